//! Live channels: create, list, describe, publish, close, and subscribe over WebSocket
//! or Server-Sent Events.
//!
//! Each subscriber holds one slot and one bounded mailbox in the channel's broker. A task
//! per connection moves messages from the mailbox to the socket; when the client reads
//! slowly, that task waits on the socket, the mailbox fills, and further messages are
//! dropped for that subscriber alone (and counted). The publisher never waits. The task
//! takes up to [`WS_BATCH_MESSAGES_MAX`] messages at a time and writes them with one flush,
//! so a subscriber holds at most that many messages beyond its mailbox.

use std::convert::Infallible;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use bytes::Bytes;
use futures_util::{Sink, SinkExt as _, StreamExt as _};
use mailroom::broadcast::Subscription;
pub use mailroom_api::channels::{
    ChannelClosed, ChannelDelivery, ChannelInfo, ChannelList, CreateChannel,
};
pub use mailroom_api::limits::{
    MAILBOX_BYTES_DEFAULT, MAILBOX_CAPACITY_DEFAULT, MAX_SUBSCRIBERS_DEFAULT,
};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{JsonBody, RawBody};
use crate::channels::{Channel, ChannelLimits, Created};
use crate::error::{ApiError, ErrorBody};
use crate::metrics::Metrics;
use crate::paths::ChannelPath;
use crate::routes::BodyLimits;
use crate::state::AppState;

/// The largest message or frame a WebSocket subscriber may send to the server.
pub const WS_INCOMING_BYTES_MAX: usize = 4 << 10;
/// The most bytes one read from a subscriber's socket takes. Subscribers send nothing but
/// control frames, and the WebSocket layer zeroes this much of its buffer on every read
/// attempt (one per batch written), so it stays small: the library default of 128 KiB
/// made zeroing a quarter of the server's CPU time under live fan-out.
pub const WS_READ_BUFFER_BYTES: usize = 4 << 10;
/// The most messages one subscriber's writer takes from its mailbox per socket flush.
/// The writer holds at most this many messages beyond the mailbox's capacity.
pub const WS_BATCH_MESSAGES_MAX: usize = 64;
/// The most payload bytes one subscriber's writer takes from its mailbox per socket
/// flush, past the first message: with the mailbox's own byte budget, what the server
/// holds in user space for one subscriber that stopped reading is at most
/// `mailbox_bytes` plus this plus one message.
pub const WS_BATCH_BYTES_MAX: usize = 1 << 20;

fn channel_info(channel: &Channel) -> ChannelInfo {
    let stats = channel.stats();
    ChannelInfo {
        name: channel.name.clone(),
        // Counts in memory: a usize always fits the wire's u64.
        max_subscribers: channel.broker.max_subscribers() as u64,
        mailbox_capacity: channel.broker.mailbox_capacity() as u64,
        mailbox_bytes: channel.broker.mailbox_bytes() as u64,
        subscribers: stats.subscribers as u64,
        published: stats.published,
        delivered: stats.delivered,
        dropped: stats.dropped,
    }
}

/// Creates a live channel (idempotent for identical settings).
#[utoipa::path(put, path = "/v1/channels/{channel}", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "1-128 characters of [A-Za-z0-9._-]")),
    request_body = CreateChannel,
    responses(
        (status = 201, description = "Created", body = ChannelInfo),
        (status = 200, description = "Existed with the same settings", body = ChannelInfo),
        (status = 400, description = "Invalid name, limits or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 409, description = "Exists with other settings, or too many channels", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn create_channel(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
    JsonBody(request): JsonBody<CreateChannel>,
) -> Result<Response, ApiError> {
    let limits = ChannelLimits {
        max_subscribers: request.max_subscribers.unwrap_or(MAX_SUBSCRIBERS_DEFAULT),
        mailbox_capacity: request.mailbox_capacity.unwrap_or(MAILBOX_CAPACITY_DEFAULT),
        mailbox_bytes: request.mailbox_bytes.unwrap_or(MAILBOX_BYTES_DEFAULT),
    };
    let created = state.channels.create(&channel, limits)?;
    let status = match created {
        Created::New => StatusCode::CREATED,
        Created::Existing => StatusCode::OK,
    };
    let info = channel_info(&*state.channels.get(&channel)?);
    Ok((status, Json(info)).into_response())
}

/// Lists the live channels with their counters.
#[utoipa::path(get, path = "/v1/channels", tag = "channels",
    responses(
        (status = 200, description = "Every live channel", body = ChannelList),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ))]
