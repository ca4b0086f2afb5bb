//! Batch consumption: poll up to `max` deliveries in one request, optionally waiting for
//! them (a long poll), and ack or nack a list of deliveries in one request.
//!
//! Each request is one store call (`DurableTopic::poll_batch_deferred`,
//! `ack_batch_deferred`, `nack_batch_deferred`, awaited through [`AppState::durable`]):
//! one log write and one durability point for the whole batch. The rules are the single
//! forms' rules applied in order; an ack or nack that does not name a delivery in flight
//! fails alone, as an item of the answer, and the others still take effect.
//!
//! A `poll/batch` may carry an `ack` list: those deliveries are acked first, in the same
//! store call as the poll (`ack_then_poll_batch_deferred`: one write, one sync), so a
//! consumer working in rounds pays one request and one sync per round. Under a long poll
//! the acks are done once, with the first poll; re-polls only poll.
//!
//! A long poll (`wait_ms` > 0) that finds nothing waits for the topic's wake-up
//! ([`crate::long_poll`]) and re-polls, answering as soon as it has a delivery, and
//! `{"deliveries": []}` when the wait ends.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;
use bytes::Bytes;
use mailroom::group::{DeliveryId, NackKind, NackOptions, NotOwned, CONSUMER_BYTES_MAX};
use mailroom::topic::{Delivery, Nack, BATCH_DELIVERIES_MAX};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::ToSchema;

use crate::body::{JsonBody, JSON_BODY_BYTES_MAX};
use crate::error::{ApiError, ErrorBody};
use crate::long_poll::{LONG_POLL_RECHECK_MS, LONG_POLL_WAIT_MS_MAX};
use crate::metrics::{GroupLabels, Metrics, NackLabels};
use crate::routes::group_control::NackKindBody;
use crate::routes::groups::{check_names, delivery_body, DeliveryBody, DeliveryRef, NackOutcome};
use crate::state::AppState;

/// The most bytes one `{"offset": .., "attempt": ..},` takes in a batch body, with room
/// for a little whitespace: the largest offset and attempt are 20 and 10 digits.
pub const DELIVERY_REF_JSON_BYTES_MAX: usize = 64;
/// The largest body of `ack/batch` and `nack/batch`: a full list of deliveries, plus the
/// small-document limit for the rest (a nack's reason, say). About 4 MiB.
pub const BATCH_JSON_BODY_BYTES_MAX: usize =
    BATCH_DELIVERIES_MAX * DELIVERY_REF_JSON_BYTES_MAX + JSON_BODY_BYTES_MAX;

/// The body of `POST .../poll/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PollBatchRequest {
    /// The consumer's identity (1 to 128 bytes); absent is the anonymous consumer. Its
    /// own deliveries in flight come first, then new ones.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    pub consumer: Option<String>,
    /// The most deliveries to return, 1 to 65,536 (the group's `max_in_flight` bounds
    /// how many can be in flight at once).
    #[serde(deserialize_with = "crate::body::whole::deserialize")]
    #[schema(minimum = 1, maximum = 65_536)]
    pub max: u32,
    /// How long to wait, in milliseconds (0 to 30,000; default 0), for at least one
    /// delivery when none is available at once.
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    #[schema(minimum = 0, maximum = 30_000)]
    pub wait_ms: Option<u64>,
    /// Up to 65,536 deliveries to ack, in this order, before polling, in the same
    /// transaction (so the slots they free are refilled by this poll). Each succeeds or
    /// fails alone, as in `ack/batch`; the answer's `acked` holds one result each.
    #[serde(default)]
    #[schema(max_items = 65_536)]
    pub ack: Option<Vec<DeliveryRef>>,
}

