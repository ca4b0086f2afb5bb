//! [`BatchRequestRef::to_json`]: the batch body written straight into bytes.
//!
//! serde_json writes a string byte by byte through an escape table (about ten
//! instructions a byte in callgrind), and a client spends most of a batch publish there:
//! more than the server spends reading it. This writer copies each run of plain bytes
//! whole and escapes the rest as serde_json does, so its output is byte for byte what
//! `serde_json::to_vec` makes of the same body (a test holds it to that).

use std::collections::BTreeMap;

use super::{BatchItemRef, BatchObjectRef, BatchRequestRef};
use crate::json_text::{map, string, string_rest};

impl BatchRequestRef<'_> {
    /// This body as JSON: the bytes `serde_json::to_vec(self)` makes, made faster.
    ///
    /// ```
    /// use mailroom_api::batch_item::{BatchItemRef, BatchRequestRef};
    /// let body = BatchRequestRef { messages: vec![BatchItemRef::Text("a \"quoted\" word")] };
    /// assert_eq!(body.to_json(), serde_json::to_vec(&body).unwrap());
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len_hint());
        out.extend_from_slice(b"{\"messages\":[");
        for (i, item) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                BatchItemRef::Text(text) => string(&mut out, text),
                BatchItemRef::Binary(binary) => {
                    out.extend_from_slice(b"{\"base64\":");
                    string(&mut out, &binary.base64);
                    out.push(b'}');
                }
                BatchItemRef::Message(object) => message(&mut out, object),
            }
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// About how long the body will be when nothing needs an escape, so the buffer
    /// is allocated once (it grows if a guess falls short).
    fn encoded_len_hint(&self) -> usize {
        let strings = |object: &BatchObjectRef<'_>| {
            let fields = [object.payload, object.key, object.idempotency_key];
            // Each header is guessed, not measured: the buffer grows if the guess
            // falls short, which costs less than walking every map once more here.
            let headers = object.headers.map_or(0, BTreeMap::len) * HEADER_BYTES_GUESS;
            fields.iter().flatten().map(|s| s.len()).sum::<usize>()
                + object.payload_base64.as_ref().map_or(0, String::len)
                + headers
        };
        let items = self.messages.iter().map(|item| match item {
            BatchItemRef::Text(text) => text.len() + 3,
            BatchItemRef::Binary(binary) => binary.base64.len() + 14,
            BatchItemRef::Message(object) => strings(object) + 80,
        });
        items.sum::<usize>() + 16
    }
}

/// The bytes [`BatchRequestRef::to_json`] sets aside for each header: a trace context's
/// `traceparent` and its 55-byte value take 73 with their punctuation.
const HEADER_BYTES_GUESS: usize = 80;

/// One object item, its fields in [`BatchObjectRef`]'s order, the absent ones left out.
// Each field's name is written in one copy of a constant that holds its quotes, the
// colon and the opening quote of its value, and each string's closing quote goes with
// the separator after it. Byte by byte, with the length hint walking the headers too,
// that punctuation cost about 80 instructions more an item with a key and two headers
// in callgrind (`to_json` and this function 347 -> 265, outside the strings' search).
fn message(out: &mut Vec<u8>, object: &BatchObjectRef<'_>) {
    let mut separator = b'{';
    let mut field = |out: &mut Vec<u8>, name: &[u8]| {
        out.push(separator);
        separator = b',';
        out.extend_from_slice(name);
    };
    if let Some(payload) = object.payload {
        field(out, b"\"payload\":\"");
        string_rest(out, payload);
    }
    if let Some(base64) = &object.payload_base64 {
        field(out, b"\"payload_base64\":\"");
        string_rest(out, base64);
    }
    if let Some(key) = object.key {
        field(out, b"\"key\":\"");
        string_rest(out, key);
    }
    if let Some(headers) = object.headers {
        field(out, b"\"headers\":");
        map(out, headers);
    }
    if let Some(key) = object.idempotency_key {
        field(out, b"\"idempotency_key\":\"");
        string_rest(out, key);
    }
    if separator == b'{' {
        out.push(b'{');
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests;