pub async fn list_channels(State(state): State<AppState>) -> Json<ChannelList> {
    let channels = state
        .channels
        .list()
        .iter()
        .map(|c| channel_info(c))
        .collect();
    Json(ChannelList { channels })
}

/// Describes one live channel.
#[utoipa::path(get, path = "/v1/channels/{channel}", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "Channel name")),
    responses(
        (status = 200, description = "The channel", body = ChannelInfo),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown channel", body = ErrorBody),
    ))]
pub async fn channel_info_route(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
) -> Result<Json<ChannelInfo>, ApiError> {
    Ok(Json(channel_info(&*state.channels.get(&channel)?)))
}

/// Publishes the raw body to every current subscriber; never waits for any of them.
///
/// With brokers sharing a PostgreSQL store, the message also goes to the subscribers of
/// the channel of that name on every other broker; the answer counts this broker's
/// subscribers only.
#[utoipa::path(post, path = "/v1/channels/{channel}/messages", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "Channel name")),
    request_body(content = String, content_type = "application/octet-stream",
        description = "The message: any bytes, up to --max-payload-bytes (and up to 5632 \
            bytes with a PostgreSQL store)"),
    responses(
        (status = 200, description = "Fanned out; delivered and dropped count this broker's \
            subscribers only (other brokers sharing a PostgreSQL store get it too, uncounted \
            here)", body = ChannelDelivery),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown channel", body = ErrorBody),
        (status = 413, description = "Body larger than --max-payload-bytes, or than 5632 \
            bytes with a PostgreSQL store", body = ErrorBody),
    ))]
pub async fn publish_channel(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
    body: Result<RawBody, ApiError>,
) -> Result<Json<ChannelDelivery>, ApiError> {
    let RawBody(payload) = body?;
    let delivery = state.channels.publish(&channel, payload)?;
    let labels = Metrics::channel(&channel);
    let metrics = &state.metrics;
    metrics.channel_publishes.get_or_create(&labels).inc();
    metrics
        .channel_deliveries
        .get_or_create(&labels)
        .inc_by(delivery.delivered as u64);
    metrics
        .channel_drops
        .get_or_create(&labels)
        .inc_by(delivery.dropped as u64);
    Ok(Json(ChannelDelivery {
        delivered: delivery.delivered as u64,
        dropped: delivery.dropped as u64,
    }))
}

/// Closes a live channel. Subscribers receive what is already in their mailboxes, then
/// their streams end.
#[utoipa::path(delete, path = "/v1/channels/{channel}", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "Channel name")),
    responses(
        (status = 200, description = "Closed", body = ChannelClosed),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown channel", body = ErrorBody),
    ))]
pub async fn close_channel(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
) -> Result<Json<ChannelClosed>, ApiError> {
    state.channels.close(&channel)?;
    Ok(Json(ChannelClosed {
        channel,
        closed: true,
    }))
}

/// Takes a slot in the channel: 404 if it does not exist, 409 if it is full.
fn subscribe(state: &AppState, channel: &str) -> Result<Subscription<Bytes>, ApiError> {
    Ok(state.channels.get(channel)?.broker.subscribe()?)
}

