//! The binary batch encoding: a batch publish body of lengths and bytes instead of JSON,
//! sent as [`CONTENT_TYPE`] to `POST /v1/topics/{topic}/messages/batch`.
//!
//! JSON makes every payload, key and header a string that the writer escapes and the
//! reader searches for its end, and a payload that is not UTF-8 travels as base64. Here
//! each is a length and its bytes, so neither side looks inside them (the server still
//! checks that keys and headers are UTF-8), and any payload goes as it is. The Rust
//! client sends its batches this way; JSON stays for everyone else.
//!
//! The layout (every integer unsigned, little-endian):
//!
//! | part | bytes | holds |
//! |---|---|---|
//! | magic | 4 | `MRB1`: the encoding and its version |
//! | count | u32 | the number of messages, 1 to [`BATCH_MESSAGES_MAX`] |
//! | then `count` times: | | |
//! | flags | u8 | bit 0: a key follows; bit 1: an idempotency key; bit 2: headers. Other bits are 0 |
//! | payload | u32 + bytes | the payload's length, then the payload |
//! | key | u32 + bytes | if bit 0: the key, UTF-8 |
//! | idempotency key | u32 + bytes | if bit 1: the idempotency key, UTF-8 |
//! | headers | u32, then pairs | if bit 2: the number of headers, then each name and value as u32 + UTF-8 bytes |
//!
//! Nothing may follow the last message. Headers may come in any order; a name given
//! twice in one message is refused. The limits are those of the JSON body
//! ([`crate::limits`]), checked by the server.
//!
//! ```
//! use mailroom_api::batch_binary::{decode, BatchWriter};
//!
//! let mut writer = BatchWriter::new();
//! writer.push_bare(b"\xff binary is fine")?;
//! writer.push(b"hello", Some("customer-1"), None, [("trace", "t1")].into_iter())?;
//! let body = writer.finish();
//!
//! let batch = decode(&body).unwrap();
//! assert_eq!(batch.items[0].payload, b"\xff binary is fine");
//! assert_eq!(batch.items[1].key, Some("customer-1"));
//! assert_eq!(batch.headers(&batch.items[1]), [("trace", "t1")]);
//! # Ok::<(), mailroom_api::batch_binary::TooLong>(())
//! ```

use std::ops::Range;

use crate::limits::BATCH_MESSAGES_MAX;

/// The request content type of a body in this encoding.
pub const CONTENT_TYPE: &str = "application/vnd.mailroom.batch";

/// The body's first four bytes: the encoding's name and version.
pub const MAGIC: &[u8; 4] = b"MRB1";

const KEY: u8 = 1;
const IDEMPOTENCY_KEY: u8 = 1 << 1;
const HEADERS: u8 = 1 << 2;

/// A decoded body's messages, every payload and string borrowed from the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    /// The messages, in order.
    pub items: Vec<Item<'a>>,
    /// Every message's headers, each message's a range of this, in name order.
    headers: Vec<(&'a str, &'a str)>,
}

/// One message of a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'a> {
    /// The payload.
    pub payload: &'a [u8],
    /// The key, if the message has one.
    pub key: Option<&'a str>,
    /// The idempotency key, if the message has one.
    pub idempotency_key: Option<&'a str>,
    /// Its headers: a range of the batch's (see [`Batch::headers`]).
    headers: Range<usize>,
}

impl<'a> Batch<'a> {
    /// `item`'s headers, in name order, each name once; empty when it has none.
    pub fn headers(&self, item: &Item<'a>) -> &[(&'a str, &'a str)] {
        &self.headers[item.headers.clone()]
    }
}

