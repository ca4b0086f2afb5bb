//! Batch consumption: poll up to `max` deliveries in one request, optionally waiting for
//! them (a long poll), and ack or nack a list of deliveries in one request.
//!
//! Each request is one backend call
//! ([`Backend::poll_batch`](crate::backend::Backend::poll_batch), `ack_batch`,
//! `nack_batch`): one log write and one durability point for the whole batch. The rules are the single
//! forms' rules applied in order; an ack or nack that does not name a delivery in flight
//! fails alone, as an item of the answer, and the others still take effect.
//!
//! A `poll/batch` may carry an `ack` list: those deliveries are acked first, in the same
//! backend call as the poll
//! ([`Backend::ack_then_poll_batch`](crate::backend::Backend::ack_then_poll_batch): one
//! write, one sync), so a consumer working in rounds pays one request and one sync per
//! round. Under a long poll
//! the acks are done once, with the first poll; re-polls only poll.
//!
//! The checks of the bodies are in [`super::batch_arguments`]; the waiting of a long poll
//! (`wait_ms` > 0) in [`super::waiting`].

use axum::extract::State;
use axum::Json;
use mailroom::group::{DeliveryId, NackKind, NackOptions, NotOwned};
use mailroom::topic::Nack;
use mailroom_store::PollScope;

use super::batch_arguments::{
    ack_ids, delivery_ids, poll_limits, AckBatchRequest, AckItemBody, AckOutcome, AckResults,
    ItemErrorBody, NackBatchRequest, NackItemBody, NackResults, PollBatchRequest, PolledBatch,
};
use super::waiting::{long_poll, poll_once};
use super::{delivery_bodies, NackOutcome};
use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::metrics::{GroupLabels, Metrics, NackLabels};
use crate::paths::GroupPath;
use crate::routes::arguments::check_nack_options;
use crate::state::AppState;

/// Polls a group for up to `max` deliveries, waiting up to `wait_ms` for at least one;
/// first acks the deliveries listed in `ack`, if any, in the same transaction.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/poll/batch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = PollBatchRequest,
    responses(
        (status = 200, description = "The deliveries (possibly none)", body = PolledBatch),
        (status = 400, description = "Invalid name, max, wait_ms, consumer, ack list or \
            JSON", body = ErrorBody),
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
) -> Result<Json<PolledBatch>, ApiError> {
    let (max, wait) = poll_limits(&request)?;
    let acks = request.ack.as_deref().map(ack_ids).transpose()?;
    let consumer = request.consumer.as_deref();
    let labels = Metrics::group(&topic, &group);
    let mut acked = None;
    let mut deliveries = Vec::new();
    if let Some(ids) = &acks {
        let (outcomes, polled) = state
            .backend
            .ack_then_poll_batch(&topic, &group, ids, consumer, max, PollScope::All)
            .await?;
        acked = Some(ack_items(&state, &labels, ids, outcomes));
        deliveries = polled;
    }
    // Without acks, or when the acking poll found nothing and may wait: a plain poll, or
    // a long poll that re-polls (never re-acks) until something comes or the wait ends.
    if acks.is_none() || (deliveries.is_empty() && !wait.is_zero()) {
        deliveries = if wait.is_zero() {
            poll_once(&state, &topic, &group, consumer, max).await?
        } else {
            long_poll(&state, &topic, &group, consumer, max, wait).await?
        };
    }
    let count = deliveries.len() as u64;
    state
        .metrics
        .deliveries
        .get_or_create(&labels)
        .inc_by(count);
    let deliveries = delivery_bodies(deliveries);
    Ok(Json(PolledBatch { deliveries, acked }))
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
    let options = NackOptions {
        kind: NackKind::from(request.kind),
        delay_ms: request.delay_ms,
        reason: request.reason,
    };
    check_nack_options(&options)?;
    let released = options.kind == NackKind::Release;
    let labels = Metrics::group(&topic, &group);
    let nacks = state
        .backend
        .nack_batch(&topic, &group, &ids, &options)
        .await?;
    let outcomes: Vec<Result<NackOutcome, NotOwned>> = nacks
        .into_iter()
        .map(|nack| nack.map(|nack| nack_outcome(nack, released)))
        .collect();
    count_nacks(&state.metrics, &labels, &outcomes);
    let results = ids
        .into_iter()
        .zip(outcomes)
        .map(|(id, outcome)| NackItemBody {
            offset: id.offset,
            attempt: id.attempt,
            outcome: outcome.ok(),
            error: outcome.err().map(ItemErrorBody::from),
        })
        .collect();
    Ok(Json(NackResults { results }))
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
