//! Pipelined publishing: one WebSocket carries many messages, each confirmed once it is
//! durable, with up to [`PUBLISH_STREAM_IN_FLIGHT_MAX`] of them unconfirmed at a time.
//!
//! `GET /v1/topics/{topic}/publish/ws` upgrades to a WebSocket (404 `unknown_topic`
//! before the upgrade if the topic does not exist).
//!
//! # Frames
//!
//! Client to server: every binary or text frame is one message's payload. Frames are
//! numbered from 0 on this connection: that number is the frame's `seq`.
//!
//! Server to client: text frames, each one JSON confirmation covering the `count` frames
//! from `seq` on, sent in `seq` order with no gap:
//!
//! ```text
//! {"seq": 0, "count": 3, "offset": 17}      frames 0, 1, 2 got offsets 17, 18, 19
//! {"seq": 3, "count": 1, "error": {"code": "payload_too_large", "message": "..."}}
//! ```
//!
//! # Batching and durability
//!
//! Whatever frames are already readable from the socket go to the store as one batch
//! (one write, one `fdatasync` under `--fsync always`), and the batch gets one
//! confirmation. A confirmation is sent only once its messages are durable under the
//! server's sync policy, exactly when the HTTP publish would answer. Several batches may
//! wait for durability at once: the server keeps reading frames (and writing the next
//! batches) while earlier ones wait, so a disk sync is shared by everything that arrived
//! meanwhile, on this connection and any other.
//!
//! # Back-pressure
//!
//! With [`PUBLISH_STREAM_IN_FLIGHT_MAX`] frames read but not yet confirmed, the server
//! stops reading the socket until a confirmation goes out: the client's writes then
//! block on TCP flow control. The server never holds more than one batch's payloads
//! (at most [`PUBLISH_STREAM_BATCH_BYTES_MAX`] plus one frame); once written, a batch is
//! only a pending answer. A client must read confirmations while it writes frames;
//! one that does not may stall its own connection, never the server.
//!
//! # Errors and closing
//!
//! A frame larger than `--max-payload-bytes` gets its own `payload_too_large` entry and
//! the stream goes on; a frame larger than that plus [`OVERSIZE_FRAME_SLACK_BYTES`]
//! breaks the connection. A store that stopped accepting writes (`store_failed`), a
//! storage fault, or the topic's deletion (`unknown_topic`) ends the stream: the server
//! stops reading, sends the error entry (and the answers of batches written before it),
//! then a close frame with code 1011 and the error code as its reason. A client that
//! closes the connection gets no further confirmations: to know the fate of every
//! message, wait for all of them before closing. Messages whose confirmation was lost
//! that way were still published (as when an HTTP response is lost on the way).
//!
//! After its close frame the server reads (and discards) what the client still sends,
//! for up to [`PUBLISH_STREAM_CLOSE_WAIT_MS_MAX`], until the client's close frame: were it
//! to drop the socket with unread frames in it, the kernel would reset the connection, and
//! a reset may destroy the confirmations and close frame not yet read by the client.
//!
//! # Shutdown
//!
//! When the server shuts down (SIGTERM, Ctrl-C) every publish stream stops reading frames
//! at once, waits for the batches it already wrote, sends their confirmations, then a
//! close frame with code 1001 (Going Away) and the reason `shutting_down`. The server waits
//! for every stream to get that far (within its shutdown grace,
//! [`SHUTDOWN_GRACE_MS_MAX`](crate::server::SHUTDOWN_GRACE_MS_MAX)) before its final store
//! sync and exit. So every frame the server read is confirmed, and frames without a
//! confirmation before the 1001 close were not published: a client can republish exactly
//! those (to a restarted server) without duplicates.

use std::future::Future;
use std::pin::Pin;

