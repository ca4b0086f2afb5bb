//! A batch publish body read without copying its strings: [`scan_batch`].
//!
//! The general decoder (`BatchRequest` through serde, with `crate::batch_item`) gives
//! every string of an item its own `String`: a payload, a key, each header name and
//! value, and a map for the headers. That is most of what an item with metadata costs
//! beyond a bare one. `scan_batch` reads the same body borrowing every string from it,
//! and the server copies the bytes once, into the record.
//!
//! It reads only the plain shape of a batch: strings without escapes, objects whose
//! fields are known and given once with string values (headers an object of strings,
//! each name once), and JSON whitespace. Anything else, including every body the
//! general decoder refuses, answers `None`: the caller then reads the body with the
//! general decoder, which accepts or refuses it (and words the refusal) as always. So
//! where `scan_batch` answers, it answers what the general decoder would, and the
//! property test below holds it to that.
//!
//! ```
//! use mailroom_api::batch_scan::{scan_batch, ScannedItem};
//!
//! let body = br#"{"messages": ["a", {"payload": "b", "headers": {"z": "1", "a": "2"}}]}"#;
//! let batch = scan_batch(body).unwrap();
//! assert!(matches!(batch.items[0], ScannedItem::Text("a")));
//! let ScannedItem::Message(object) = &batch.items[1] else { panic!() };
//! assert_eq!(object.payload, Some("b"));
//! // Headers come in name order, as a map would hold them.
//! assert_eq!(batch.headers(object), [("a", "2"), ("z", "1")]);
//! // An escape is left to the general decoder.
//! assert!(scan_batch(br#"{"messages": ["a\"b"]}"#).is_none());
//! ```

use std::ops::Range;

use crate::batch_item::Field;

/// A batch body's items, their strings borrowed from the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedBatch<'a> {
    /// The items, in order.
    pub items: Vec<ScannedItem<'a>>,
    /// Every item's headers, each item's a range of this.
    headers: Vec<(&'a str, &'a str)>,
}

/// One item, in the three forms of [`BatchMessage`](crate::topics::BatchMessage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScannedItem<'a> {
    /// A string item: the payload as text.
    Text(&'a str),
    /// `{"base64": ...}`: the payload's base64.
    Binary(&'a str),
    /// An object item (its payload fields as given, checked by the caller).
    Message(ScannedObject<'a>),
}

/// An object item's fields, as [`BatchMessageObject`](crate::topics::BatchMessageObject)'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScannedObject<'a> {
    /// `payload`.
    pub payload: Option<&'a str>,
    /// `payload_base64`.
    pub payload_base64: Option<&'a str>,
    /// `key`.
    pub key: Option<&'a str>,
    /// `idempotency_key`.
    pub idempotency_key: Option<&'a str>,
    /// `headers`: a range of the batch's headers (see [`ScannedBatch::headers`]).
    headers: Option<Range<usize>>,
}

impl<'a> ScannedBatch<'a> {
    /// `object`'s headers, in name order, each name once; empty when it has none.
    pub fn headers(&self, object: &ScannedObject<'a>) -> &[(&'a str, &'a str)] {
        object
            .headers
            .clone()
            .map_or(&[][..], |range| &self.headers[range])
    }
}

/// Reads `body` as a batch publish body (`{"messages": [...]}`) if it has the plain
/// shape of the module docs; `None` if it has not (read it with the general decoder).
pub fn scan_batch(body: &[u8]) -> Option<ScannedBatch<'_>> {
    // Validating the whole body once makes every slice between two ASCII quotes a
    // `&str` without a second check.
    let text = std::str::from_utf8(body).ok()?;
    let mut scanner = Scanner {
        text,
        bytes: body,
        at: 0,
        headers: Vec::new(),
    };
    let items = scanner.batch()?;
    scanner.skip_whitespace();
    (scanner.at == body.len()).then_some(ScannedBatch {
        items,
        headers: scanner.headers,
    })
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Scanner<'a> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    #[inline]
    fn next(&mut self) -> Option<u8> {
        let mut byte = *self.bytes.get(self.at)?;
        // Every JSON whitespace byte is at most a space, and a body written without
        // whitespace (the Rust client's) never has one between tokens: one test then.
        if byte <= b' ' {
            self.skip_whitespace();
            byte = *self.bytes.get(self.at)?;
        }
        self.at += 1;
        Some(byte)
    }

    #[inline]
    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// A string without escapes, after whitespace.
    #[inline]
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        self.string_rest()
    }

    /// The rest of a string whose opening quote was read.
    // Always inlined: as a call it cost about 11 instructions a string in callgrind
    // (saving registers, `at` through memory), beside a short string's search.
    #[inline(always)]
    fn string_rest(&mut self) -> Option<&'a str> {
        let start = self.at;
        let len = plain_string_len(&self.bytes[start..])?;
        self.at = start + len + 1;
        // Both ends are ASCII quotes, so both are character boundaries.
        self.text.get(start..start + len)
    }

    /// An object item's field name, after whitespace, and its colon.
    ///
    /// The name's bytes are matched with each known name and its closing quote, so a
    /// known name is read without the search for its end that a string takes: its
    /// bytes prove it plain. Any other name, escaped spellings of the known ones
    /// included, answers `None`, as reading it as a string and matching that did.
    #[inline]
    fn field(&mut self) -> Option<Field> {
        self.expect(b'"')?;
        let rest = &self.bytes[self.at..];
        let (field, name): (Field, &[u8]) = match *rest.first()? {
            b'p' if rest.starts_with(b"payload\"") => (Field::Payload, b"payload\""),
            b'p' if rest.starts_with(b"payload_base64\"") => {
                (Field::PayloadBase64, b"payload_base64\"")
            }
            b'k' if rest.starts_with(b"key\"") => (Field::Key, b"key\""),
            b'h' if rest.starts_with(b"headers\"") => (Field::Headers, b"headers\""),
            b'i' if rest.starts_with(b"idempotency_key\"") => {
                (Field::IdempotencyKey, b"idempotency_key\"")
            }
            b'b' if rest.starts_with(b"base64\"") => (Field::Base64, b"base64\""),
            _ => return None,
        };
        self.at += name.len();
        self.expect(b':')?;
        Some(field)
    }

    /// `{"messages": [items]}` up to its closing brace.
    fn batch(&mut self) -> Option<Vec<ScannedItem<'a>>> {
        self.expect(b'{')?;
        if self.string()? != "messages" {
            return None;
        }
        self.expect(b':')?;
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
        } else {
            loop {
                items.push(self.item()?);
                match self.next()? {
                    b',' => continue,
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.expect(b'}')?;
        Some(items)
    }

    fn item(&mut self) -> Option<ScannedItem<'a>> {
        match self.next()? {
            b'"' => Some(ScannedItem::Text(self.string_rest()?)),
            b'{' => self.object(),
            _ => None,
        }
    }

    /// An object item, its opening brace read.
    fn object(&mut self) -> Option<ScannedItem<'a>> {
        let mut object = ScannedObject::default();
        let mut base64 = None;
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(ScannedItem::Message(object));
        }
        loop {
            let slot = match self.field()? {
                Field::Headers => {
                    if object.headers.is_some() {
                        return None;
                    }
                    object.headers = Some(self.headers()?);
                    None
                }
                Field::Payload => Some(&mut object.payload),
                Field::PayloadBase64 => Some(&mut object.payload_base64),
                Field::Key => Some(&mut object.key),
                Field::IdempotencyKey => Some(&mut object.idempotency_key),
                Field::Base64 => Some(&mut base64),
            };
            if let Some(slot) = slot {
                if slot.replace(self.string()?).is_some() {
                    return None;
                }
            }
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        match base64 {
            None => Some(ScannedItem::Message(object)),
            // `base64` stands alone.
            Some(base64) if object == ScannedObject::default() => Some(ScannedItem::Binary(base64)),
            Some(_) => None,
        }
    }

    /// A headers object: its pairs pushed in name order; `None` for a name given twice.
    fn headers(&mut self) -> Option<Range<usize>> {
        let start = self.headers.len();
        self.expect(b'{')?;
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(start..start);
        }
        loop {
            let name = self.string()?;
            self.expect(b':')?;
            let value = self.string()?;
            self.headers.push((name, value));
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        // A map keeps the last of a repeated name; that rare body is left to it.
        sort_names_once(&mut self.headers[start..])?;
        Some(start..self.headers.len())
    }
}

