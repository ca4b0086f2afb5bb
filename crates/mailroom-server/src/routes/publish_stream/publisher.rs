//! One publish stream's loop: reading frames into batches, handing each batch to the
//! store, answering confirmations in order once durable, and ending (see the parent
//! module's docs for the protocol).

use std::future::Future;
use std::pin::Pin;

use axum::extract::ws::{close_code, CloseFrame, Message};
use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::{FutureExt as _, Sink, SinkExt as _, Stream, StreamExt as _};

use super::*;
use mailroom_api::publish_stream::TextFrames;
use mailroom_api::topics::BatchMessageObject;
use mailroom_store::NewMessage;

use crate::backend::TopicPublisher;
use crate::error::ApiError;
use crate::metrics::TopicLabels;
use crate::routes::metadata;
use crate::state::{AppState, PublishStreamTicket};

/// A confirmation that resolves once its batch is durable (or at once, for an error).
type PendingConfirmation = Pin<Box<dyn Future<Output = StreamConfirmation> + Send>>;

/// Frames read and not yet handed to the store.
#[derive(Debug, Default)]
struct Batch {
    /// The seq of the first payload.
    seq: u64,
    messages: Vec<NewMessage>,
    bytes: usize,
}

/// What one read from the socket amounts to.
enum Incoming {
    /// A message payload.
    Payload(Bytes),
    /// A text frame of a stream opened with `?text=json`: one message as JSON.
    Envelope(Bytes),
    /// A ping or pong: the protocol layer answers pings.
    Control,
    /// The client closed the connection or it broke: nobody will read confirmations.
    Gone,
    /// Reading failed on the client's protocol violation (such as a frame beyond the
    /// hard size limit), but the socket may still carry the answers owed, then this
    /// close frame ([`crate::websocket`]).
    Violation(CloseFrame),
}

impl Incoming {
    fn from_read(read: Option<Result<Message, axum::Error>>, text: TextFrames) -> Incoming {
        match read {
            Some(Ok(Message::Binary(payload))) => Incoming::Payload(payload),
            Some(Ok(Message::Text(json))) if text == TextFrames::Json => {
                Incoming::Envelope(Bytes::from(json))
            }
            Some(Ok(Message::Text(text))) => Incoming::Payload(Bytes::from(text)),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => Incoming::Control,
            Some(Ok(Message::Close(_))) | None => Incoming::Gone,
            Some(Err(error)) => match crate::websocket::close_for(error) {
                Some(frame) => Incoming::Violation(frame),
                // The connection broke: nothing more can be sent.
                None => Incoming::Gone,
            },
        }
    }
}

/// One connection's publishing state.
pub(super) struct Publisher {
    state: AppState,
    labels: TopicLabels,
    handle: Box<dyn TopicPublisher>,
    pub(super) payload_bytes_max: usize,
    /// What a text frame holds.
    text: TextFrames,
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
    pub(super) fn new(
        state: AppState,
        topic: String,
        handle: Box<dyn TopicPublisher>,
        text: TextFrames,
    ) -> Publisher {
        let payload_bytes_max =
            usize::try_from(state.config.payload_bytes_max).unwrap_or(usize::MAX);
        let ticket = state.publish_streams.ticket();
        Publisher {
            state,
            labels: TopicLabels { topic },
            handle,
            payload_bytes_max,
            text,
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
    pub(super) async fn run<S>(mut self, mut socket: S)
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
                    if self.take_frames(&mut socket, Incoming::from_read(read, self.text)).is_err() {
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
                Incoming::Payload(payload) => self.take_message(NewMessage::bare(payload)),
                Incoming::Envelope(json) => self.take_envelope(&json),
                Incoming::Control => {}
                Incoming::Gone => return Err(()),
                Incoming::Violation(frame) => {
                    if self.ending.is_none() {
                        self.ending = Some(frame);
                    }
                }
            }
            if self.ending.is_some() || self.unconfirmed >= PUBLISH_STREAM_IN_FLIGHT_MAX {
                break;
            }
            match socket.next().now_or_never() {
                Some(read) => incoming = Incoming::from_read(read, self.text),
                None => break,
            }
        }
        self.publish_batch();
        Ok(())
    }

    /// Reads a JSON text frame as one message and adds it to the batch; a frame that is
    /// not a message object gets its own error entry, naming the frame's field.
    fn take_envelope(&mut self, json: &[u8]) {
        let seq = self.next_seq;
        let message = crate::body::parse::<BatchMessageObject>(json)
            .and_then(|object| metadata::message_of_object(&format!("frame {seq}"), object));
        match message {
            Ok(message) => self.take_message(message),
            Err(error) => {
                self.next_seq += 1;
                self.unconfirmed += 1;
                self.refuse(seq, error);
            }
        }
    }

