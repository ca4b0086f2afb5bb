//! Live channels across brokers: each broker's channel publishes go to the others by
//! `NOTIFY` on [`CHANNEL_MESSAGES`], sent off the publish path and many per statement,
//! as the long-poll wake-ups are (`notify.rs`); each broker listens and fans every
//! message out to its own subscribers of the channel of that name.
//!
//! A publish puts its message in this broker's outbox (bounded, never waiting: full, it
//! drops the message and counts it) and wakes the sender task, which sends whatever the
//! outbox holds in one `SELECT pg_notify(...) FROM unnest(...)` statement. Statements go
//! one after another, so they commit in the order the messages were published, and
//! PostgreSQL delivers the notifications of one session in commit order: each broker
//! sees one publisher's messages in the order it published them.
//!
//! A notification is `<broker id, 16 hex> <seq> <channel> <payload in base64>`: base64,
//! because a notification is text and a channel message any bytes; the broker id so a
//! broker skips its own (it fanned them out itself); `seq` counts this broker's relayed
//! messages (from 0), so a receiver that finds a gap knows how many it missed (its
//! listening connection dropped, or the sender dropped them) and counts them; and it
//! keeps two equal messages apart, since PostgreSQL folds equal notifications of one
//! transaction into one. A notification must be shorter than 8000 bytes, so a message
//! is at most [`RELAYED_PAYLOAD_BYTES_MAX`]; a larger publish is refused with 413.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use deadpool_postgres::Pool;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::channels::{ChannelRelay, Channels, RelayCounts};

/// The channel the brokers notify and listen on for channel messages.
pub const CHANNEL_MESSAGES: &str = "mailroom_channel_messages";
/// The largest channel message relayed: its base64 (`4 * ceil(n / 3)` = 7512 bytes) and
/// the longest header (16 + 1 + 20 + 1 + 128 + 1 bytes) stay under PostgreSQL's 8000-byte
/// limit of a notification's payload, with room to spare.
pub const RELAYED_PAYLOAD_BYTES_MAX: usize = 5632;
/// The most messages waiting in a broker's outbox; past it, a publish is not relayed.
pub const OUTBOX_MESSAGES_MAX: usize = 16_384;
/// The most payload bytes waiting in a broker's outbox; past it, a publish is not relayed.
pub const OUTBOX_BYTES_MAX: usize = 32 << 20;
/// The most notification bytes one statement sends: a burst goes as several statements,
/// each a transaction the listeners take in one piece.
const STATEMENT_BYTES_MAX: usize = 1 << 20;
/// How long the sender waits after a failed statement before the next.
const RETRY_MS: u64 = 200;

// The OpenAPI text of the channel publish route names this limit.
const _: () = assert!(RELAYED_PAYLOAD_BYTES_MAX == 5632);
const _: () = assert!(4 * RELAYED_PAYLOAD_BYTES_MAX.div_ceil(3) + 167 < 8000);

/// What the relay did since the broker started ([`RelayCounts`] as it counts them).
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Messages of this broker sent to the others.
    pub sent: AtomicU64,
    /// Messages of this broker not sent: the outbox was full or the statement failed.
    pub unsent: AtomicU64,
    /// Messages of other brokers received here.
    pub received: AtomicU64,
    /// Messages of other brokers that never arrived here (gaps in their numbers).
    pub missed: AtomicU64,
}

/// One message waiting to be sent.
#[derive(Debug)]
struct Outgoing {
    seq: u64,
    channel: String,
    payload: Bytes,
}

#[derive(Debug, Default)]
struct Outbox {
    queue: VecDeque<Outgoing>,
    bytes: usize,
    next_seq: u64,
}

/// A broker's side of the relay: its outbox, its counts, and its channels, which the
/// listener fans received messages out to.
#[derive(Debug)]
pub(super) struct Relay {
    broker_id: u64,
    outbox: Mutex<Outbox>,
    ready: Notify,
    /// The highest number received from each other broker, by broker id.
    last_seen: Mutex<HashMap<u64, u64>>,
    pub counts: Counts,
    /// Weak: the channels hold the relay, which must not keep them alive in turn.
    channels: Weak<Channels>,
}

