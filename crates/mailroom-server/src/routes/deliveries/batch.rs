//! Batch consumption: poll up to `max` deliveries in one request, optionally waiting for
//! them (a long poll), and ack or nack a list of deliveries in one request.
//!
//! Each request is one backend call
//! ([`Backend::poll_batch`](crate::backend::Backend::poll_batch), `ack_batch`,
//! `nack_batch`): one log write and one durability point for the whole batch. The rules
//! are the single forms' rules applied in order; an ack or nack that does not name a delivery in flight
//! fails alone, as an item of the answer, and the others still take effect.
//!
//! A `poll/batch` may carry an `ack` list and a `nack` (deliveries and the options they
//! share): the nacks, then the acks, are settled first, in the same backend call as the
//! poll ([`Backend::settle_then_poll_batch`](crate::backend::Backend::settle_then_poll_batch)),
//! so a consumer working in rounds pays one request per round even when it failed some
//! of the last one, and the window slots they free are refilled by this poll. Under a
//! long poll the settlements are done once, with the first poll; re-polls only poll.
//!
//! The checks of the bodies are in [`super::batch_arguments`]; the waiting of a long poll
//! (`wait_ms` > 0) in [`super::waiting`].

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mailroom::group::{DeliveryId, NackKind, NackOptions, NotOwned};
use mailroom::topic::Nack;
use mailroom_store::{MessageDelivery, PollScope};

use super::batch_arguments::{
    ack_ids, checked_ids, delivery_ids, poll_limits, settled_count_within, AckBatchRequest,
    AckItemBody, AckOutcome, AckResults, ItemErrorBody, NackBatchRequest, NackItemBody,
    NackResults, PollBatchRequest, PolledBatch,
};
use super::waiting::{long_poll, poll_once};
use super::{delivery_bodies, NackOutcome};
use crate::backend::Settlements;
use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::metrics::{GroupLabels, Metrics, NackLabels};
use crate::paths::GroupPath;
use crate::routes::arguments::check_nack_options;
use crate::state::AppState;

/// Polls a group for up to `max` deliveries, waiting up to `wait_ms` for at least one;
/// first nacks the deliveries listed in `nack`, then acks those in `ack`, if any, in the
/// same transaction.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/poll/batch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = PollBatchRequest,
    responses(
        (status = 200, description = "The deliveries (possibly none)", body = PolledBatch),
        (status = 400, description = "Invalid name, max, wait_ms, consumer, ack or nack \
            list, nack options or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "Too many long polls waiting (too_many_long_polls)",
            body = ErrorBody),
    ))]
pub async fn poll_batch(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(request): JsonBody<PollBatchRequest>,
) -> Result<PolledJson, ApiError> {
    let (max, wait) = poll_limits(&request)?;
    let acks = request.ack.as_deref().map(ack_ids).transpose()?;
    let nacks = request.nack.map(poll_nacks).transpose()?;
    settled_count_within(acks.as_deref(), nacks.as_ref().map(|(ids, _)| &ids[..]))?;
    let settlements = PollSettlements { nacks, acks };
    let consumer = request.consumer.as_deref();
    let mut answer = PolledBatch {
        deliveries: Vec::new(),
        acked: None,
        nacked: None,
    };
    let mut deliveries = Vec::new();
    let settles = settlements.acks.is_some() || settlements.nacks.is_some();
    if settles {
        let settled = settle_then_poll(&state, &topic, &group, &settlements, consumer, max);
        (answer.nacked, answer.acked, deliveries) = settled.await?;
    }
    // Without settlements, or when the settling poll found nothing and may wait: a plain
    // poll, or a long poll that re-polls (never re-settles) until something comes or the
    // wait ends.
    if !settles || (deliveries.is_empty() && !wait.is_zero()) {
        deliveries = if wait.is_zero() {
            poll_once(&state, &topic, &group, consumer, max).await?
        } else {
            long_poll(&state, &topic, &group, consumer, max, wait).await?
        };
    }
    let count = deliveries.len() as u64;
    let labels = Metrics::group(&topic, &group);
    state
        .metrics
        .deliveries
        .get_or_create(&labels)
        .inc_by(count);
    answer.deliveries = delivery_bodies(deliveries);
    Ok(PolledJson(answer))
}