impl PollBatchRequest {
    /// The checked `max` and wait.
    fn limits(&self) -> Result<(usize, Duration), ApiError> {
        let max = usize::try_from(self.max).unwrap_or(usize::MAX);
        if max == 0 || max > BATCH_DELIVERIES_MAX {
            return Err(ApiError::invalid_argument(format!(
                "max must be in 1..={BATCH_DELIVERIES_MAX}, got {max}"
            )));
        }
        let wait_ms = self.wait_ms.unwrap_or(0);
        if wait_ms > LONG_POLL_WAIT_MS_MAX {
            return Err(ApiError::invalid_argument(format!(
                "wait_ms must be in 0..={LONG_POLL_WAIT_MS_MAX}, got {wait_ms}"
            )));
        }
        if let Some(consumer) = &self.consumer {
            if consumer.is_empty() || consumer.len() > CONSUMER_BYTES_MAX {
                return Err(ApiError::invalid_argument(format!(
                    "a consumer is 1 to {CONSUMER_BYTES_MAX} bytes, got {}",
                    consumer.len()
                )));
            }
        }
        Ok((max, Duration::from_millis(wait_ms)))
    }
}

/// The answer to `POST .../poll/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolledBatch {
    /// The deliveries: the consumer's own in flight first, then new ones, each by
    /// ascending offset. Empty when nothing was available (within `wait_ms`).
    pub deliveries: Vec<DeliveryBody>,
    /// When the request had `ack`: one result per delivery to ack, in request order, as
    /// `ack/batch` answers them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked: Option<Vec<AckItemBody>>,
}

/// The body of `POST .../ack/batch`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// 1 to 65,536 deliveries, acked in this order.
    #[schema(min_items = 1, max_items = 65_536)]
    pub deliveries: Vec<DeliveryRef>,
}

/// The body of `POST .../nack/batch`: deliveries, and the single nack's options applied
/// to each.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackBatchRequest {
    /// 1 to 65,536 deliveries, nacked in this order.
    #[schema(min_items = 1, max_items = 65_536)]
    pub deliveries: Vec<DeliveryRef>,
    /// `nack` (default), `release` or `reject`.
    #[serde(default)]
    pub kind: NackKindBody,
    /// Not redelivered before this many milliseconds (overrides the group's backoff);
    /// at most 7 days.
    #[serde(default, deserialize_with = "crate::body::whole::deserialize_option")]
    pub delay_ms: Option<u64>,
    /// Why (at most 1024 bytes); kept with each dead letter this makes.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Why one item of a batch failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ItemErrorBody {
    /// A stable code, as the single form's error would have: `not_owned`.
    pub code: String,
    /// A human-readable explanation.
    pub message: String,
}

impl From<NotOwned> for ItemErrorBody {
    fn from(error: NotOwned) -> ItemErrorBody {
        ItemErrorBody {
            code: "not_owned".to_owned(),
            message: error.to_string(),
        }
    }
}

/// What an ack of a batch did.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckOutcome {
    /// The delivery was acknowledged.
    Acked,
}

/// One delivery of an `ack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AckItemBody {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// `acked`, when it worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AckOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemErrorBody>,
}

/// One delivery of a `nack/batch`: exactly one of `outcome` and `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NackItemBody {
    /// The message's offset, as requested.
    pub offset: u64,
    /// The attempt, as requested.
    pub attempt: u32,
    /// What the nack did, when it worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<NackOutcome>,
    /// Why it failed (it was not in flight when its turn came).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ItemErrorBody>,
}

/// The answer to `POST .../ack/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AckResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<AckItemBody>,
}

/// The answer to `POST .../nack/batch`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NackResults {
    /// One result per requested delivery, in request order.
    pub results: Vec<NackItemBody>,
}

/// The largest offset a batch may name: the OpenAPI document types offsets as `int64`,
/// and no log gets near this many messages, so a larger one is refused as bad input
/// rather than reported as an item that is not in flight.
pub const BATCH_OFFSET_MAX: u64 = i64::MAX as u64;
/// The largest attempt a batch may name, for the same reason (`int32`); attempts never
/// get near it (`max_attempts` is at most 1,000,000).
pub const BATCH_ATTEMPT_MAX: u32 = i32::MAX as u32;