/// Subscribes over WebSocket: one frame per message (text when UTF-8, binary otherwise),
/// then a close frame once the channel is closed and the mailbox drained.
#[utoipa::path(get, path = "/v1/channels/{channel}/ws", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "Channel name")),
    responses(
        (status = 101, description = "Switching to WebSocket"),
        (status = 400, description = "Invalid name or not a WebSocket handshake", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown channel", body = ErrorBody),
        (status = 409, description = "The channel's subscriber limit is reached", body = ErrorBody),
    ))]
pub async fn subscribe_ws(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // The channel first: a 404 says more than "not a WebSocket request".
    state.channels.get(&channel)?;
    let upgrade = upgrade.map_err(|rejection| ApiError::not_websocket(&rejection))?;
    let subscription = subscribe(&state, &channel)?;
    // Subscribers only listen; anything they send is ignored, so it may as well be small.
    let upgrade = upgrade
        .max_message_size(WS_INCOMING_BYTES_MAX)
        .max_frame_size(WS_INCOMING_BYTES_MAX)
        .read_buffer_size(WS_READ_BUFFER_BYTES);
    Ok(upgrade.on_upgrade(move |socket| pump_websocket(socket, subscription)))
}

/// Moves messages from the mailbox to the socket until the channel closes or the client
/// goes away.
///
/// Each wake-up drains what the mailbox holds (up to [`WS_BATCH_MESSAGES_MAX`] messages
/// and about [`WS_BATCH_BYTES_MAX`] bytes), encodes
/// every message into the WebSocket's write buffer and flushes once: a burst costs one
/// socket write instead of one per message, and the reading side is polled once per batch.
async fn pump_websocket(mut socket: WebSocket, subscription: Subscription<Bytes>) {
    let mut batch = Vec::with_capacity(WS_BATCH_MESSAGES_MAX);
    loop {
        // select! drops the losing branch's future before running a handler, so a handler
        // may use the socket that the other branch was reading from.
        tokio::select! {
            message = subscription.recv() => {
                let Some(first) = message else {
                    // Closed and drained: say goodbye properly.
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                };
                let mut bytes = first.len();
                batch.push(first);
                // One message at a time, so the batch stops at its byte cap: a message
                // taken is weighed only once it is out of the mailbox.
                while batch.len() < WS_BATCH_MESSAGES_MAX && bytes < WS_BATCH_BYTES_MAX {
                    let Some(next) = subscription.poll() else { break };
                    bytes += next.len();
                    batch.push(next);
                }
                if write_batch(&mut socket, &mut batch).await.is_err() {
                    return;
                }
            }
            frame = socket.recv() => match frame {
                // The client is gone or said goodbye; the subscription drops with us.
                None | Some(Ok(Message::Close(_))) => return,
                // A protocol violation gets its close code (1002, 1007, 1009); a broken
                // connection, nothing.
                Some(Err(error)) => {
                    if let Some(frame) = crate::websocket::close_for(error) {
                        let _ = socket.send(Message::Close(Some(frame))).await;
                    }
                    return;
                }
                // Pings are answered by the protocol layer; anything else is ignored.
                Some(Ok(_)) => {}
            },
        }
    }
}

/// Writes every payload of `batch` (emptying it) as one frame each, then flushes once.
async fn write_batch<S>(sink: &mut S, batch: &mut Vec<Bytes>) -> Result<(), S::Error>
where
    S: Sink<Message> + Unpin,
{
    for payload in batch.drain(..) {
        sink.feed(ws_frame(payload)).await?;
    }
    sink.flush().await
}

/// A text frame when the payload is UTF-8, a binary frame otherwise. Both share the
/// payload's buffer with the other subscribers: nothing is copied.
fn ws_frame(payload: Bytes) -> Message {
    match Utf8Bytes::try_from(payload.clone()) {
        Ok(text) => Message::Text(text),
        Err(_) => Message::Binary(payload),
    }
}