/// Sorts `pairs` by name; `None` if a name is given twice.
fn sort_names_once(pairs: &mut [(&str, &str)]) -> Option<()> {
    if pairs.len() > 8 {
        pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        return pairs
            .windows(2)
            .all(|pair| pair[0].0 != pair[1].0)
            .then_some(());
    }
    // The usual few headers: an insertion sort, which compares every name with the one
    // it stops beside, so a repeated name shows as an equal pair (the general sort
    // above cost about 145 instructions for two headers).
    for i in 1..pairs.len() {
        let mut at = i;
        while at > 0 {
            match name_order(pairs[at - 1].0, pairs[at].0) {
                std::cmp::Ordering::Less => break,
                std::cmp::Ordering::Equal => return None,
                std::cmp::Ordering::Greater => pairs.swap(at - 1, at),
            }
            at -= 1;
        }
    }
    Some(())
}

/// `a` against `b` as `str::cmp` orders them, by their first bytes where those differ
/// (the usual case), which spares the call to `memcmp` that `cmp` makes.
#[inline]
fn name_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

/// How many bytes of `rest` come before its closing quote, if they hold neither an
/// escape nor a control character (which JSON refuses in a string); `None` otherwise.
#[inline(always)]
fn plain_string_len(rest: &[u8]) -> Option<usize> {
    use crate::json_text::WORDWISE_BYTES;
    use crate::json_text::{first_special, first_special_after_words, first_special_in_word};
    // Most strings of an item with metadata (its key, header names and values) end
    // within 16 bytes: their first words are searched here, inlined into the scanner,
    // instead of in a call to `first_special` (callgrind, `bench/metadata-instructions.sh`:
    // the scanner and that call 1,048 -> 1,010 instructions an item with a key and two
    // headers). The body goes on past a string (its closing quote at least), so it
    // usually holds the three words; a long string goes on to memchr as before.
    const _: () = assert!(WORDWISE_BYTES == 24, "three words, as first_special reads");
    let len = if rest.len() > WORDWISE_BYTES + 8 {
        let found = first_special_in_word(rest, 0)
            .or_else(|| first_special_in_word(rest, 8))
            .or_else(|| first_special_in_word(rest, 16));
        match found {
            Some(len) => len,
            None => first_special_after_words(rest)?,
        }
    } else {
        first_special(rest)?
    };
    (rest[len] == b'"').then_some(len)
}

#[cfg(test)]
mod tests;
