//! The group calls as plans for [`Postgres::group_call`]: polls (single and batch),
//! acks, nacks, touches, redrive and purge, and the reads that first apply due expiries.
//! Each plan is the embedded store's, step for step, through `mailroom::group`.

use std::ops::Range;

use bytes::Bytes;
use std::collections::HashMap;

use mailroom::group::{
    key_hash, plan_batch, BatchHome, BatchPoll, Change, DeliveryId, GroupState, NackOptions,
    NewDelivery, NotOwned, Offer, PollStep, SlotPhase, WindowScan, KEYED_WINDOW_SPAN,
};
use mailroom::topic::{DeadLetterInfo, Delivery, Nack, TopicError};
use mailroom_store::{DeadLetterPage, StoreError, DEAD_LETTERS_PAGE_MAX};

use super::encoding::decode;
use super::group::{apply_planned, big, unknown_group, unknown_topic, Planned, Planning};
use super::{PgError, Postgres};
use crate::backend::{BackendError, GroupDetail};

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
        // Every message a batch can reach had its size read (`group::sizes`); one
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
    // A message vanishing under a poll needs retention, which this backend has not yet.
    plan_batch(&mut home, &poll)?;
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
    ) -> Result<Option<Delivery<Bytes>>, BackendError> {
        let (_, deliveries) = self
            // The keys of the window are read with the sizes (see `group::sizes`).
            .group_call(topic, group, true, |planning| loop {
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
        Ok(deliveries.into_iter().next())
    }

    pub(super) async fn poll_many(
        &self,
        topic: &str,
        group: &str,
        consumer: Option<&str>,
        max: usize,
    ) -> Result<Vec<Delivery<Bytes>>, BackendError> {
        let (_, deliveries) = self
            .group_call(topic, group, true, |planning| {
                let deliveries = poll_batch_plan(planning, consumer, max)?;
                Ok(Planned {
                    answer: (),
                    deliveries,
                })
            })
            .await?;
        Ok(deliveries)
    }

    pub(super) async fn ack_then_poll(
        &self,
        topic: &str,
        group: &str,
        acks: &[DeliveryId],
        consumer: Option<&str>,
        max: usize,
    ) -> Result<mailroom_store::AckedThenPolled, BackendError> {
        let (acked, polled) = self
            .group_call(topic, group, true, |planning| {
                let acked: Vec<Result<(), NotOwned>> = settle(planning, acks, None)?
                    .into_iter()
                    .map(|result| result.map(drop))
                    .collect();
                // Sizes were read before the acks, for two windows' worth of offsets:
                // the acks move the position at most one window on.
                let deliveries = poll_batch_plan(planning, consumer, max)?;
                Ok(Planned {
                    answer: acked,
                    deliveries,
                })
            })
            .await?;
        Ok((acked, polled))
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
            .group_call(topic, group, false, |planning| {
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
            .group_call(topic, group, false, |planning| {
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
        let (taken, _) = self
            .group_call(topic, group, false, |planning| {
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

    /// The group's state after due expiries (written if any), for the reads.
    pub(super) async fn current(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<(GroupState, u64), BackendError> {
        let (answer, _) = self
            .group_call(topic, group, false, |planning| {
                Ok(Planned::answer((planning.state.clone(), planning.log_end)))
            })
            .await?;
        Ok(answer)
    }

    pub(super) async fn detail(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<GroupDetail, BackendError> {
        let (state, log_end) = self.current(topic, group).await?;
        let page = self.dead_letter_rows(topic, group, 0, None).await?;
        Ok(GroupDetail {
            info: state.info(group, log_end),
            config: *state.config(),
            counters: state.counters(),
            in_flight: state.in_flight_details(),
            dead_letters: page.letters,
        })
    }

    pub(super) async fn dead_letters(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, BackendError> {
        if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
            return Err(BackendError::Store(StoreError::InvalidArgument {
                reason: format!("limit must be in 1..={DEAD_LETTERS_PAGE_MAX}, got {limit}"),
            }));
        }
        // Due expiries first, so the page shows what they dead-lettered.
        self.current(topic, group).await?;
        self.dead_letter_rows(topic, group, from, Some(limit)).await
    }

    /// The dead letters from offset `from` (up to `limit`, by offset; all, oldest first,
    /// without a limit) with their payloads, as committed.
    async fn dead_letter_rows(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: Option<usize>,
    ) -> Result<DeadLetterPage, BackendError> {
        let client = self.client().await?;
        let (order, fetch) = match limit {
            Some(limit) => ("d.\"offset\"", big(limit as u64 + 1)),
            None => ("d.seq", i64::MAX),
        };
        let rows = client
            .query(
                &format!(
                    "SELECT d.\"offset\", d.attempts, d.reason, d.at_ms, d.payload, \
                     d.published_at_ms, d.key, d.headers::text, d.idempotency_key \
                     FROM mailroom_dead_letters d JOIN mailroom_topics t ON t.id = d.topic_id \
                     WHERE t.name = $1 AND d.group_name = $2 AND d.\"offset\" >= $3 \
                     ORDER BY {order} LIMIT $4"
                ),
                &[&topic, &group, &big(from), &fetch],
            )
            .await
            .map_err(PgError::from)?;
        let mut letters: Vec<DeadLetterInfo<Bytes>> = rows
            .iter()
            .map(|row| {
                Ok(DeadLetterInfo {
                    offset: row.get::<_, i64>(0) as u64,
                    attempts: row.get::<_, i32>(1) as u32,
                    reason: row.get(2),
                    at_ms: row.get::<_, i64>(3) as u64,
                    message: self.at_hand.payload_of(row, 4)?,
                })
            })
            .collect::<Result<_, BackendError>>()?;
        let next = match limit {
            Some(limit) if letters.len() > limit => letters.pop().map(|letter| letter.offset),
            _ => None,
        };
        Ok(DeadLetterPage { letters, next })
    }

    /// The committed state of a group and the database's time, read without a lock
    /// (from the cache when its version is current).
    /// The key hashes of the messages in the window `[position, position + 4W)` of
    /// `state`, for a plan that reads no sizes (`next_due_in`); none are read when no slot
    /// is ready, since only a ready slot's key changes what the clock can do.
    pub(super) async fn window_keys(
        &self,
        topic: &str,
        state: &GroupState,
    ) -> Result<HashMap<u64, Option<u64>>, BackendError> {
        let ready = state
            .slots()
            .any(|slot| matches!(slot.phase, SlotPhase::Ready { .. }));
        if !ready {
            return Ok(HashMap::new());
        }
        let from = state.position();
        let span = u64::from(state.config().max_in_flight) * u64::from(KEYED_WINDOW_SPAN);
        let to = from.saturating_add(span);
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT m.\"offset\", m.key FROM mailroom_messages m \
                 JOIN mailroom_topics t ON m.topic_id = t.id \
                 WHERE t.name = $1 AND m.\"offset\" >= $2 AND m.\"offset\" < $3",
                &[&topic, &big(from), &big(to)],
            )
            .await
            .map_err(PgError::from)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let key: Option<&[u8]> = row.get(1);
                (row.get::<_, i64>(0) as u64, key.map(key_hash))
            })
            .collect())
    }

    pub(super) async fn read_state(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<(GroupState, u64), BackendError> {
        let key = (topic.to_owned(), group.to_owned());
        let cached = self.cache.lock().get(&key).cloned();
        let (version, group_id) = cached
            .as_ref()
            .map_or((-1, -1), |cached| (cached.version, cached.group_id));
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT t.id, g.version, \
                 CASE WHEN g.version = $3 AND g.id = $4 THEN NULL ELSE g.state END, \
                 (extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
                 (SELECT array_agg(d.\"offset\" ORDER BY d.seq) FROM mailroom_dead_letters d \
                  WHERE d.topic_id = t.id AND d.group_name = g.name \
                  AND NOT (g.version = $3 AND g.id = $4)) \
                 FROM mailroom_topics t JOIN mailroom_groups g ON g.topic_id = t.id \
                 WHERE t.name = $1 AND g.name = $2",
                &[&topic, &group, &version, &group_id],
            )
            .await
            .map_err(PgError::from)?;
        let Some(row) = row else {
            let topic_known = client
                .query_opt("SELECT 1 FROM mailroom_topics WHERE name = $1", &[&topic])
                .await
                .map_err(PgError::from)?;
            return Err(match topic_known {
                Some(_) => unknown_group(group),
                None => unknown_topic(topic),
            });
        };
        let db_now = row.get::<_, i64>(3).max(0) as u64;
        let stored: Option<Vec<u8>> = row.get(2);
        let (state, clock_ms) = match (stored, cached) {
            (None, Some(cached)) => (cached.state, cached.clock_ms),
            (Some(bytes), _) => {
                // Only the timing matters to these reads; the dead letters' count is read
                // without their notes.
                let offsets: Vec<i64> = row.get::<_, Option<Vec<i64>>>(4).unwrap_or_default();
                let entries = offsets
                    .iter()
                    .map(|&offset| mailroom::group::DeadLetterEntry {
                        offset: offset as u64,
                        attempts: 0,
                    })
                    .collect::<Vec<_>>();
                let notes = vec![mailroom::group::DeadLetterNote::default(); entries.len()];
                let stored = decode(&bytes, entries, notes)
                    .map_err(|error| BackendError::Internal(error.to_string()))?;
                let state = GroupState::from_snapshot(stored.snapshot)
                    .map_err(|error| BackendError::Internal(error.to_string()))?;
                (state, stored.clock_ms)
            }
            (None, None) => {
                return Err(BackendError::Internal(
                    "the database withheld a group state this broker does not hold".into(),
                ))
            }
        };
        Ok((state, db_now.max(clock_ms)))
    }
}