/// Why a body is not a binary batch. Each names the message it is about as
/// `messages[i]`, as the JSON body's refusals do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body does not start with [`MAGIC`].
    #[error("the body does not start with \"MRB1\", the binary batch encoding's magic")]
    Magic,
    /// The count is 0 or over [`BATCH_MESSAGES_MAX`].
    #[error("messages: a batch holds 1 to {BATCH_MESSAGES_MAX} messages; the body says {count}")]
    Count {
        /// The count the body gave.
        count: u32,
    },
    /// The body ends before what it announced.
    #[error("{at}: the body ends inside its {part}")]
    Truncated {
        /// `messages[i]`, or `count`.
        at: String,
        /// The part that is cut short (`payload`, `key`, `header value`, ...).
        part: &'static str,
    },
    /// A flags byte has a bit this version does not know.
    #[error("messages[{index}]: unknown flag bits {bits:#04x} (this version knows 0x07)")]
    Flags {
        /// The message.
        index: usize,
        /// The unknown bits.
        bits: u8,
    },
    /// A key or header is not UTF-8.
    #[error("messages[{index}].{part} is not UTF-8")]
    NotUtf8 {
        /// The message.
        index: usize,
        /// `key`, `idempotency_key`, `header name` or `header value`.
        part: &'static str,
    },
    /// A message names one header twice.
    #[error("messages[{index}].headers names {name:?} twice")]
    RepeatedHeader {
        /// The message.
        index: usize,
        /// The name.
        name: String,
    },
    /// Bytes follow the last message.
    #[error("{extra} bytes follow the last of the {count} messages")]
    Trailing {
        /// The messages the body held.
        count: usize,
        /// The bytes after them.
        extra: usize,
    },
}

/// Reads `body` as a binary batch. Checks the layout and that strings are UTF-8; the
/// caller checks the limits of payloads, keys and headers.
///
/// # Errors
///
/// [`DecodeError`], saying where the body breaks the layout.
pub fn decode(body: &[u8]) -> Result<Batch<'_>, DecodeError> {
    let rest = body.strip_prefix(MAGIC).ok_or(DecodeError::Magic)?;
    let Some((count, rest)) = rest.split_first_chunk() else {
        return Err(DecodeError::Truncated {
            at: "count".to_owned(),
            part: "count",
        });
    };
    let count = u32::from_le_bytes(*count);
    let mut reader = Reader {
        rest,
        index: 0,
        spans: Vec::new(),
    };
    if count == 0 || count as usize > BATCH_MESSAGES_MAX {
        return Err(DecodeError::Count { count });
    }
    let mut batch = Batch {
        items: Vec::with_capacity(count as usize),
        headers: Vec::new(),
    };
    for index in 0..count as usize {
        reader.index = index;
        let item = reader.item(&mut batch.headers)?;
        batch.items.push(item);
    }
    match reader.rest.len() {
        0 => Ok(batch),
        extra => Err(DecodeError::Trailing {
            count: count as usize,
            extra,
        }),
    }
}

/// The unread part of a body, and the message being read.
struct Reader<'a> {
    rest: &'a [u8],
    index: usize,
    /// Where the message's headers' names and values are, reused from message to message.
    spans: Vec<(Range<usize>, Range<usize>)>,
}

impl<'a> Reader<'a> {
    fn truncated(&self, part: &'static str) -> DecodeError {
        DecodeError::Truncated {
            at: format!("messages[{}]", self.index),
            part,
        }
    }

    fn take(&mut self, bytes: usize, part: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < bytes {
            return Err(self.truncated(part));
        }
        let (taken, rest) = self.rest.split_at(bytes);
        self.rest = rest;
        Ok(taken)
    }

    fn u32(&mut self, part: &'static str) -> Result<u32, DecodeError> {
        match self.rest {
            [a, b, c, d, rest @ ..] => {
                self.rest = rest;
                Ok(u32::from_le_bytes([*a, *b, *c, *d]))
            }
            _ => Err(self.truncated(part)),
        }
    }

