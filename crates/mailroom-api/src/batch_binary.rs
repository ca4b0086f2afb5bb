//! The binary batch encoding: a batch publish body of lengths and bytes instead of JSON,
//! sent as [`CONTENT_TYPE`] to `POST /v1/topics/{topic}/messages/batch`.
//!
//! JSON makes every payload, key and header a string that the writer escapes and the
//! reader searches for its end, and a payload that is not UTF-8 travels as base64. Here
//! each message is its record body as the store writes it: the metadata block
//! ([`crate::metadata_block`]) if the message has a key, headers or an idempotency key,
//! then the payload as it is. The server checks the block (its layout, UTF-8, header
//! order, the limits) and writes the body to disk without taking it apart, as Kafka
//! writes a producer's record batch. The Rust client sends its batches this way; JSON
//! stays for everyone else.
//!
//! The layout (every integer unsigned, little-endian):
//!
//! | part | bytes | holds |
//! |---|---|---|
//! | magic | 4 | `MRB2`: the encoding and its version |
//! | count | u32 | the number of messages, 1 to [`BATCH_MESSAGES_MAX`] |
//! | then `count` times: | | |
//! | word | u32 | bit 31: the body opens with a metadata block; bits 0 to 30: the body's bytes |
//! | body | as the word says | the metadata block (if bit 31), then the payload |
//!
//! Nothing may follow the last message. A block's headers go in name order (bytewise),
//! each name once, or the server refuses the message. The limits are those of the JSON
//! body ([`crate::limits`]), checked by the server. `MRB1`, the version before (lengths
//! of four bytes, headers in any order), is refused with a word that says so.
//!
//! ```
//! use mailroom_api::batch_binary::{BatchWriter, Reader};
//!
//! let mut writer = BatchWriter::new();
//! writer.push_bare(b"\xff binary is fine")?;
//! writer.push(b"hello", Some("customer-1"), None, [("trace", "t1")].into_iter())?;
//! let body = writer.finish();
//!
//! let mut reader = Reader::new(&body).unwrap();
//! let first = reader.next_message().unwrap().unwrap();
//! assert_eq!((first.payload, first.block.is_none()), (&b"\xff binary is fine"[..], true));
//! let second = reader.next_message().unwrap().unwrap();
//! let block = second.block.unwrap();
//! assert_eq!(block.key(), Some("customer-1"));
//! assert_eq!(block.headers().collect::<Vec<_>>(), [("trace", "t1")]);
//! assert_eq!(second.body, [block.bytes(), b"hello"].concat());
//! assert!(reader.next_message().unwrap().is_none());
//! # Ok::<(), mailroom_api::batch_binary::TooLong>(())
//! ```

use crate::limits::BATCH_MESSAGES_MAX;
use crate::metadata_block::{
    read_block, write_block, BlockError, BlockRef, HeaderAt, LENGTH_BYTES,
};

pub use crate::metadata_block::TooLong;

/// The request content type of a body in this encoding.
pub const CONTENT_TYPE: &str = "application/vnd.mailroom.batch";

/// The body's first four bytes: the encoding's name and version.
pub const MAGIC: &[u8; 4] = b"MRB2";

/// What every version's magic opens with: a body that starts with it is meant to be
/// binary, whatever its content type says.
pub const MAGIC_NAME: &[u8; 3] = b"MRB";

/// The word's bit that says a body opens with a metadata block.
const HAS_BLOCK: u32 = 1 << 31;