impl Relay {
    /// A relay for the broker `broker_id`, and the channels it serves.
    pub(super) fn with_channels(broker_id: u64) -> (Arc<Relay>, Arc<Channels>) {
        let mut relay = None;
        let channels = Arc::new_cyclic(|channels| {
            let made = Arc::new(Relay {
                broker_id,
                outbox: Mutex::default(),
                ready: Notify::new(),
                last_seen: Mutex::default(),
                counts: Counts::default(),
                channels: Weak::clone(channels),
            });
            relay = Some(Arc::clone(&made));
            Channels::relayed(made)
        });
        (relay.expect("made in the closure"), channels)
    }

    /// Takes one notification's payload from the listener: skips this broker's own,
    /// counts the messages missed before it, and fans it out here.
    pub(super) fn receive(&self, notification: &str) {
        let Some((sender, seq, channel, payload)) = decode(notification) else {
            tracing::warn!(
                notification,
                "a channel message that does not parse; ignored"
            );
            return;
        };
        if sender == self.broker_id {
            return;
        }
        let missed = {
            let mut last_seen = self.last_seen.lock();
            let missed = match last_seen.get(&sender) {
                Some(&last) if seq > last => seq - last - 1,
                Some(_) => 0,
                // The first heard of that broker: what came before was not ours to get.
                None => 0,
            };
            let last = last_seen.entry(sender).or_insert(seq);
            *last = (*last).max(seq);
            missed
        };
        if missed > 0 {
            let total = self.counts.missed.fetch_add(missed, Ordering::Relaxed) + missed;
            tracing::warn!(
                sender = format_args!("{sender:016x}"),
                missed,
                total,
                "channel messages of another broker never arrived (the listening \
                 connection dropped, or that broker could not send them)"
            );
        }
        self.counts.received.fetch_add(1, Ordering::Relaxed);
        if let Some(channels) = self.channels.upgrade() {
            channels.deliver_relayed(channel, payload);
        }
    }

    /// Takes what the outbox holds, up to one statement's worth, as notification payloads.
    fn take_batch(&self) -> Vec<String> {
        let mut outbox = self.outbox.lock();
        let mut batch = Vec::new();
        let mut bytes = 0;
        while bytes < STATEMENT_BYTES_MAX {
            let Some(message) = outbox.queue.pop_front() else {
                break;
            };
            outbox.bytes -= message.payload.len();
            let encoded = encode(self.broker_id, &message);
            bytes += encoded.len();
            batch.push(encoded);
        }
        batch
    }
}

impl ChannelRelay for Relay {
    fn payload_bytes_max(&self) -> usize {
        RELAYED_PAYLOAD_BYTES_MAX
    }

    fn send(&self, channel: &str, payload: &Bytes) {
        let mut outbox = self.outbox.lock();
        // Every message takes a number, sent or not, so the others count what they miss.
        let seq = outbox.next_seq;
        outbox.next_seq += 1;
        let full = outbox.queue.len() >= OUTBOX_MESSAGES_MAX
            || outbox.bytes + payload.len() > OUTBOX_BYTES_MAX;
        if full {
            drop(outbox);
            self.counts.unsent.fetch_add(1, Ordering::Relaxed);
            return;
        }
        outbox.bytes += payload.len();
        outbox.queue.push_back(Outgoing {
            seq,
            channel: channel.to_owned(),
            payload: payload.clone(),
        });
        drop(outbox);
        self.ready.notify_one();
    }

    fn counts(&self) -> RelayCounts {
        let counts = &self.counts;
        RelayCounts {
            sent: counts.sent.load(Ordering::Relaxed),
            unsent: counts.unsent.load(Ordering::Relaxed),
            received: counts.received.load(Ordering::Relaxed),
            missed: counts.missed.load(Ordering::Relaxed),
        }
    }
}

/// The task that sends the outbox, one statement at a time, in order.
pub(super) fn spawn_sender(relay: Arc<Relay>, pool: Pool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            relay.ready.notified().await;
            loop {
                let batch = relay.take_batch();
                if batch.is_empty() {
                    break;
                }
                let count = batch.len() as u64;
                let sent = async {
                    let client = pool.get().await.map_err(|error| error.to_string())?;
                    // Prepared once per connection, as the wake-ups' (`notify.rs`).
                    let statement = client
                        .prepare_cached("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
                        .await
                        .map_err(|error| error.to_string())?;
                    client
                        .execute(&statement, &[&CHANNEL_MESSAGES, &batch])
                        .await
                        .map_err(|error| error.to_string())
                };
                match sent.await {
                    Ok(_) => {
                        relay.counts.sent.fetch_add(count, Ordering::Relaxed);
                    }
                    Err(error) => {
                        // Best effort: a statement that failed may or may not have been
                        // sent, and sending it again could deliver it twice; it is
                        // counted as unsent, and the receivers count it if it was not.
                        relay.counts.unsent.fetch_add(count, Ordering::Relaxed);
                        tracing::warn!(%error, count, "could not relay channel messages");
                        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
                    }
                }
            }
        }
    })
}

