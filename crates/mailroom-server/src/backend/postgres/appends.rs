//! Publishes to one topic, written together when they arrive together.
//!
//! A publish takes the topic row's lock and holds it until its commit (`topics.rs`,
//! "Offsets" in `docs/scale-out.md`), so publishes of one topic commit one after another,
//! each with its own WAL flush: sixteen publishers got no more through than one. Here the
//! first publish of a topic writes at once, in its own task; publishes that arrive while
//! it is being written wait in the topic's queue, and when it ends one task writes them
//! all as one append (one transaction, one commit, one flush) and answers each its own
//! offsets, in the order they arrived. Bare payloads join bare payloads, messages with
//! metadata join messages with metadata; a publish with idempotency keys is written on
//! its own (its window is counted in offsets from the publish that carries a key, which
//! a combined batch would shift). That is the embedded store's group commit, done
//! per broker; brokers sharing a database still take turns on the row, each with a
//! batch. A lone publisher pays nothing for it: nothing waits, nothing is spawned.
//!
//! A publish is copied only when it queues: a publish written at once is written from
//! its caller's own slice. A combined append holds at most [`COMBINED_MESSAGES_MAX`] messages and
//! [`COMBINED_BYTES_MAX`] bytes (one publish larger than that goes alone).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use deadpool_postgres::Pool;
use mailroom_store::{IdempotencyWindow, NewMessage, StoreError, Stored};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::idempotency::{append_messages, checked};
use super::notify::Notifier;
use super::topics::append;
use crate::backend::BackendError;

/// The most messages one combined append carries (a single publish's batch limit).
pub(super) const COMBINED_MESSAGES_MAX: usize = mailroom_api::limits::BATCH_MESSAGES_MAX;
/// The most payload bytes one combined append carries.
pub(super) const COMBINED_BYTES_MAX: usize = 8 << 20;

/// What one publish writes.
#[derive(Debug)]
enum Work {
    /// Payloads without metadata (`append`).
    Payloads(Vec<Bytes>),
    /// Messages with metadata, idempotently under the window if there is one
    /// (`append_messages`).
    Messages(Vec<NewMessage>, Option<IdempotencyWindow>),
}

/// What one publish is answered.
#[derive(Debug)]
enum Written {
    /// A [`Work::Payloads`]'s offsets.
    Offsets(Range<u64>),
    /// A [`Work::Messages`]'s answer per message.
    Stored(Vec<Stored>),
}

type Answer = Result<Written, BackendError>;

