//! The request extractors: a body as JSON ([`JsonBody`]) or as bytes ([`RawBody`]), and
//! a query string ([`QueryParams`]).
//!
//! A JSON body is read whatever its `Content-Type` says: `curl -d` labels JSON as a form,
//! and refusing that would only make the API harder to use by hand. The body size is
//! capped by the route's [`body_limit`]. Every failure is an [`ApiError`] in the
//! standard shape: `malformed_json` for bytes that are not JSON, `invalid_body` for
//! JSON of the wrong shape or types, `payload_too_large` for an oversized body (saying
//! the limit), `bad_request` for a query string that does not fit (saying which
//! parameter).

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::Extension;
use bytes::BytesMut;
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;

use crate::error::{shown, ApiError, ErrorCode};

pub use mailroom_api::limits::JSON_BODY_BYTES_MAX;
/// The integer fields that also accept whole-number floats (they are part of the wire
/// format, so they live with it).
pub use mailroom_api::whole;

/// A route's body limit, kept in the request's extensions so that a 413 can state it
/// (the framework's own limit does not say what it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit {
    /// The largest body accepted, in bytes.
    pub bytes_max: usize,
    /// What the limit is called in a message: `"this route's limit"`, say.
    pub name: &'static str,
}

/// The layers of a route whose body is at most `bytes_max` bytes: the framework's cap,
/// and the [`BodyLimit`] its 413 reads. `name` is what the message calls the limit.
pub fn body_limit(
    bytes_max: usize,
    name: &'static str,
) -> (DefaultBodyLimit, Extension<BodyLimit>) {
    (
        DefaultBodyLimit::max(bytes_max),
        Extension(BodyLimit { bytes_max, name }),
    )
}

/// A request body parsed as JSON into `T`.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let RawBody(bytes) = RawBody::from_request(request, state).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// A request body as bytes, such as a message to publish.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let limit = request.extensions().get::<BodyLimit>().copied();
        let length = content_length(request.headers());
        match limit {
            Some(limit) => read_capped(request.into_body(), limit, length)
                .await
                .map(RawBody),
            None => Bytes::from_request(request, state)
                .await
                .map(RawBody)
                .map_err(|rejection| body_rejection(rejection, None, length)),
        }
    }
}

/// Reads a body of at most `limit.bytes_max` bytes (the same cap as the route's
/// `DefaultBodyLimit`, set beside it by [`body_limit`]). Not the framework's `Bytes`
/// extractor: that boxes the body again inside a length-limiting wrapper and gathers
/// frames into a list (this read takes about 830 instructions fewer a 1 KiB publish,
/// BENCHMARKS.md), while most bodies arrive as one frame, which is kept as it is.
async fn read_capped(
    mut body: Body,
    limit: BodyLimit,
    length: Option<u64>,
) -> Result<Bytes, ApiError> {
    // Not refused by the declared length before reading, though that would be sooner:
    // a client still writing the body would then see its connection closed (a broken
    // pipe) instead of the 413, as with the framework's limit.
    let over = |bytes: u64| bytes > u64::try_from(limit.bytes_max).unwrap_or(u64::MAX);
    let mut first: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                format!("Failed to buffer the request body: {error}"),
            )
        })?;
        // Trailers carry no bytes of the body.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len() as u64);
        if over(total) {
            return Err(too_large(Some(limit), length));
        }
        if first.is_none() && joined.is_empty() {
            first = Some(data);
            continue;
        }
        if let Some(earlier) = first.take() {
            joined.extend_from_slice(&earlier);
        }
        joined.extend_from_slice(&data);
    }
    Ok(first.unwrap_or_else(|| joined.freeze()))
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Turns the framework's body-reading failure into the standard shape; a 413 says the
/// body's length (when the request gave it) and the route's limit.
pub fn body_rejection(
    rejection: BytesRejection,
    limit: Option<BodyLimit>,
    length: Option<u64>,
) -> ApiError {
    if rejection.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            rejection.body_text(),
        );
    }
    too_large(limit, length)
}

