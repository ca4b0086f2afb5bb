//! The metadata block: a message's key, idempotency key and headers as one run of
//! lengths and bytes. The store keeps it in a message's record, before the payload
//! (record format 2), and the binary batch encoding ([`crate::batch_binary`]) carries
//! it the same way, so a server checks a block from the wire and writes it to disk as
//! it came, without taking it apart and putting it together again.
//!
//! The layout (every integer unsigned, little-endian):
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | `block_bytes` u32 | the block's length, these four bytes included |
//! | 4 | `flags` u8 | 1: a key follows, 2: headers follow, 4: an idempotency key follows; other bits 0 |
//! | | `key_bytes` u16, key | if flag 1: the key, UTF-8 |
//! | | `idempotency_key_bytes` u16, key | if flag 4: the idempotency key, UTF-8 |
//! | | `headers` u16, then per header `name_bytes` u16, `value_bytes` u16, name, value | if flag 2: headers in name order (bytewise), each name once, UTF-8 |
//!
//! A message without metadata has no block at all. The block says nothing of limits:
//! a key of 2,000 bytes is a well-formed block, which the server refuses for its
//! length (`mailroom::topic::Metadata::check`), so a refusal reads the same whichever
//! encoding carried it.
//!
//! # Example
//!
//! ```
//! use mailroom_api::metadata_block::{read_block, write_block};
//!
//! let mut block = Vec::new();
//! write_block(Some("customer-7"), None, [("trace", "t1")].into_iter(), &mut block)?;
//! let mut headers = Vec::new();
//! let read = read_block(&block, &mut headers).unwrap();
//! assert_eq!(read.key(), Some("customer-7"));
//! assert_eq!(read.headers().collect::<Vec<_>>(), [("trace", "t1")]);
//! assert_eq!(read.bytes(), &block[..]);
//! # Ok::<(), mailroom_api::metadata_block::TooLong>(())
//! ```

use std::ops::Range;

/// The bytes of the block's length field, which opens it.
pub const LENGTH_BYTES: usize = 4;
/// Flag: a key follows.
pub const FLAG_KEY: u8 = 1;
/// Flag: headers follow.
pub const FLAG_HEADERS: u8 = 2;
/// Flag: an idempotency key follows.
pub const FLAG_IDEMPOTENCY_KEY: u8 = 4;
const FLAGS_KNOWN: u8 = FLAG_KEY | FLAG_HEADERS | FLAG_IDEMPOTENCY_KEY;
/// Where the fields after the length and the flags start.
const FIELDS_AT: usize = LENGTH_BYTES + 1;

/// A string or a count the block's u16 fields cannot carry (64 KiB and more; every
/// limit of the API is far below it), a block past 4 GiB, or (in
/// [`crate::batch_binary`]) a message past its length word's 2 GiB.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a message's {part} of {bytes} is longer than the binary encoding carries")]
pub struct TooLong {
    /// The part (`key`, `header value`, `headers`, ...).
    pub part: &'static str,
    /// Its length (bytes, or headers for `headers`).
    pub bytes: usize,
}

/// Appends the block of a key, an idempotency key and `headers` to `out`, or nothing
/// when all three are absent. Headers are written in the order given: pass them in
/// name order, each name once (as a `BTreeMap` holds them), or
/// [`read_block`] refuses the block.
///
/// # Errors
///
/// [`TooLong`] for a field past its u16 (or the block past its u32); `out` is then
/// left as it was.
pub fn write_block<'h>(
    key: Option<&str>,
    idempotency_key: Option<&str>,
    headers: impl ExactSizeIterator<Item = (&'h str, &'h str)>,
    out: &mut Vec<u8>,
) -> Result<(), TooLong> {
    let count = headers.len();
    if key.is_none() && count == 0 && idempotency_key.is_none() {
        return Ok(());
    }
    let start = out.len();
    let written = write_fields(key, idempotency_key, count, headers, out);
    let block_bytes = written.and_then(|()| u32_len("metadata block", out.len() - start));
    match block_bytes {
        Ok(block_bytes) => {
            out[start..start + LENGTH_BYTES].copy_from_slice(&block_bytes.to_le_bytes());
            Ok(())
        }
        Err(too_long) => {
            out.truncate(start);
            Err(too_long)
        }
    }
}

