//! The rule for topic and group names.
//!
//! Names become directory names (topics) and are written into records (groups), so they
//! are kept to a small, portable alphabet: no separators, no `.`/`..`, nothing a shell or
//! a file system could read differently.

use crate::StoreError;

/// The longest topic or group name, in bytes (all allowed characters are ASCII).
pub const NAME_BYTES_MAX: usize = 128;

/// Checks a topic or group name: 1..=[`NAME_BYTES_MAX`] characters of `[A-Za-z0-9._-]`,
/// and not `.` or `..`.
///
/// # Errors
///
/// [`StoreError::InvalidName`] saying what is wrong.
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > NAME_BYTES_MAX {
        "longer than 128 bytes"
    } else if name == "." || name == ".." {
        "reserved"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        "characters outside [A-Za-z0-9._-]"
    } else {
        return Ok(());
    };
    Err(StoreError::InvalidName {
        name: name.to_owned(),
        reason,
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