use axum::extract::ws::{close_code, CloseFrame, Message, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::{FutureExt as _, Sink, SinkExt as _, Stream, StreamExt as _};
use mailroom_store::DurableTopic;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::metrics::TopicLabels;
use crate::names::check_name;
use crate::state::{AppState, PublishStreamTicket};

/// The most frames one connection may have read but not yet confirmed; beyond it the
/// server stops reading the socket.
pub const PUBLISH_STREAM_IN_FLIGHT_MAX: usize = 4_096;
/// Once a batch holds this many payload bytes it goes to the store, and the next frames
/// start another batch.
pub const PUBLISH_STREAM_BATCH_BYTES_MAX: usize = 1 << 20;
/// How far beyond `--max-payload-bytes` a frame may go and still get its own error entry
/// with the stream going on; a larger frame breaks the connection (the WebSocket layer
/// refuses to buffer it).
pub const OVERSIZE_FRAME_SLACK_BYTES: usize = 64 << 10;
/// The most bytes one read from a publisher's socket takes.
pub const PUBLISH_STREAM_READ_BUFFER_BYTES: usize = 64 << 10;
/// How long, after its close frame, the server keeps reading (and discarding) what the
/// client sends while it waits for the client's close frame.
pub const PUBLISH_STREAM_CLOSE_WAIT_MS_MAX: u64 = 2_000;
/// The close reason of a stream ended by the server's shutdown (close code 1001).
pub const SHUTDOWN_CLOSE_REASON: &str = "shutting_down";

// A batch holds at most the in-flight bound of records and under the batch bytes plus
// one frame (the frame that crosses the mark), so the store never refuses one for its size.
const _: () = assert!(PUBLISH_STREAM_IN_FLIGHT_MAX <= mailroom_store::log::APPEND_RECORDS_MAX);
const _: () = assert!(
    PUBLISH_STREAM_BATCH_BYTES_MAX as u64 + crate::config::PAYLOAD_BYTES_MAX_LIMIT
        <= mailroom_store::log::APPEND_BYTES_MAX
);

/// One confirmation frame: the fate of frames `seq .. seq + count`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct StreamConfirmation {
    /// The first frame covered (frames are numbered from 0 on the connection).
    pub seq: u64,
    /// How many consecutive frames are covered.
    pub count: u64,
    /// On success: the offset of frame `seq`; frame `seq + i` got `offset + i`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// On failure: why none of the covered frames was published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StreamError>,
}

/// Why frames were not published: the code and message an HTTP publish would give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct StreamError {
    /// The stable error code (`payload_too_large`, `unknown_topic`, `store_failed`, ...).
    pub code: String,
    /// A human-readable explanation.
    pub message: String,
}

impl StreamConfirmation {
    fn new(seq: u64, count: usize, outcome: Result<u64, ApiError>) -> StreamConfirmation {
        let count = count as u64;
        match outcome {
            Ok(offset) => StreamConfirmation {
                seq,
                count,
                offset: Some(offset),
                error: None,
            },
            Err(error) => StreamConfirmation {
                seq,
                count,
                offset: None,
                error: Some(StreamError {
                    code: error.code.to_owned(),
                    message: error.message,
                }),
            },
        }
    }
}

/// Publishes over a WebSocket: one binary or text frame per message, many in flight,
/// answered in order by `StreamConfirmation` text frames, each once its batch is durable.
#[utoipa::path(get, path = "/v1/topics/{topic}/publish/ws", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name")),
    responses(
        (status = 101, description = "Switching to WebSocket: send one frame per message; \
            the server answers with StreamConfirmation text frames in order"),
        (status = 400, description = "Invalid name or not a WebSocket handshake", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
    ))]
pub async fn publish_stream(
    State(state): State<AppState>,
    Path(topic): Path<String>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // Name and topic first: a 404 says more than "not a WebSocket request".
    check_name("topic", &topic)?;
    let handle = state.store.topic(&topic)?;
    let upgrade = upgrade.map_err(|rejection| ApiError::not_websocket(&rejection))?;
    let publisher = Publisher::new(state, topic, handle);
    let frame_bytes_max = publisher
        .payload_bytes_max
        .saturating_add(OVERSIZE_FRAME_SLACK_BYTES);
    let upgrade = upgrade
        .max_message_size(frame_bytes_max)
        .max_frame_size(frame_bytes_max)
        .read_buffer_size(PUBLISH_STREAM_READ_BUFFER_BYTES);
    Ok(upgrade.on_upgrade(move |socket| publisher.run(socket)))
}

