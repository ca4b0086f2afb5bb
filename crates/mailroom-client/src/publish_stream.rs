//! Pipelined publishing over one WebSocket: see [`PublishStream`].

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use mailroom_api::publish_stream::StreamConfirmation;

use crate::subscription::open_websocket;
use crate::{Client, ClientError, NewMessage, Refusal, SubscribeOptions};

/// The window [`Client::publish_stream`] uses: messages in flight at once.
pub const PUBLISH_WINDOW_DEFAULT: usize = 256;
/// The largest window: the server reads no further than this many unconfirmed messages
/// per connection, so a larger window would only queue frames in the socket.
pub const PUBLISH_WINDOW_MAX: usize = mailroom_api::limits::PUBLISH_STREAM_IN_FLIGHT_MAX;

/// The server's answer for messages `seq .. seq + count` of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// The first message covered.
    pub seq: u64,
    /// How many consecutive messages are covered (at least one).
    pub count: u64,
    /// The offset of message `seq` (message `seq + i` got `offset + i`), or why none of
    /// them was published.
    pub outcome: Result<u64, Refusal>,
}

impl Confirmation {
    /// The messages covered.
    ///
    /// ```
    /// use mailroom_client::Confirmation;
    /// let confirmation = Confirmation { seq: 4, count: 2, outcome: Ok(10) };
    /// assert_eq!(confirmation.seqs(), 4..6);
    /// assert_eq!(confirmation.offsets(), Some(10..12));
    /// assert_eq!(confirmation.offset_of(5), Some(11));
    /// assert_eq!(confirmation.offset_of(6), None);
    /// ```
    pub fn seqs(&self) -> Range<u64> {
        self.seq..self.seq + self.count
    }

    /// The offsets the covered messages got, if they were published.
    pub fn offsets(&self) -> Option<Range<u64>> {
        let first = *self.outcome.as_ref().ok()?;
        Some(first..first + self.count)
    }

    /// The offset message `seq` got, if this confirmation covers it and it was published.
    pub fn offset_of(&self, seq: u64) -> Option<u64> {
        let first = *self.outcome.as_ref().ok()?;
        self.seqs().contains(&seq).then(|| first + (seq - self.seq))
    }
}

impl TryFrom<StreamConfirmation> for Confirmation {
    type Error = ClientError;

    fn try_from(wire: StreamConfirmation) -> Result<Confirmation, ClientError> {
        let outcome = match (wire.offset, wire.error) {
            (Some(offset), None) => Ok(offset),
            (None, Some(refusal)) => Err(refusal),
            _ => {
                return Err(ClientError::UnexpectedResponse(
                    "a confirmation needs exactly one of offset and error".into(),
                ))
            }
        };
        if wire.count == 0 {
            return Err(ClientError::UnexpectedResponse(
                "a confirmation covering no message".into(),
            ));
        }
        Ok(Confirmation {
            seq: wire.seq,
            count: wire.count,
            outcome,
        })
    }
}

type Socket = WebSocketStream<TcpStream>;

/// Pipelined publishing over one WebSocket: many messages in flight, each confirmed once
/// the server has made it durable.
///
/// [`Client::publish_stream`] opens the connection; [`send`](Self::send) queues a
/// message and returns its sequence number (`seq`, counted from 0 on the stream);
/// [`confirmed`](Self::confirmed) hands out the server's confirmations in `seq` order;
/// [`flush`](Self::flush) waits for all of them.
///
/// # Window
///
/// At most `window` messages are in flight: sent, with their confirmation not yet
/// received. [`send`](Self::send) waits (reading confirmations meanwhile) while
/// the window is full, so a fast producer is paced by the server's disk. Confirmations
/// that arrive are kept until taken by [`confirmed`](Self::confirmed) or
/// [`flush`](Self::flush): one small entry per server batch, never more than
/// one per message sent since they were last taken.
///
/// # Confirmations
///
/// The server writes what arrives together as one batch and confirms it with one
/// [`Confirmation`] covering `count` consecutive messages: either their offsets (also
/// consecutive) or one [`Refusal`] for all of them. A refusal of one message's content
/// (`payload_too_large`) leaves the stream open. A refusal that ends the stream
/// (`unknown_topic` once the topic is deleted, `store_failed`, `storage_error`) is
/// followed by the server's close: messages sent after it were not published, and waiting
/// for them fails with [`ClientError::StreamClosed`].
///
/// # Server shutdown
///
/// A server shutting down stops reading, confirms every message it read, then closes
/// with code 1001 and the reason `shutting_down`. The messages still in flight after that
/// (`unconfirmed` in the error) were not published: republishing them makes no
/// duplicates.
///
/// Once the server closed, every confirmation that arrived before its close is still
/// handed out: [`confirmed`](Self::confirmed) returns them in order and fails with
/// [`ClientError::StreamClosed`] only after the last one. [`send`](Self::send),
/// [`feed`](Self::feed) and [`flush`](Self::flush) fail at once, leaving the
/// confirmations not yet taken to [`confirmed`](Self::confirmed).
///
/// Closing (or dropping) the stream with messages in flight gives up their
/// confirmations; they may or may not have been published. [`flush`](Self::flush)
/// first to know.
///
/// ```no_run
/// # async fn demo() -> Result<(), mailroom_client::ClientError> {
/// use bytes::Bytes;
/// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
/// let mut stream = client.publish_stream("orders").await?;
/// for n in 0..1_000 {
///     stream.feed(Bytes::from(format!("order {n}"))).await?;
/// }
/// for confirmation in stream.flush().await? {
///     let offsets = confirmation.offsets().expect("published");
///     println!("messages {:?} are durable at {offsets:?}", confirmation.seqs());
/// }
/// stream.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PublishStream {
    sink: SplitSink<Socket, Message>,
    stream: SplitStream<Socket>,
    window: usize,
    /// The seq the next message sent gets.
    next_seq: u64,
    /// The seq after the last message whose confirmation arrived.
    received_through: u64,
    /// Confirmations received and not yet taken.
    received: VecDeque<Confirmation>,
    /// Whether everything fed has been written to the socket.
    flushed: bool,
    /// The server's close reason, once it closed.
    closed: Option<String>,
}

