//! Message metadata on the wire: a key and headers taken from a batch item's object or
//! from a raw publish's request headers, checked against the library's limits, and
//! handed back with deliveries and dead letters (as JSON fields, or as response headers
//! of a raw poll).
//!
//! The raw publish (`POST /v1/topics/{topic}/messages`) reads:
//!
//! - [`KEY_HEADER`] (`Mailroom-Key`): the message's key;
//! - every [`HEADER_PREFIX`]`<name>` (`Mailroom-Header-<name>`): header `<name>` (HTTP
//!   header names are case-insensitive, so names arrive in lower case; the batch publish
//!   keeps them as written). Values are UTF-8.
//!
//! A raw poll answers the same names, and [`PUBLISHED_AT_HEADER`] with the publish time.
//! A header that HTTP cannot carry (a name outside HTTP's token characters, a value with
//! control characters) is left out of a raw poll's answer; the JSON poll has them all.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use mailroom::group::ArgumentError;
use mailroom::topic::{Message, Metadata};
use mailroom_api::topics::BatchMessageObject;
use mailroom_store::NewMessage;

use crate::error::ApiError;

/// The request (and raw poll response) header carrying a message's key.
pub const KEY_HEADER: &str = "mailroom-key";
/// The prefix of the request (and raw poll response) headers carrying a message's
/// headers, one each: `mailroom-header-<name>`.
pub const HEADER_PREFIX: &str = "mailroom-header-";
/// The request header carrying a raw publish's idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The raw poll response header carrying the publish time, Unix milliseconds.
pub const PUBLISHED_AT_HEADER: &str = "mailroom-published-at-ms";

/// Checks `metadata`, wording a refusal with each field's name behind the prefix that
/// `prefix` makes (`"messages[3]."` makes `messages[3].key`). The prefix is made only
/// for a refusal: formatting it for every message of a batch cost about a twentieth of the
/// batch's instructions.
pub(crate) fn checked(
    metadata: Metadata,
    prefix: impl FnOnce() -> String,
) -> Result<Metadata, ApiError> {
    match metadata.check() {
        Ok(()) => Ok(metadata),
        Err(error) => {
            let prefix = prefix();
            Err(renamed(error, |field| format!("{prefix}{field}")))
        }
    }
}

/// `error` about batch item `index`, its field named as the JSON body names it
/// (`messages[3].key`).
pub(crate) fn item_refusal(index: usize, error: ArgumentError) -> ApiError {
    renamed(error, |field| format!("messages[{index}].{field}"))
}

/// The library's refusal in the server's wording, its field named by `name`.
fn renamed(error: ArgumentError, name: impl Fn(&str) -> String) -> ApiError {
    match error {
        ArgumentError::LengthOutOfRange {
            field,
            min,
            max,
            got,
        } => ApiError::length_out_of_range(&name(field), min..=max, got),
        ArgumentError::CountOutOfRange {
            field,
            items,
            min,
            max,
            got,
        } => ApiError::count_out_of_range(
            &name(field),
            items,
            usize::try_from(min).unwrap_or(usize::MAX)..=usize::try_from(max).unwrap_or(usize::MAX),
            usize::try_from(got).unwrap_or(usize::MAX),
        ),
        other => ApiError::from(other),
    }
}

/// The metadata of a batch item object.
pub(crate) fn of_object(
    index: usize,
    key: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    idempotency_key: Option<String>,
) -> Result<Metadata, ApiError> {
    let metadata = Metadata {
        key,
        headers: headers.unwrap_or_default(),
        idempotency_key,
    };
    checked(metadata, || format!("messages[{index}]."))
}

/// The message a JSON text frame of a publish stream holds (the batch item object),
/// its refusals naming `what` (`frame 3`).
pub(crate) fn message_of_object(
    what: &str,
    object: BatchMessageObject,
) -> Result<NewMessage, ApiError> {
    use base64::Engine as _;
    let payload = match (object.payload, object.payload_base64) {
        (Some(text), None) => Bytes::from(text),
        (None, Some(base64)) => base64::engine::general_purpose::STANDARD
            .decode(base64)
            .map(Bytes::from)
            .map_err(|_| {
                ApiError::invalid_argument(format!("{what}.payload_base64 is not standard base64"))
            })?,
        _ => {
            return Err(ApiError::invalid_argument(format!(
                "{what} must have exactly one of payload and payload_base64"
            )))
        }
    };
    let metadata = Metadata {
        key: object.key,
        headers: object.headers.unwrap_or_default(),
        idempotency_key: object.idempotency_key,
    };
    let metadata = checked(metadata, || format!("{what}."))?;
    Ok(NewMessage { payload, metadata })
}

