//! One round's settlements: split into runs that each go to the store as one batch
//! call, and answered in the order the client sent them.

use std::collections::HashSet;

use mailroom::group::{DeliveryId, NackKind, NackOptions, NotOwned};
use mailroom::topic::Nack;
use mailroom_api::consume_stream::SettledOutcome;
use mailroom_api::deliveries::NackOutcome;
use mailroom_api::publish_stream::StreamError;
use mailroom_api::ErrorCode;
use mailroom_store::{MessageDelivery, PollScope};

use super::consumer::{failed, Ending, StreamConsumer};
use super::{ServerFrame, Settlement};
use crate::backend::Settlements;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::routes::arguments::check_nack_options;
use crate::routes::deliveries::batch::{count_nacks, nack_outcome};

/// One client frame, numbered and parsed.
pub(super) enum Incoming {
    /// A settlement.
    Settle(u64, Settlement),
    /// A frame that does not parse: answered with this error.
    Bad(u64, ApiError),
}

impl Incoming {
    /// Parses client frame `seq`.
    pub(super) fn parse(seq: u64, text: &str) -> Incoming {
        match serde_json::from_str::<Settlement>(text) {
            Ok(settlement) => Incoming::Settle(seq, settlement),
            Err(error) => Incoming::Bad(
                seq,
                ApiError::invalid_argument(format!("frame {seq}: {error}")),
            ),
        }
    }
}

/// Nacks made with the same options, each with the `seq` of its frame.
type NackRun = (Vec<(u64, DeliveryId)>, NackOptions);

/// A run of settlements that goes to the store as one call.
enum Run {
    Acks(Vec<(u64, DeliveryId)>),
    Nacks(Vec<(u64, DeliveryId)>, NackOptions),
    Touch(u64, DeliveryId),
    Bad(u64, Option<DeliveryId>, ApiError),
}

impl Run {
    /// The deliveries the run settles.
    fn ids(&self) -> impl Iterator<Item = DeliveryId> + '_ {
        let (many, one): (&[(u64, DeliveryId)], Option<DeliveryId>) = match self {
            Run::Acks(ids) | Run::Nacks(ids, _) => (ids, None),
            Run::Touch(_, id) => (&[], Some(*id)),
            Run::Bad(..) => (&[], None),
        };
        many.iter().map(|(_, id)| *id).chain(one)
    }
}

/// Splits `incoming` into runs, in order: consecutive acks together, consecutive nacks
/// with equal options together; then, when no offset is settled twice, every ack moved
/// into one last run ([`acks_last`]).
fn runs(incoming: Vec<Incoming>) -> Vec<Run> {
    acks_last(runs_in_order(incoming))
}

/// With no offset settled twice in a round, its settlements commute: each changes only
/// its own delivery's slot (an ordering key has one delivery in flight at a time, so two
/// of them never share one), and the answers are sent in `seq` order whatever order they
/// were made in. So every ack goes into one last run, the one the refilling poll carries:
/// a round of acks and nacks is two calls on the store (the nacks, then the acks with
/// the poll) instead of three or more (the acks, the nacks, then a poll of its own).
/// Nack runs the acks kept apart join when their options are equal. A round that
/// settles an offset twice keeps the client's order.
fn acks_last(runs: Vec<Run>) -> Vec<Run> {
    let mut offsets = HashSet::new();
    let distinct = runs
        .iter()
        .flat_map(Run::ids)
        .all(|id| offsets.insert(id.offset));
    if !distinct {
        return runs;
    }
    let mut acks = Vec::new();
    let mut rest = Vec::with_capacity(runs.len());
    for run in runs {
        match (run, rest.last_mut()) {
            (Run::Acks(ids), _) => acks.extend(ids),
            // Nacks that only acks kept apart: one run again.
            (Run::Nacks(ids, options), Some(Run::Nacks(before, same))) if *same == options => {
                before.extend(ids);
            }
            (other, _) => rest.push(other),
        }
    }
    if !acks.is_empty() {
        rest.push(Run::Acks(acks));
    }
    rest
}

/// Takes the round's tail off `runs`: its last run of acks, if it ends with one, and the
/// runs of nacks right before that (or at the end); they go to the store with the poll.
fn tail(runs: &mut Vec<Run>) -> (Vec<NackRun>, Vec<(u64, DeliveryId)>) {
    let acks = match runs.pop() {
        Some(Run::Acks(ids)) => ids,
        other => {
            runs.extend(other);
            Vec::new()
        }
    };
    let mut nacks = Vec::new();
    loop {
        match runs.pop() {
            Some(Run::Nacks(ids, options)) => nacks.push((ids, options)),
            other => {
                runs.extend(other);
                break;
            }
        }
    }
    nacks.reverse();
    (nacks, acks)
}