/// The store's ids of a batch's deliveries, checking the list's length and each id's
/// range.
fn delivery_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    if deliveries.is_empty() {
        return Err(ApiError::invalid_argument(format!(
            "a batch names 1..={BATCH_DELIVERIES_MAX} deliveries, got 0"
        )));
    }
    ack_ids(deliveries)
}

/// As [`delivery_ids`], but an empty list is allowed (a poll's optional `ack`).
fn ack_ids(deliveries: &[DeliveryRef]) -> Result<Vec<DeliveryId>, ApiError> {
    if deliveries.len() > BATCH_DELIVERIES_MAX {
        return Err(ApiError::invalid_argument(format!(
            "a batch names 1..={BATCH_DELIVERIES_MAX} deliveries, got {}",
            deliveries.len()
        )));
    }
    let out_of_range = deliveries.iter().enumerate().find(|(_, delivery)| {
        delivery.offset > BATCH_OFFSET_MAX || delivery.attempt > BATCH_ATTEMPT_MAX
    });
    if let Some((index, delivery)) = out_of_range {
        return Err(ApiError::invalid_argument(format!(
            "delivery {index}: offset {} attempt {} is out of range (offset at most \
             {BATCH_OFFSET_MAX}, attempt at most {BATCH_ATTEMPT_MAX})",
            delivery.offset, delivery.attempt
        )));
    }
    Ok(deliveries.iter().map(|delivery| delivery.id()).collect())
}

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
    Path((topic, group)): Path<(String, String)>,
    JsonBody(request): JsonBody<PollBatchRequest>,
) -> Result<Json<PolledBatch>, ApiError> {
    check_names(&topic, &group)?;
    let (max, wait) = request.limits()?;
    let acks = request.ack.as_deref().map(ack_ids).transpose()?;
    let consumer = request.consumer.as_deref();
    let labels = Metrics::group(&topic, &group);
    let mut acked = None;
    let mut deliveries = Vec::new();
    if let Some(ids) = &acks {
        let (outcomes, polled) = state
            .durable(|store| {
                store
                    .topic(&topic)?
                    .ack_then_poll_batch_deferred(&group, ids, consumer, max)
            })
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
    let deliveries = deliveries.into_iter().map(delivery_body).collect();
    Ok(Json(PolledBatch { deliveries, acked }))
}

async fn poll_once(
    state: &AppState,
    topic: &str,
    group: &str,
    consumer: Option<&str>,
    max: usize,
) -> Result<Vec<Delivery<Bytes>>, ApiError> {
    state
        .durable(|store| {
            store
                .topic(topic)?
                .poll_batch_deferred(group, consumer, max)
        })
        .await
}

/// Counts and wakes for `outcomes` of acking `ids`, and turns them into answer items.
fn ack_items(
    state: &AppState,
    labels: &GroupLabels,
    ids: &[DeliveryId],
    outcomes: Vec<Result<(), NotOwned>>,
) -> Vec<AckItemBody> {
    let acked = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
    if acked > 0 {
        state.long_polls.wake(&labels.topic);
    }
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

/// Re-polls whenever the topic is woken (or every [`LONG_POLL_RECHECK_MS`]) until a poll
/// finds something, `wait` has passed or the server shuts down. Interest is registered
/// before each poll, so a wake that lands during the poll makes the wait after it
/// return at once.
async fn long_poll(
    state: &AppState,
    topic: &str,
    group: &str,
    consumer: Option<&str>,
    max: usize,
    wait: Duration,
) -> Result<Vec<Delivery<Bytes>>, ApiError> {
    let deadline = Instant::now() + wait;
    let waiter = state.long_polls.waiter(topic);
    // Taken at the first empty poll, held until this returns or is dropped.
    let mut waiting = None;
    let closed = state.long_polls.closed();
    tokio::pin!(closed);
    closed.as_mut().enable();
    loop {
        let woken = waiter.notify().notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let deliveries = poll_once(state, topic, group, consumer, max).await?;
        let now = Instant::now();
        if !deliveries.is_empty() || now >= deadline || state.long_polls.is_closing() {
            return Ok(deliveries);
        }
        if waiting.is_none() {
            waiting = Some(state.long_polls.admit()?);
        }
        let recheck = deadline.min(now + Duration::from_millis(LONG_POLL_RECHECK_MS));
        tokio::select! {
            () = &mut woken => {}
            () = &mut closed => {}
            () = tokio::time::sleep_until(recheck) => {}
        }
    }
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
    Path((topic, group)): Path<(String, String)>,
    JsonBody(request): JsonBody<AckBatchRequest>,
) -> Result<Json<AckResults>, ApiError> {
    check_names(&topic, &group)?;
    let ids = delivery_ids(&request.deliveries)?;
    let labels = Metrics::group(&topic, &group);
    let outcomes = state
        .durable(|store| store.topic(&topic)?.ack_batch_deferred(&group, &ids))
        .await?;
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
    Path((topic, group)): Path<(String, String)>,
    JsonBody(request): JsonBody<NackBatchRequest>,
) -> Result<Json<NackResults>, ApiError> {
    check_names(&topic, &group)?;
    let ids = delivery_ids(&request.deliveries)?;
    let options = NackOptions {
        kind: NackKind::from(request.kind),
        delay_ms: request.delay_ms,
        reason: request.reason,
    };
    let released = options.kind == NackKind::Release;
    let labels = Metrics::group(&topic, &group);
    let nacks = state
        .durable(|store| {
            store
                .topic(&topic)?
                .nack_batch_deferred(&group, &ids, &options)
        })
        .await?;
    let outcomes: Vec<Result<NackOutcome, NotOwned>> = nacks
        .into_iter()
        .map(|nack| nack.map(|nack| nack_outcome(nack, released)))
        .collect();
    count_nacks(&state.metrics, &labels, &outcomes);
    if outcomes.iter().any(Result::is_ok) {
        state.long_polls.wake(&labels.topic);
    }
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

fn nack_outcome(nack: Nack, released: bool) -> NackOutcome {
    match nack {
        Nack::Retry if released => NackOutcome::Released,
        Nack::Retry => NackOutcome::Retry,
        Nack::DeadLettered => NackOutcome::DeadLettered,
    }
}

/// Counts each successful nack by outcome (and each dead letter), as the single nack does.
fn count_nacks(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_request(json: &str) -> PollBatchRequest {
        crate::body::parse(json.as_bytes()).expect("valid shape")
    }

    // Proves max, wait_ms and consumer are checked against their documented ranges, and
    // an absent wait is no wait.
    #[test]
    fn poll_limits_are_checked() {
        let (max, wait) = poll_request(r#"{"max":3}"#).limits().unwrap();
        assert_eq!((max, wait), (3, Duration::ZERO));
        let (max, wait) = poll_request(r#"{"max":65536,"wait_ms":30000,"consumer":"w"}"#)
            .limits()
            .unwrap();
        assert_eq!((max, wait), (65_536, Duration::from_millis(30_000)));
        for bad in [
            r#"{"max":0}"#,
            r#"{"max":65537}"#,
            r#"{"max":1,"wait_ms":30001}"#,
            r#"{"max":1,"consumer":""}"#,
        ] {
            let error = poll_request(bad).limits().unwrap_err();
            assert_eq!(error.code, "invalid_argument", "{bad}");
        }
        let long = format!(r#"{{"max":1,"consumer":"{}"}}"#, "c".repeat(129));
        assert!(poll_request(&long).limits().is_err());
    }

    // Proves a batch list must name 1 to BATCH_DELIVERIES_MAX deliveries, each within
    // the documented int64 offset and int32 attempt.
    #[test]
    fn delivery_list_length_is_checked() {
        let one = DeliveryRef {
            offset: 4,
            attempt: 2,
        };
        assert_eq!(
            delivery_ids(&[one]).unwrap(),
            vec![DeliveryId {
                offset: 4,
                attempt: 2
            }]
        );
        assert!(delivery_ids(&[]).is_err());
        assert!(delivery_ids(&vec![one; BATCH_DELIVERIES_MAX + 1]).is_err());
        let edge = DeliveryRef {
            offset: BATCH_OFFSET_MAX,
            attempt: BATCH_ATTEMPT_MAX,
        };
        assert!(delivery_ids(&[edge]).is_ok());
        for (offset, attempt) in [(BATCH_OFFSET_MAX + 1, 1), (0, BATCH_ATTEMPT_MAX + 1)] {
            assert!(delivery_ids(&[one, DeliveryRef { offset, attempt }]).is_err());
        }
    }

    /// A server state and router over a fresh store with topic `t` and group `g`
    /// (max_attempts 3); keep the directory alive for the test's length.
    fn app_with_group() -> (tempfile::TempDir, AppState, axum::Router) {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::Config {
            fsync: crate::config::FsyncPolicy::Never,
            ..crate::Config::default()
        };
        let store =
            mailroom_store::Store::open(dir.path(), crate::server::store_options(&config)).unwrap();
        store.create_topic("t").unwrap();
        store.topic("t").unwrap().create_group("g", 3).unwrap();
        let state = AppState::new(store, config);
        let app = crate::app::router(state.clone());
        (dir, state, app)
    }

    // Proves a waiting long poll is answered by the publish's wake-up, not by the
    // periodic re-check: on a paused clock, the answer arrives with no time passed (a
    // lost wake would leave the runtime idle until the clock jumps to the re-check).
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn long_poll_is_woken_by_publish_not_by_recheck() {
        use axum::body::Body;
        use axum::http::Request;
        use http_body_util::BodyExt as _;
        use tower::ServiceExt as _;

        let (_dir, state, app) = app_with_group();
        let started = Instant::now();
        let poll = Request::post("/v1/topics/t/groups/g/poll/batch")
            .body(Body::from(r#"{"max":4,"wait_ms":30000}"#))
            .unwrap();
        let waiter = tokio::spawn(app.clone().oneshot(poll));
        while state.long_polls.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        let publish = Request::post("/v1/topics/t/messages")
            .body(Body::from("hello"))
            .unwrap();
        assert_eq!(app.oneshot(publish).await.unwrap().status(), 201);
        let response = waiter.await.unwrap().unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["deliveries"][0]["payload"], "hello");
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(state.long_polls.waiting(), 0);
    }

    // Proves shutdown ends a waiting long poll at once with an empty answer (on a
    // paused clock: no time passes), and a long poll started after it does not wait.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn shutdown_ends_long_polls() {
        use axum::body::Body;
        use axum::http::Request;
        use http_body_util::BodyExt as _;
        use tower::ServiceExt as _;

        let (_dir, state, app) = app_with_group();
        let poll = || {
            Request::post("/v1/topics/t/groups/g/poll/batch")
                .body(Body::from(r#"{"max":4,"wait_ms":30000}"#))
                .unwrap()
        };
        let started = Instant::now();
        let waiter = tokio::spawn(app.clone().oneshot(poll()));
        while state.long_polls.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        state.long_polls.close();
        let late = app.oneshot(poll()).await.unwrap();
        for response in [waiter.await.unwrap().unwrap(), late] {
            assert_eq!(response.status(), 200);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], br#"{"deliveries":[]}"#);
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    // Proves the body limit fits the largest list a client may send, compactly encoded.
    #[test]
    fn body_limit_fits_a_full_list() {
        let largest = DeliveryRef {
            offset: u64::MAX,
            attempt: u32::MAX,
        };
        let item = serde_json::to_string(&largest).unwrap();
        assert!(item.len() < DELIVERY_REF_JSON_BYTES_MAX);
        let body = serde_json::json!({ "deliveries": vec![largest; BATCH_DELIVERIES_MAX] });
        assert!(serde_json::to_vec(&body).unwrap().len() < BATCH_JSON_BODY_BYTES_MAX);
    }
}
