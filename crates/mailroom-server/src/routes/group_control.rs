//! Consumer groups beyond the seed (`docs/semantics.md`): group settings (lease, backoff,
//! `max_in_flight`), the detailed group view, nack kinds with delay and reason, lease
//! extension (`touch`), consumer identities on poll, and dead-letter redrive and purge.
//!
//! All of it is the store's API over HTTP; the rules live in `mailroom::group`.

use std::ops::Range;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use mailroom::group::{Backoff, DeliveryId, GroupConfig};
pub use mailroom_api::dead_letters::{DeadLettersTaken, OffsetRange};
pub use mailroom_api::deliveries::{NackKind as NackKindBody, NackRequest, PollRequest, Touched};
pub use mailroom_api::groups::{
    Backoff as BackoffBody, DeadLetterNote as DeadLetterNoteBody, GroupCounters as CountersBody,
    GroupDetail as GroupDetailBody,
};

use crate::backend::GroupDetail;
use crate::body::parse;
use crate::error::{shown, ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::arguments::check_consumer;
use crate::routes::deliveries::DeliveryRef;
use crate::routes::groups::group_info_body;
use crate::state::AppState;

/// The optional settings of a new group, beyond `max_attempts`; `None` when none is set,
/// so such a group is created exactly as in the seed.
pub fn group_config(
    max_attempts: u32,
    lease_ms: Option<u64>,
    backoff: Option<BackoffBody>,
    max_in_flight: Option<u32>,
) -> Option<GroupConfig> {
    if lease_ms.is_none() && backoff.is_none() && max_in_flight.is_none() {
        return None;
    }
    let mut config = GroupConfig::new(max_attempts);
    config.lease_ms = lease_ms;
    config.backoff = backoff.map(Backoff::from);
    if let Some(window) = max_in_flight {
        config.max_in_flight = window;
    }
    Some(config)
}

/// Reads everything [`GroupDetailBody`] shows.
pub async fn group_detail(
    state: &AppState,
    topic: String,
    group: String,
) -> Result<GroupDetailBody, ApiError> {
    let detail = state.backend.group_detail(&topic, &group).await?;
    let GroupDetail {
        info,
        config,
        counters,
        in_flight,
        dead_letters,
    } = detail;
    Ok(GroupDetailBody {
        info: group_info_body(info),
        lease_ms: config.lease_ms,
        backoff: config.backoff.map(BackoffBody::from),
        max_in_flight: config.max_in_flight,
        counters: counters.into(),
        deliveries: in_flight.into_iter().map(delivery_ref).collect(),
        dead_letter_notes: dead_letters.iter().map(DeadLetterNoteBody::from).collect(),
    })
}

fn delivery_ref(id: DeliveryId) -> DeliveryRef {
    DeliveryRef {
        offset: id.offset,
        attempt: id.attempt,
    }
}

/// The consumer of a poll, from `?consumer=` or a `{"consumer": ...}` body (an empty
/// body is none), checked as `poll/batch` checks its own.
///
/// # Errors
/// 400 for a malformed body, a consumer given both ways that differs, or one of the
/// wrong length ([`check_consumer`]).
pub fn poll_consumer(query: PollRequest, body: &Bytes) -> Result<Option<String>, ApiError> {
    let from_body = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        parse::<PollRequest>(body)?.consumer
    };
    let consumer = match (query.consumer, from_body) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::invalid_argument(format!(
                "consumer must be given once or the same both ways, got {:?} in the query \
                 and {:?} in the body",
                shown(&a),
                shown(&b)
            )))
        }
        (a, b) => a.or(b),
    };
    check_consumer(consumer.as_deref())?;
    Ok(consumer)
}

