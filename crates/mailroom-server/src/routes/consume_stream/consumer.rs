//! One consume stream's loop: wait for settlements, a wake-up or a due time; settle;
//! refill the window; send.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::ws::{close_code, CloseFrame, Message};
use futures_util::{FutureExt as _, Sink, SinkExt as _, Stream, StreamExt as _};
use mailroom::group::DeliveryId;
use mailroom_api::limits::CONSUME_STREAM_SETTLEMENTS_MAX;
use mailroom_api::publish_stream::SHUTDOWN_CLOSE_REASON;
use mailroom_store::{MessageDelivery, PollScope};
use tokio::time::Instant;

use super::settle::Incoming;
use super::ServerFrame;
use crate::error::ApiError;
use crate::long_poll::LONG_POLL_RECHECK_MS;
use crate::metrics::Metrics;
use crate::routes::deliveries::delivery_bodies;
use crate::state::AppState;

/// A consumer identity for a stream opened without one: unique to this connection.
pub(super) fn made_up_identity() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("stream-{started:x}-{n}")
}

/// How a stream ends, other than by the client going away.
pub(super) struct Ending {
    pub(super) code: u16,
    pub(super) reason: &'static str,
}

/// One consume stream's state.
pub(super) struct StreamConsumer {
    pub(super) state: AppState,
    pub(super) topic: String,
    pub(super) group: String,
    pub(super) consumer: String,
    pub(super) window: u32,
    /// The deliveries sent to the client and, as far as the stream knows, still its: a
    /// poll of everything it owns sets them, new deliveries and settlement answers
    /// update them. A lease that ran out (or a seek) is learned at the next such poll.
    pub(super) sent: HashSet<DeliveryId>,
    /// The number of the next client frame.
    pub(super) seq: u64,
}

impl StreamConsumer {
    pub(super) fn new(
        state: AppState,
        topic: String,
        group: String,
        consumer: String,
        window: u32,
    ) -> StreamConsumer {
        StreamConsumer {
            state,
            topic,
            group,
            consumer,
            window,
            sent: HashSet::new(),
            seq: 0,
        }
    }

    /// Runs the stream until the client goes away or it must end; then sends the close
    /// frame, if any.
    pub(super) async fn run<S>(mut self, mut socket: S)
    where
        S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin,
    {
        if let Err(Some(ending)) = self.serve(&mut socket).await {
            let frame = CloseFrame {
                code: ending.code,
                reason: ending.reason.into(),
            };
            let _ = socket.send(Message::Close(Some(frame))).await;
        }
    }

    /// The loop. `Err(None)`: the client went away; `Err(Some)`: end with that close.
    async fn serve<S>(&mut self, socket: &mut S) -> Result<(), Option<Ending>>
    where
        S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin,
    {
        let opened = ServerFrame::Opened {
            consumer: self.consumer.clone(),
            window: self.window,
        };
        send_frames(socket, &[opened]).await?;
        let long_polls = self.state.long_polls.clone();
        let waiter = long_polls.waiter(&self.topic, &self.group);
        let closed = long_polls.closed();
        tokio::pin!(closed);
        closed.as_mut().enable();
        // What the last round's acking poll handed out, or what to poll now: first (and
        // after a wait that ended by the clock, when leases may have run out) everything
        // the consumer owns, so a reconnecting consumer gets its deliveries back and the
        // stream learns what it no longer holds; otherwise new deliveries only.
        let mut refill = Refill::PollOwned;
        loop {
            let woken = waiter.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match std::mem::replace(&mut refill, Refill::PollNew) {
                Refill::PollOwned => {
                    let owned = self.poll(PollScope::All).await?;
                    self.deliver_owned(socket, owned).await?;
                }
                Refill::PollNew => {
                    let fresh = self.poll(PollScope::New).await?;
                    self.deliver_new(socket, fresh).await?;
                }
                Refill::Polled(fresh) => self.deliver_new(socket, fresh).await?,
            }
            if long_polls.is_closing() {
                return Err(Some(going_away()));
            }
            let has_room = self.sent.len() < self.window as usize;
            let wake_at = self.wake_at(&waiter).await?;
            tokio::select! {
                biased;
                () = &mut closed => return Err(Some(going_away())),
                read = socket.next() => {
                    let incoming = self.gather(socket, read)?;
                    let (answers, polled) = self.settle(incoming).await?;
                    send_frames(socket, &answers).await?;
                    if let Some(polled) = polled {
                        refill = Refill::Polled(polled);
                    }
                }
                () = &mut woken, if has_room => {}
                () = tokio::time::sleep_until(wake_at) => refill = Refill::PollOwned,
            }
        }
    }

    /// Polls the window for the stream's consumer: every delivery it owns and new ones,
    /// or new ones only (its own counted against the window).
    async fn poll(&self, scope: PollScope) -> Result<Vec<MessageDelivery>, Option<Ending>> {
        let backend = &self.state.backend;
        let (topic, group) = (&self.topic, &self.group);
        let (consumer, max) = (Some(self.consumer.as_str()), self.window as usize);
        let polled = backend.poll_batch(topic, group, consumer, max, scope).await;
        polled.map_err(|error| Some(failed(&ApiError::from(error))))
    }

