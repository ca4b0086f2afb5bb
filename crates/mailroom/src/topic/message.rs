//! A message with its metadata: the time the broker published it, an optional key,
//! optional headers and an optional idempotency key, with the limits every home checks.
//!
//! The limits, and why they are what they are (compared with the peers users come from):
//!
//! | limit | value | Kafka | NATS JetStream | SQS |
//! |---|---|---|---|---|
//! | [`KEY_BYTES_MAX`] | 1 KiB | bytes, bounded only by the record size | subject ≤ ~ 4 KiB by config | `MessageGroupId` ≤ 128 chars |
//! | [`HEADERS_MAX`] | 64 | unbounded | unbounded | 10 message attributes |
//! | [`HEADER_NAME_BYTES_MAX`] | 256 B | unbounded | unbounded (header block in `max_payload`) | attribute name ≤ 256 chars |
//! | [`HEADER_VALUE_BYTES_MAX`] | 4 KiB | unbounded | unbounded | counted in the 256 KiB message |
//! | [`HEADERS_BYTES_MAX`] | 16 KiB | counted in `max.message.bytes` | counted in `max_payload` | counted in the 256 KiB message |
//! | [`IDEMPOTENCY_KEY_BYTES_MAX`] | 256 B | producer id + sequence (not a string) | `Nats-Msg-Id`, unbounded | deduplication id ≤ 128 chars |
//!
//! A key names an entity (a customer, an order), not a document, so 1 KiB is generous
//! and keeps per-key bookkeeping small. Headers carry trace context (`traceparent` is 55
//! bytes), content types and origins: 64 of them and 16 KiB in all are far above what
//! those need, and small beside the default 1 MiB payload, yet they bound what one
//! message adds to every delivery. Names and values are UTF-8 (they travel as JSON
//! strings and as HTTP header values). Keys, header names and idempotency keys must not
//! be empty; a header value may be.
//!
//! # Example
//!
//! ```
//! use mailroom::topic::{Metadata, KEY_BYTES_MAX};
//!
//! let metadata = Metadata::new()
//!     .with_key("customer-42")
//!     .with_header("content-type", "application/json");
//! assert!(metadata.check().is_ok());
//! assert!(Metadata::new().with_key("k".repeat(KEY_BYTES_MAX + 1)).check().is_err());
//! assert!(Metadata::new().is_empty());
//! ```

use std::collections::BTreeMap;

use crate::group::ArgumentError;

/// The longest message key, in bytes of UTF-8.
pub const KEY_BYTES_MAX: usize = 1024;
/// The most headers one message may carry.
pub const HEADERS_MAX: usize = 64;
/// The longest header name, in bytes of UTF-8.
pub const HEADER_NAME_BYTES_MAX: usize = 256;
/// The longest header value, in bytes of UTF-8.
pub const HEADER_VALUE_BYTES_MAX: usize = 4096;
/// The most bytes all of one message's header names and values may take together.
pub const HEADERS_BYTES_MAX: usize = 16 << 10;
/// The longest idempotency key, in bytes of UTF-8.
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 256;

/// What a publisher may say about a message besides its payload. Every field is
/// optional; [`Metadata::default`] says nothing and costs nothing to store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Metadata {
    /// The message's key: what it is about (a customer, an order).
    pub key: Option<String>,
    /// Headers, by name (names are unique; a map keeps them in name order).
    pub headers: BTreeMap<String, String>,
    /// The publisher's idempotency key: stored with the message, so the window of
    /// keys already seen can be rebuilt from the log.
    pub idempotency_key: Option<String>,
}

impl Metadata {
    /// No metadata.
    pub fn new() -> Self {
        Metadata::default()
    }

    /// With `key` as the key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// With header `name` set to `value` (replacing an earlier value of `name`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// With `key` as the idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Whether it says nothing (no key, no headers, no idempotency key).
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.headers.is_empty() && self.idempotency_key.is_none()
    }

    /// The bytes all header names and values take together.
    pub fn headers_bytes(&self) -> usize {
        self.headers
            .iter()
            .map(|(name, value)| name.len() + value.len())
            .sum()
    }

    /// Checks every limit of the module docs.
    ///
    /// # Errors
    ///
    /// [`ArgumentError::LengthOutOfRange`] naming `key`, `idempotency_key`,
    /// `headers.name`, `headers.value` or `headers` (the total bytes), or
    /// [`ArgumentError::CountOutOfRange`] naming `headers` (their number).
    pub fn check(&self) -> Result<(), ArgumentError> {
        check_parts(
            self.key.as_deref(),
            self.idempotency_key.as_deref(),
            self.headers.len(),
            self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        )
    }
}