/// Extends the lease of the exact delivery in flight to `now + lease_ms`.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/touch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = DeliveryRef,
    responses(
        (status = 200, description = "The lease runs from now again", body = Touched),
        (status = 400, description = "Invalid name or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 409, description = "Not a delivery in flight, or its lease ran out (not_owned)",
            body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn touch(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    crate::body::JsonBody(delivery): crate::body::JsonBody<DeliveryRef>,
) -> Result<Json<Touched>, ApiError> {
    state.backend.touch(&topic, &group, delivery.id()).await?;
    Ok(Json(Touched {
        outcome: "touched".to_owned(),
    }))
}

/// The largest offset a range may name. JSON clients commonly hold integers as signed 64-bit
/// (and the OpenAPI `int64` format says so), while no log gets anywhere near this many
/// messages, so anything above it is refused rather than half-supported.
const RANGE_OFFSET_MAX: u64 = mailroom_api::limits::OFFSET_MAX;

/// The range of a redrive or purge body (an empty body is every offset), checked.
fn offset_range(body: &Bytes) -> Result<Range<u64>, ApiError> {
    let range = if body.iter().all(u8::is_ascii_whitespace) {
        OffsetRange::default()
    } else {
        parse::<OffsetRange>(body)?
    };
    for (field, offset) in [("from", range.from), ("to", range.to)] {
        if let Some(offset) = offset.filter(|&offset| offset > RANGE_OFFSET_MAX) {
            return Err(ApiError::out_of_range(field, 0..=RANGE_OFFSET_MAX, offset));
        }
    }
    let from = range.from.unwrap_or(0);
    let to = range.to.unwrap_or(u64::MAX);
    if from > to {
        return Err(ApiError::invalid_argument(format!(
            "from must not be above to, got {from} and {to}"
        )));
    }
    Ok(from..to)
}

/// Puts this group's dead letters (all, or those with offsets in `[from, to)`) back for
/// delivery with a fresh failure budget; other groups are untouched.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/dead-letters/redrive",
    tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body(content = OffsetRange, description = "Optional; absent is every dead letter"),
    responses(
        (status = 200, description = "How many were redriven", body = DeadLettersTaken),
        (status = 400, description = "Invalid name, range or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn redrive(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    body: Bytes,
) -> Result<Json<DeadLettersTaken>, ApiError> {
    take_dead_letters(state, topic, group, &body, Take::Redrive).await
}

/// Deletes this group's dead letters (all, or those with offsets in `[from, to)`).
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/dead-letters/purge",
    tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body(content = OffsetRange, description = "Optional; absent is every dead letter"),
    responses(
        (status = 200, description = "How many were purged", body = DeadLettersTaken),
        (status = 400, description = "Invalid name, range or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn purge(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    body: Bytes,
) -> Result<Json<DeadLettersTaken>, ApiError> {
    take_dead_letters(state, topic, group, &body, Take::Purge).await
}

/// What a redrive or purge does with the dead letters it chose.
#[derive(Debug, Clone, Copy)]
enum Take {
    /// Puts them back for delivery.
    Redrive,
    /// Deletes them.
    Purge,
}

/// Redrive and purge differ only in what the backend does with the chosen dead letters.
async fn take_dead_letters(
    state: AppState,
    topic: String,
    group: String,
    body: &Bytes,
    take: Take,
) -> Result<Json<DeadLettersTaken>, ApiError> {
    let range = offset_range(body)?;
    let backend = &state.backend;
    let count = match take {
        Take::Redrive => backend.redrive(&topic, &group, range).await?,
        Take::Purge => backend.purge(&topic, &group, range).await?,
    };
    Ok(Json(DeadLettersTaken { count }))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the consumer comes from the query or the body, an empty body is none, and
    // two different answers are refused rather than one silently winning.
    #[test]
    fn poll_consumer_sources() {
        let none = PollRequest::default();
        assert_eq!(poll_consumer(none, &Bytes::new()).unwrap(), None);
        let body = Bytes::from_static(br#"{"consumer":"c1"}"#);
        let from_body = poll_consumer(PollRequest::default(), &body).unwrap();
        assert_eq!(from_body.as_deref(), Some("c1"));
        let query = PollRequest {
            consumer: Some("c2".into()),
        };
        assert!(poll_consumer(query, &body).is_err());
        let bad = Bytes::from_static(br#"{"who":"c1"}"#);
        assert!(poll_consumer(PollRequest::default(), &bad).is_err());
    }

    // Proves a group with no new setting maps to no config (the seed path) and one with
    // any setting keeps the others at their defaults.
    #[test]
    fn group_config_only_when_asked() {
        assert_eq!(group_config(3, None, None, None), None);
        let config = group_config(3, Some(500), None, Some(4)).unwrap();
        assert_eq!(config.lease_ms, Some(500));
        assert_eq!(config.backoff, None);
        assert_eq!(config.max_in_flight, 4);
    }

    // Proves the offset range defaults to everything and refuses an inverted range.
    #[test]
    fn offset_range_parses() {
        assert_eq!(offset_range(&Bytes::new()).unwrap(), 0..u64::MAX);
        let body = Bytes::from_static(br#"{"from":2,"to":5}"#);
        assert_eq!(offset_range(&body).unwrap(), 2..5);
        let inverted = Bytes::from_static(br#"{"from":5,"to":2}"#);
        assert!(offset_range(&inverted).is_err());
    }

    // Proves a range offset above the documented int64 maximum is refused, the maximum
    // itself accepted, and an absent `to` still means "no upper end".
    #[test]
    fn range_offsets_above_int64_are_refused() {
        let above = Bytes::from_static(br#"{"from":0,"to":9223372036854775808}"#);
        assert!(offset_range(&above).is_err());
        let at_max = Bytes::from_static(br#"{"from":9223372036854775807}"#);
        assert_eq!(offset_range(&at_max).unwrap(), RANGE_OFFSET_MAX..u64::MAX);
    }
}