    /// Sends the deliveries of `owned` not sent yet; from now on the stream's are exactly
    /// these (a poll of the window answers every one the consumer owns).
    async fn deliver_owned<S>(
        &mut self,
        socket: &mut S,
        owned: Vec<MessageDelivery>,
    ) -> Result<(), Option<Ending>>
    where
        S: Sink<Message, Error = axum::Error> + Unpin,
    {
        let ids: HashSet<DeliveryId> = owned.iter().map(MessageDelivery::id).collect();
        let fresh: Vec<MessageDelivery> = owned
            .into_iter()
            .filter(|delivery| !self.sent.contains(&delivery.id()))
            .collect();
        self.sent = ids;
        self.send_deliveries(socket, fresh).await
    }

    /// Sends `fresh`, new deliveries (none of them sent before), and counts them the
    /// stream's.
    async fn deliver_new<S>(
        &mut self,
        socket: &mut S,
        fresh: Vec<MessageDelivery>,
    ) -> Result<(), Option<Ending>>
    where
        S: Sink<Message, Error = axum::Error> + Unpin,
    {
        for delivery in &fresh {
            let first_time = self.sent.insert(delivery.id());
            debug_assert!(
                first_time,
                "a new delivery was sent before: {}",
                delivery.id()
            );
        }
        self.send_deliveries(socket, fresh).await
    }

    async fn send_deliveries<S>(
        &mut self,
        socket: &mut S,
        fresh: Vec<MessageDelivery>,
    ) -> Result<(), Option<Ending>>
    where
        S: Sink<Message, Error = axum::Error> + Unpin,
    {
        if fresh.is_empty() {
            return Ok(());
        }
        let labels = Metrics::group(&self.topic, &self.group);
        let count = fresh.len() as u64;
        self.state
            .metrics
            .deliveries
            .get_or_create(&labels)
            .inc_by(count);
        let bodies = delivery_bodies(fresh);
        let frames: Vec<ServerFrame> = bodies.into_iter().map(ServerFrame::Delivery).collect();
        send_frames(socket, &frames).await
    }

    /// When to re-poll by the clock: the group's next due time (a lease running out, a
    /// delay ending), or [`LONG_POLL_RECHECK_MS`] from now.
    async fn wake_at(
        &self,
        waiter: &crate::long_poll::TopicWaiter<'_>,
    ) -> Result<Instant, Option<Ending>> {
        let recheck = Instant::now() + Duration::from_millis(LONG_POLL_RECHECK_MS);
        waiter.arm(recheck, None);
        let due_in = self
            .state
            .backend
            .next_due_in(&self.topic, &self.group)
            .await
            .map_err(|error| Some(failed(&ApiError::from(error))))?;
        let wake_at = match due_in {
            Some(due_in) => recheck.min(Instant::now() + due_in),
            None => recheck,
        };
        waiter.arm(wake_at, None);
        Ok(wake_at)
    }

    /// The frame just read and every one already readable after it, up to
    /// [`CONSUME_STREAM_SETTLEMENTS_MAX`], parsed and numbered.
    fn gather<S>(
        &mut self,
        socket: &mut S,
        first: Option<Result<Message, axum::Error>>,
    ) -> Result<Vec<Incoming>, Option<Ending>>
    where
        S: Stream<Item = Result<Message, axum::Error>> + Unpin,
    {
        let mut incoming = Vec::new();
        let mut read = first;
        loop {
            match read {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Err(None),
                Some(Ok(Message::Binary(_))) => {
                    return Err(Some(Ending {
                        code: close_code::UNSUPPORTED,
                        reason: "binary_frame",
                    }))
                }
                Some(Ok(Message::Text(text))) => {
                    incoming.push(Incoming::parse(self.seq, text.as_str()));
                    self.seq += 1;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            }
            if incoming.len() >= CONSUME_STREAM_SETTLEMENTS_MAX {
                return Ok(incoming);
            }
            match socket.next().now_or_never() {
                Some(next) => read = next,
                None => return Ok(incoming),
            }
        }
    }
}

/// What a round of the stream polls, or what its acking poll handed out.
enum Refill {
    /// Poll every delivery the consumer owns, and new ones.
    PollOwned,
    /// Poll new deliveries only.
    PollNew,
    /// New deliveries the round's acking poll handed out.
    Polled(Vec<MessageDelivery>),
}

/// Sends `frames` as JSON text frames, flushed once.
async fn send_frames<S>(socket: &mut S, frames: &[ServerFrame]) -> Result<(), Option<Ending>>
where
    S: Sink<Message, Error = axum::Error> + Unpin,
{
    for frame in frames {
        // Every frame's JSON is UTF-8: serde_json's, or the delivery writer's, which
        // copies UTF-8 strings and writes ASCII around them.
        let text = String::from_utf8(frame.to_json()).map_err(|_| None)?;
        socket
            .feed(Message::Text(text.into()))
            .await
            .map_err(|_| None)?;
    }
    socket.flush().await.map_err(|_| None)
}

fn going_away() -> Ending {
    Ending {
        code: close_code::AWAY,
        reason: SHUTDOWN_CLOSE_REASON,
    }
}

/// The close of a stream whose group call failed as a whole (the group or topic is
/// gone, the store failed): 1011 with the error's code as the reason.
pub(super) fn failed(error: &ApiError) -> Ending {
    const CODES: [&str; 5] = [
        "unknown_topic",
        "unknown_group",
        "store_failed",
        "storage_error",
        "internal",
    ];
    let reason = CODES
        .iter()
        .find(|code| **code == error.code.as_str())
        .copied()
        .unwrap_or("internal");
    Ending {
        code: close_code::ERROR,
        reason,
    }
}