/// A publish's messages as its caller holds them: copied into a [`Work`] only if the
/// publish has to queue.
#[derive(Debug, Clone, Copy)]
enum Borrowed<'a> {
    Payloads(&'a [Bytes]),
    Messages(&'a [NewMessage], Option<IdempotencyWindow>),
}

/// One waiting publish and where its answer goes.
#[derive(Debug)]
struct Waiter {
    work: Work,
    answer: oneshot::Sender<Answer>,
}

/// The topics being written by this broker, each with the publishes waiting behind the
/// write in progress. A topic is in the map exactly while a write of it is in progress.
#[derive(Debug)]
pub(super) struct Appends {
    pool: Pool,
    notifier: Arc<Notifier>,
    queues: Mutex<HashMap<String, Vec<Waiter>>>,
}

impl Appends {
    /// No topic being written yet.
    pub(super) fn new(pool: Pool, notifier: Arc<Notifier>) -> Arc<Appends> {
        Arc::new(Appends {
            pool,
            notifier,
            queues: Mutex::new(HashMap::new()),
        })
    }

    /// Publishes `payloads` to `topic` with consecutive offsets, answered once the write
    /// that carries them committed: at once if no write of `topic` is in progress here,
    /// else together with the publishes that waited behind it.
    pub(super) async fn append(
        self: &Arc<Appends>,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        match self.publish(topic, Borrowed::Payloads(payloads)).await? {
            Written::Offsets(offsets) => Ok(offsets),
            Written::Stored(_) => Err(mismatched()),
        }
    }

    /// Publishes `messages` to `topic` as `append_messages` does (idempotently with a
    /// `window`), answered once the write that carries them committed. Their metadata is
    /// checked first, so that a bad publish fails alone.
    pub(super) async fn append_messages(
        self: &Arc<Appends>,
        topic: &str,
        messages: &[NewMessage],
        window: Option<IdempotencyWindow>,
    ) -> Result<Vec<Stored>, BackendError> {
        checked(messages)?;
        let work = Borrowed::Messages(messages, window);
        match self.publish(topic, work).await? {
            Written::Stored(answers) => Ok(answers),
            Written::Offsets(_) => Err(mismatched()),
        }
    }

    /// Writes `work` at once, or queues it behind the write of `topic` in progress.
    async fn publish(self: &Arc<Appends>, topic: &str, work: Borrowed<'_>) -> Answer {
        if let Some(wait) = self.queued(topic, work) {
            return wait.await.map_err(|_| ended())?;
        }
        // Whatever becomes of this call (a client that hung up drops it mid-write), the
        // guard hands the queue that formed behind it to a task of its own.
        let _turn = Turn {
            appends: Arc::clone(self),
            topic,
        };
        self.write(topic, work).await
    }

    /// Queues a copy of `work` behind the write of `topic` in progress, if there is one,
    /// and answers where its answer will come; else marks `topic` as being written by the
    /// caller and answers `None`.
    fn queued(&self, topic: &str, work: Borrowed<'_>) -> Option<oneshot::Receiver<Answer>> {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(topic) else {
            queues.insert(topic.to_owned(), Vec::new());
            return None;
        };
        let (answer, wait) = oneshot::channel();
        let work = match work {
            Borrowed::Payloads(payloads) => Work::Payloads(payloads.to_vec()),
            Borrowed::Messages(messages, window) => Work::Messages(messages.to_vec(), window),
        };
        queue.push(Waiter { work, answer });
        Some(wait)
    }

    /// Ends the write of `topic` in progress: the topic leaves the map if nothing waits,
    /// else a task writes the queue, in combined appends until it stays empty.
    fn hand_over(self: &Arc<Appends>, topic: &str) {
        let mut queues = self.queues.lock();
        if queues.get(topic).is_some_and(Vec::is_empty) {
            queues.remove(topic);
            return;
        }
        drop(queues);
        let (appends, topic) = (Arc::clone(self), topic.to_owned());
        tokio::spawn(async move { while appends.write_next(&topic).await {} });
    }

    /// Writes the publishes waiting on `topic` that fit one combined append and answers
    /// each; `false` (and the topic out of the map) when none waited.
    async fn write_next(&self, topic: &str) -> bool {
        let mut taken = {
            let mut queues = self.queues.lock();
            let Some(queue) = queues.get_mut(topic) else {
                return false;
            };
            if queue.is_empty() {
                queues.remove(topic);
                return false;
            }
            let fits = fitting(queue);
            queue.drain(..fits).collect::<Vec<Waiter>>()
        };
        let Some((work, counts)) = combined(&mut taken) else {
            for waiter in taken {
                let _ = waiter.answer.send(Err(mismatched()));
            }
            return true;
        };
        let result = self.write(topic, work.borrowed()).await;
        answer_each(taken, &counts, &result);
        true
    }

    /// One write of `work`: one transaction.
    async fn write(&self, topic: &str, work: Borrowed<'_>) -> Answer {
        let marks = &self.notifier.marks;
        match work {
            Borrowed::Payloads(payloads) => append(&self.pool, marks, topic, payloads)
                .await
                .map(Written::Offsets),
            Borrowed::Messages(messages, window) => {
                append_messages(&self.pool, marks, topic, messages, window)
                    .await
                    .map(Written::Stored)
            }
        }
    }
}

/// The write of one topic in progress on a caller's own task; dropping it hands over.
struct Turn<'a> {
    appends: Arc<Appends>,
    topic: &'a str,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.appends.hand_over(self.topic);
    }
}

impl Work {
    fn borrowed(&self) -> Borrowed<'_> {
        match self {
            Work::Payloads(payloads) => Borrowed::Payloads(payloads),
            Work::Messages(messages, window) => Borrowed::Messages(messages, *window),
        }
    }

    fn len(&self) -> usize {
        match self {
            Work::Payloads(payloads) => payloads.len(),
            Work::Messages(messages, _) => messages.len(),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Work::Payloads(payloads) => payloads.iter().map(Bytes::len).sum(),
            Work::Messages(messages, _) => messages.iter().map(|m| m.payload.len()).sum(),
        }
    }

    /// Whether `next` may be written in one append behind `self`: the same kind, and no
    /// idempotency key in either (a key's window is counted in offsets from the
    /// publish that carries it, so a combined batch could find a duplicate that the
    /// same publishes made one by one would not).
    fn joins(&self, next: &Work) -> bool {
        match (self, next) {
            (Work::Payloads(_), Work::Payloads(_)) => true,
            (Work::Messages(first, window), Work::Messages(then, same)) => {
                window == same && !keyed(first) && !keyed(then)
            }
            _ => false,
        }
    }
}