/// The deliveries of a run's `(seq, delivery)` pairs.
fn ids_of(run: &[(u64, DeliveryId)]) -> Vec<DeliveryId> {
    run.iter().map(|(_, id)| *id).collect()
}

/// The client frame an answer answers.
fn seq_of(answer: &ServerFrame) -> u64 {
    match answer {
        ServerFrame::Settled { seq, .. } | ServerFrame::Error { seq, .. } => *seq,
        _ => u64::MAX,
    }
}

/// Splits `incoming` into runs, in order: consecutive acks together, consecutive nacks
/// with equal options together.
fn runs_in_order(incoming: Vec<Incoming>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for item in incoming {
        let (seq, settlement) = match item {
            Incoming::Bad(seq, error) => {
                runs.push(Run::Bad(seq, None, error));
                continue;
            }
            Incoming::Settle(seq, settlement) => (seq, settlement),
        };
        let id = settlement.id().id();
        match settlement {
            Settlement::Ack { .. } => match runs.last_mut() {
                Some(Run::Acks(ids)) => ids.push((seq, id)),
                _ => runs.push(Run::Acks(vec![(seq, id)])),
            },
            Settlement::Nack {
                kind,
                delay_ms,
                reason,
                ..
            } => {
                let options = NackOptions {
                    kind: NackKind::from(kind),
                    delay_ms,
                    reason,
                };
                if let Err(error) = check_nack_options(&options) {
                    runs.push(Run::Bad(seq, Some(id), error));
                    continue;
                }
                match runs.last_mut() {
                    Some(Run::Nacks(ids, same)) if *same == options => ids.push((seq, id)),
                    _ => runs.push(Run::Nacks(vec![(seq, id)], options)),
                }
            }
            Settlement::Touch { .. } => runs.push(Run::Touch(seq, id)),
        }
    }
    runs
}

fn settled(seq: u64, id: DeliveryId, outcome: SettledOutcome) -> ServerFrame {
    ServerFrame::Settled {
        seq,
        offset: id.offset,
        attempt: id.attempt,
        outcome,
    }
}

fn refused(seq: u64, id: Option<DeliveryId>, code: ErrorCode, message: String) -> ServerFrame {
    ServerFrame::Error {
        seq,
        offset: id.map(|id| id.offset),
        attempt: id.map(|id| id.attempt),
        error: StreamError { code, message },
    }
}

fn not_owned(seq: u64, id: DeliveryId, error: &NotOwned) -> ServerFrame {
    refused(seq, Some(id), ErrorCode::NotOwned, error.to_string())
}

/// The new deliveries an acking poll handed out, if the round ended with one.
type Refill = Option<Vec<MessageDelivery>>;

/// The delivery an answer says is no longer the consumer's: settled (a touch keeps it)
/// or refused as not owned (it never was, or is no longer).
fn released_by(answer: &ServerFrame) -> Option<DeliveryId> {
    match answer {
        ServerFrame::Settled {
            offset,
            attempt,
            outcome,
            ..
        } if *outcome != SettledOutcome::Touched => Some(DeliveryId {
            offset: *offset,
            attempt: *attempt,
        }),
        ServerFrame::Error {
            offset: Some(offset),
            attempt: Some(attempt),
            error,
            ..
        } if error.code == ErrorCode::NotOwned => Some(DeliveryId {
            offset: *offset,
            attempt: *attempt,
        }),
        _ => None,
    }
}

