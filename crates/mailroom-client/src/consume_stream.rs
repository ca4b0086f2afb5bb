//! Streamed consumption over one WebSocket: see [`ConsumeStream`].

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

pub use mailroom_api::consume_stream::SettledOutcome;
use mailroom_api::consume_stream::{ServerFrame, Settlement};

use crate::subscription::open_websocket;
use crate::{Client, ClientError, Delivery, DeliveryId, NackOptions, Refusal, SubscribeOptions};

/// The server's answer to settlement `seq` of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The settlement answered (numbered from 0 on the stream, as the `ack`, `nack` and
    /// `touch` calls returned them).
    pub seq: u64,
    /// What it did, or why it was refused (`not_owned`: the delivery is not in flight
    /// under that attempt any more).
    pub outcome: Result<SettledOutcome, Refusal>,
}

/// What [`ConsumeStream::next`] hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A delivery, now owned by the stream's consumer.
    Delivery(Delivery),
    /// The answer to a settlement, in `seq` order.
    Settled(Settled),
}

/// A group's deliveries pushed over one WebSocket, with at most `window` of them
/// unsettled; acks, nacks and touches go back on the same socket.
///
/// [`Client::consume_stream`] opens it; [`next`](Self::next) hands out deliveries and
/// the answers to settlements as they arrive; [`ack`](Self::ack), [`nack`](Self::nack)
/// and [`touch`](Self::touch) send settlements, each answered later by one
/// [`StreamEvent::Settled`] in the order sent. The server sends the next delivery once
/// a settlement frees a slot of the window.
///
/// # Batching settlements
///
/// `ack`, `nack` and `touch` each send their frame at once (one write to the socket).
/// A consumer settling several deliveries together (a round of them, say) queues them
/// with [`feed_ack`](Self::feed_ack), [`feed_nack`](Self::feed_nack) and
/// [`feed_touch`](Self::feed_touch) and sends them all with one [`flush`](Self::flush):
/// one write, which the server reads as one round and settles with one durable write.
///
/// Dropping the stream leaves its deliveries in flight, as an HTTP consumer's: their
/// leases run out, or a stream reopened with the same consumer identity gets them back.
///
/// ```no_run
/// # async fn demo() -> Result<(), mailroom_client::ClientError> {
/// use mailroom_client::StreamEvent;
/// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
/// let mut stream = client.consume_stream("orders", "billing", 16, Some("worker-1")).await?;
/// while let Some(event) = stream.next().await? {
///     if let StreamEvent::Delivery(delivery) = event {
///         println!("{}: {:?}", delivery.offset, delivery.payload);
///         stream.ack(delivery.id()).await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ConsumeStream {
    socket: WebSocketStream<TcpStream>,
    consumer: String,
    window: u32,
    next_seq: u64,
    /// The server's close reason, once it closed.
    closed: Option<String>,
}

impl Client {
    /// Opens a consume stream of `group` on `topic` holding up to `window` deliveries
    /// unsettled, as `consumer` (`None`: the server makes up an identity for it).
    ///
    /// # Errors
    /// Before the upgrade: 404 for an unknown topic or group, 400 for a window outside
    /// `1..=4096` or above the group's `max_in_flight`, or a bad consumer; a transport
    /// error.
    pub async fn consume_stream(
        &self,
        topic: &str,
        group: &str,
        window: u32,
        consumer: Option<&str>,
    ) -> Result<ConsumeStream, ClientError> {
        let path = Client::group_path(topic, group, &["consume", "ws"])?;
        let query = stream_query(window, consumer);
        let options = SubscribeOptions::default();
        let config = WebSocketConfig::default();
        let mut socket = open_websocket(self, &path, Some(&query), options, config).await?;
        let opened = match socket.next().await {
            Some(Ok(Message::Text(text))) => serde_json::from_str::<ServerFrame>(text.as_str())
                .map_err(|e| ClientError::UnexpectedResponse(format!("opened frame: {e}")))?,
            other => {
                return Err(ClientError::UnexpectedResponse(format!(
                    "expected an opened frame, got {other:?}"
                )))
            }
        };
        let ServerFrame::Opened { consumer, window } = opened else {
            return Err(ClientError::UnexpectedResponse(format!(
                "expected an opened frame, got {opened:?}"
            )));
        };
        Ok(ConsumeStream {
            socket,
            consumer,
            window,
            next_seq: 0,
            closed: None,
        })
    }
}