/// Why a body is not a binary batch. Each names the message it is about as
/// `messages[i]`, as the JSON body's refusals do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body does not start with [`MAGIC`].
    #[error("the body does not start with \"MRB2\", the binary batch encoding's magic")]
    Magic,
    /// The body is in another version of the encoding.
    #[error("the body is in binary batch version {found:?}; this server reads \"MRB2\" (a newer client writes it)")]
    Version {
        /// The magic the body starts with.
        found: String,
    },
    /// The count is 0 or over [`BATCH_MESSAGES_MAX`].
    #[error("messages: a batch holds 1 to {BATCH_MESSAGES_MAX} messages; the body says {count}")]
    Count {
        /// The count the body gave.
        count: u32,
    },
    /// The body ends before what it announced.
    #[error("{at}: the request body ends inside its {part}")]
    Truncated {
        /// `messages[i]`, or `count`.
        at: String,
        /// The part that is cut short (`count`, `length word`, `record body`, `metadata block`).
        part: &'static str,
    },
    /// A message's metadata block breaks its layout.
    #[error("messages[{index}]: {error}")]
    Block {
        /// The message.
        index: usize,
        /// What is wrong with the block.
        error: BlockError,
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

/// One message of a body, read by [`Reader::next_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a, 'h> {
    /// Its place in the batch, from 0.
    pub index: usize,
    /// Its record body: the block, if any, then the payload.
    pub body: &'a [u8],
    /// The payload.
    pub payload: &'a [u8],
    /// Its metadata block, read and checked; `None` for a bare message.
    pub block: Option<BlockRef<'a, 'h>>,
}

/// Reads a body message by message: each block's headers go into one list that the
/// next message reuses, so reading allocates once per batch, not per message.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
    count: usize,
    index: usize,
    headers: Vec<HeaderAt>,
}

impl<'a> Reader<'a> {
    /// A reader of `body`, its magic and count checked.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Magic`], [`DecodeError::Version`], [`DecodeError::Count`], or
    /// [`DecodeError::Truncated`] for a body cut inside its count.
    pub fn new(body: &'a [u8]) -> Result<Reader<'a>, DecodeError> {
        let Some(rest) = body.strip_prefix(MAGIC) else {
            return Err(match body.get(..MAGIC.len()) {
                Some(magic) if magic.starts_with(MAGIC_NAME) => DecodeError::Version {
                    found: String::from_utf8_lossy(magic).into_owned(),
                },
                _ => DecodeError::Magic,
            });
        };
        let Some((count, rest)) = rest.split_first_chunk() else {
            return Err(DecodeError::Truncated {
                at: "count".to_owned(),
                part: "count",
            });
        };
        let count = u32::from_le_bytes(*count);
        if count == 0 || count as usize > BATCH_MESSAGES_MAX {
            return Err(DecodeError::Count { count });
        }
        Ok(Reader {
            rest,
            count: count as usize,
            index: 0,
            headers: Vec::new(),
        })
    }

    /// How many messages the body says it holds.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The next message, or `None` after the last (once the body is checked to end
    /// there).
    ///
    /// # Errors
    ///
    /// [`DecodeError`]: where the body breaks the layout.
    pub fn next_message(&mut self) -> Result<Option<Message<'a, '_>>, DecodeError> {
        if self.index == self.count {
            return match self.rest.len() {
                0 => Ok(None),
                extra => Err(DecodeError::Trailing {
                    count: self.count,
                    extra,
                }),
            };
        }
        let index = self.index;
        let truncated = |part| DecodeError::Truncated {
            at: format!("messages[{index}]"),
            part,
        };
        let (word, rest) = self
            .rest
            .split_first_chunk()
            .ok_or_else(|| truncated("length word"))?;
        let word = u32::from_le_bytes(*word);
        let body_bytes = (word & !HAS_BLOCK) as usize;
        if rest.len() < body_bytes {
            return Err(truncated("record body"));
        }
        let (body, rest) = rest.split_at(body_bytes);
        self.rest = rest;
        self.index += 1;
        if word & HAS_BLOCK == 0 {
            return Ok(Some(Message {
                index,
                body,
                payload: body,
                block: None,
            }));
        }
        let block_bytes = match body.first_chunk::<LENGTH_BYTES>() {
            // A length under its own four bytes is read with them, for `read_block` to
            // refuse by what it says.
            Some(length) => (u32::from_le_bytes(*length) as usize).max(LENGTH_BYTES),
            None => return Err(truncated("metadata block")),
        };
        if block_bytes > body.len() {
            return Err(truncated("metadata block"));
        }
        let (block, payload) = body.split_at(block_bytes);
        let block = read_block(block, &mut self.headers)
            .map_err(|error| DecodeError::Block { index, error })?;
        Ok(Some(Message {
            index,
            body,
            payload,
            block: Some(block),
        }))
    }
}

/// Writes a binary batch body, one message at a time.
///
/// ```
/// use mailroom_api::batch_binary::{BatchWriter, Reader};
/// let mut writer = BatchWriter::new();
/// writer.push(b"p", None, Some("retry-7"), std::iter::empty())?;
/// let body = writer.finish();
/// let mut reader = Reader::new(&body).unwrap();
/// let message = reader.next_message().unwrap().unwrap();
/// assert_eq!(message.block.unwrap().idempotency_key(), Some("retry-7"));
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
    /// [`TooLong`] for a payload of 2 GiB or more; nothing is added.
    pub fn push_bare(&mut self, payload: &[u8]) -> Result<(), TooLong> {
        // Its own path: a bare message is the word and the payload, and most batches
        // are all bare.
        let word = word_of(payload.len(), false)?;
        self.body.reserve(4 + payload.len());
        self.body.extend_from_slice(&word.to_le_bytes());
        self.body.extend_from_slice(payload);
        self.count += 1;
        Ok(())
    }

