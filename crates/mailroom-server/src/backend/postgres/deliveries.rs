//! The group calls as plans for [`Postgres::group_call`]: polls (single and batch),
//! acks, nacks, touches, redrive and purge (the reads that first apply due expiries are
//! in `group_reads`).
//! Each plan is the embedded store's, step for step, through `mailroom::group`.

use std::ops::Range;

use mailroom::group::{
    plan_batch, plan_batch_new, BatchHome, BatchPoll, Change, DeliveryId, GroupState, NackOptions,
    NewDelivery, NotOwned, Offer, PollStep, WindowScan,
};
use mailroom::topic::{Nack, TopicError};
use mailroom_store::{MessageDelivery, PollScope, StoreError};

use super::group::{apply_planned, DeadLetters, Planned, Planning};
use super::group_window::PollWindow;
use super::waiting::PollRead;
use super::Postgres;
use crate::backend::{BackendError, SettledRound, Settlements};

/// The largest sum of payload bytes one batch poll hands out (past its first message),
/// as the embedded store's default.
pub const POLL_BATCH_BYTES_MAX: usize = mailroom_store::POLL_BATCH_BYTES_MAX_DEFAULT;

fn not_owned(group: &str, source: NotOwned) -> BackendError {
    BackendError::Store(StoreError::Topic(TopicError::NotOwned {
        group: group.to_owned(),
        source,
    }))
}

/// A batch poll's home: applies each step to the planning state at once and collects the
/// deliveries, within the byte budget.
struct Collect<'a> {
    planning: &'a mut Planning,
    consumer: Option<&'a str>,
    ids: Vec<DeliveryId>,
    bytes: usize,
}

impl Collect<'_> {
    fn offer(&mut self, offset: u64) -> Result<Offer, BackendError> {
        // Every message a batch can reach had its size read (`group_window`); one
        // missing is a fault, not a reason to end the batch quietly.
        let Some(&size) = self.planning.sizes.get(&offset) else {
            return Err(BackendError::Internal(format!(
                "message {offset} is missing from the log"
            )));
        };
        let taken = self.bytes.saturating_add(size);
        if !self.ids.is_empty() && taken > POLL_BATCH_BYTES_MAX {
            return Ok(Offer::Declined);
        }
        self.bytes = taken;
        Ok(Offer::Taken)
    }
}

impl BatchHome for Collect<'_> {
    type Error = BackendError;

    fn state(&self) -> &GroupState {
        &self.planning.state
    }

    fn plan_new(&mut self, log_end: u64, now_ms: u64) -> Result<PollStep, BackendError> {
        self.plan_new_scanned(log_end, now_ms, &mut WindowScan::default())
    }

    fn plan_new_scanned(
        &mut self,
        log_end: u64,
        now_ms: u64,
        scan: &mut WindowScan,
    ) -> Result<PollStep, BackendError> {
        let planning = &mut *self.planning;
        let mut keys = Planning::key_lookup(&planning.keys);
        Ok(planning
            .state
            .plan_poll_new_scanned(log_end, now_ms, &mut keys, scan))
    }

    fn expire(&mut self, change: Change) -> Result<(), BackendError> {
        apply_planned(&mut self.planning.state, &change)
    }

    fn owned(&mut self, id: DeliveryId) -> Result<Offer, BackendError> {
        let offer = self.offer(id.offset)?;
        if offer == Offer::Taken {
            self.ids.push(id);
        }
        Ok(offer)
    }

    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, BackendError> {
        let offer = self.offer(new.id.offset)?;
        if offer == Offer::Taken {
            apply_planned(&mut self.planning.state, &new.change(self.consumer))?;
            self.ids.push(new.id);
        }
        Ok(offer)
    }
}

fn poll_batch_plan(
    planning: &mut Planning,
    consumer: Option<&str>,
    max: usize,
    scope: PollScope,
) -> Result<Vec<DeliveryId>, BackendError> {
    let poll = BatchPoll {
        consumer,
        max,
        log_end: planning.log_end,
        now_ms: planning.now_ms,
    };
    let mut home = Collect {
        planning,
        consumer,
        ids: Vec::new(),
        bytes: 0,
    };
    // No message vanishes under a poll: retention moves the groups it leaves below in the
    // transaction that raises the log's start (`retention.rs`), under their row locks.
    match scope {
        PollScope::All => plan_batch(&mut home, &poll)?,
        PollScope::New => plan_batch_new(&mut home, &poll)?,
    };
    Ok(home.ids)
}

fn settle(
    planning: &mut Planning,
    ids: &[DeliveryId],
    nack: Option<&NackOptions>,
) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
    let mut results = Vec::with_capacity(ids.len());
    for &id in ids {
        let planned = match nack {
            Some(options) => planning.state.plan_nack(id, options, planning.now_ms),
            None => planning.state.plan_ack(id, planning.now_ms),
        };
        results.push(match planned {
            Ok(change) => {
                apply_planned(&mut planning.state, &change)?;
                Ok(change.nack_outcome())
            }
            Err(refused) => Err(refused),
        });
    }
    Ok(results)
}

