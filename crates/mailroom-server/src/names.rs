//! Names of topics, groups and channels: 1 to [`NAME_BYTES_MAX`] characters of
//! `[A-Za-z0-9._-]`, and not `.` or `..`.
//!
//! The server checks names before any store or registry call, with the wire format's rule
//! ([`mailroom_api::names`], which the store also applies), so every resource, live
//! channels included, refuses the same names with the same `invalid_name` error, and a
//! name is always safe to use as a file name or a metric label.

use axum::http::StatusCode;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorCode};

pub use mailroom_api::NAME_BYTES_MAX;

/// The OpenAPI schema of a name, for path parameters.
#[derive(Debug)]
pub struct Name(pub String);

impl utoipa::PartialSchema for Name {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            // `.` and `..` also match, but no HTTP client sends them as a path segment.
            .pattern(Some(r"^[A-Za-z0-9._-]{1,128}$"))
            .min_length(Some(1))
            .max_length(Some(NAME_BYTES_MAX))
            .into()
    }
}

impl ToSchema for Name {}

/// Checks a name; `kind` ("topic", "group", "channel") goes into the message.
///
/// ```
/// use mailroom_server::names::check_name;
/// assert!(check_name("topic", "orders.v2_eu-west").is_ok());
/// assert!(check_name("topic", "a/b").is_err());
/// assert!(check_name("topic", "..").is_err());
/// assert!(check_name("topic", &"x".repeat(129)).is_err());
/// ```
///
/// # Errors
/// A 400 `invalid_name` [`ApiError`] saying what is wrong.
pub fn check_name(kind: &str, name: &str) -> Result<(), ApiError> {
    mailroom_api::check_name(name).map_err(|reason| {
        let message = mailroom_api::names::refusal(kind, name, reason);
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidName, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the boundary: exactly NAME_BYTES_MAX is accepted, one more is refused, and
    // every character outside the set is refused.
    #[test]
    fn boundaries_and_character_set() {
        assert!(check_name("t", &"a".repeat(NAME_BYTES_MAX)).is_ok());
        assert!(check_name("t", &"a".repeat(NAME_BYTES_MAX + 1)).is_err());
        assert!(check_name("t", "").is_err());
        for bad in ["a b", "a/b", "ä", "a\0", "a%2F", "a:b", "a\n"] {
            let error = check_name("t", bad).unwrap_err();
            assert_eq!(
                (error.status.as_u16(), error.code),
                (400, ErrorCode::InvalidName),
                "{bad:?}"
            );
        }
        assert!(check_name("t", "...").is_ok());
        assert!(check_name("t", ".").is_err());
        assert!(check_name("t", "..").is_err());
    }
}