/// Runs a publish stream to `topic` over `socket` until the client goes away or the
/// stream ends: what the route does after the upgrade, over any socket of WebSocket
/// messages (the tests drive it with an in-memory one).
///
/// # Errors
/// `unknown_topic` (or `invalid_name`) before anything is read.
pub async fn serve_publish_stream<S>(
    state: AppState,
    topic: String,
    socket: S,
) -> Result<(), ApiError>
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin,
{
    check_name("topic", &topic)?;
    let handle = state.store.topic(&topic)?;
    Publisher::new(state, topic, handle).run(socket).await;
    Ok(())
}

/// A confirmation that resolves once its batch is durable (or at once, for an error).
type PendingConfirmation = Pin<Box<dyn Future<Output = StreamConfirmation> + Send>>;

/// Frames read and not yet handed to the store.
#[derive(Debug, Default)]
struct Batch {
    /// The seq of the first payload.
    seq: u64,
    payloads: Vec<Bytes>,
    bytes: usize,
}

/// What one read from the socket amounts to.
enum Incoming {
    /// A message payload.
    Payload(Bytes),
    /// A ping or pong: the protocol layer answers pings.
    Control,
    /// The client closed the connection or it broke: nobody will read confirmations.
    Gone,
    /// Reading failed (such as a frame beyond the hard size limit), but the socket may
    /// still carry the answers owed.
    Failed,
}

impl Incoming {
    fn from_read(read: Option<Result<Message, axum::Error>>) -> Incoming {
        match read {
            Some(Ok(Message::Binary(payload))) => Incoming::Payload(payload),
            Some(Ok(Message::Text(text))) => Incoming::Payload(Bytes::from(text)),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => Incoming::Control,
            Some(Ok(Message::Close(_))) | None => Incoming::Gone,
            Some(Err(_)) => Incoming::Failed,
        }
    }
}

/// One connection's publishing state.
struct Publisher {
    state: AppState,
    labels: TopicLabels,
    handle: DurableTopic,
    payload_bytes_max: usize,
    /// The seq the next frame read gets.
    next_seq: u64,
    /// Frames read whose confirmation has not been sent.
    unconfirmed: usize,
    /// Confirmations owed, in seq order.
    pending: FuturesOrdered<PendingConfirmation>,
    batch: Batch,
    /// Set once the stream must end: the close frame to send after the answers owed.
    ending: Option<CloseFrame>,
    /// Counts this stream as running until it ends, and tells it when the server stops.
    ticket: PublishStreamTicket,
}

impl Publisher {
    fn new(state: AppState, topic: String, handle: DurableTopic) -> Publisher {
        let payload_bytes_max =
            usize::try_from(state.config.payload_bytes_max).unwrap_or(usize::MAX);
        let ticket = state.publish_streams.ticket();
        Publisher {
            state,
            labels: TopicLabels { topic },
            handle,
            payload_bytes_max,
            next_seq: 0,
            unconfirmed: 0,
            pending: FuturesOrdered::new(),
            batch: Batch::default(),
            ending: None,
            ticket,
        }
    }

