//! One round's settlements: split into runs that each go to the store as one batch
//! call, and answered in the order the client sent them.

use mailroom::group::{DeliveryId, NackKind, NackOptions, NotOwned};
use mailroom_api::consume_stream::SettledOutcome;
use mailroom_api::deliveries::NackOutcome;
use mailroom_api::publish_stream::StreamError;
use mailroom_api::ErrorCode;
use mailroom_store::{MessageDelivery, PollScope};

use super::consumer::{failed, Ending, StreamConsumer};
use super::{ServerFrame, Settlement};
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

/// A run of settlements that goes to the store as one call.
enum Run {
    Acks(Vec<(u64, DeliveryId)>),
    Nacks(Vec<(u64, DeliveryId)>, NackOptions),
    Touch(u64, DeliveryId),
    Bad(u64, Option<DeliveryId>, ApiError),
}

/// Splits `incoming` into runs, in order: consecutive acks together, consecutive nacks
/// with equal options together.
fn runs(incoming: Vec<Incoming>) -> Vec<Run> {
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
    /// Settles one round, answering each frame in order; the round's last run of acks
    /// goes with the poll that refills the window (with new deliveries only). What the
    /// answers settle is no longer the stream's.
    pub(super) async fn settle(
        &mut self,
        incoming: Vec<Incoming>,
    ) -> Result<(Vec<ServerFrame>, Refill), Option<Ending>> {
        let runs = runs(incoming);
        let last = runs.len().saturating_sub(1);
        let mut answers = Vec::new();
        let mut refill = None;
        for (index, run) in runs.into_iter().enumerate() {
            match run {
                Run::Acks(ids) => {
                    let polled = self.acks(&ids, index == last, &mut answers).await?;
                    refill = polled;
                }
                Run::Nacks(ids, options) => self.nacks(&ids, &options, &mut answers).await?,
                Run::Touch(seq, id) => answers.push(self.touch(seq, id).await?),
                Run::Bad(seq, id, error) => {
                    answers.push(refused(seq, id, error.code, error.message));
                }
            }
        }
        for id in answers.iter().filter_map(released_by) {
            self.sent.remove(&id);
        }
        Ok((answers, refill))
    }

    async fn acks(
        &self,
        ids: &[(u64, DeliveryId)],
        then_poll: bool,
        answers: &mut Vec<ServerFrame>,
    ) -> Result<Refill, Option<Ending>> {
        let only: Vec<DeliveryId> = ids.iter().map(|(_, id)| *id).collect();
        let backend = &self.state.backend;
        let (outcomes, polled) = if then_poll {
            let consumer = Some(self.consumer.as_str());
            let max = self.window as usize;
            let (outcomes, polled) = backend
                .ack_then_poll_batch(
                    &self.topic,
                    &self.group,
                    &only,
                    consumer,
                    max,
                    PollScope::New,
                )
                .await
                .map_err(|error| Some(failed(&error.into())))?;
            (outcomes, Some(polled))
        } else {
            let outcomes = backend
                .ack_batch(&self.topic, &self.group, &only)
                .await
                .map_err(|error| Some(failed(&error.into())))?;
            (outcomes, None)
        };
        let acked = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
        let labels = Metrics::group(&self.topic, &self.group);
        self.state.metrics.acks.get_or_create(&labels).inc_by(acked);
        for ((seq, id), outcome) in ids.iter().zip(outcomes) {
            answers.push(match outcome {
                Ok(()) => settled(*seq, *id, SettledOutcome::Acked),
                Err(error) => not_owned(*seq, *id, &error),
            });
        }
        Ok(polled)
    }

    async fn nacks(
        &self,
        ids: &[(u64, DeliveryId)],
        options: &NackOptions,
        answers: &mut Vec<ServerFrame>,
    ) -> Result<(), Option<Ending>> {
        let only: Vec<DeliveryId> = ids.iter().map(|(_, id)| *id).collect();
        let nacks = self
            .state
            .backend
            .nack_batch(&self.topic, &self.group, &only, options)
            .await
            .map_err(|error| Some(failed(&error.into())))?;
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
        Ok(())
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
