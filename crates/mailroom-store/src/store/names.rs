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

    // Proves the alphabet, the length limit and the reserved names are enforced.
    #[test]
    fn names_follow_the_rule() {
        for good in ["a", "orders", "A.b_c-9", "...", &"x".repeat(NAME_BYTES_MAX)] {
            assert!(validate_name(good).is_ok(), "{good:?} was refused");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a\0",
            &"x".repeat(NAME_BYTES_MAX + 1),
        ] {
            assert!(
                matches!(validate_name(bad), Err(StoreError::InvalidName { .. })),
                "{bad:?} was accepted"
            );
        }
    }
}