/// The flags, the fields and a placeholder for the length (see [`write_block`]).
fn write_fields<'h>(
    key: Option<&str>,
    idempotency_key: Option<&str>,
    count: usize,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
    out: &mut Vec<u8>,
) -> Result<(), TooLong> {
    let flags = (if key.is_some() { FLAG_KEY } else { 0 })
        | (if count == 0 { 0 } else { FLAG_HEADERS })
        | (if idempotency_key.is_some() {
            FLAG_IDEMPOTENCY_KEY
        } else {
            0
        });
    // Fixed-width fields side by side go in one append each: every append checks the
    // buffer's room and moves its end.
    out.extend_from_slice(&[0, 0, 0, 0, flags]);
    if let Some(key) = key {
        put_text(out, "key", key)?;
    }
    if let Some(key) = idempotency_key {
        put_text(out, "idempotency_key", key)?;
    }
    if count != 0 {
        out.extend_from_slice(&u16_len("headers", count)?);
        for (name, value) in headers {
            let [n0, n1] = u16_len("header name", name.len())?;
            let [v0, v1] = u16_len("header value", value.len())?;
            out.extend_from_slice(&[n0, n1, v0, v1]);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
    Ok(())
}

fn put_text(out: &mut Vec<u8>, part: &'static str, text: &str) -> Result<(), TooLong> {
    out.extend_from_slice(&u16_len(part, text.len())?);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn u16_len(part: &'static str, bytes: usize) -> Result<[u8; 2], TooLong> {
    u16::try_from(bytes)
        .map(u16::to_le_bytes)
        .map_err(|_| TooLong { part, bytes })
}

fn u32_len(part: &'static str, bytes: usize) -> Result<u32, TooLong> {
    u32::try_from(bytes).map_err(|_| TooLong { part, bytes })
}

/// Why bytes are not a metadata block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// The length field is not the block's length (or the block is shorter than its
    /// length and flags).
    #[error("the metadata block's length field says {claimed} bytes, but it has {actual}")]
    Length {
        /// What the length field says.
        claimed: u64,
        /// The bytes there are.
        actual: usize,
    },
    /// A flag this version does not know.
    #[error("unknown metadata flag bits {bits:#04x} (this version knows 0x07)")]
    Flags {
        /// The unknown bits.
        bits: u8,
    },
    /// A field runs past the block's end.
    #[error("the metadata block ends inside its {part}")]
    Truncated {
        /// The field cut short.
        part: &'static str,
    },
    /// Bytes follow the last field.
    #[error("{extra} bytes follow the metadata block's last field")]
    Trailing {
        /// How many.
        extra: usize,
    },
    /// A string is not UTF-8.
    #[error("the metadata's {part} is not UTF-8")]
    NotUtf8 {
        /// `key`, `idempotency_key`, `header name` or `header value`.
        part: &'static str,
    },
    /// A header name is given twice.
    #[error("headers names {name:?} twice")]
    RepeatedHeader {
        /// The name.
        name: String,
    },
    /// Headers are not in name order.
    #[error("headers are not in name order: {after:?} comes after {before:?}")]
    HeaderOrder {
        /// The earlier name.
        before: String,
        /// The name after it, which sorts before it.
        after: String,
    },
}

/// Where a string is in its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn len(self) -> usize {
        self.end - self.start
    }

    fn range(self) -> Range<usize> {
        self.start..self.end
    }
}

/// Where one header's name and value are in its block: what [`read_block`] keeps in
/// the list it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderAt {
    name: Span,
    value: Span,
}

/// A metadata block read and checked by [`read_block`]: its layout is whole, its
/// strings are UTF-8 and its headers are in name order, each name once. It borrows the
/// block, and the list `read_block` put the headers' places in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef<'a, 'h> {
    bytes: &'a [u8],
    key: Option<Span>,
    idempotency_key: Option<Span>,
    headers: &'h [HeaderAt],
}