impl Client {
    /// Opens a publishing stream to `topic` with [`PUBLISH_WINDOW_DEFAULT`] messages in
    /// flight at most.
    ///
    /// # Errors
    /// `unknown_topic` (404) before the upgrade, `unauthorized` (401), or a transport
    /// error.
    pub async fn publish_stream(&self, topic: &str) -> Result<PublishStream, ClientError> {
        self.publish_stream_with_window(topic, PUBLISH_WINDOW_DEFAULT)
            .await
    }

    /// As [`Client::publish_stream`] with `window` messages in flight at most (taken
    /// into `1..=`[`PUBLISH_WINDOW_MAX`]).
    ///
    /// # Errors
    /// As for [`Client::publish_stream`].
    pub async fn publish_stream_with_window(
        &self,
        topic: &str,
        window: usize,
    ) -> Result<PublishStream, ClientError> {
        let socket = connect(self, topic).await?;
        let (sink, stream) = socket.split();
        Ok(PublishStream {
            sink,
            stream,
            window: window.clamp(1, PUBLISH_WINDOW_MAX),
            next_seq: 0,
            received_through: 0,
            received: VecDeque::new(),
            flushed: true,
            closed: None,
        })
    }
}

impl PublishStream {
    /// Sends `payload` as the next message and returns its seq; waits first while the
    /// window is full. The message is on its way to the server when this returns.
    ///
    /// # Errors
    /// [`ClientError::StreamClosed`] once the server ended the stream; a transport or
    /// protocol failure.
    pub async fn send(&mut self, payload: Bytes) -> Result<u64, ClientError> {
        let seq = self.feed(payload).await?;
        self.write_out().await?;
        Ok(seq)
    }

    /// Sends `message`, with its key and headers, as the next message (one JSON text
    /// frame), and returns its seq; as [`send`](Self::send) otherwise. A key or header
    /// past its limit comes back as that seq's refusal.
    ///
    /// # Errors
    /// As for [`send`](Self::send).
    pub async fn send_message(&mut self, message: &NewMessage) -> Result<u64, ClientError> {
        let json = serde_json::to_string(&message.object()).expect("a message serializes");
        let seq = self.feed_frame(Message::Text(json.into())).await?;
        self.write_out().await?;
        Ok(seq)
    }

    /// As [`send`](Self::send), but the message may wait in the write buffer until the
    /// buffer fills, the window fills, or the next [`send`](Self::send),
    /// [`confirmed`](Self::confirmed) or [`flush`](Self::flush): fewer, larger writes
    /// for a burst of messages.
    ///
    /// # Errors
    /// As for [`send`](Self::send).
    pub async fn feed(&mut self, payload: Bytes) -> Result<u64, ClientError> {
        self.feed_frame(Message::Binary(payload)).await
    }

    /// Feeds one frame, waiting first while the window is full.
    async fn feed_frame(&mut self, frame: Message) -> Result<u64, ClientError> {
        while self.in_flight() >= self.window as u64 {
            self.write_out().await?;
            self.receive_one().await?;
        }
        self.check_open()?;
        loop {
            // Feeding may write (when the buffer is full), and the server may be waiting
            // for us to read its confirmations before it reads further: read meanwhile.
            tokio::select! {
                fed = self.sink.feed(frame.clone()) => {
                    fed?;
                    break;
                }
                read = self.stream.next() => {
                    self.take_frame(read)?;
                    self.check_open()?;
                }
            }
        }
        self.flushed = false;
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }

    /// The next confirmation in seq order, waiting for it if needed; `None` when every
    /// message sent has been confirmed and its confirmation taken.
    ///
    /// # Errors
    /// [`ClientError::StreamClosed`] if the server ended the stream before confirming
    /// the messages still in flight; a transport or protocol failure.
    pub async fn confirmed(&mut self) -> Result<Option<Confirmation>, ClientError> {
        if self.received.is_empty() && self.in_flight() > 0 {
            self.write_out().await?;
            self.receive_one().await?;
        }
        Ok(self.received.pop_front())
    }