    /// A u32 length and that many bytes.
    fn bytes(&mut self, part: &'static str) -> Result<&'a [u8], DecodeError> {
        let length = self.u32(part)?;
        self.take(length as usize, part)
    }

    /// A u32 length and that many bytes, as a range of `run` (which the reader is in).
    fn span(&mut self, run: &'a [u8], part: &'static str) -> Result<Range<usize>, DecodeError> {
        let bytes = self.bytes(part)?;
        let end = run.len() - self.rest.len();
        Ok(end - bytes.len()..end)
    }

    fn item(&mut self, headers: &mut Vec<(&'a str, &'a str)>) -> Result<Item<'a>, DecodeError> {
        let [flags] = self.take(1, "flags")? else {
            unreachable!("one byte taken")
        };
        let flags = *flags;
        if flags & !(KEY | IDEMPOTENCY_KEY | HEADERS) != 0 {
            return Err(DecodeError::Flags {
                index: self.index,
                bits: flags & !(KEY | IDEMPOTENCY_KEY | HEADERS),
            });
        }
        let payload = self.bytes("payload")?;
        // The strings and their lengths are one run of bytes; where every length is
        // under 128 (its bytes are ASCII) the run is UTF-8 exactly when its strings
        // are, so it is checked once instead of string by string (`Run::text`).
        let run = self.rest;
        let key = (flags & KEY != 0)
            .then(|| self.span(run, "key"))
            .transpose()?;
        let idempotency_key = (flags & IDEMPOTENCY_KEY != 0)
            .then(|| self.span(run, "idempotency_key"))
            .transpose()?;
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        if flags & HEADERS != 0 {
            let count = self.u32("headers")?;
            for _ in 0..count {
                let name = self.span(run, "header name")?;
                spans.push((name, self.span(run, "header value")?));
            }
        }
        let run = Run::of(&run[..run.len() - self.rest.len()], self.index);
        let key = key.map(|span| run.text(span, "key")).transpose()?;
        let idempotency_key = idempotency_key
            .map(|span| run.text(span, "idempotency_key"))
            .transpose()?;
        let start = headers.len();
        for (name, value) in spans.drain(..) {
            headers.push((
                run.text(name, "header name")?,
                run.text(value, "header value")?,
            ));
        }
        self.spans = spans;
        self.in_name_order(&mut headers[start..])?;
        Ok(Item {
            payload,
            key,
            idempotency_key,
            headers: start..headers.len(),
        })
    }