    /// Reads frames into batches and sends confirmations as batches become durable,
    /// until the client goes away or the stream ends on an error or the server's
    /// shutdown.
    async fn run<S>(mut self, mut socket: S)
    where
        S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin,
    {
        loop {
            let reading = self.ending.is_none();
            if !reading && self.pending.is_empty() {
                close(&mut socket, self.ending.take()).await;
                return;
            }
            let room = self.unconfirmed < PUBLISH_STREAM_IN_FLIGHT_MAX;
            // select! drops the losing branch's future before running a handler, so a
            // handler may use the socket the other branch was reading from.
            tokio::select! {
                Some(first) = self.pending.next(), if !self.pending.is_empty() => {
                    if self.answer(&mut socket, first).await.is_err() {
                        return;
                    }
                }
                read = socket.next(), if reading && room => {
                    if self.take_frames(&mut socket, Incoming::from_read(read)).is_err() {
                        return;
                    }
                }
                // The batch is always empty here (each read hands its frames to the
                // store), so stopping leaves nothing read and unwritten.
                () = self.ticket.stopping(), if reading => {
                    self.end(close_code::AWAY, SHUTDOWN_CLOSE_REASON);
                }
            }
        }
    }

    /// Takes `first` and every further frame already readable (while there is room),
    /// handing them to the store in batches.
    ///
    /// # Errors
    /// `Err(())` when the client is gone: nothing more can be answered.
    fn take_frames<S>(&mut self, socket: &mut S, first: Incoming) -> Result<(), ()>
    where
        S: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        let mut incoming = first;
        loop {
            match incoming {
                Incoming::Payload(payload) => self.take_payload(payload),
                Incoming::Control => {}
                Incoming::Gone => return Err(()),
                Incoming::Failed => {
                    self.end(close_code::ERROR, "read_failed");
                }
            }
            if self.ending.is_some() || self.unconfirmed >= PUBLISH_STREAM_IN_FLIGHT_MAX {
                break;
            }
            match socket.next().now_or_never() {
                Some(read) => incoming = Incoming::from_read(read),
                None => break,
            }
        }
        self.publish_batch();
        Ok(())
    }

    /// Adds one frame to the batch; an oversized frame instead gets its own error entry
    /// (after the batch before it, to keep the answers in seq order).
    fn take_payload(&mut self, payload: Bytes) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.unconfirmed += 1;
        if payload.len() > self.payload_bytes_max {
            self.publish_batch();
            let error = ApiError::payload_over_limit(
                &format!("frame {seq}"),
                payload.len(),
                self.payload_bytes_max as u64,
            );
            let refused = StreamConfirmation::new(seq, 1, Err(error));
            self.pending
                .push_back(Box::pin(std::future::ready(refused)));
            return;
        }
        if self.batch.payloads.is_empty() {
            self.batch.seq = seq;
        }
        self.batch.bytes += payload.len();
        self.batch.payloads.push(payload);
        if self.batch.bytes >= PUBLISH_STREAM_BATCH_BYTES_MAX {
            self.publish_batch();
        }
    }

    /// Writes the batch to the store (one write) and queues its confirmation, which
    /// resolves once the write is durable.
    fn publish_batch(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        if batch.payloads.is_empty() {
            return;
        }
        let (seq, count) = (batch.seq, batch.payloads.len());
        let confirmation: PendingConfirmation =
            match self.handle.publish_batch_deferred(&batch.payloads) {
                Ok(written) => Box::pin(async move {
                    let outcome = written.await.map(|offsets| offsets.start);
                    StreamConfirmation::new(seq, count, outcome.map_err(ApiError::from))
                }),
                Err(error) => {
                    // Later frames would fail alike: stop reading at once.
                    let error = ApiError::from(error);
                    if is_ending_code(error.code) {
                        self.end(close_code::ERROR, ending_code(error.code));
                    }
                    Box::pin(std::future::ready(StreamConfirmation::new(
                        seq,
                        count,
                        Err(error),
                    )))
                }
            };
        self.pending.push_back(confirmation);
    }

    /// Sends `first` and every further confirmation already resolved, with one flush.
    ///
    /// # Errors
    /// The socket's, when the client is gone.
    async fn answer<S>(
        &mut self,
        socket: &mut S,
        first: StreamConfirmation,
    ) -> Result<(), axum::Error>
    where
        S: Sink<Message, Error = axum::Error> + Unpin,
    {
        let mut next = Some(first);
        let mut published = 0u64;
        while let Some(confirmation) = next.take() {
            self.unconfirmed -= confirmation.count as usize;
            match &confirmation.error {
                None => published += confirmation.count,
                Some(error) if is_ending_code(&error.code) => {
                    let code = ending_code(&error.code);
                    self.end(close_code::ERROR, code);
                }
                Some(_) => {}
            }
            let text = serde_json::to_string(&confirmation).expect("a confirmation serializes");
            socket.feed(Message::Text(text.into())).await?;
            next = self.pending.next().now_or_never().flatten();
        }
        socket.flush().await?;
        if published > 0 {
            self.state.long_polls.wake(&self.labels.topic);
            let metrics = &self.state.metrics;
            metrics
                .publishes
                .get_or_create(&self.labels)
                .inc_by(published);
        }
        Ok(())
    }

    /// Stops reading; the close frame goes out once every answer owed is sent. The
    /// first reason wins.
    fn end(&mut self, code: u16, reason: &'static str) {
        if self.ending.is_none() {
            self.ending = Some(CloseFrame {
                code,
                reason: reason.into(),
            });
        }
    }
}

