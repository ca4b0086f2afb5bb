//! A group's dead letters: listed by page in offset order, redriven (put back for
//! delivery with a fresh failure budget) or purged, all or an offset range of them.

use std::ops::Range;

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
pub use mailroom_api::dead_letters::{
    DeadLetterBody, DeadLetterQuery as DeadLetterPage, DeadLetters, DeadLettersTaken, OffsetRange,
};
pub use mailroom_api::limits::{DEAD_LETTERS_PAGE_DEFAULT, DEAD_LETTERS_PAGE_MAX};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::{parse, QueryParams};
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::deliveries::encode_payload;
use crate::routes::metadata;
use crate::routes::BodyLimits;
use crate::state::AppState;

// The page bound the wire states is the store's own.
const _: () = assert!(DEAD_LETTERS_PAGE_MAX == mailroom_store::DEAD_LETTERS_PAGE_MAX);

/// The checked page size.
fn page_limit(page: &DeadLetterPage) -> Result<usize, ApiError> {
    let limit = page.limit.unwrap_or(DEAD_LETTERS_PAGE_DEFAULT);
    if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
        return Err(ApiError::out_of_range(
            "limit",
            1..=DEAD_LETTERS_PAGE_MAX as u64,
            limit as u64,
        ));
    }
    Ok(limit)
}

/// Lists one page of the group's dead letters, by offset, with their payloads.
#[utoipa::path(get, path = "/v1/topics/{topic}/groups/{group}/dead-letters", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name"),
           DeadLetterPage),
    responses(
        (status = 200, description = "A page of dead letters", body = DeadLetters),
        (status = 400, description = "Invalid name, from or limit", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
    ))]
pub async fn dead_letters(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    QueryParams(page): QueryParams<DeadLetterPage>,
) -> Result<Json<DeadLetters>, ApiError> {
    let limit = page_limit(&page)?;
    let from = page.from.unwrap_or(0);
    let page = state
        .backend
        .dead_letter_page(&topic, &group, from, limit)
        .await?;
    let dead_letters = page
        .letters
        .into_iter()
        .map(|letter| {
            let (payload, (key, headers, published_at_ms)) = metadata::fields(letter.message);
            let (payload, payload_base64) = encode_payload(payload);
            DeadLetterBody {
                offset: letter.offset,
                attempts: letter.attempts,
                reason: letter.reason,
                at_ms: letter.at_ms,
                payload,
                payload_base64,
                key,
                headers,
                published_at_ms,
            }
        })
        .collect();
    let next = page.next;
    Ok(Json(DeadLetters { dead_letters, next }))
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

/// The dead-letter routes: list a page, redrive, purge.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(dead_letters))
        .routes(routes!(redrive).layer(limits.json))
        .routes(routes!(purge).layer(limits.json))
}

#[cfg(test)]
mod tests {
    use super::*;

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