    /// Puts one message's headers in name order, refusing a name given twice.
    fn in_name_order(&self, headers: &mut [(&'a str, &'a str)]) -> Result<(), DecodeError> {
        if !headers.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            headers.sort_by(|a, b| a.0.cmp(b.0));
            if let Some(pair) = headers.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                return Err(DecodeError::RepeatedHeader {
                    index: self.index,
                    name: pair[0].0.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// A message's strings with their lengths, the bytes after its payload.
struct Run<'a> {
    bytes: &'a [u8],
    /// The whole run, where it is UTF-8.
    text: Option<&'a str>,
    index: usize,
}

impl<'a> Run<'a> {
    fn of(bytes: &'a [u8], index: usize) -> Run<'a> {
        let text = std::str::from_utf8(bytes).ok();
        Run { bytes, text, index }
    }

    /// The string at `span`. Cut from a UTF-8 run, it is UTF-8 if it starts and ends on
    /// character boundaries; otherwise (a length's bytes were not UTF-8, or a string
    /// is not) it is checked on its own.
    fn text(&self, span: Range<usize>, part: &'static str) -> Result<&'a str, DecodeError> {
        let text = match self.text {
            Some(run) => run.get(span),
            None => self
                .bytes
                .get(span)
                .and_then(|bytes| std::str::from_utf8(bytes).ok()),
        };
        text.ok_or(DecodeError::NotUtf8 {
            index: self.index,
            part,
        })
    }
}

/// A length past `u32::MAX`, which the encoding cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a message's {part} of {bytes} bytes is longer than the binary batch encoding carries")]
pub struct TooLong {
    /// The part (`payload`, `key`, ...).
    pub part: &'static str,
    /// Its length.
    pub bytes: usize,
}

/// Writes a binary batch body, one message at a time.
///
/// ```
/// use mailroom_api::batch_binary::{decode, BatchWriter};
/// let mut writer = BatchWriter::new();
/// writer.push(b"p", None, Some("retry-7"), std::iter::empty())?;
/// let body = writer.finish();
/// assert_eq!(decode(&body).unwrap().items[0].idempotency_key, Some("retry-7"));
/// # Ok::<(), mailroom_api::batch_binary::TooLong>(())
/// ```
#[derive(Debug, Clone)]
pub struct BatchWriter {
    body: Vec<u8>,
    count: usize,
}

impl Default for BatchWriter {
    fn default() -> Self {
        BatchWriter::new()
    }
}

impl BatchWriter {
    /// A writer of an empty batch (a batch must get at least one message).
    pub fn new() -> BatchWriter {
        BatchWriter::with_capacity(0)
    }

    /// A writer whose body has room for `bytes` of messages before it grows.
    pub fn with_capacity(bytes: usize) -> BatchWriter {
        let mut body = Vec::with_capacity(8 + bytes);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&0u32.to_le_bytes());
        BatchWriter { body, count: 0 }
    }

    /// Adds a message without key or headers.
    ///
    /// # Errors
    ///
    /// [`TooLong`] for a payload of 4 GiB or more; nothing is added.
    pub fn push_bare(&mut self, payload: &[u8]) -> Result<(), TooLong> {
        self.push(payload, None, None, std::iter::empty())
    }

    /// Adds a message with its metadata.
    ///
    /// # Errors
    ///
    /// [`TooLong`] for a part of 4 GiB or more (or more than `u32::MAX` headers);
    /// nothing is added. (`headers` is walked twice, once to size the message.)
    pub fn push<'h>(
        &mut self,
        payload: &[u8],
        key: Option<&str>,
        idempotency_key: Option<&str>,
        headers: impl ExactSizeIterator<Item = (&'h str, &'h str)> + Clone,
    ) -> Result<(), TooLong> {
        // Every length is checked first, so nothing of a message the encoding cannot
        // carry is written and the body grows at most once a message.
        let mut bytes = 1 + part_bytes("payload", payload)?;
        let mut flags = 0;
        if let Some(key) = key {
            flags |= KEY;
            bytes += part_bytes("key", key.as_bytes())?;
        }
        if let Some(key) = idempotency_key {
            flags |= IDEMPOTENCY_KEY;
            bytes += part_bytes("idempotency_key", key.as_bytes())?;
        }
        let header_count = headers.len();
        if header_count > 0 {
            flags |= HEADERS;
            length_of("headers", header_count)?;
            bytes += 4;
            for (name, value) in headers.clone() {
                bytes += part_bytes("header name", name.as_bytes())?;
                bytes += part_bytes("header value", value.as_bytes())?;
            }
        }
        let body = &mut self.body;
        body.reserve(bytes);
        let start = body.len();
        body.push(flags);
        put(body, payload);
        if let Some(key) = key {
            put(body, key.as_bytes());
        }
        if let Some(key) = idempotency_key {
            put(body, key.as_bytes());
        }
        if header_count > 0 {
            body.extend_from_slice(&(header_count as u32).to_le_bytes());
            for (name, value) in headers {
                put(body, name.as_bytes());
                put(body, value.as_bytes());
            }
        }
        debug_assert_eq!(body.len() - start, bytes, "the message was sized right");
        self.count += 1;
        Ok(())
    }

    /// The messages added so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no message has been added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The body, its count filled in (past `u32::MAX` messages it says `u32::MAX`,
    /// which the server refuses as it refuses any count over [`BATCH_MESSAGES_MAX`]).
    pub fn finish(mut self) -> Vec<u8> {
        let count = u32::try_from(self.count).unwrap_or(u32::MAX);
        self.body[4..8].copy_from_slice(&count.to_le_bytes());
        self.body
    }
}

/// Appends `bytes` with its length (checked by [`part_bytes`] before).
#[inline]
fn put(body: &mut Vec<u8>, bytes: &[u8]) {
    body.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    body.extend_from_slice(bytes);
}

/// What `bytes` takes as a part: its length and itself.
fn part_bytes(part: &'static str, bytes: &[u8]) -> Result<usize, TooLong> {
    length_of(part, bytes.len())?;
    Ok(4 + bytes.len())
}

fn length_of(part: &'static str, bytes: usize) -> Result<u32, TooLong> {
    u32::try_from(bytes).map_err(|_| TooLong { part, bytes })
}

#[cfg(test)]
mod tests;
