//! A group's dead letters, listed by page in offset order. (Redrive and purge are in
//! [`crate::routes::group_control`].)

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::body::QueryParams;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::deliveries::encode_payload;
use crate::state::AppState;

/// One dead letter. Exactly one of `payload` and `payload_base64`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetterBody {
    /// The message's offset.
    pub offset: u64,
    /// Deliveries made before it was dead-lettered.
    pub attempts: u32,
    /// The reason given with the final failure (`"lease expired"` for a lease), or null.
    pub reason: Option<String>,
    /// When it was dead-lettered, in Unix milliseconds.
    pub at_ms: u64,
    /// The message, when it is valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The message in standard base64, when it is not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

/// The most dead letters one page may hold (the store's own limit).
pub const DEAD_LETTERS_PAGE_MAX: usize = mailroom_store::DEAD_LETTERS_PAGE_MAX;
/// The page size when `limit` is not given.
pub const DEAD_LETTERS_PAGE_DEFAULT: usize = 1_000;

/// Which page of dead letters `GET .../dead-letters` answers.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeadLetterPage {
    /// The first offset to include (default 0): the `next` of the previous page.
    #[param(minimum = 0)]
    pub from: Option<u64>,
    /// The most dead letters to return, 1 to 10,000 (default 1,000).
    #[param(minimum = 1, maximum = 10_000)]
    pub limit: Option<usize>,
}

impl DeadLetterPage {
    /// The checked page size.
    fn limit(&self) -> Result<usize, ApiError> {
        let limit = self.limit.unwrap_or(DEAD_LETTERS_PAGE_DEFAULT);
        if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
            return Err(ApiError::out_of_range(
                "limit",
                1..=DEAD_LETTERS_PAGE_MAX as u64,
                limit as u64,
            ));
        }
        Ok(limit)
    }
}

/// The answer to `GET .../dead-letters`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetters {
    /// One page of the group's dead letters, by ascending offset.
    pub dead_letters: Vec<DeadLetterBody>,
    /// The `from` of the next page, or null when this page is the last.
    pub next: Option<u64>,
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
    let limit = page.limit()?;
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