impl<'a: 'h, 'h> BlockRef<'a, 'h> {
    /// The whole block, length field included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The key.
    pub fn key(&self) -> Option<&'a str> {
        self.key.map(|span| self.text(span))
    }

    /// The idempotency key.
    pub fn idempotency_key(&self) -> Option<&'a str> {
        self.idempotency_key.map(|span| self.text(span))
    }

    /// Where the idempotency key is in the block, as a range of [`bytes`](Self::bytes).
    pub fn idempotency_key_range(&self) -> Option<Range<usize>> {
        self.idempotency_key.map(Span::range)
    }

    /// The headers, `(name, value)` in name order.
    pub fn headers(&self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'h {
        let bytes = self.bytes;
        self.headers
            .iter()
            .map(move |header| (text_of(bytes, header.name), text_of(bytes, header.value)))
    }

    /// The lengths in bytes of the key and the idempotency key, the number of headers
    /// and each header's name and value: what the limits are checked on, without
    /// taking the strings out.
    pub fn lengths(
        &self,
    ) -> (
        Option<usize>,
        Option<usize>,
        usize,
        impl Iterator<Item = (usize, usize)> + 'h,
    ) {
        let headers = self.headers.iter();
        (
            self.key.map(Span::len),
            self.idempotency_key.map(Span::len),
            self.headers.len(),
            headers.map(|header| (header.name.len(), header.value.len())),
        )
    }

    fn text(&self, span: Span) -> &'a str {
        text_of(self.bytes, span)
    }
}

/// The string at `span` of a block [`read_block`] checked.
fn text_of(block: &[u8], span: Span) -> &str {
    std::str::from_utf8(&block[span.range()]).expect("read_block checked it as UTF-8")
}

/// Reads `block` (a whole block, length field included), putting where its headers are
/// into `headers` (cleared first, so one list serves block after block).
///
/// # Errors
///
/// [`BlockError`]: where the bytes break the layout.
pub fn read_block<'a, 'h>(
    block: &'a [u8],
    headers: &'h mut Vec<HeaderAt>,
) -> Result<BlockRef<'a, 'h>, BlockError> {
    headers.clear();
    let Some(length) = block.first_chunk::<LENGTH_BYTES>() else {
        return Err(BlockError::Truncated { part: "length" });
    };
    let claimed = u32::from_le_bytes(*length);
    if claimed as usize != block.len() || block.len() < FIELDS_AT {
        return Err(BlockError::Length {
            claimed: u64::from(claimed),
            actual: block.len(),
        });
    }
    let flags = block[LENGTH_BYTES];
    if flags & !FLAGS_KNOWN != 0 {
        return Err(BlockError::Flags {
            bits: flags & !FLAGS_KNOWN,
        });
    }
    let mut fields = Fields {
        block,
        at: FIELDS_AT,
    };
    let key = (flags & FLAG_KEY != 0)
        .then(|| fields.text("key"))
        .transpose()?;
    let idempotency_key = (flags & FLAG_IDEMPOTENCY_KEY != 0)
        .then(|| fields.text("idempotency_key"))
        .transpose()?;
    if flags & FLAG_HEADERS != 0 {
        let count = fields.u16("headers")?;
        for _ in 0..count {
            let (name_bytes, value_bytes) =
                (fields.u16("header name")?, fields.u16("header value")?);
            let name = fields.span(name_bytes, "header name")?;
            let value = fields.span(value_bytes, "header value")?;
            if let Some(before) = headers.last() {
                in_order(&block[before.name.range()], &block[name.range()])?;
            }
            headers.push(HeaderAt { name, value });
        }
    }
    if fields.at != block.len() {
        return Err(BlockError::Trailing {
            extra: block.len() - fields.at,
        });
    }
    // Where the fields are ASCII (lengths under 128 and ASCII strings: the common case)
    // every string is UTF-8 at once.
    if !all_ascii(&block[FIELDS_AT..]) {
        let strings = key
            .map(|span| (span, "key"))
            .into_iter()
            .chain(idempotency_key.map(|span| (span, "idempotency_key")));
        let headers = headers
            .iter()
            .flat_map(|header| [(header.name, "header name"), (header.value, "header value")]);
        for (span, part) in strings.chain(headers) {
            std::str::from_utf8(&block[span.range()]).map_err(|_| BlockError::NotUtf8 { part })?;
        }
    }
    Ok(BlockRef {
        bytes: block,
        key,
        idempotency_key,
        headers,
    })
}