/// A `poll/batch` answer as the response's JSON body, written by
/// [`PolledBatch::to_json`] (payloads copied in runs, not byte by byte as serde_json
/// writes strings; the bytes are the same).
pub struct PolledJson(pub PolledBatch);

impl IntoResponse for PolledJson {
    fn into_response(self) -> Response {
        let json = [(header::CONTENT_TYPE, "application/json")];
        (json, self.0.to_json()).into_response()
    }
}

/// What a `poll/batch` settles before it polls: its nacks (with the options they share)
/// and its acks.
struct PollSettlements {
    nacks: Option<(Vec<DeliveryId>, NackOptions)>,
    acks: Option<Vec<DeliveryId>>,
}

/// The answer items of a poll's nacks and acks (each `Some` when the request had them),
/// and what the poll handed out.
type SettledPoll = (
    Option<Vec<NackItemBody>>,
    Option<Vec<AckItemBody>>,
    Vec<MessageDelivery>,
);

/// Nacks, then acks, then polls, in one backend call
/// ([`Backend::settle_then_poll_batch`](crate::backend::Backend::settle_then_poll_batch)).
async fn settle_then_poll(
    state: &AppState,
    topic: &str,
    group: &str,
    settlements: &PollSettlements,
    consumer: Option<&str>,
    max: usize,
) -> Result<SettledPoll, ApiError> {
    let runs: Vec<(&[DeliveryId], NackOptions)> = (settlements.nacks.iter())
        .map(|(ids, options)| (&ids[..], options.clone()))
        .collect();
    let round = Settlements {
        nacks: &runs,
        acks: settlements.acks.as_deref().unwrap_or_default(),
    };
    let (nacked, (acked, polled)) = state
        .backend
        .settle_then_poll_batch(topic, group, round, consumer, max, PollScope::All)
        .await?;
    let labels = Metrics::group(topic, group);
    let nacked = match (&settlements.nacks, nacked.into_iter().next()) {
        (None, _) => None,
        (Some((ids, options)), Some(outcomes)) => {
            let released = options.kind == NackKind::Release;
            Some(nack_items(state, &labels, ids, outcomes, released))
        }
        (Some(_), None) => return Err(ApiError::internal("the store answered no nacks")),
    };
    let acked = (settlements.acks.as_ref()).map(|ids| ack_items(state, &labels, ids, acked));
    Ok((nacked, acked, polled))
}

/// A poll's `nack`: its checked ids and options.
fn poll_nacks(request: NackBatchRequest) -> Result<(Vec<DeliveryId>, NackOptions), ApiError> {
    let ids = checked_ids("nack.deliveries", 1, &request.deliveries)?;
    Ok((ids, nack_options(request)?))
}

/// The checked options of a nack batch (its `deliveries` are checked apart).
fn nack_options(request: NackBatchRequest) -> Result<NackOptions, ApiError> {
    let options = NackOptions {
        kind: NackKind::from(request.kind),
        delay_ms: request.delay_ms,
        reason: request.reason,
    };
    check_nack_options(&options)?;
    Ok(options)
}

/// Counts `outcomes` of acking `ids`, and turns them into answer items.
fn ack_items(
    state: &AppState,
    labels: &GroupLabels,
    ids: &[DeliveryId],
    outcomes: Vec<Result<(), NotOwned>>,
) -> Vec<AckItemBody> {
    let acked = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
    state.metrics.acks.get_or_create(labels).inc_by(acked);
    ids.iter()
        .zip(outcomes)
        .map(|(id, outcome)| AckItemBody {
            offset: id.offset,
            attempt: id.attempt,
            outcome: outcome.is_ok().then_some(AckOutcome::Acked),
            error: outcome.err().map(ItemErrorBody::from),
        })
        .collect()
}