impl ConsumeStream {
    /// The next delivery or settlement answer, waiting for it; `None` once the server
    /// closed the stream (its reason in [`closed`](Self::closed)).
    ///
    /// # Errors
    /// A transport failure or a frame that is not the documented shape.
    pub async fn next(&mut self) -> Result<Option<StreamEvent>, ClientError> {
        while self.closed.is_none() {
            let text = match self.socket.next().await {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(frame))) => {
                    self.closed = Some(frame.map_or_else(String::new, |f| f.reason.to_string()));
                    break;
                }
                None => {
                    self.closed = Some("connection ended".into());
                    break;
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return Err(error.into()),
            };
            let frame: ServerFrame = serde_json::from_str(text.as_str())
                .map_err(|e| ClientError::UnexpectedResponse(format!("stream frame: {e}")))?;
            return Ok(Some(event(frame)?));
        }
        Ok(None)
    }

    /// Acks `delivery`; answers the settlement's `seq`.
    ///
    /// # Errors
    /// [`ClientError::StreamClosed`] once the server closed; a transport failure.
    pub async fn ack(&mut self, delivery: DeliveryId) -> Result<u64, ClientError> {
        let seq = self.feed_ack(delivery).await?;
        self.flush().await?;
        Ok(seq)
    }

    /// Queues an ack of `delivery` without sending it (see "Batching settlements" in the
    /// [type docs](Self)); answers its `seq`. [`flush`](Self::flush) sends it.
    ///
    /// ```no_run
    /// # async fn demo(mut stream: mailroom_client::ConsumeStream,
    /// #     round: Vec<mailroom_client::DeliveryId>) -> Result<(), mailroom_client::ClientError> {
    /// for id in round {
    ///     stream.feed_ack(id).await?;
    /// }
    /// stream.flush().await?; // one write for the whole round
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`ack`](Self::ack) (a queue past the socket's write buffer writes some out).
    pub async fn feed_ack(&mut self, delivery: DeliveryId) -> Result<u64, ClientError> {
        self.feed(Settlement::Ack {
            offset: delivery.offset,
            attempt: delivery.attempt,
        })
        .await
    }

    /// Queues a nack of `delivery` per `options` without sending it; as
    /// [`feed_ack`](Self::feed_ack).
    ///
    /// # Errors
    /// As [`feed_ack`](Self::feed_ack).
    pub async fn feed_nack(
        &mut self,
        delivery: DeliveryId,
        options: &NackOptions,
    ) -> Result<u64, ClientError> {
        self.feed(nack_of(delivery, options)).await
    }

    /// Queues a touch of `delivery` without sending it; as [`feed_ack`](Self::feed_ack).
    ///
    /// # Errors
    /// As [`feed_ack`](Self::feed_ack).
    pub async fn feed_touch(&mut self, delivery: DeliveryId) -> Result<u64, ClientError> {
        self.feed(Settlement::Touch {
            offset: delivery.offset,
            attempt: delivery.attempt,
        })
        .await
    }

    /// Sends every settlement queued by the `feed_` calls, in one write.
    ///
    /// # Errors
    /// A transport failure.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.socket.flush().await?;
        Ok(())
    }

    /// Nacks, releases or rejects `delivery` per `options`; answers the `seq`.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn nack(
        &mut self,
        delivery: DeliveryId,
        options: &NackOptions,
    ) -> Result<u64, ClientError> {
        let seq = self.feed(nack_of(delivery, options)).await?;
        self.flush().await?;
        Ok(seq)
    }

    /// Extends the lease of `delivery`; answers the `seq`.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub async fn touch(&mut self, delivery: DeliveryId) -> Result<u64, ClientError> {
        let seq = self.feed_touch(delivery).await?;
        self.flush().await?;
        Ok(seq)
    }

    /// The consumer identity the deliveries are owned by.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The most deliveries unsettled at once.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// The server's close reason, once it closed the stream.
    pub fn closed(&self) -> Option<&str> {
        self.closed.as_deref()
    }

    /// Closes the connection; deliveries not settled stay in flight.
    ///
    /// # Errors
    /// A transport failure while sending the close frame.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.closed.is_none() {
            self.socket.close(None).await?;
        }
        Ok(())
    }

    /// Queues `settlement`'s frame on the socket (sent by the next flush, or once the
    /// socket's write buffer fills); answers its `seq`.
    async fn feed(&mut self, settlement: Settlement) -> Result<u64, ClientError> {
        if let Some(reason) = &self.closed {
            return Err(ClientError::StreamClosed {
                reason: reason.clone(),
                unconfirmed: 0,
            });
        }
        let text = serde_json::to_string(&settlement).expect("a settlement serializes");
        self.socket.feed(Message::Text(text.into())).await?;
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }
}

/// The upgrade's query string. Built apart from the async call: the serializer is not
/// `Send`, and must not live across an await.
fn nack_of(delivery: DeliveryId, options: &NackOptions) -> Settlement {
    Settlement::Nack {
        offset: delivery.offset,
        attempt: delivery.attempt,
        kind: options.kind,
        delay_ms: options.delay_ms,
        reason: options.reason.clone(),
    }
}

fn stream_query(window: u32, consumer: Option<&str>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("window", &window.to_string());
    if let Some(consumer) = consumer {
        query.append_pair("consumer", consumer);
    }
    query.finish()
}

/// The event a server frame is.
fn event(frame: ServerFrame) -> Result<StreamEvent, ClientError> {
    Ok(match frame {
        ServerFrame::Delivery(body) => StreamEvent::Delivery(Delivery::try_from(body)?),
        ServerFrame::Settled { seq, outcome, .. } => StreamEvent::Settled(Settled {
            seq,
            outcome: Ok(outcome),
        }),
        ServerFrame::Error { seq, error, .. } => StreamEvent::Settled(Settled {
            seq,
            outcome: Err(error),
        }),
        ServerFrame::Opened { .. } => {
            return Err(ClientError::UnexpectedResponse(
                "a second opened frame".into(),
            ))
        }
    })
}
