//! The limits the wire exposes: every bound a request is checked against, with the
//! defaults a server applies when a field is left out.
//!
//! Some of these are the state machine's own limits (`mailroom::group`,
//! `mailroom::topic`); they are repeated here so a client need not depend on the core,
//! and the `core` feature checks at compile time that both say the same.

pub use crate::names::NAME_BYTES_MAX;

/// The largest message a server accepts by default (`--max-payload-bytes`), in bytes.
pub const PAYLOAD_BYTES_MAX_DEFAULT: u64 = 1 << 20;
/// The largest `--max-payload-bytes` a server may be configured with.
pub const PAYLOAD_BYTES_MAX_LIMIT: u64 = 64 << 20;
/// The largest JSON body of the endpoints that take small JSON documents.
pub const JSON_BODY_BYTES_MAX: usize = 64 << 10;

/// The longest message key, in bytes of UTF-8 (`"key"`, `Mailroom-Key`).
pub const KEY_BYTES_MAX: usize = 1024;
/// The most headers one message may carry (`"headers"`, `Mailroom-Header-*`).
pub const HEADERS_MAX: usize = 64;
/// The longest header name, in bytes of UTF-8.
pub const HEADER_NAME_BYTES_MAX: usize = 256;
/// The longest header value, in bytes of UTF-8.
pub const HEADER_VALUE_BYTES_MAX: usize = 4096;
/// The most bytes one message's header names and values may take together.
pub const HEADERS_BYTES_MAX: usize = 16 << 10;
/// The longest idempotency key, in bytes of UTF-8.
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 256;

/// The most messages one batch publish may carry.
pub const BATCH_MESSAGES_MAX: usize = 10_000;
/// A batch publish body may be this many times `--max-payload-bytes` (base64 inflates
/// by 4/3, and a batch is meant to carry several messages).
pub const BATCH_BODY_PAYLOADS_MAX: usize = 4;
/// The most deliveries one batch may poll, ack or nack.
pub const BATCH_DELIVERIES_MAX: usize = 65_536;
/// The longest a poll may wait for a first delivery (`wait_ms`), in milliseconds.
pub const LONG_POLL_WAIT_MS_MAX: u64 = 30_000;
/// The largest offset a request may name: the OpenAPI document types offsets as
/// `int64`, and no log gets near this many messages.
pub const OFFSET_MAX: u64 = i64::MAX as u64;
/// The largest attempt a batch may name (`int32`); attempts never get near it.
pub const ATTEMPT_MAX: u32 = i32::MAX as u32;

/// The largest `max_attempts` a group may have.
pub const MAX_ATTEMPTS_MAX: u32 = 1_000_000;
/// The most deliveries one group may have in flight at once (`max_in_flight`).
pub const MAX_IN_FLIGHT_MAX: u32 = 65_536;
/// The longest lease a group may set (`lease_ms`), in milliseconds (one week).
pub const LEASE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The longest retry delay (a nack's `delay_ms` or a backoff's), in milliseconds.
pub const DELAY_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The longest timed pause of a group (`until_ms` at most this far ahead), in
/// milliseconds (one week); a longer one is a pause until a resume.
pub const PAUSE_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The longest failure reason kept with a nack or dead letter, in bytes of UTF-8.
pub const REASON_BYTES_MAX: usize = 1024;
/// The longest consumer identity accepted on a poll, in bytes of UTF-8.
pub const CONSUMER_BYTES_MAX: usize = 128;

/// The most dead letters one page may hold (`limit`).
pub const DEAD_LETTERS_PAGE_MAX: usize = 10_000;
/// The page size when `limit` is not given.
pub const DEAD_LETTERS_PAGE_DEFAULT: usize = 1_000;
/// The most messages one read of a topic's log may return (`limit` of
/// `GET /v1/topics/{topic}/messages`).
pub const READ_PAGE_MAX: usize = 10_000;
/// The page size of a read when `limit` is not given.
pub const READ_PAGE_DEFAULT: usize = 100;
/// The most payload bytes one page of any listing holds (dead letters and reads of a
/// topic's log): 16 MiB, as a batch poll. A page stops before the item
/// that would pass it, but always holds at least one item, however large, and its `next`
/// names the first item left out, so paging goes on. Bounds the memory one answer pins
/// whatever `limit` asks for.
pub const PAGE_BYTES_MAX: usize = 16 << 20;

/// The most frames one publish stream may have sent but not yet had confirmed; the
/// server reads no further, so a larger client window only queues frames in the socket.
pub const PUBLISH_STREAM_IN_FLIGHT_MAX: usize = 4_096;