/// One notification's payload for `message` of broker `broker_id`.
fn encode(broker_id: u64, message: &Outgoing) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(&message.payload);
    format!(
        "{broker_id:016x} {} {} {body}",
        message.seq, message.channel
    )
}

/// The sender, number, channel and payload of a notification; `None` if it does not parse.
fn decode(notification: &str) -> Option<(u64, u64, &str, Bytes)> {
    let mut parts = notification.splitn(4, ' ');
    let sender = u64::from_str_radix(parts.next()?, 16).ok()?;
    let seq = parts.next()?.parse().ok()?;
    let channel = parts.next()?;
    let payload = base64::engine::general_purpose::STANDARD
        .decode(parts.next()?)
        .ok()?;
    Some((sender, seq, channel, Bytes::from(payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a message of the largest relayed size, on the longest channel name and the
    // largest number, encodes under PostgreSQL's limit and decodes to itself.
    #[test]
    fn the_largest_message_fits_a_notification_and_round_trips() {
        let message = Outgoing {
            seq: u64::MAX,
            channel: "c".repeat(128),
            payload: Bytes::from(vec![0xff; RELAYED_PAYLOAD_BYTES_MAX]),
        };
        let encoded = encode(u64::MAX, &message);
        assert!(encoded.len() < 8000, "{}", encoded.len());
        let (sender, seq, channel, payload) = decode(&encoded).unwrap();
        assert_eq!(
            (sender, seq, channel),
            (u64::MAX, u64::MAX, &*message.channel)
        );
        assert_eq!(payload, message.payload);
        assert!(decode("zz 1 c AAAA").is_none());
        assert!(decode("01 1 c").is_none());
    }

    // Proves the receiver skips its own broker's messages, fans the others out to the
    // channel of that name, and counts the numbers it never got as missed.
    #[test]
    fn a_receiver_skips_its_own_and_counts_gaps() {
        let (relay, channels) = Relay::with_channels(7);
        let limits = crate::channels::ChannelLimits {
            max_subscribers: 1,
            mailbox_capacity: 8,
            mailbox_bytes: 1024,
        };
        channels.create("c", limits).unwrap();
        let subscription = channels.get("c").unwrap().broker.subscribe().unwrap();
        let from = |broker: u64, seq: u64, payload: &str| {
            let message = Outgoing {
                seq,
                channel: "c".into(),
                payload: Bytes::from(payload.to_owned()),
            };
            relay.receive(&encode(broker, &message));
        };
        from(7, 0, "own");
        from(9, 4, "a");
        from(9, 5, "b");
        from(9, 8, "c");
        from(3, 0, "d");
        let got: Vec<Bytes> = std::iter::from_fn(|| subscription.poll()).collect();
        assert_eq!(got, ["a", "b", "c", "d"].map(Bytes::from));
        assert_eq!(relay.counts.received.load(Ordering::Relaxed), 4);
        assert_eq!(relay.counts.missed.load(Ordering::Relaxed), 2);
    }

    // Proves a full outbox drops the publish (counted as unsent) without waiting, and
    // the numbers keep counting so the receivers see the gap.
    #[test]
    fn a_full_outbox_drops_and_counts() {
        let (relay, _channels) = Relay::with_channels(1);
        let big = Bytes::from(vec![0u8; OUTBOX_BYTES_MAX]);
        relay.send("c", &big);
        relay.send("c", &Bytes::from_static(b"x"));
        assert_eq!(relay.counts.unsent.load(Ordering::Relaxed), 1);
        let batch = relay.take_batch();
        assert_eq!(batch.len(), 1);
        relay.send("c", &Bytes::from_static(b"y"));
        let batch = relay.take_batch();
        let (_, seq, _, payload) = decode(&batch[0]).unwrap();
        assert_eq!((seq, payload), (2, Bytes::from_static(b"y")));
    }
}