impl StreamConsumer {
    /// Settles one round, answering each frame in order. The round's tail (its last run
    /// of acks and the runs of nacks right before it, or its last runs of nacks) goes
    /// with the poll that refills the window (with new deliveries only) as one call on
    /// the store. What the answers settle is no longer the stream's.
    pub(super) async fn settle(
        &mut self,
        incoming: Vec<Incoming>,
    ) -> Result<(Vec<ServerFrame>, Refill), Option<Ending>> {
        let mut runs = runs(incoming);
        let (nacks, acks) = tail(&mut runs);
        let mut answers = Vec::new();
        for run in runs {
            match run {
                Run::Acks(ids) => {
                    let only = ids_of(&ids);
                    let backend = &self.state.backend;
                    let outcomes = backend
                        .ack_batch(&self.topic, &self.group, &only)
                        .await
                        .map_err(|error| Some(failed(&error.into())))?;
                    self.answer_acks(&ids, outcomes, &mut answers);
                }
                Run::Nacks(ids, options) => {
                    let only = ids_of(&ids);
                    let backend = &self.state.backend;
                    let nacks = backend
                        .nack_batch(&self.topic, &self.group, &only, &options)
                        .await
                        .map_err(|error| Some(failed(&error.into())))?;
                    self.answer_nacks(&ids, &options, nacks, &mut answers);
                }
                Run::Touch(seq, id) => answers.push(self.touch(seq, id).await?),
                Run::Bad(seq, id, error) => {
                    answers.push(refused(seq, id, error.code, error.message));
                }
            }
        }
        let refill = match nacks.is_empty() && acks.is_empty() {
            true => None,
            false => Some(self.settle_tail(&nacks, &acks, &mut answers).await?),
        };
        for id in answers.iter().filter_map(released_by) {
            self.sent.remove(&id);
        }
        answers.sort_by_key(seq_of);
        Ok((answers, refill))
    }

    /// The round's tail and the refilling poll, as one call on the store.
    async fn settle_tail(
        &self,
        nacks: &[NackRun],
        acks: &[(u64, DeliveryId)],
        answers: &mut Vec<ServerFrame>,
    ) -> Result<Vec<MessageDelivery>, Option<Ending>> {
        let nack_ids: Vec<Vec<DeliveryId>> = nacks.iter().map(|(run, _)| ids_of(run)).collect();
        let nack_runs: Vec<(&[DeliveryId], NackOptions)> = nack_ids
            .iter()
            .zip(nacks)
            .map(|(ids, (_, options))| (ids.as_slice(), options.clone()))
            .collect();
        let ack_ids = ids_of(acks);
        let round = Settlements {
            nacks: &nack_runs,
            acks: &ack_ids,
        };
        let consumer = Some(self.consumer.as_str());
        let (nacked, (acked, polled)) = self
            .state
            .backend
            .settle_then_poll_batch(
                &self.topic,
                &self.group,
                round,
                consumer,
                self.window as usize,
                PollScope::New,
            )
            .await
            .map_err(|error| Some(failed(&error.into())))?;
        for ((ids, options), outcomes) in nacks.iter().zip(nacked) {
            self.answer_nacks(ids, options, outcomes, answers);
        }
        self.answer_acks(acks, acked, answers);
        Ok(polled)
    }

    /// Counts and answers the acks of `ids`.
    fn answer_acks(
        &self,
        ids: &[(u64, DeliveryId)],
        outcomes: Vec<Result<(), NotOwned>>,
        answers: &mut Vec<ServerFrame>,
    ) {
        let acked = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
        let labels = Metrics::group(&self.topic, &self.group);
        self.state.metrics.acks.get_or_create(&labels).inc_by(acked);
        for ((seq, id), outcome) in ids.iter().zip(outcomes) {
            answers.push(match outcome {
                Ok(()) => settled(*seq, *id, SettledOutcome::Acked),
                Err(error) => not_owned(*seq, *id, &error),
            });
        }
    }

    /// Counts and answers the nacks of `ids`, made with `options`.
    fn answer_nacks(
        &self,
        ids: &[(u64, DeliveryId)],
        options: &NackOptions,
        nacks: Vec<Result<Nack, NotOwned>>,
        answers: &mut Vec<ServerFrame>,
    ) {
        let released = options.kind == NackKind::Release;
        let outcomes: Vec<Result<NackOutcome, NotOwned>> = nacks
            .into_iter()
            .map(|nack| nack.map(|nack| nack_outcome(nack, released)))
            .collect();
        let labels = Metrics::group(&self.topic, &self.group);
        count_nacks(&self.state.metrics, &labels, &outcomes);
        for ((seq, id), outcome) in ids.iter().zip(outcomes) {
            answers.push(match outcome {
                Ok(NackOutcome::Retry) => settled(*seq, *id, SettledOutcome::Retry),
                Ok(NackOutcome::Released) => settled(*seq, *id, SettledOutcome::Released),
                Ok(NackOutcome::DeadLettered) => settled(*seq, *id, SettledOutcome::DeadLettered),
                Err(error) => not_owned(*seq, *id, &error),
            });
        }
    }