/// The most live channels a server holds.
pub const CHANNELS_MAX: usize = 10_000;
/// The largest `max_subscribers` of a channel.
pub const CHANNEL_SUBSCRIBERS_MAX: usize = 10_000;
/// The largest `mailbox_capacity` of a channel.
pub const CHANNEL_MAILBOX_CAPACITY_MAX: usize = 65_536;
/// A channel's `max_subscribers` when not given.
pub const MAX_SUBSCRIBERS_DEFAULT: usize = 64;
/// A channel's `mailbox_capacity` when not given.
pub const MAILBOX_CAPACITY_DEFAULT: usize = 256;
/// The largest `mailbox_bytes` of a channel: 64 MiB, room for one message of the
/// largest `--max-payload-bytes`.
pub const CHANNEL_MAILBOX_BYTES_MAX: usize = 64 << 20;
/// A channel's `mailbox_bytes` when not given: 8 MiB. With the count, it bounds what one
/// subscriber that stopped reading pins in the server's memory.
pub const MAILBOX_BYTES_DEFAULT: usize = 8 << 20;

// The state machine's limits, said again above: both must agree.
#[cfg(feature = "core")]
const _: () = {
    use mailroom::group;
    assert!(MAX_IN_FLIGHT_MAX == group::MAX_IN_FLIGHT_MAX);
    assert!(LEASE_MS_MAX == group::LEASE_MS_MAX);
    assert!(DELAY_MS_MAX == group::DELAY_MS_MAX);
    assert!(REASON_BYTES_MAX == group::REASON_BYTES_MAX);
    assert!(CONSUMER_BYTES_MAX == group::CONSUMER_BYTES_MAX);
    assert!(BATCH_DELIVERIES_MAX == mailroom::topic::BATCH_DELIVERIES_MAX);
    assert!(NAME_BYTES_MAX == mailroom::topic::GROUP_NAME_BYTES_MAX);
    assert!(KEY_BYTES_MAX == mailroom::topic::KEY_BYTES_MAX);
    assert!(HEADERS_MAX == mailroom::topic::HEADERS_MAX);
    assert!(HEADER_NAME_BYTES_MAX == mailroom::topic::HEADER_NAME_BYTES_MAX);
    assert!(HEADER_VALUE_BYTES_MAX == mailroom::topic::HEADER_VALUE_BYTES_MAX);
    assert!(HEADERS_BYTES_MAX == mailroom::topic::HEADERS_BYTES_MAX);
    assert!(IDEMPOTENCY_KEY_BYTES_MAX == mailroom::topic::IDEMPOTENCY_KEY_BYTES_MAX);
};
/// The largest idempotency window by count a topic accepts (`window_messages`): a
/// restart rebuilds the window by reading up to this many records of the topic.
pub const IDEMPOTENCY_WINDOW_MESSAGES_MAX: u64 = 1_000_000;
/// The longest idempotency window by time a topic accepts (`window_ms`): 7 days.
pub const IDEMPOTENCY_WINDOW_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The longest retention age a topic accepts (`max_age_ms`): about ten years.
pub const RETENTION_AGE_MS_MAX: u64 = 3_650 * 24 * 60 * 60 * 1000;
/// The largest retention size a topic accepts (`max_bytes`): 1 EiB.
pub const RETENTION_BYTES_MAX: u64 = 1 << 60;
/// The largest retention count a topic accepts (`max_messages`): 2^53, the largest
/// integer every JSON reader keeps exactly.
pub const RETENTION_MESSAGES_MAX: u64 = 1 << 53;

/// The largest window a consume stream may ask for (`?window=`): the most deliveries it
/// holds unsettled at once. The group's `max_in_flight` bounds it too.
pub const CONSUME_STREAM_WINDOW_MAX: u32 = 4_096;
/// The largest settlement frame a consume stream reads, in bytes; a larger frame ends
/// the connection (close 1009).
pub const CONSUME_STREAM_FRAME_BYTES_MAX: usize = 16 << 10;
/// The most settlement frames a consume stream settles as one batch; the rest wait for
/// the next round.
pub const CONSUME_STREAM_SETTLEMENTS_MAX: usize = 1_024;
/// The most bytes of frames a consume stream queues for a client that does not read:
/// beyond it the server stops sending (and so stops reading) until the client catches
/// up. Above one poll's payload cap (16 MiB), so a full batch always fits.
pub const CONSUME_STREAM_QUEUED_BYTES_MAX: usize = 32 << 20;