/// Sends the close frame, then reads and discards what the client still sends until its
/// own close frame, the end of the connection, or [`PUBLISH_STREAM_CLOSE_WAIT_MS_MAX`].
async fn close<S>(socket: &mut S, frame: Option<CloseFrame>)
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin,
{
    if socket.send(Message::Close(frame)).await.is_err() {
        return;
    }
    let drain = async {
        while let Some(Ok(read)) = socket.next().await {
            if matches!(read, Message::Close(_)) {
                break;
            }
        }
    };
    let wait = std::time::Duration::from_millis(PUBLISH_STREAM_CLOSE_WAIT_MS_MAX);
    let _ = tokio::time::timeout(wait, drain).await;
}

/// The error codes that end the stream: the topic is gone or the store failed, so every
/// later frame would fail alike. Refusals of one frame's content do not end it.
const ENDING_CODES: [&str; 4] = ["unknown_topic", "store_failed", "storage_error", "internal"];

fn is_ending_code(code: &str) -> bool {
    ENDING_CODES.contains(&code)
}

/// `code` as a `'static` close reason.
fn ending_code(code: &str) -> &'static str {
    ENDING_CODES
        .iter()
        .find(|known| **known == code)
        .copied()
        .unwrap_or("internal")
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    // Proves the confirmation frame's JSON is exactly the documented shape: an offset
    // on success, an error object (and no offset) on failure.
    #[test]
    fn confirmations_serialize_as_documented() {
        let ok = StreamConfirmation::new(3, 2, Ok(17));
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!({"seq": 3, "count": 2, "offset": 17})
        );
        let refused = StreamConfirmation::new(5, 1, Err(ApiError::payload_too_large("big")));
        assert_eq!(
            serde_json::to_value(&refused).unwrap(),
            serde_json::json!({"seq": 5, "count": 1,
                "error": {"code": "payload_too_large", "message": "big"}})
        );
    }

    // Proves a publish error ends the stream exactly when it is a 404 (the topic is
    // gone) or a server fault, and that its close reason is its own code.
    #[test]
    fn ending_errors_and_codes_agree() {
        use mailroom_store::StoreError;
        let errors = [
            ApiError::from(StoreError::UnknownTopic { topic: "t".into() }),
            ApiError::from(StoreError::FailStopped {
                reason: "disk".into(),
            }),
            ApiError::payload_too_large("big"),
            ApiError::invalid_argument("bad"),
            ApiError::internal("panic"),
            ApiError::from(StoreError::Io {
                operation: "fdatasync",
                path: "/data".into(),
                source: std::io::Error::other("gone"),
            }),
        ];
        for error in errors {
            let ends = error.status == StatusCode::NOT_FOUND || error.status.is_server_error();
            assert_eq!(ends, is_ending_code(error.code), "{error:?}");
            if ends {
                assert_eq!(ending_code(error.code), error.code);
            }
        }
    }
}
