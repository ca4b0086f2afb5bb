//! Finding the bytes of a JSON string's text that need an escape (a quote, a backslash
//! or a control character): the batch body's scanner stops at them
//! ([`crate::batch_scan`]) and its writer escapes them ([`crate::batch_item`]'s
//! `BatchRequestRef::to_json`). One search for both, since either side of the batch
//! publish spends most of its time there.

use std::collections::BTreeMap;

/// Where the first byte of `text` that a JSON string must escape stands: a quote, a
/// backslash or a control character (below 0x20); `None` when there is none.
// The writer calls it for every string of a batch, most of them short (the scanner
// searches a string's first words itself, `batch_scan::plain_string_len`): the long
// strings' search is a function of its own so that this part stays small enough for the
// compiler to inline where it pays.
#[inline]
pub(crate) fn first_special(text: &[u8]) -> Option<usize> {
    // Most strings of a batch are short (field names, keys, header names and values):
    // their first bytes go a word at a time, one pass for the three kinds alike.
    // memchr's vector search costs more than that for them (about 67 instructions a
    // call in callgrind, `bench/metadata-instructions.sh`), and a byte-wise
    // control-character test costs about 4 instructions a byte. A whole text of at
    // most SHORT_TEXT_BYTES_MAX (the writer's strings, whose end is known) goes word by
    // word to its end: memchr's setup and the control-character pass after it cost
    // about 210 instructions for a 55-byte `traceparent` value in callgrind, the words
    // to its end about 130.
    let short = text.len() <= SHORT_TEXT_BYTES_MAX;
    let words = if short { text.len() } else { WORDWISE_BYTES };
    let mut at = 0;
    while at + 8 <= words {
        let found = special_bytes(word_at(text, at));
        if found != 0 {
            // Little-endian: the lowest flagged byte is the first one in the text.
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if short {
        if text.len() < 8 {
            return text.iter().position(|&b| special(b));
        }
        // The last few bytes in the word that ends the text: the bytes it shares with
        // the word before are clean, and a clean byte is never flagged (a false flag
        // needs a true one below it), so the lowest flag is the first special byte.
        let last = text.len() - 8;
        let found = special_bytes(word_at(text, last));
        return (found != 0).then(|| last + (found.trailing_zeros() / 8) as usize);
    }
    first_special_after_words(text)
}

/// [`first_special`] for a text longer than [`WORDWISE_BYTES`], whose first
/// `WORDWISE_BYTES` bytes hold no special byte.
#[inline(never)]
pub(crate) fn first_special_after_words(text: &[u8]) -> Option<usize> {
    // A long string (a payload): memchr's vector search for a quote or backslash, then
    // a check for a control character before it, found again byte by byte only when
    // there is one.
    let at = WORDWISE_BYTES;
    let rest = &text[at..];
    let end = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    if has_control(&text[..at + end]) {
        return rest.iter().position(|&b| b < 0x20).map(|i| at + i);
    }
    (end < rest.len()).then_some(at + end)
}

/// Whether `clean` holds a control character, where it holds no quote or backslash,
/// its first [`WORDWISE_BYTES`] bytes no special byte at all.
fn has_control(clean: &[u8]) -> bool {
    // A fold without an early exit over whole 32-byte runs, which the compiler makes a
    // vector loop of, and the bytes after them a word at a time. The fold over all of
    // them left up to 31 to the vector loop's byte-wise tail (about 4 instructions a
    // byte), most of a 55-byte `traceparent` value's search; a fold over 16-lane
    // chunks compiled to scalar code.
    let rest = &clean[WORDWISE_BYTES..];
    let whole = rest.len() & !31;
    let least = rest[..whole].iter().fold(u8::MAX, |least, &b| least.min(b));
    if least < 0x20 {
        return true;
    }
    // The words that end the text, back to the last whole run: only a control
    // character can be flagged in them (no quote or backslash), and a false flag needs
    // a true one. Every word is there: it ends past WORDWISE_BYTES (at least 8).
    let mut flags = 0;
    let mut end = clean.len();
    while end > WORDWISE_BYTES + whole {
        flags |= special_bytes(word_at(clean, end - 8));
        end -= 8;
    }
    flags != 0
}

/// Where the first special byte (as [`special`] says) of the eight bytes of `text` from
/// `at` stands, counted from the start of `text`; `None` when none of them is one.
/// `text` must hold the eight bytes.
#[inline(always)]
pub(crate) fn first_special_in_word(text: &[u8], at: usize) -> Option<usize> {
    let found = special_bytes(word_at(text, at));
    // Little-endian: the lowest flagged byte is the first one in the text.
    (found != 0).then(|| at + (found.trailing_zeros() / 8) as usize)
}

/// The longest text [`first_special`] reads a word at a time to its end.
pub(crate) const SHORT_TEXT_BYTES_MAX: usize = 64;

/// How many bytes of a text [`first_special`] reads a word at a time before it hands
/// the rest to memchr.
pub(crate) const WORDWISE_BYTES: usize = 24;

/// Whether a JSON string must escape `byte`.
#[inline]
pub(crate) fn special(byte: u8) -> bool {
    matches!(byte, b'"' | b'\\' | 0..0x20)
}

/// The eight bytes of `text` from `at` (which has them) as a little-endian word.
#[inline]
fn word_at(text: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&text[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The high bit of each byte of `word` set where [`special`] holds, exact for the
/// lowest such byte (bytes above it may be flagged falsely, by a borrow).
#[inline]
fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // `(v - ONES) & !v` sets a byte's high bit where the byte is zero, and, with 0x20
    // taken from each byte instead, where it is below 0x20.
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    (quote | backslash | control) & HIGH
}

/// `headers` as a JSON object of strings, in the map's order, as serde_json writes it.
pub(crate) fn map(out: &mut Vec<u8>, headers: &BTreeMap<String, String>) {
    let mut opening: &[u8] = b"{\"";
    for (name, value) in headers {
        out.extend_from_slice(opening);
        opening = b",\"";
        string_rest(out, name);
        out.extend_from_slice(b":\"");
        string_rest(out, value);
    }
    if headers.is_empty() {
        out.push(b'{');
    }
    out.push(b'}');
}

/// `text` as a JSON string, escaped as serde_json escapes it: a quote, a backslash and
/// the control characters, these by their short form where JSON has one and as
/// `\u00xx` otherwise.
pub(crate) fn string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    string_rest(out, text);
}

/// [`string`] after its opening quote: the text, escaped, and the closing quote.
pub(crate) fn string_rest(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    while let Some(at) = first_special(rest) {
        out.extend_from_slice(&rest[..at]);
        escape(out, rest[at]);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

fn escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            let hex = [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
            out.extend_from_slice(b"\\u00");
            out.extend_from_slice(&hex);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
pub(crate) mod tests;