fn keyed(messages: &[NewMessage]) -> bool {
    messages
        .iter()
        .any(|message| message.metadata.idempotency_key.is_some())
}

/// How many of `queue`'s first waiters one combined append takes: at least one, then
/// as many as are of its kind and keep it within [`COMBINED_MESSAGES_MAX`] and
/// [`COMBINED_BYTES_MAX`].
fn fitting(queue: &[Waiter]) -> usize {
    let (mut messages, mut bytes) = (0, 0);
    let fits = queue.iter().position(|waiter| {
        messages += waiter.work.len();
        bytes += waiter.work.bytes();
        messages > COMBINED_MESSAGES_MAX
            || bytes > COMBINED_BYTES_MAX
            || !queue[0].work.joins(&waiter.work)
    });
    fits.unwrap_or(queue.len()).max(1)
}

/// The one write that carries all of `taken` (which [`fitting`] made of one kind), its
/// messages moved out of them, and how many each carried; `None` if they were of two
/// kinds after all (then nothing can be written).
fn combined(taken: &mut [Waiter]) -> Option<(Work, Vec<usize>)> {
    let counts = taken.iter().map(|waiter| waiter.work.len()).collect();
    let mut all = match &taken.first()?.work {
        Work::Payloads(_) => Work::Payloads(Vec::new()),
        Work::Messages(_, window) => Work::Messages(Vec::new(), *window),
    };
    for waiter in taken {
        match (&mut all, &mut waiter.work) {
            (Work::Payloads(all), Work::Payloads(mine)) => all.append(mine),
            (Work::Messages(all, _), Work::Messages(mine, _)) => all.append(mine),
            _ => return None,
        }
    }
    Some((all, counts))
}

/// Answers each of `taken`, which carried `counts` messages, its own share of a
/// combined append's `result`, in order.
fn answer_each(taken: Vec<Waiter>, counts: &[usize], result: &Answer) {
    let mut next = 0;
    for (waiter, &count) in taken.into_iter().zip(counts) {
        let answer = match result {
            Ok(Written::Offsets(offsets)) => {
                let first = offsets.start + next as u64;
                Ok(Written::Offsets(first..first + count as u64))
            }
            Ok(Written::Stored(answers)) => answers
                .get(next..next + count)
                .map(|mine| Written::Stored(mine.to_vec()))
                .ok_or_else(mismatched),
            Err(error) => Err(each(error)),
        };
        next += count;
        // A publish whose caller is gone has nobody to tell.
        let _ = waiter.answer.send(answer);
    }
}

/// The error a combined append's failure gives each publish it carried: the same one.
/// An append fails only with an unknown topic, an unreachable database or a database
/// error, all of which copy exactly (metadata is checked before a publish queues); any
/// other store error is answered as internal.
fn each(error: &BackendError) -> BackendError {
    match error {
        BackendError::Store(StoreError::UnknownTopic { topic }) => {
            BackendError::Store(StoreError::UnknownTopic {
                topic: topic.clone(),
            })
        }
        BackendError::Store(other) => BackendError::Internal(other.to_string()),
        BackendError::Internal(why) => BackendError::Internal(why.clone()),
        BackendError::Unavailable(why) => BackendError::Unavailable(why.clone()),
        BackendError::NotSupported(what) => BackendError::NotSupported(what),
    }
}

/// A waiter's answer was dropped unsent: its write's task ended without answering.
fn ended() -> BackendError {
    BackendError::Internal("a combined publish's write ended without an answer".into())
}

/// Publishes of two kinds taken for one write, or a write answered in another kind or
/// count than it was asked: cannot happen ([`fitting`] takes one kind, [`combined`]
/// keeps it, and a write answers each message).
fn mismatched() -> BackendError {
    BackendError::Internal("a combined publish was answered in the wrong kind".into())
}

#[cfg(test)]
mod tests;