    /// Waits until every message sent is confirmed, and takes all confirmations not
    /// taken yet, in seq order.
    ///
    /// # Errors
    /// As for [`confirmed`](Self::confirmed). On an error the confirmations that did
    /// arrive are not lost: [`confirmed`](Self::confirmed) hands them out.
    pub async fn flush(&mut self) -> Result<Vec<Confirmation>, ClientError> {
        self.write_out().await?;
        while self.in_flight() > 0 {
            self.receive_one().await?;
        }
        Ok(self.received.drain(..).collect())
    }

    /// Messages sent whose confirmation has not arrived.
    pub fn in_flight(&self) -> u64 {
        self.next_seq - self.received_through
    }

    /// The most messages in flight at once.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Closes the connection. Messages still in flight lose their confirmations (see
    /// the [type documentation](PublishStream)).
    ///
    /// # Errors
    /// A transport failure while sending the close frame.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.closed.is_none() {
            self.sink.close().await?;
        }
        Ok(())
    }

    /// Writes out everything fed, reading confirmations meanwhile (see `feed`).
    async fn write_out(&mut self) -> Result<(), ClientError> {
        while !self.flushed {
            // Once the server closed, writing fails (`SendAfterClosing`): say why instead.
            self.check_open()?;
            tokio::select! {
                written = self.sink.flush() => {
                    written?;
                    self.flushed = true;
                }
                read = self.stream.next() => {
                    self.take_frame(read)?;
                    self.check_open()?;
                }
            }
        }
        Ok(())
    }

    /// Reads until one more confirmation arrives.
    async fn receive_one(&mut self) -> Result<(), ClientError> {
        let before = self.received_through;
        while self.received_through == before {
            self.check_open()?;
            let read = self.stream.next().await;
            self.take_frame(read)?;
        }
        Ok(())
    }

    /// Takes one frame from the server.
    fn take_frame(
        &mut self,
        read: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> Result<(), ClientError> {
        let text = match read {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => {
                let reason = frame.map_or_else(String::new, |f| f.reason.to_string());
                self.closed = Some(reason);
                return Ok(());
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => return Ok(()),
            Some(Ok(Message::Binary(_))) => {
                return Err(ClientError::UnexpectedResponse(
                    "a binary frame from the server".into(),
                ))
            }
            Some(Err(error)) => return Err(error.into()),
            None => {
                self.closed = Some("connection ended".into());
                return Ok(());
            }
        };
        let wire: StreamConfirmation = serde_json::from_str(text.as_str())
            .map_err(|e| ClientError::UnexpectedResponse(format!("confirmation: {e}")))?;
        let confirmation = Confirmation::try_from(wire)?;
        let expected = self.received_through;
        if confirmation.seq != expected || confirmation.count > self.next_seq - expected {
            return Err(ClientError::UnexpectedResponse(format!(
                "confirmation of messages {:?}, expected one from {expected} within {}",
                confirmation.seqs(),
                self.next_seq
            )));
        }
        self.received_through += confirmation.count;
        self.received.push_back(confirmation);
        Ok(())
    }

    /// Fails once the server closed the stream.
    fn check_open(&self) -> Result<(), ClientError> {
        match &self.closed {
            None => Ok(()),
            Some(reason) => Err(ClientError::StreamClosed {
                reason: reason.clone(),
                unconfirmed: self.in_flight(),
            }),
        }
    }
}

/// The WebSocket handshake with `/v1/topics/{topic}/publish/ws`.
async fn connect(client: &Client, topic: &str) -> Result<Socket, ClientError> {
    let path = Client::topic_path(topic, &["publish", "ws"])?;
    let options = SubscribeOptions::default();
    // Text frames as JSON messages: `send` writes binary frames (bare payloads) as
    // before, and `send_message` the JSON text frames that carry keys and headers.
    let query = Some("text=json");
    open_websocket(client, &path, query, options, WebSocketConfig::default()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Confirmation, ClientError> {
        let wire: StreamConfirmation = serde_json::from_str(json).expect("well-formed JSON");
        Confirmation::try_from(wire)
    }

    // Proves both documented confirmation shapes decode, and that a frame with both or
    // neither of offset and error, or covering nothing, is refused.
    #[test]
    fn confirmation_frames_decode_strictly() {
        let ok = parse(r#"{"seq":2,"count":3,"offset":9}"#).unwrap();
        assert_eq!((ok.seqs(), ok.offsets()), (2..5, Some(9..12)));
        let refused =
            parse(r#"{"seq":5,"count":1,"error":{"code":"payload_too_large","message":"m"}}"#)
                .unwrap();
        assert_eq!(refused.outcome.unwrap_err().code, "payload_too_large");
        for bad in [
            r#"{"seq":0,"count":1}"#,
            r#"{"seq":0,"count":1,"offset":1,"error":{"code":"c","message":"m"}}"#,
            r#"{"seq":0,"count":0,"offset":1}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