/// [`Metadata`] borrowed: the same fields as string slices, with the headers as a slice
/// of `(name, value)` pairs in name order, names unique. A decoder that reads metadata
/// out of a request body lends it this way, so that the bytes are copied once, into
/// the record, instead of into a `String` each first. Its limits are [`Metadata`]'s,
/// checked by the same code.
///
/// # Example
///
/// ```
/// use mailroom::topic::{Metadata, MetadataRef};
///
/// let headers = [("content-type", "text/plain"), ("trace", "t1")];
/// let borrowed = MetadataRef { key: Some("k"), headers: &headers, idempotency_key: None };
/// assert!(borrowed.check().is_ok());
/// let owned = Metadata::new().with_key("k").with_header("trace", "t1").with_header("content-type", "text/plain");
/// assert_eq!(borrowed.to_metadata(), owned);
/// assert!(MetadataRef { key: Some(""), ..borrowed }.check().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataRef<'a> {
    /// The message's key.
    pub key: Option<&'a str>,
    /// Headers as `(name, value)`, in name order, each name once.
    pub headers: &'a [(&'a str, &'a str)],
    /// The publisher's idempotency key.
    pub idempotency_key: Option<&'a str>,
}

impl MetadataRef<'_> {
    /// Whether it says nothing (no key, no headers, no idempotency key).
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.headers.is_empty() && self.idempotency_key.is_none()
    }

    /// Checks the limits of [`Metadata::check`], with its errors.
    ///
    /// # Errors
    ///
    /// As [`Metadata::check`].
    ///
    /// # Panics
    ///
    /// In debug builds, if the headers are not in name order with each name once (the
    /// caller's mistake: a map would have merged them).
    pub fn check(&self) -> Result<(), ArgumentError> {
        debug_assert!(
            self.headers.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "headers in name order, each once"
        );
        check_parts(
            self.key,
            self.idempotency_key,
            self.headers.len(),
            self.headers.iter().copied(),
        )
    }

    /// The owned [`Metadata`] of the same content.
    pub fn to_metadata(&self) -> Metadata {
        Metadata {
            key: self.key.map(str::to_owned),
            headers: self
                .headers
                .iter()
                .map(|&(name, value)| (name.to_owned(), value.to_owned()))
                .collect(),
            idempotency_key: self.idempotency_key.map(str::to_owned),
        }
    }
}

/// The limits of the module docs, for metadata owned or borrowed alike.
fn check_parts<'a>(
    key: Option<&str>,
    idempotency_key: Option<&str>,
    header_count: usize,
    headers: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<(), ArgumentError> {
    let lengths = headers.map(|(name, value)| (name.len(), value.len()));
    check_metadata_lengths(
        key.map(str::len),
        idempotency_key.map(str::len),
        header_count,
        lengths,
    )
}

/// Checks the limits of [`Metadata::check`] from the lengths alone, in bytes: the key's,
/// the idempotency key's, and each header's name and value (`header_count` of them),
/// with its errors. For metadata that is not yet taken apart into strings, as a
/// record's metadata block from the wire.
///
/// # Errors
///
/// As [`Metadata::check`].
///
/// # Example
///
/// ```
/// use mailroom::topic::{check_metadata_lengths, KEY_BYTES_MAX};
///
/// assert!(check_metadata_lengths(Some(3), None, 1, [(5, 40)].into_iter()).is_ok());
/// assert!(check_metadata_lengths(Some(KEY_BYTES_MAX + 1), None, 0, std::iter::empty()).is_err());
/// ```
#[inline]
pub fn check_metadata_lengths(
    key: Option<usize>,
    idempotency_key: Option<usize>,
    header_count: usize,
    headers: impl Iterator<Item = (usize, usize)>,
) -> Result<(), ArgumentError> {
    if let Some(key) = key {
        check_length_of("key", key, 1, KEY_BYTES_MAX)?;
    }
    if let Some(key) = idempotency_key {
        check_length_of("idempotency_key", key, 1, IDEMPOTENCY_KEY_BYTES_MAX)?;
    }
    if header_count > HEADERS_MAX {
        return Err(ArgumentError::CountOutOfRange {
            field: "headers",
            items: "headers",
            min: 0,
            max: HEADERS_MAX as u64,
            got: header_count as u64,
        });
    }
    let mut bytes = 0;
    for (name, value) in headers {
        check_length_of("headers.name", name, 1, HEADER_NAME_BYTES_MAX)?;
        check_length_of("headers.value", value, 0, HEADER_VALUE_BYTES_MAX)?;
        bytes += name + value;
    }
    check_length_of("headers", bytes, 0, HEADERS_BYTES_MAX)
}