/// The metadata a raw publish's request headers carry.
///
/// # Errors
/// 400 `invalid_argument` for a value that is not UTF-8, a header repeated, or a limit
/// broken, naming the request header.
pub(crate) fn of_request_headers(headers: &HeaderMap) -> Result<Metadata, ApiError> {
    let mut metadata = Metadata::default();
    for (name, value) in headers {
        let name = name.as_str();
        let is_key = name == KEY_HEADER;
        let is_idempotency_key = name == IDEMPOTENCY_KEY_HEADER;
        let header = name.strip_prefix(HEADER_PREFIX);
        if !is_key && !is_idempotency_key && header.is_none() {
            continue;
        }
        if headers.get_all(name).iter().count() > 1 {
            return Err(ApiError::invalid_argument(format!(
                "request header {name} is given more than once"
            )));
        }
        let value = std::str::from_utf8(value.as_bytes()).map_err(|_| {
            ApiError::invalid_argument(format!("request header {name} is not UTF-8"))
        })?;
        match header {
            None if is_idempotency_key => metadata.idempotency_key = Some(value.to_owned()),
            None => metadata.key = Some(value.to_owned()),
            Some(header) => {
                metadata.headers.insert(header.to_owned(), value.to_owned());
            }
        }
    }
    match metadata.check() {
        Ok(()) => Ok(metadata),
        Err(error) => Err(renamed(error, |field| match field {
            "key" => KEY_HEADER.to_owned(),
            "idempotency_key" => "Idempotency-Key".to_owned(),
            "headers.name" => format!("the name of a {HEADER_PREFIX}* request header"),
            "headers.value" => format!("a {HEADER_PREFIX}* request header"),
            _ => format!("the {HEADER_PREFIX}* request headers"),
        })),
    }
}

/// The wire fields of a message's metadata: key, headers (left out when none), publish
/// time.
pub(crate) type Fields = (
    Option<String>,
    Option<BTreeMap<String, String>>,
    Option<u64>,
);

/// Splits `message` into its payload and its wire fields.
pub(crate) fn fields(message: Message<Bytes>) -> (Bytes, Fields) {
    let Message {
        payload,
        published_at_ms,
        metadata,
    } = message;
    let headers = (!metadata.headers.is_empty()).then_some(metadata.headers);
    (payload, (metadata.key, headers, published_at_ms))
}

/// Adds `message`'s metadata to a raw poll's response headers.
pub(crate) fn insert_response_headers(message: &Message<Bytes>, out: &mut HeaderMap) {
    if let Some(at) = message.published_at_ms {
        out.insert(PUBLISHED_AT_HEADER, HeaderValue::from(at));
    }
    let key = message.metadata.key.as_deref();
    if let Some(value) = key.and_then(|key| HeaderValue::from_str(key).ok()) {
        out.insert(KEY_HEADER, value);
    }
    for (name, value) in &message.metadata.headers {
        let name = HeaderName::try_from(format!("{HEADER_PREFIX}{name}"));
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_str(value)) {
            out.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves request headers become a key and headers, and a broken limit names the
    // request header.
    #[test]
    fn request_headers_become_metadata() {
        let mut headers = HeaderMap::new();
        headers.insert("mailroom-key", HeaderValue::from_static("k"));
        headers.insert("mailroom-header-trace", HeaderValue::from_static("t1"));
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        let metadata = of_request_headers(&headers).unwrap();
        assert_eq!(
            metadata,
            Metadata::new().with_key("k").with_header("trace", "t1")
        );
        headers.insert("mailroom-key", HeaderValue::from_static(""));
        let error = of_request_headers(&headers).unwrap_err();
        assert_eq!(error.code, "invalid_argument");
        assert!(
            error.message.starts_with("mailroom-key must be"),
            "{}",
            error.message
        );
    }

    // Proves a batch item's refusal names the item's field.
    #[test]
    fn object_refusal_names_the_item_field() {
        let error = of_object(3, Some(String::new()), None, None).unwrap_err();
        assert!(
            error.message.starts_with("messages[3].key must be"),
            "{}",
            error.message
        );
    }
}