impl Postgres {
    pub(super) async fn poll_one(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
    ) -> Result<(Option<MessageDelivery>, PollRead), BackendError> {
        let (_, deliveries, read) = self
            // The keys of the window are read with the sizes (see `group_window`).
            .group_call_read(topic, group, Some(PollWindow::of(1)), |planning| loop {
                let mut keys = Planning::key_lookup(&planning.keys);
                let step = planning.state.plan_poll_keyed(
                    planning.log_end,
                    planning.now_ms,
                    consumer,
                    &mut keys,
                );
                let id = match step {
                    PollStep::Idle | PollStep::Full | PollStep::Wait { .. } => None,
                    PollStep::Expire(change) => {
                        apply_planned(&mut planning.state, &change)?;
                        continue;
                    }
                    PollStep::InFlight(id) => Some(id),
                    PollStep::Deliver(new) => {
                        apply_planned(&mut planning.state, &new.change(consumer))?;
                        Some(new.id)
                    }
                };
                return Ok(Planned {
                    answer: (),
                    deliveries: id.into_iter().collect(),
                });
            })
            .await?;
        Ok((deliveries.into_iter().next(), read))
    }

    pub(super) async fn poll_many(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
        scope: PollScope,
    ) -> Result<(Vec<MessageDelivery>, PollRead), BackendError> {
        let (_, deliveries, read) = self
            .group_call_read(topic, group, Some(PollWindow::of(max)), |planning| {
                let deliveries = poll_batch_plan(planning, consumer, max, scope)?;
                Ok(Planned {
                    answer: (),
                    deliveries,
                })
            })
            .await?;
        Ok((deliveries, read))
    }

    /// A round in one transaction: the runs of nacks, the acks, then the poll (the
    /// consume stream's round; with no nacks, a batch poll carrying acks).
    pub(super) async fn settle_then_poll(
        &self,
        topic: &str,
        group: &str,
        round: Settlements<'_>,
        consumer: Option<&str>,
        (max, scope): (usize, PollScope),
    ) -> Result<(SettledRound, PollRead), BackendError> {
        for (_, options) in round.nacks {
            options
                .check()
                .map_err(|error| StoreError::Topic(TopicError::from(error)))?;
        }
        // The acks may leave their slots out of the window's read only when no nack
        // comes before them, which could refuse one (`group_window`).
        let acks = if round.nacks.is_empty() {
            round.acks
        } else {
            &[]
        };
        let (answer, polled, read) = self
            .group_call_read(topic, group, Some(PollWindow { max, acks }), |planning| {
                let mut nacked = Vec::with_capacity(round.nacks.len());
                for (ids, options) in round.nacks {
                    nacked.push(settle(planning, ids, Some(options))?);
                }
                let acked: Vec<Result<(), NotOwned>> = settle(planning, round.acks, None)?
                    .into_iter()
                    .map(|result| result.map(drop))
                    .collect();
                // The window was read before the acks, from `next_fresh`: the acks move
                // the position at most up to it (`group_window`).
                let deliveries = poll_batch_plan(planning, consumer, max, scope)?;
                Ok(Planned {
                    answer: (nacked, acked),
                    deliveries,
                })
            })
            .await?;
        let (nacked, acked) = answer;
        Ok(((nacked, (acked, polled)), read))
    }

    pub(super) async fn settle_many(
        &self,
        topic: &str,
        group: &str,
        ids: &[DeliveryId],
        nack: Option<&NackOptions>,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
        if let Some(options) = nack {
            options
                .check()
                .map_err(|error| StoreError::Topic(TopicError::from(error)))?;
        }
        let (results, _) = self
            .group_call(topic, group, None, |planning| {
                Ok(Planned::answer(settle(planning, ids, nack)?))
            })
            .await?;
        Ok(results)
    }

    pub(super) async fn settle_one(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
        nack: Option<&NackOptions>,
    ) -> Result<Nack, BackendError> {
        let mut results = self.settle_many(topic, group, &[id], nack).await?;
        results
            .pop()
            .expect("one result per delivery")
            .map_err(|source| not_owned(group, source))
    }

    pub(super) async fn touch_one(
        &self,
        topic: &str,
        group: &str,
        id: DeliveryId,
    ) -> Result<(), BackendError> {
        let (result, _) = self
            .group_call(topic, group, None, |planning| {
                let planned = planning.state.plan_touch(id, planning.now_ms);
                let result = match planned {
                    Ok(Some(change)) => apply_planned(&mut planning.state, &change).map(Ok)?,
                    Ok(None) => Ok(()),
                    Err(refused) => Err(refused),
                };
                Ok(Planned::answer(result))
            })
            .await?;
        result.map_err(|source| not_owned(group, source))
    }

    /// Redrives (or with `purge`, deletes) the dead letters in `offsets`; answers how many.
    pub(super) async fn take_dead(
        &self,
        topic: &str,
        group: &str,
        offsets: Range<u64>,
        purge: bool,
    ) -> Result<u64, BackendError> {
        let taken = self
            .group_call_with_dead_letters(topic, group, DeadLetters::Read, |planning| {
                let before = planning.state.dead_letters().len();
                let planned = if purge {
                    planning.state.plan_purge(offsets)
                } else {
                    planning.state.plan_redrive(offsets)
                };
                if let Some(change) = planned {
                    apply_planned(&mut planning.state, &change)?;
                }
                let taken = (before - planning.state.dead_letters().len()) as u64;
                Ok(Planned::answer(taken))
            })
            .await?;
        Ok(taken)
    }
}