/// The 413 for a body over `limit`: its length when the request gave it, and the limit.
fn too_large(limit: Option<BodyLimit>, length: Option<u64>) -> ApiError {
    let body = match length {
        Some(length) => format!("the request body is {length} bytes"),
        None => "the request body is too large".to_owned(),
    };
    ApiError::payload_too_large(match limit {
        Some(BodyLimit { bytes_max, name }) => format!("{body}, over {name} of {bytes_max} bytes"),
        None => body,
    })
}

/// A query string deserialized into `T`.
#[derive(Debug, Clone)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        check_query_utf8(&parts.uri)?;
        Query::try_from_uri(&parts.uri)
            .map(|Query(value)| QueryParams(value))
            .map_err(|rejection| query_rejection(&parts.uri, &rejection))
    }
}

/// Refuses a query parameter whose percent-decoded bytes are not UTF-8. The framework
/// would turn them into U+FFFD, so `?consumer=%ff` and `?consumer=%fe` would name the
/// same consumer; the same bytes in a JSON body are refused too.
///
/// # Errors
/// 400 `bad_request` naming the parameter and its value as sent.
fn check_query_utf8(uri: &Uri) -> Result<(), ApiError> {
    let Some(query) = uri.query() else {
        return Ok(());
    };
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        for part in [name, value] {
            if std::str::from_utf8(&percent_decoded(part)).is_err() {
                let name = String::from_utf8_lossy(&percent_decoded(name)).into_owned();
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::BadRequest,
                    format!(
                        "query parameter {name}={}: not valid UTF-8 once percent-decoded",
                        shown(value)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The bytes a query-string part stands for, as `application/x-www-form-urlencoded`
/// reads them: `+` is a space, `%XX` a byte, and a `%` without two hex digits itself.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |offset: usize| {
            bytes
                .get(at + offset)
                .and_then(|b| char::from(*b).to_digit(16))
        };
        match (bytes[at], hex(1), hex(2)) {
            (b'%', Some(high), Some(low)) => {
                // Two hex digits make at most 0xff.
                decoded.push(u8::try_from(high * 16 + low).expect("a byte"));
                at += 3;
            }
            (b'+', _, _) => {
                decoded.push(b' ');
                at += 1;
            }
            (byte, _, _) => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    decoded
}

/// 400 `bad_request` for a query string that does not fit, naming the parameter and the
/// value it had: `query parameter limit=abc: invalid digit found in string`.
fn query_rejection(uri: &Uri, rejection: &QueryRejection) -> ApiError {
    let text = rejection.body_text();
    let detail = text
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(&text);
    // The framework puts the parameter's name first ("limit: ..."), when it knows it.
    let named = detail.split_once(": ").and_then(|(name, rest)| {
        let value = uri
            .query()?
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(key, _)| *key == name)?
            .1;
        Some(format!("query parameter {name}={}: {rest}", shown(value)))
    });
    let message = named.unwrap_or_else(|| format!("query string: {detail}"));
    ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
}

/// Parses JSON bytes, classifying the failure.
///
/// # Errors
/// 400 `malformed_json` or `invalid_body`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body of this API is a JSON object; serde would also take an array for a
    // struct, which the documented schema does not allow.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    // An empty body is the empty object on a route whose fields are all optional (as
    // `curl -X PUT` sends it); on one with a required field it stays what it is, JSON
    // that ended before it began.
    if first.is_none() {
        if let Ok(empty) = serde_json::from_slice::<T>(b"{}") {
            return Ok(empty);
        }
    }
    if matches!(first, Some(b'[')) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidBody,
            "request body: expected a JSON object, got an array",
        ));
    }
    // Tracking the path costs a wrapper around every value read (measurable in a batch
    // publish of object items, `BENCHMARKS.md`), so a body is read without it first,
    // and read again with it only to word a refusal: the same bytes fail the same way.
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    if let Ok(value) = <T as serde::Deserialize>::deserialize(&mut deserializer) {
        if deserializer.end().is_ok() {
            return Ok(value);
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // The path names the field as the client sent it (`deliveries[3].offset`), which
    // serde_json's own message leaves out.
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|error| body_error(error.inner(), &error.path().to_string()))?;
    deserializer
        .end()
        .map_err(|error| body_error(&error, "."))?;
    Ok(value)
}