    async fn touch(&self, seq: u64, id: DeliveryId) -> Result<ServerFrame, Option<Ending>> {
        match self.state.backend.touch(&self.topic, &self.group, id).await {
            Ok(()) => Ok(settled(seq, id, SettledOutcome::Touched)),
            Err(error) => {
                let error = ApiError::from(error);
                if error.code == ErrorCode::NotOwned {
                    Ok(refused(seq, Some(id), error.code, error.message))
                } else {
                    Err(Some(failed(&error)))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use mailroom_api::deliveries::NackKind as WireNackKind;
    use proptest::prelude::*;

    use super::*;

    /// A settlement of `offset` (attempt 1): 0 ack, 1 nack, 2 reject, 3 touch.
    fn settlement(op: u8, offset: u64) -> Settlement {
        let nack = |kind| Settlement::Nack {
            offset,
            attempt: 1,
            kind,
            delay_ms: None,
            reason: None,
        };
        match op {
            0 => Settlement::Ack { offset, attempt: 1 },
            1 => nack(WireNackKind::Nack),
            2 => nack(WireNackKind::Reject),
            _ => Settlement::Touch { offset, attempt: 1 },
        }
    }

    /// Each run's settlements as (seq, offset, what), what being 0 ack, 1 nack, 2 reject,
    /// 3 touch, 4 a bad frame.
    fn flat(runs: &[Run]) -> Vec<Vec<(u64, u64, u8)>> {
        runs.iter()
            .map(|run| match run {
                Run::Acks(ids) => ids.iter().map(|(seq, id)| (*seq, id.offset, 0)).collect(),
                Run::Nacks(ids, options) => {
                    let what = if options.kind == NackKind::Reject {
                        2
                    } else {
                        1
                    };
                    ids.iter()
                        .map(|(seq, id)| (*seq, id.offset, what))
                        .collect()
                }
                Run::Touch(seq, id) => vec![(*seq, id.offset, 3)],
                Run::Bad(seq, ..) => vec![(*seq, u64::MAX, 4)],
            })
            .collect()
    }

    proptest! {
        // Proves the runs of a round: with distinct offsets, every ack is in the one last
        // run, the other runs keep the client's order and nothing is lost or added; with
        // an offset settled twice, the runs are exactly the in-order ones.
        #[test]
        fn acks_go_last_only_when_no_offset_is_settled_twice(
            frames in proptest::collection::vec((0u8..5, 0u64..12), 0..24),
        ) {
            let incoming = || {
                frames.iter().enumerate().map(|(seq, &(op, offset))| match op {
                    4 => Incoming::parse(seq as u64, "{\"op\":\"dance\"}"),
                    _ => Incoming::Settle(seq as u64, settlement(op, offset)),
                })
                .collect::<Vec<_>>()
            };
            let in_order = flat(&runs_in_order(incoming()));
            let made = flat(&runs(incoming()));
            // The tail taken off for the poll: the rest, then the tail's nacks, then its
            // acks, is the round as made, and nothing before the tail is a run of nacks.
            let mut rest = runs(incoming());
            let (nacks, acks) = tail(&mut rest);
            prop_assert!(!matches!(rest.last(), Some(Run::Nacks(..))));
            let mut joined = rest;
            joined.extend(nacks.into_iter().map(|(ids, options)| Run::Nacks(ids, options)));
            if !acks.is_empty() {
                joined.push(Run::Acks(acks));
            }
            prop_assert_eq!(flat(&joined), made.clone());
            let settled: Vec<u64> = frames.iter().filter(|f| f.0 != 4).map(|f| f.1).collect();
            let distinct = settled.iter().collect::<HashSet<_>>().len() == settled.len();
            if !distinct {
                prop_assert_eq!(made, in_order);
                return Ok(());
            }
            let mut all: Vec<(u64, u64, u8)> = made.concat();
            all.sort_unstable();
            let mut expected = in_order.concat();
            expected.sort_unstable();
            prop_assert_eq!(all, expected);
            let ack_runs: Vec<usize> = made.iter().enumerate()
                .filter(|(_, run)| run.iter().any(|s| s.2 == 0))
                .map(|(index, _)| index)
                .collect();
            prop_assert!(ack_runs.len() <= 1);
            if let Some(&index) = ack_runs.first() {
                prop_assert_eq!(index, made.len() - 1);
                prop_assert!(made[index].iter().all(|s| s.2 == 0));
                prop_assert!(made[index].windows(2).all(|w| w[0].0 < w[1].0));
            }
            let others = |runs: &[Vec<(u64, u64, u8)>]| -> Vec<(u64, u64, u8)> {
                runs.iter().flatten().filter(|s| s.2 != 0).copied().collect()
            };
            prop_assert_eq!(others(&made), others(&in_order));
        }
    }
}
