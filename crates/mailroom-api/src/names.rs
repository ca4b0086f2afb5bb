//! Names of topics, groups and channels: 1 to [`NAME_BYTES_MAX`] characters of
//! `[A-Za-z0-9._-]`, and not `.` or `..`.
//!
//! One rule for every resource. Names become directory names (topics), are written into
//! the store's records (groups), and are single URL path segments, so they are kept to a
//! small, portable alphabet: no separators, no `.`/`..`, nothing a shell, a file system or
//! an HTTP router could read differently. The store, the server and the client all check
//! names with [`check_name`].

/// The longest name, in bytes (all allowed characters are ASCII).
pub const NAME_BYTES_MAX: usize = 128;

/// What a name names, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// A durable topic.
    Topic,
    /// A consumer group of a topic.
    Group,
    /// A live channel.
    Channel,
}

impl NameKind {
    /// `"topic"`, `"group"` or `"channel"`.
    pub fn as_str(self) -> &'static str {
        match self {
            NameKind::Topic => "topic",
            NameKind::Group => "group",
            NameKind::Channel => "channel",
        }
    }
}

impl std::fmt::Display for NameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a name breaks the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("empty")]
    Empty,
    /// The name is over [`NAME_BYTES_MAX`] bytes.
    #[error("longer than 128 bytes")]
    TooLong,
    /// The name is `.` or `..`.
    #[error("reserved")]
    Reserved,
    /// The name has a character outside `[A-Za-z0-9._-]`.
    #[error("characters outside [A-Za-z0-9._-]")]
    Characters,
}

const _: () = assert!(NAME_BYTES_MAX == 128, "NameError::TooLong's text says 128");

impl NameError {
    /// The reason as a short phrase: `"empty"`, `"reserved"`, ...
    pub fn reason(self) -> &'static str {
        match self {
            NameError::Empty => "empty",
            NameError::TooLong => "longer than 128 bytes",
            NameError::Reserved => "reserved",
            NameError::Characters => "characters outside [A-Za-z0-9._-]",
        }
    }
}

/// A name refused by the rule, with what it names: the `invalid_name` error of the
/// server and the client's refusal before sending, in one wording.
///
/// ```
/// use mailroom_api::names::{check, NameKind};
/// let error = check(NameKind::Group, "a/b").unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "group name \"a/b\" is invalid (characters outside [A-Za-z0-9._-]); a name is \
///      1..=128 characters of [A-Za-z0-9._-], not . or .."
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{}", refusal(.kind, .name, *.reason))]
pub struct InvalidName {
    /// What the name names.
    pub kind: NameKind,
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub reason: NameError,
}

/// The message for a `kind` name (`"topic"`, say) refused for `reason`; it echoes a
/// bounded part of the name ([`shown`](crate::error::shown)).
pub fn refusal(kind: impl std::fmt::Display, name: &str, reason: NameError) -> String {
    let shown = crate::error::shown(name);
    format!(
        "{kind} name {shown:?} is invalid ({reason}); a name is 1..={NAME_BYTES_MAX} \
         characters of [A-Za-z0-9._-], not . or .."
    )
}

/// Checks a `kind` name against the rule.
///
/// # Errors
/// The [`InvalidName`] saying what is wrong.
pub fn check(kind: NameKind, name: &str) -> Result<(), InvalidName> {
    check_name(name).map_err(|reason| InvalidName {
        kind,
        name: name.to_owned(),
        reason,
    })
}

/// Checks a name against the rule.
///
/// ```
/// use mailroom_api::names::{check_name, NameError};
/// assert!(check_name("orders.v2_eu-west").is_ok());
/// assert_eq!(check_name("a/b"), Err(NameError::Characters));
/// assert_eq!(check_name(".."), Err(NameError::Reserved));
/// assert_eq!(check_name(&"x".repeat(129)), Err(NameError::TooLong));
/// ```
///
/// # Errors
/// The [`NameError`] saying what is wrong.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        Err(NameError::Empty)
    } else if name.len() > NAME_BYTES_MAX {
        Err(NameError::TooLong)
    } else if name == "." || name == ".." {
        Err(NameError::Reserved)
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Err(NameError::Characters)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the alphabet, the length limit and the reserved names are enforced, at the
    // boundary of each.
    #[test]
    fn names_follow_the_rule() {
        for good in ["a", "orders", "A.b_c-9", "...", &"x".repeat(NAME_BYTES_MAX)] {
            assert!(check_name(good).is_ok(), "{good:?} was refused");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a\0",
            "a%2F",
            "a:b",
            "a\n",
            &"x".repeat(NAME_BYTES_MAX + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} was accepted");
        }
    }

    // Proves each reason's Display is the phrase the store and server put in messages.
    #[test]
    fn reasons_read_as_phrases() {
        for error in [
            NameError::Empty,
            NameError::TooLong,
            NameError::Reserved,
            NameError::Characters,
        ] {
            assert_eq!(error.to_string(), error.reason());
        }
    }
}
