//! Streamed consumption: one WebSocket carries a group's deliveries to one consumer,
//! with up to a window of them unsettled, and the consumer's acks, nacks and touches
//! back.
//!
//! `GET /v1/topics/{topic}/groups/{group}/consume/ws?window=N&consumer=ID` upgrades to a
//! WebSocket. Before the upgrade: 404 for an unknown topic or group, 400 for a window
//! outside `1..=CONSUME_STREAM_WINDOW_MAX` or above the group's `max_in_flight` (the
//! group could never fill it), or a bad consumer identity.
//!
//! # Frames
//!
//! All frames are JSON text frames, typed in [`mailroom_api::consume_stream`]. The
//! server first sends `{"type":"opened","consumer":...,"window":N}`, then one
//! `{"type":"delivery", ...}` per delivery (a batch poll's item: offset, attempt,
//! payload or payload_base64, key, headers, published_at_ms). The client sends
//! settlements, numbered from 0 on the connection (`seq`):
//!
//! ```text
//! {"op":"ack","offset":17,"attempt":1}
//! {"op":"nack","offset":18,"attempt":1,"kind":"release","delay_ms":500,"reason":"busy"}
//! {"op":"touch","offset":19,"attempt":1}
//! ```
//!
//! and gets one answer per frame, in `seq` order: `{"type":"settled","seq":0,...,
//! "outcome":"acked"}` or `{"type":"error","seq":1,...,"error":{"code":"not_owned",...}}`.
//! A text frame that does not parse gets an `invalid_argument` error answer and the
//! stream goes on; a binary frame closes the stream with 1003 (unsupported data), a
//! frame over `CONSUME_STREAM_FRAME_BYTES_MAX` with 1009.
//!
//! # Rounds
//!
//! The server works in rounds: it takes every settlement already readable from the
//! socket (up to `CONSUME_STREAM_SETTLEMENTS_MAX`), settles consecutive acks as one
//! `ack_batch` and consecutive nacks with equal options as one `nack_batch` (touches one
//! by one), the last run of acks together with the poll that refills the window
//! (`ack_then_poll_batch` of new deliveries: one write, one durability point), answers
//! them in order, then sends what the poll handed out. When no offset is settled twice
//! in the round, the settlements commute, and every ack of the round goes into that last
//! run (`settle::acks_last`). The runs of nacks right before it go with it to
//! [`Backend::settle_then_poll_batch`](crate::backend::Backend::settle_then_poll_batch):
//! one transaction of the group, on the embedded store and over PostgreSQL alike. With
//! nothing to settle it waits, without polling, for the topic's wake-up or the group's
//! next due time ([`crate::long_poll`]), as a long poll does.
//!
//! # The window
//!
//! The stream's first poll is a batch poll of `window` for the stream's consumer, which
//! answers the consumer's own deliveries in flight first (a reconnecting consumer gets
//! them back), then new ones. Every refill after it polls new deliveries only
//! ([`Backend::poll_batch`](crate::backend::Backend::poll_batch) with `PollScope::New`), with the
//! consumer's deliveries in flight counted against the window by the group's state
//! machine: so the consumer never owns more than `window` deliveries, nothing it holds is
//! read again, and nothing is sent twice. A delivery whose lease ran out is no longer the
//! consumer's, and frees its slot; after a wait that ended by the clock (when leases may
//! have run out) the stream polls everything it owns again, to learn which it still
//! holds.
//!
//! # Disconnects
//!
//! The stream's deliveries stay in flight as an HTTP consumer's would: their leases run
//! out, or a stream reopened with the same `consumer` gets them back first (same
//! attempts). Settlements the server read before the disconnect took effect.

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::response::Response;
use mailroom_api::limits::{CONSUME_STREAM_FRAME_BYTES_MAX, CONSUME_STREAM_WINDOW_MAX};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::body::QueryParams;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::arguments::check_consumer;
use crate::state::AppState;

mod consumer;
mod settle;

pub use mailroom_api::consume_stream::{ConsumeStreamQuery, ServerFrame, Settlement};

use consumer::StreamConsumer;

/// Consumes a group over a WebSocket: deliveries pushed as they come, at most `window`
/// unsettled; acks, nacks and touches sent back on the same socket, answered in order.
#[utoipa::path(get, path = "/v1/topics/{topic}/groups/{group}/consume/ws", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"),
           ConsumeStreamQuery),
    responses(
        (status = 101, description = "Switching to WebSocket: the server sends ServerFrame \
            text frames; the client sends Settlement text frames"),
        (status = 400, description = "Invalid name, window or consumer, or not a WebSocket \
            handshake", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn consume_stream(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    QueryParams(query): QueryParams<ConsumeStreamQuery>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let window = query.window.unwrap_or(1);
    if !(1..=CONSUME_STREAM_WINDOW_MAX).contains(&window) {
        return Err(ApiError::out_of_range(
            "window",
            1..=u64::from(CONSUME_STREAM_WINDOW_MAX),
            u64::from(window),
        ));
    }
    check_consumer(query.consumer.as_deref())?;
    // The group first: a 404 says more than "not a WebSocket request".
    let config = state.backend.group_config(&topic, &group).await?;
    if window > config.max_in_flight {
        return Err(ApiError::invalid_argument(format!(
            "window must be at most the group's max_in_flight ({}), got {window}",
            config.max_in_flight
        )));
    }
    let upgrade = upgrade.map_err(|rejection| ApiError::not_websocket(&rejection))?;
    let consumer = query.consumer.unwrap_or_else(consumer::made_up_identity);
    let stream = StreamConsumer::new(state, topic, group, consumer, window);
    let upgrade = upgrade
        .max_message_size(CONSUME_STREAM_FRAME_BYTES_MAX)
        .max_frame_size(CONSUME_STREAM_FRAME_BYTES_MAX)
        .max_write_buffer_size(mailroom_api::limits::CONSUME_STREAM_QUEUED_BYTES_MAX);
    Ok(upgrade.on_upgrade(move |socket| stream.run(socket)))
}

/// The consume stream's route.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(consume_stream))
}