/// 400 `malformed_json` or `invalid_body` for `error` at `path` ("." for the whole body).
fn body_error(error: &serde_json::Error, path: &str) -> ApiError {
    use serde_json::error::Category;
    let code = match error.classify() {
        Category::Data => ErrorCode::InvalidBody,
        Category::Syntax | Category::Eof | Category::Io => ErrorCode::MalformedJson,
    };
    let message = match path {
        "." | "" => format!("request body: {error}"),
        path => format!("request body field {path}: {error}"),
    };
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
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

    // Proves percent-decoding as forms do it: `+` is a space, `%XX` a byte in either
    // case, and a `%` not followed by two hex digits stays as it is.
    #[test]
    fn query_parts_are_percent_decoded() {
        assert_eq!(percent_decoded("a+b%20c"), b"a b c");
        assert_eq!(percent_decoded("%ff%FE"), [0xff, 0xfe]);
        assert_eq!(percent_decoded("%e2%82%ac"), "€".as_bytes());
        assert_eq!(percent_decoded("100%"), b"100%");
        assert_eq!(percent_decoded("%g1%4"), b"%g1%4");
        let uri = |text: &str| text.parse::<Uri>().unwrap();
        assert!(check_query_utf8(&uri("/p?consumer=%e2%82%ac&limit=1")).is_ok());
        let refused = check_query_utf8(&uri("/p?consumer=%ff")).unwrap_err();
        assert_eq!(refused.code, "bad_request");
        assert!(
            refused.message.contains("consumer=%ff"),
            "{}",
            refused.message
        );
        assert!(check_query_utf8(&uri("/p?%ff=1")).is_err());
    }

    fn read(
        frames: Vec<Result<Vec<u8>, std::io::Error>>,
        bytes_max: usize,
        length: Option<u64>,
    ) -> Result<Bytes, ApiError> {
        let body = Body::from_stream(futures_util::stream::iter(frames));
        let limit = BodyLimit {
            bytes_max,
            name: "the test's limit",
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(read_capped(body, limit, length))
    }

    proptest::proptest! {
        // Proves a capped read answers every frame's bytes joined in order when they fit,
        // and 413 naming the limit when they do not, whether or not a length was declared.
        #[test]
        fn capped_reads_join_frames_or_refuse(
            frames in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0..6),
            bytes_max in 0usize..150,
            declared in proptest::bool::ANY,
        ) {
            let joined = frames.concat();
            let length = declared.then_some(joined.len() as u64);
            let got = read(frames.into_iter().map(Ok).collect(), bytes_max, length);
            if joined.len() <= bytes_max {
                proptest::prop_assert_eq!(got.unwrap(), Bytes::from(joined));
            } else {
                let error = got.unwrap_err();
                proptest::prop_assert_eq!(error.status, StatusCode::PAYLOAD_TOO_LARGE);
                let limit = format!("over the test's limit of {bytes_max} bytes");
                proptest::prop_assert!(error.message.contains(&limit), "{}", error.message);
            }
        }
    }

    // Proves a body that fails part way (a client that breaks its chunked framing) is a
    // 400 that says so, not a truncated message.
    #[test]
    fn a_failing_body_is_a_bad_request() {
        let broken = std::io::Error::other("chunk size line too long");
        let error = read(vec![Ok(b"abc".to_vec()), Err(broken)], 100, None).unwrap_err();
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert!(
            error.message.contains("chunk size line too long"),
            "{}",
            error.message
        );
    }
}
