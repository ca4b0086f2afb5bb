//! Pipelined publishing: one WebSocket carries many messages, each confirmed once it is
//! durable, with up to [`PUBLISH_STREAM_IN_FLIGHT_MAX`] of them unconfirmed at a time.
//!
//! `GET /v1/topics/{topic}/publish/ws` upgrades to a WebSocket (404 `unknown_topic`
//! before the upgrade if the topic does not exist).
//!
//! # Frames
//!
//! Client to server: every binary or text frame is one message's payload. Frames are
//! numbered from 0 on this connection: that number is the frame's `seq`. A stream opened
//! with `?text=json` reads each text frame as one message in JSON, the object form of a
//! batch item, so it may carry a key and headers (binary frames stay bare payloads):
//!
//! ```text
//! {"payload": "paid", "key": "customer-7", "headers": {"traceparent": "00-..."}}
//! ```
//!
//! A text frame that is not such an object, or breaks a metadata limit, gets its own
//! `invalid_argument` entry naming the frame (`frame 3.key must be ...`), and the stream
//! goes on.
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
//! ends the stream with close code 1009, and other protocol violations with 1002 (1007
//! for a text frame that is not UTF-8), after the answers owed ([`crate::websocket`]). A store that stopped accepting writes (`store_failed`), a
//! storage fault, or the topic's deletion (`unknown_topic`) ends the stream: the server
//! stops reading, sends the error entry (and the answers of batches written before it),
//! then a close frame with code 1011 and the error code as its reason. A reopen of the
//! topic under a running stream (`POST .../recover`, the full-disk self-heal, a repair)
//! does not end it: its next batch goes to the reopened topic (the embedded backend's
//! publisher looks the topic up again), so only a batch that failed before the reopen
//! ends a stream, and the client reconnects. A client that
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

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{Sink, Stream};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::body::QueryParams;
use crate::error::{ApiError, ErrorBody};
use crate::names::check_name;
use crate::paths::TopicPath;
use crate::state::AppState;

mod publisher;

use publisher::Publisher;

/// The most frames one connection may have read but not yet confirmed; beyond it the
/// server stops reading the socket.
pub use mailroom_api::limits::PUBLISH_STREAM_IN_FLIGHT_MAX;
/// The close reason of a stream ended by the server's shutdown (close code 1001).
pub use mailroom_api::publish_stream::SHUTDOWN_CLOSE_REASON;
pub use mailroom_api::publish_stream::{
    PublishStreamQuery, StreamConfirmation, StreamError, TextFrames,
};

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

/// The confirmation of frames `seq .. seq + count`, which were published from `offset` on
/// or refused with the error.
pub(super) fn confirmation(
    seq: u64,
    count: usize,
    outcome: Result<u64, ApiError>,
) -> StreamConfirmation {
    let count = count as u64;
    match outcome {
        Ok(offset) => StreamConfirmation {
            seq,
            count,
            offset: Some(offset),
            duplicate: false,
            error: None,
        },
        Err(error) => StreamConfirmation {
            seq,
            count,
            offset: None,
            duplicate: false,
            error: Some(StreamError {
                code: error.code,
                message: error.message,
            }),
        },
    }
}

/// Publishes over a WebSocket: one binary or text frame per message, many in flight,
/// answered in order by `StreamConfirmation` text frames, each once its batch is durable.
#[utoipa::path(get, path = "/v1/topics/{topic}/publish/ws", tag = "topics",
    params(("topic" = crate::names::Name, Path, description = "Topic name"), PublishStreamQuery),
    responses(
        (status = 101, description = "Switching to WebSocket: send one frame per message; \
            the server answers with StreamConfirmation text frames in order"),
        (status = 400, description = "Invalid name or not a WebSocket handshake", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
    ))]
pub async fn publish_stream(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    QueryParams(query): QueryParams<PublishStreamQuery>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // The topic first: a 404 says more than "not a WebSocket request".
    let handle = state.backend.publisher(&topic)?;
    let upgrade = upgrade.map_err(|rejection| ApiError::not_websocket(&rejection))?;
    let publisher = Publisher::new(state, topic, handle, query.text);
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
    let handle = state.backend.publisher(&topic)?;
    Publisher::new(state, topic, handle, TextFrames::Payload)
        .run(socket)
        .await;
    Ok(())
}

/// The publish stream's route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(publish_stream))
}
