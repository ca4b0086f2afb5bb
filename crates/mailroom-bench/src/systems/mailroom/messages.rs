//! The messages a mailroom publisher sends: bare payloads, or payloads with the run's
//! metadata (a key and headers, an idempotency key, or an ordering key).

use bytes::Bytes;

/// What every message a mailroom publisher sends carries besides its payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MessageMetadata {
    /// Nothing: bare payloads (today's publishes).
    #[default]
    None,
    /// A key and two headers (about what trace context and a content type add).
    KeyAndHeaders,
    /// A unique idempotency key per message, so every one is checked and stored.
    IdempotencyKey,
    /// A key drawn at random (seeded by the message's number) from this many distinct
    /// keys, for ordering keys in the consume workload.
    Keys(u32),
}

/// Makes the idempotency keys of one run unique across its publishers.
static IDEMPOTENCY_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Makes `messages` the messages of `payloads` with `metadata`: the ones kept from the
/// last batch get the new payload and, where the key is per message, a new key written
/// into the key's `String`.
pub(super) fn refill(
    messages: &mut Vec<mailroom_client::NewMessage>,
    metadata: MessageMetadata,
    payloads: &[Bytes],
) {
    use std::fmt::Write as _;
    // Written once a batch: the process id is the same in every key of the run.
    let prefix = format!("{}-", std::process::id());
    messages.truncate(payloads.len());
    while messages.len() < payloads.len() {
        messages.push(message_with(metadata));
    }
    for (message, payload) in messages.iter_mut().zip(payloads) {
        message.payload = payload.clone();
        let n = || IDEMPOTENCY_KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = match metadata {
            MessageMetadata::IdempotencyKey => message.idempotency_key.as_mut(),
            MessageMetadata::Keys(_) => message.key.as_mut(),
            MessageMetadata::None | MessageMetadata::KeyAndHeaders => None,
        };
        if let Some(key) = key {
            key.clear();
            match metadata {
                MessageMetadata::Keys(keys) => {
                    // Random, not round-robin: round-robin keys never meet inside a window.
                    let drawn = splitmix(n()) % u64::from(keys.max(1));
                    write!(key, "key-{drawn}").expect("a String takes it");
                }
                _ => {
                    // The text `format!("{pid}-{n}")` makes, without formatting it per
                    // message: that was about 450 instructions a message in callgrind,
                    // nearly half of what the client spent on an idempotent item beyond
                    // a bare one.
                    key.push_str(&prefix);
                    push_decimal(key, n());
                }
            }
        }
    }
}

/// A message with `metadata` (an empty payload, and empty per-message keys that
/// [`refill`] writes).
fn message_with(metadata: MessageMetadata) -> mailroom_client::NewMessage {
    let message = mailroom_client::NewMessage::new(Bytes::new());
    match metadata {
        MessageMetadata::None => message,
        MessageMetadata::KeyAndHeaders => message
            .with_key("customer-0042")
            .with_header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .with_header("content-type", "application/json"),
        MessageMetadata::IdempotencyKey => message.with_idempotency_key(String::new()),
        MessageMetadata::Keys(_) => message.with_key(String::new()),
    }
}

/// Appends `n` in decimal to `text`.
fn push_decimal(text: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // A char at a time: `str::from_utf8` of the digits cost more than pushing them.
    for &digit in &digits[start..] {
        text.push(char::from(digit));
    }
}

/// SplitMix64: a well-spread number from a counter.
fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the hand-written decimal is what `format!` writes, at both ends of u64.
    #[test]
    fn decimals_are_formatted_as_format_writes_them() {
        for n in [0, 7, 10, 99, 4_294_967_295, u64::MAX] {
            let mut text = String::from("x");
            push_decimal(&mut text, n);
            assert_eq!(text, format!("x{n}"));
        }
    }

    // Proves every idempotent message gets a key of its own, written as pid-n.
    #[test]
    fn idempotency_keys_are_distinct() {
        let payloads = vec![Bytes::from_static(b"p"); 3];
        let mut messages = Vec::new();
        refill(&mut messages, MessageMetadata::IdempotencyKey, &payloads);
        refill(&mut messages, MessageMetadata::IdempotencyKey, &payloads);
        let keys: std::collections::BTreeSet<_> = messages
            .iter()
            .map(|m| m.idempotency_key.clone().unwrap())
            .collect();
        assert_eq!(keys.len(), 3);
        let prefix = format!("{}-", std::process::id());
        assert!(keys.iter().all(|key| key.starts_with(&prefix)));
    }
}