    /// Adds a message with its metadata. Headers are written in name order whatever
    /// order they come in; a name given twice is written twice, which the server
    /// refuses, as it refuses a JSON object naming a header twice.
    ///
    /// # Errors
    ///
    /// [`TooLong`] for a key, header or idempotency key of 64 KiB or more, more than
    /// 65,535 headers, or a message of 2 GiB or more (every limit of the API is far
    /// below these); nothing is added.
    pub fn push<'h>(
        &mut self,
        payload: &[u8],
        key: Option<&str>,
        idempotency_key: Option<&str>,
        headers: impl ExactSizeIterator<Item = (&'h str, &'h str)> + Clone,
    ) -> Result<(), TooLong> {
        let body = &mut self.body;
        let start = body.len();
        let write = || {
            body.reserve(4 + payload.len() + 64);
            body.extend_from_slice(&[0; 4]);
            if in_name_order(headers.clone()) {
                write_block(key, idempotency_key, headers, body)?;
            } else {
                let mut sorted: Vec<(&str, &str)> = headers.collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                write_block(key, idempotency_key, sorted.into_iter(), body)?;
            }
            let has_block = body.len() > start + 4;
            body.extend_from_slice(payload);
            let word = word_of(body.len() - start - 4, has_block)?;
            body[start..start + 4].copy_from_slice(&word.to_le_bytes());
            Ok(())
        };
        let written = write();
        match written {
            Ok(()) => self.count += 1,
            Err(_) => self.body.truncate(start),
        }
        written
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

/// The length word of a body of `bytes` that opens with a block or not.
fn word_of(bytes: usize, has_block: bool) -> Result<u32, TooLong> {
    let word = u32::try_from(bytes)
        .ok()
        .filter(|&bytes| bytes & HAS_BLOCK == 0)
        .ok_or(TooLong {
            part: "message",
            bytes,
        })?;
    Ok(if has_block { word | HAS_BLOCK } else { word })
}

/// Whether `headers` come in name order with no name twice.
fn in_name_order<'h>(mut headers: impl Iterator<Item = (&'h str, &'h str)>) -> bool {
    let Some((mut before, _)) = headers.next() else {
        return true;
    };
    headers.all(|(name, _)| {
        let ordered = before < name;
        before = name;
        ordered
    })
}

#[cfg(test)]
mod tests;