/// Subscribes as Server-Sent Events: one `data:` event per UTF-8 message; a message that
/// is not UTF-8 or holds a carriage return arrives as an `event: base64` event.
#[utoipa::path(get, path = "/v1/channels/{channel}/events", tag = "channels",
    params(("channel" = crate::names::Name, Path, description = "Channel name")),
    responses(
        (status = 200, description = "An event stream", content_type = "text/event-stream", body = String),
        (status = 400, description = "Invalid name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown channel", body = ErrorBody),
        (status = 409, description = "The channel's subscriber limit is reached", body = ErrorBody),
    ))]
pub async fn subscribe_events(
    State(state): State<AppState>,
    ChannelPath { channel }: ChannelPath,
) -> Result<Response, ApiError> {
    let subscription = subscribe(&state, &channel)?;
    let events = subscription
        .into_stream()
        .map(|payload| Ok::<Event, Infallible>(sse_event(payload)));
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// An SSE event for a payload. SSE carries text lines: newlines are split into several
/// `data:` lines (clients join them back), but a carriage return cannot be carried, so
/// such payloads, like non-UTF-8 ones, go as base64.
fn sse_event(payload: Bytes) -> Event {
    match std::str::from_utf8(&payload) {
        Ok(text) if !text.contains('\r') => Event::default().data(text),
        _ => Event::default()
            .event("base64")
            .data(base64::engine::general_purpose::STANDARD.encode(&payload)),
    }
}

/// The channel routes: list, create, describe, close, publish, subscribe (WebSocket,
/// Server-Sent Events).
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_channels))
        .routes(routes!(create_channel, channel_info_route, close_channel).layer(limits.json))
        .routes(routes!(publish_channel).layer(limits.payload))
        .routes(routes!(subscribe_ws))
        .routes(routes!(subscribe_events))
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A sink that records what it is given and how often it is flushed.
    #[derive(Default)]
    struct Recorder {
        frames: Vec<Message>,
        flushes: usize,
    }

    impl Sink<Message> for Recorder {
        type Error = Infallible;

        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn start_send(mut self: Pin<&mut Self>, frame: Message) -> Result<(), Infallible> {
            self.frames.push(frame);
            Ok(())
        }

        fn poll_flush(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Result<(), Infallible>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
    }

    // Proves a UTF-8 payload becomes a text frame and any other a binary frame, both
    // pointing at the published buffer itself (no copy per subscriber).
    #[test]
    fn frames_share_the_payload() {
        let text = Bytes::from_static(b"hello");
        let Message::Text(frame) = ws_frame(text.clone()) else {
            panic!("UTF-8 must go as text");
        };
        assert_eq!(frame.as_str().as_ptr(), text.as_ptr());
        let binary = Bytes::from_static(&[0xff, 0x00]);
        let Message::Binary(frame) = ws_frame(binary.clone()) else {
            panic!("non-UTF-8 must go as binary");
        };
        assert_eq!(frame.as_ptr(), binary.as_ptr());
    }

    // Proves a batch goes out as one frame per message, in mailbox order, with one flush
    // for the whole batch, and leaves the batch buffer empty for reuse.
    #[tokio::test]
    async fn a_batch_is_flushed_once_in_order() {
        let broker = mailroom::broadcast::Broker::new(1, 8).unwrap();
        let subscription = broker.subscribe().unwrap();
        for n in 0..5u8 {
            broker.publish(Bytes::from(vec![b'0' + n])).unwrap();
        }
        let mut batch = Vec::new();
        assert_eq!(subscription.poll_many(&mut batch, WS_BATCH_MESSAGES_MAX), 5);
        let mut sink = Recorder::default();
        write_batch(&mut sink, &mut batch).await.unwrap();
        assert!(batch.is_empty());
        assert_eq!(sink.flushes, 1);
        let texts: Vec<&str> = sink
            .frames
            .iter()
            .map(|frame| match frame {
                Message::Text(text) => text.as_str(),
                other => panic!("unexpected frame {other:?}"),
            })
            .collect();
        assert_eq!(texts, ["0", "1", "2", "3", "4"]);
    }
}
