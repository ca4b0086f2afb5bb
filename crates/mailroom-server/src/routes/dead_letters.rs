//! A group's dead letters, listed by page in offset order. (Redrive and purge are in
//! [`crate::routes::group_control`].)

use axum::extract::State;
use axum::Json;
pub use mailroom_api::dead_letters::{
    DeadLetterBody, DeadLetterQuery as DeadLetterPage, DeadLetters,
};
pub use mailroom_api::limits::{DEAD_LETTERS_PAGE_DEFAULT, DEAD_LETTERS_PAGE_MAX};

use crate::body::QueryParams;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::deliveries::encode_payload;
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
            let (payload, payload_base64) = encode_payload(letter.message);
            DeadLetterBody {
                offset: letter.offset,
                attempts: letter.attempts,
                reason: letter.reason,
                at_ms: letter.at_ms,
                payload,
                payload_base64,
            }
        })
        .collect();
    let next = page.next;
    Ok(Json(DeadLetters { dead_letters, next }))
}