    /// Answers frame `seq` alone with `error`, after the batch before it (to keep the
    /// answers in seq order).
    fn refuse(&mut self, seq: u64, error: ApiError) {
        self.publish_batch();
        let refused = confirmation(seq, 1, Err(error));
        self.pending
            .push_back(Box::pin(std::future::ready(refused)));
    }

    /// Adds one frame's message to the batch; an oversized payload instead gets its own
    /// error entry.
    fn take_message(&mut self, message: NewMessage) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.unconfirmed += 1;
        let payload_bytes = message.payload.len();
        if payload_bytes > self.payload_bytes_max {
            let error = ApiError::payload_over_limit(
                &format!("frame {seq}"),
                payload_bytes,
                self.payload_bytes_max as u64,
            );
            self.refuse(seq, error);
            return;
        }
        if message.metadata.idempotency_key.is_some() {
            // Its answer may be a duplicate's offset, which does not follow the batch's:
            // a frame with an idempotency key is published and confirmed alone.
            self.publish_batch();
            self.publish_keyed(seq, message);
            return;
        }
        if self.batch.messages.is_empty() {
            self.batch.seq = seq;
        }
        self.batch.bytes += payload_bytes + message.metadata.headers_bytes();
        self.batch.messages.push(message);
        if self.batch.bytes >= PUBLISH_STREAM_BATCH_BYTES_MAX {
            self.publish_batch();
        }
    }

    /// Writes the batch to the store (one write) and queues its confirmation, which
    /// resolves once the write is durable.
    fn publish_batch(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        if batch.messages.is_empty() {
            return;
        }
        let (seq, count) = (batch.seq, batch.messages.len());
        let written = if batch.messages.iter().all(|m| m.metadata.is_empty()) {
            let payloads: Vec<Bytes> = batch.messages.into_iter().map(|m| m.payload).collect();
            self.handle.publish_batch(&payloads)
        } else {
            self.handle.publish_messages(&batch.messages)
        };
        let confirmation: PendingConfirmation = match written {
            Ok(written) => Box::pin(async move {
                let outcome = written.await.map(|offsets| offsets.start);
                confirmation(seq, count, outcome.map_err(ApiError::from))
            }),
            Err(error) => {
                // Later frames would fail alike: stop reading at once.
                let error = ApiError::from(error);
                if is_ending_code(error.code.as_str()) {
                    self.end(close_code::ERROR, ending_code(error.code.as_str()));
                }
                Box::pin(std::future::ready(confirmation(seq, count, Err(error))))
            }
        };
        self.pending.push_back(confirmation);
    }

    /// Publishes frame `seq`'s message, which has an idempotency key, alone, and queues
    /// its confirmation (with `duplicate` set for a repeat).
    fn publish_keyed(&mut self, seq: u64, message: NewMessage) {
        let confirmation: PendingConfirmation = match self.handle.publish_once(&[message]) {
            Ok(written) => Box::pin(async move {
                match written.await {
                    Ok(answers) => StreamConfirmation {
                        duplicate: answers[0].duplicate,
                        ..confirmation(seq, 1, Ok(answers[0].offset))
                    },
                    Err(error) => confirmation(seq, 1, Err(ApiError::from(error))),
                }
            }),
            Err(error) => {
                let error = ApiError::from(error);
                if is_ending_code(error.code.as_str()) {
                    self.end(close_code::ERROR, ending_code(error.code.as_str()));
                }
                Box::pin(std::future::ready(confirmation(seq, 1, Err(error))))
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
                // A duplicate stored nothing: it is not counted as published.
                None if confirmation.duplicate => {}
                None => published += confirmation.count,
                Some(error) if is_ending_code(error.code.as_str()) => {
                    let code = ending_code(error.code.as_str());
                    self.end(close_code::ERROR, code);
                }
                Some(_) => {}
            }
            let text = serde_json::to_string(&confirmation).expect("a confirmation serializes");
            socket.feed(Message::Text(text.into())).await?;
            next = self.pending.next().now_or_never().flatten();
        }
        socket.flush().await?;
        // The backend woke the topic's long polls when each batch became durable.
        if published > 0 {
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
        let ok = confirmation(3, 2, Ok(17));
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!({"seq": 3, "count": 2, "offset": 17})
        );
        let refused = confirmation(5, 1, Err(ApiError::payload_too_large("big")));
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
            assert_eq!(ends, is_ending_code(error.code.as_str()), "{error:?}");
            if ends {
                assert_eq!(ending_code(error.code.as_str()), error.code);
            }
        }
    }
}