/// Where the key is in `block` (a range of it), read without the rest of the block: what
/// the planner of ordering keys asks of every fresh message. `None` for a block without
/// a key, or one too short to hold the key it claims ([`read_block`] says why).
///
/// ```
/// use mailroom_api::metadata_block::{key_at, write_block};
/// let mut block = Vec::new();
/// write_block(Some("k1"), None, [("h", "v")].into_iter(), &mut block)?;
/// assert_eq!(key_at(&block).map(|at| &block[at]), Some(&b"k1"[..]));
/// # Ok::<(), mailroom_api::metadata_block::TooLong>(())
/// ```
pub fn key_at(block: &[u8]) -> Option<Range<usize>> {
    leading_field_at(block, FLAG_KEY)
}

/// Where the idempotency key is in `block`, as [`key_at`] finds the key.
///
/// ```
/// use mailroom_api::metadata_block::{idempotency_key_at, write_block};
/// let mut block = Vec::new();
/// write_block(Some("k1"), Some("once"), std::iter::empty(), &mut block)?;
/// assert_eq!(idempotency_key_at(&block).map(|at| &block[at]), Some(&b"once"[..]));
/// # Ok::<(), mailroom_api::metadata_block::TooLong>(())
/// ```
pub fn idempotency_key_at(block: &[u8]) -> Option<Range<usize>> {
    leading_field_at(block, FLAG_IDEMPOTENCY_KEY)
}

/// The key or the idempotency key (`flag`), the two fields before the headers.
fn leading_field_at(block: &[u8], flag: u8) -> Option<Range<usize>> {
    let flags = *block.get(LENGTH_BYTES)?;
    if flags & flag == 0 {
        return None;
    }
    let mut fields = Fields {
        block,
        at: FIELDS_AT,
    };
    if flag == FLAG_IDEMPOTENCY_KEY && flags & FLAG_KEY != 0 {
        fields.text("key").ok()?;
    }
    fields.text("field").ok().map(Span::range)
}

/// Whether every byte is ASCII, eight at a time: about 50 instructions for a key and
/// two headers, where `str::from_utf8` took about 140 and `<[u8]>::is_ascii` (a byte
/// at a time here) about 170, counted with callgrind.
fn all_ascii(bytes: &[u8]) -> bool {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut seen = 0u64;
    for word in &mut words {
        seen |= u64::from_le_bytes(word.try_into().expect("chunks of 8"));
    }
    let rest = words.remainder().iter().fold(0, |seen, &byte| seen | byte);
    seen & HIGH_BITS == 0 && rest.is_ascii()
}

/// Refuses `name` after `before` unless it sorts after it (bytewise, as `str` sorts).
fn in_order(before: &[u8], name: &[u8]) -> Result<(), BlockError> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match before.cmp(name) {
        std::cmp::Ordering::Less => Ok(()),
        std::cmp::Ordering::Equal => Err(BlockError::RepeatedHeader { name: text(name) }),
        std::cmp::Ordering::Greater => Err(BlockError::HeaderOrder {
            before: text(before),
            after: text(name),
        }),
    }
}

/// The block's fields, read from `at` on, never past its end.
struct Fields<'a> {
    block: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn u16(&mut self, part: &'static str) -> Result<usize, BlockError> {
        match self.block.get(self.at..self.at + 2) {
            Some(&[low, high]) => {
                self.at += 2;
                Ok(usize::from(u16::from_le_bytes([low, high])))
            }
            _ => Err(BlockError::Truncated { part }),
        }
    }

    fn span(&mut self, bytes: usize, part: &'static str) -> Result<Span, BlockError> {
        let end = self.at + bytes;
        if end > self.block.len() {
            return Err(BlockError::Truncated { part });
        }
        let span = Span {
            start: self.at,
            end,
        };
        self.at = end;
        Ok(span)
    }

    /// A u16 length and that many bytes (checked as UTF-8 by the caller).
    fn text(&mut self, part: &'static str) -> Result<Span, BlockError> {
        let bytes = self.u16(part)?;
        self.span(bytes, part)
    }
}

#[cfg(test)]
mod tests;
