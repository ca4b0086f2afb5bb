//! The JSON request-body extractor.
//!
//! It reads the body whatever its `Content-Type` says: `curl -d` labels JSON as a form,
//! and refusing that would only make the API harder to use by hand. The body size is
//! capped by the route's `DefaultBodyLimit`. Every failure is an [`ApiError`] in the
//! standard shape: `malformed_json` for bytes that are not JSON, `invalid_body` for
//! JSON of the wrong shape or types, `payload_too_large` for an oversized body.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The largest JSON body accepted by the endpoints that take small JSON documents.
pub const JSON_BODY_BYTES_MAX: usize = 64 << 10;

/// A request body parsed as JSON into `T`.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(bytes_rejection)?;
        parse(&bytes).map(JsonBody)
    }
}

/// Turns the framework's body-reading failure into the standard shape.
pub fn bytes_rejection(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = rejection.status();
    let message = rejection.body_text();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large(message)
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

/// Parses JSON bytes, classifying the failure.
///
/// # Errors
/// 400 `malformed_json` or `invalid_body`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body of this API is a JSON object; serde would also take an array for a
    // struct, which the documented schema does not allow.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'[')) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "request body: expected a JSON object, got an array",
        ));
    }
    serde_json::from_slice(bytes).map_err(|error| {
        use serde_json::error::Category;
        let code = match error.classify() {
            Category::Data => "invalid_body",
            Category::Syntax | Category::Eof | Category::Io => "malformed_json",
        };
        ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!("request body: {error}"),
        )
    })
}

/// Serde helpers for integer fields that also accept whole-number floats such as `3.0`:
/// JSON Schema calls those integers, so clients generated from the OpenAPI document may
/// send them. Fractions, negatives and out-of-range values are still refused.
pub mod whole {
    use serde::de::Deserializer;
    use serde::Deserialize as _;

    /// The largest float that converts to a `u64` without saturating.
    const U64_LIMIT_F64: f64 = 18_446_744_073_709_551_616.0;

    fn convert<E: serde::de::Error, T: TryFrom<u64>>(number: serde_json::Number) -> Result<T, E> {
        let value = number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < U64_LIMIT_F64)
                .map(|f| f as u64)
        });
        let value = value
            .ok_or_else(|| E::custom(format!("expected a non-negative integer, got {number}")))?;
        T::try_from(value).map_err(|_| E::custom(format!("{value} is out of range")))
    }

    /// Deserializes a required integer field.
    ///
    /// # Errors
    /// Anything but a non-negative whole number that fits `T`.
    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
        convert(serde_json::Number::deserialize(d)?)
    }

    /// Deserializes an optional integer field (`null` or absent is `None`; pair it with
    /// `#[serde(default)]`).
    ///
    /// # Errors
    /// As for [`deserialize`].
    pub fn deserialize_option<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        match Option::<serde_json::Number>::deserialize(d)? {
            None => Ok(None),
            Some(number) => convert::<D::Error, T>(number).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Shape {
        #[serde(deserialize_with = "whole::deserialize")]
        n: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Maybe {
        #[serde(default, deserialize_with = "whole::deserialize_option")]
        n: Option<u32>,
    }

    // Proves syntax errors and type errors get different stable codes.
    #[test]
    fn classifies_failures() {
        assert_eq!(
            parse::<Shape>(b"{\"n\":").unwrap_err().code,
            "malformed_json"
        );
        assert_eq!(parse::<Shape>(b"").unwrap_err().code, "malformed_json");
        assert_eq!(
            parse::<Shape>(b"{\"n\":\"x\"}").unwrap_err().code,
            "invalid_body"
        );
        assert_eq!(
            parse::<Shape>(b"{\"n\":-1}").unwrap_err().code,
            "invalid_body"
        );
        assert_eq!(parse::<Shape>(b"\"x\"").unwrap_err().code, "invalid_body");
        assert_eq!(parse::<Shape>(b" [1]").unwrap_err().code, "invalid_body");
        assert_eq!(
            parse::<Shape>(b"{\"n\":2.5}").unwrap_err().code,
            "invalid_body"
        );
        assert_eq!(
            parse::<Shape>(b"{\"n\":4294967296}").unwrap_err().code,
            "invalid_body"
        );
        assert_eq!(parse::<Shape>(b"{\"n\":2.0}").unwrap().n, 2);
        assert_eq!(parse::<Maybe>(b"{}").unwrap().n, None);
        assert_eq!(parse::<Maybe>(b"{\"n\":null}").unwrap().n, None);
        assert_eq!(parse::<Maybe>(b"{\"n\":7.0}").unwrap().n, Some(7));
        assert!(parse::<Shape>(b"{\"n\":1}").is_ok());
    }
}
