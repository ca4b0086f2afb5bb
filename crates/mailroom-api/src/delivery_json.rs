//! Deliveries written straight into JSON: a `poll/batch` answer
//! ([`PolledBatch::to_json`]), a consume stream's frame ([`ServerFrame::to_json`]) and
//! one delivery ([`DeliveryBody::write_json`]).
//!
//! A server hands out deliveries faster than anything else it writes, and serde_json
//! writes each payload byte by byte through its escape table: that was the largest
//! single item of a broker's CPU on a prefetch-64 consume of 1 KiB messages (12.7% of
//! its samples over PostgreSQL). These writers copy each run of plain bytes whole and
//! escape the rest as serde_json does, so their output is byte for byte what
//! `serde_json::to_vec` makes of the same value (the tests hold them to that); what is
//! not a delivery (the acks' and nacks' results, the other frames) still goes through
//! serde_json.

use crate::batch::PolledBatch;
use crate::consume_stream::ServerFrame;
use crate::deliveries::DeliveryBody;
use crate::json_text::{map, string_rest};

impl DeliveryBody {
    /// Appends this delivery as JSON to `out`: the bytes `serde_json::to_vec(self)`
    /// makes.
    ///
    /// ```
    /// use mailroom_api::deliveries::DeliveryBody;
    /// let delivery = DeliveryBody {
    ///     offset: 7,
    ///     attempt: 1,
    ///     payload: Some("a \"quoted\" word".into()),
    ///     payload_base64: None,
    ///     key: None,
    ///     headers: None,
    ///     published_at_ms: Some(1_700_000_000_000),
    /// };
    /// let mut out = Vec::new();
    /// delivery.write_json(&mut out);
    /// assert_eq!(out, serde_json::to_vec(&delivery).unwrap());
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_fields(out, b"{\"offset\":");
    }

    /// Appends this delivery's fields and the closing brace to `out`, after `opening`
    /// (the object's opening brace and whatever comes before its first field, which is
    /// `offset`, the field's name included).
    fn write_fields(&self, out: &mut Vec<u8>, opening: &[u8]) {
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(opening);
        out.extend_from_slice(digits.format(self.offset).as_bytes());
        out.extend_from_slice(b",\"attempt\":");
        out.extend_from_slice(digits.format(self.attempt).as_bytes());
        // Each field's name goes in one copy of a constant that holds its separator,
        // its quotes, the colon and the opening quote of its value.
        if let Some(payload) = &self.payload {
            out.extend_from_slice(b",\"payload\":\"");
            string_rest(out, payload);
        }
        if let Some(base64) = &self.payload_base64 {
            out.extend_from_slice(b",\"payload_base64\":\"");
            string_rest(out, base64);
        }
        if let Some(key) = &self.key {
            out.extend_from_slice(b",\"key\":\"");
            string_rest(out, key);
        }
        if let Some(headers) = &self.headers {
            out.extend_from_slice(b",\"headers\":");
            map(out, headers);
        }
        if let Some(at) = self.published_at_ms {
            out.extend_from_slice(b",\"published_at_ms\":");
            out.extend_from_slice(digits.format(at).as_bytes());
        }
        out.push(b'}');
    }

    /// About how many bytes [`write_json`](Self::write_json) writes when nothing needs
    /// an escape, so that a buffer is allocated once (it grows if a guess falls short).
    fn encoded_len_hint(&self) -> usize {
        let strings = [&self.payload, &self.payload_base64, &self.key];
        let text: usize = strings
            .iter()
            .filter_map(|s| s.as_ref())
            .map(String::len)
            .sum();
        let headers = self.headers.as_ref().map_or(0, |headers| {
            let pairs = headers
                .iter()
                .map(|(name, value)| name.len() + value.len() + 6);
            pairs.sum::<usize>() + 12
        });
        text + headers + DELIVERY_PUNCTUATION_BYTES
    }
}

/// The bytes of a delivery's JSON outside its strings' text, at most: field names,
/// quotes, separators and the three numbers.
const DELIVERY_PUNCTUATION_BYTES: usize = 140;

impl PolledBatch {
    /// This answer as JSON: the bytes `serde_json::to_vec(self)` makes, the deliveries
    /// written by [`DeliveryBody::write_json`].
    ///
    /// ```
    /// use mailroom_api::batch::PolledBatch;
    /// use mailroom_api::deliveries::DeliveryBody;
    /// let delivery = DeliveryBody {
    ///     offset: 0,
    ///     attempt: 2,
    ///     payload: None,
    ///     payload_base64: Some("/w==".into()),
    ///     key: Some("customer-42".into()),
    ///     headers: None,
    ///     published_at_ms: None,
    /// };
    /// let answer = PolledBatch { deliveries: vec![delivery], acked: Some(Vec::new()), nacked: None };
    /// assert_eq!(answer.to_json(), serde_json::to_vec(&answer).unwrap());
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        let hint: usize = self
            .deliveries
            .iter()
            .map(DeliveryBody::encoded_len_hint)
            .sum();
        let mut out = Vec::with_capacity(hint + 64);
        out.extend_from_slice(b"{\"deliveries\":[");
        for (i, delivery) in self.deliveries.iter().enumerate() {
            let opening: &[u8] = if i == 0 {
                b"{\"offset\":"
            } else {
                b",{\"offset\":"
            };
            delivery.write_fields(&mut out, opening);
        }
        out.push(b']');
        // The settlements' results are short and carry no payload: serde_json writes
        // them, into the same buffer.
        if let Some(acked) = &self.acked {
            out.extend_from_slice(b",\"acked\":");
            serde_json::to_writer(&mut out, acked).expect("ack results serialize");
        }
        if let Some(nacked) = &self.nacked {
            out.extend_from_slice(b",\"nacked\":");
            serde_json::to_writer(&mut out, nacked).expect("nack results serialize");
        }
        out.push(b'}');
        out
    }
}

impl ServerFrame {
    /// This frame as JSON text: the bytes `serde_json::to_vec(self)` makes, a delivery's
    /// written by [`DeliveryBody::write_json`]'s writer.
    ///
    /// ```
    /// use mailroom_api::consume_stream::ServerFrame;
    /// let frame = ServerFrame::Opened { consumer: "c-1".into(), window: 64 };
    /// assert_eq!(frame.to_json(), serde_json::to_vec(&frame).unwrap());
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        match self {
            ServerFrame::Delivery(delivery) => {
                let mut out = Vec::with_capacity(delivery.encoded_len_hint() + 20);
                delivery.write_fields(&mut out, b"{\"type\":\"delivery\",\"offset\":");
                out
            }
            other => serde_json::to_vec(other).expect("frames serialize"),
        }
    }
}

#[cfg(test)]
mod tests;