/// Acknowledges each listed delivery, in order; each item succeeds or fails alone.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/ack/batch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = AckBatchRequest,
    responses(
        (status = 200, description = "One result per delivery", body = AckResults),
        (status = 400, description = "Invalid name, list or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn ack_batch(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(request): JsonBody<AckBatchRequest>,
) -> Result<Json<AckResults>, ApiError> {
    let ids = delivery_ids(&request.deliveries)?;
    let labels = Metrics::group(&topic, &group);
    let outcomes = state.backend.ack_batch(&topic, &group, &ids).await?;
    let results = ack_items(&state, &labels, &ids, outcomes);
    Ok(Json(AckResults { results }))
}

/// Nacks, releases or rejects each listed delivery, in order, with the same options;
/// each item succeeds or fails alone.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/nack/batch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = NackBatchRequest,
    responses(
        (status = 200, description = "One result per delivery: retry, released or \
            dead_lettered, or an error", body = NackResults),
        (status = 400, description = "Invalid name, list, options or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn nack_batch(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(request): JsonBody<NackBatchRequest>,
) -> Result<Json<NackResults>, ApiError> {
    let ids = delivery_ids(&request.deliveries)?;
    let options = nack_options(request)?;
    let released = options.kind == NackKind::Release;
    let labels = Metrics::group(&topic, &group);
    let nacks = state
        .backend
        .nack_batch(&topic, &group, &ids, &options)
        .await?;
    let results = nack_items(&state, &labels, &ids, nacks, released);
    Ok(Json(NackResults { results }))
}

/// Counts `nacks` of `ids` by outcome, and turns them into answer items.
fn nack_items(
    state: &AppState,
    labels: &GroupLabels,
    ids: &[DeliveryId],
    nacks: Vec<Result<Nack, NotOwned>>,
    released: bool,
) -> Vec<NackItemBody> {
    let outcomes: Vec<Result<NackOutcome, NotOwned>> = nacks
        .into_iter()
        .map(|nack| nack.map(|nack| nack_outcome(nack, released)))
        .collect();
    count_nacks(&state.metrics, labels, &outcomes);
    ids.iter()
        .zip(outcomes)
        .map(|(id, outcome)| NackItemBody {
            offset: id.offset,
            attempt: id.attempt,
            outcome: outcome.ok(),
            error: outcome.err().map(ItemErrorBody::from),
        })
        .collect()
}

pub(crate) fn nack_outcome(nack: Nack, released: bool) -> NackOutcome {
    match nack {
        Nack::Retry if released => NackOutcome::Released,
        Nack::Retry => NackOutcome::Retry,
        Nack::DeadLettered => NackOutcome::DeadLettered,
    }
}

/// Counts each successful nack by outcome (and each dead letter), as the single nack does.
pub(crate) fn count_nacks(
    metrics: &Metrics,
    labels: &GroupLabels,
    outcomes: &[Result<NackOutcome, NotOwned>],
) {
    for (outcome, label) in [
        (NackOutcome::Retry, "retry"),
        (NackOutcome::Released, "released"),
        (NackOutcome::DeadLettered, "dead_lettered"),
    ] {
        let count = outcomes.iter().filter(|item| **item == Ok(outcome)).count() as u64;
        if count == 0 {
            continue;
        }
        let nack_labels = NackLabels {
            topic: labels.topic.clone(),
            group: labels.group.clone(),
            outcome: label.to_owned(),
        };
        metrics.nacks.get_or_create(&nack_labels).inc_by(count);
        if outcome == NackOutcome::DeadLettered {
            metrics.dead_letters.get_or_create(labels).inc_by(count);
        }
    }
}
