//! The rule for topic and group names: the wire format's ([`mailroom_api::names`]).
//!
//! Names become directory names (topics) and are written into records (groups), so they
//! are kept to a small, portable alphabet: no separators, no `.`/`..`, nothing a shell or
//! a file system could read differently. The rule is the wire format's, so a name the
//! server or a client accepts is one the store accepts.

use crate::StoreError;

/// The longest topic or group name, in bytes (all allowed characters are ASCII).
pub use mailroom_api::names::NAME_BYTES_MAX;

/// Checks a topic or group name with the wire format's rule
/// ([`mailroom_api::names::check_name`]): 1..=[`NAME_BYTES_MAX`] characters of
/// `[A-Za-z0-9._-]`, and not `.` or `..`.
///
/// ```
/// assert!(mailroom_store::validate_name("orders").is_ok());
/// assert!(mailroom_store::validate_name("..").is_err());
/// ```
///
/// # Errors
///
/// [`StoreError::InvalidName`] saying what is wrong.
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    mailroom_api::names::check_name(name).map_err(|error| StoreError::InvalidName {
        name: name.to_owned(),
        reason: error.reason(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a refused name becomes the store's error with the rule's own reason (the
    // rule itself is proved in mailroom-api), and the longest name is accepted.
    #[test]
    fn refusals_carry_the_rules_reason() {
        assert!(validate_name(&"x".repeat(NAME_BYTES_MAX)).is_ok());
        for (bad, reason) in [
            ("", "empty"),
            ("..", "reserved"),
            ("a/b", "characters outside [A-Za-z0-9._-]"),
        ] {
            match validate_name(bad) {
                Err(StoreError::InvalidName { name, reason: got }) => {
                    assert_eq!((name.as_str(), got), (bad, reason));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