#[inline]
fn check_length_of(
    field: &'static str,
    got: usize,
    min: usize,
    max: usize,
) -> Result<(), ArgumentError> {
    if (min..=max).contains(&got) {
        Ok(())
    } else {
        Err(ArgumentError::LengthOutOfRange {
            field,
            min,
            max,
            got,
        })
    }
}

/// A message as a log hands it back: its payload, when the broker published it and
/// what the publisher said about it.
///
/// # Example
///
/// ```
/// use mailroom::topic::{Message, Metadata};
///
/// let message = Message::new(b"hello".to_vec(), Some(1_700_000_000_000), Metadata::new().with_key("k"));
/// assert_eq!(message.metadata.key.as_deref(), Some("k"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<P> {
    /// The payload.
    pub payload: P,
    /// When the broker appended it, by its clock, in Unix milliseconds; `None` where
    /// that is no longer known (a dead letter kept after retention removed its message).
    pub published_at_ms: Option<u64>,
    /// Its key, headers and idempotency key.
    pub metadata: Metadata,
}

impl<P> Message<P> {
    /// A message of `payload`, published at `published_at_ms`, with `metadata`.
    pub fn new(payload: P, published_at_ms: Option<u64>, metadata: Metadata) -> Self {
        Message {
            payload,
            published_at_ms,
            metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(metadata: &Metadata) -> Option<&'static str> {
        match metadata.check() {
            Ok(()) => None,
            Err(ArgumentError::LengthOutOfRange { field, .. })
            | Err(ArgumentError::CountOutOfRange { field, .. }) => Some(field),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }

    // Proves each limit is inclusive at its bound and names its field one past it.
    #[test]
    fn every_limit_is_inclusive_and_named() {
        let at = |n: usize| "k".repeat(n);
        assert_eq!(field_of(&Metadata::new().with_key(at(KEY_BYTES_MAX))), None);
        assert_eq!(
            field_of(&Metadata::new().with_key(at(KEY_BYTES_MAX + 1))),
            Some("key")
        );
        assert_eq!(field_of(&Metadata::new().with_key("")), Some("key"));
        let idem = Metadata::new().with_idempotency_key(at(IDEMPOTENCY_KEY_BYTES_MAX + 1));
        assert_eq!(field_of(&idem), Some("idempotency_key"));
        let name = Metadata::new().with_header(at(HEADER_NAME_BYTES_MAX + 1), "v");
        assert_eq!(field_of(&name), Some("headers.name"));
        assert_eq!(
            field_of(&Metadata::new().with_header("", "v")),
            Some("headers.name")
        );
        assert_eq!(field_of(&Metadata::new().with_header("n", "")), None);
        let value = Metadata::new().with_header("n", at(HEADER_VALUE_BYTES_MAX + 1));
        assert_eq!(field_of(&value), Some("headers.value"));
        let mut many = Metadata::new();
        for i in 0..HEADERS_MAX {
            many = many.with_header(format!("h{i}"), "");
        }
        assert_eq!(field_of(&many), None);
        assert_eq!(field_of(&many.with_header("one-more", "")), Some("headers"));
        // Four values at their limit pass; one byte more in all does not.
        let mut big = Metadata::new();
        for name in ["a", "b", "c"] {
            big = big.with_header(name, at(HEADER_VALUE_BYTES_MAX));
        }
        let room = HEADERS_BYTES_MAX - big.headers_bytes() - 1;
        assert_eq!(field_of(&big.clone().with_header("d", at(room))), None);
        assert_eq!(
            field_of(&big.with_header("d", at(room + 1))),
            Some("headers")
        );
    }

    // Proves the borrowed view is checked by the same rules, with the same errors.
    #[test]
    fn borrowed_metadata_is_checked_alike() {
        let long = "v".repeat(HEADER_VALUE_BYTES_MAX + 1);
        let both = [("a", ""), ("b", "v")];
        let (unnamed, too_long) = ([("", "v")], [("a", long.as_str())]);
        let none = MetadataRef::default();
        let cases = [
            MetadataRef {
                key: Some("k"),
                headers: &both,
                idempotency_key: Some("i"),
            },
            MetadataRef {
                key: Some(""),
                ..none
            },
            MetadataRef {
                headers: &unnamed,
                ..none
            },
            MetadataRef {
                headers: &too_long,
                ..none
            },
            MetadataRef {
                idempotency_key: Some(""),
                ..none
            },
        ];
        for borrowed in cases {
            assert_eq!(borrowed.check(), borrowed.to_metadata().check());
            assert_eq!(borrowed.is_empty(), borrowed.to_metadata().is_empty());
        }
    }
}
