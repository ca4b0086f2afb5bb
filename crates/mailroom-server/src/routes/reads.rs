//! Reading a topic's log without a group: `GET /v1/topics/{topic}/messages` (the
//! `POST` on that path is the raw publish). The rules of a page are
//! `mailroom_api::reads`'s; the backend cuts it ([`Backend::read_log`]).
//!
//! A read at the end of the log with `wait_ms` waits for the topic's next publish, on
//! the long polls' wake-ups ([`crate::long_poll`]), with the same slot bound and the
//! same re-check as a group's long poll, and answers an empty page when the wait ends.
//!
//! [`Backend::read_log`]: crate::backend::Backend::read_log

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use mailroom_api::limits::{OFFSET_MAX, PAGE_BYTES_MAX, READ_PAGE_DEFAULT, READ_PAGE_MAX};
pub use mailroom_api::reads::{ReadMessage, ReadPage, ReadQuery};
use tokio::time::Instant;

use crate::backend::LogPage;
use crate::body::QueryParams;
use crate::error::{ApiError, ErrorBody};
use crate::long_poll::{LONG_POLL_RECHECK_MS, LONG_POLL_WAIT_MS_MAX};
use crate::paths::TopicPath;
use crate::routes::deliveries::encode_payload;
use crate::routes::metadata;
use crate::state::AppState;

/// The group name a reader's waiter is filed under: not a valid group name, so it never
/// shares arms with a group's long polls (a reader never arms; it waits on publishes).
const READER: &str = "";

/// Where a read starts, as its query asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// At this offset (below the retained start: at the start).
    Offset(u64),
    /// At the first message published at or after this time.
    Time(u64),
}

/// A read's checked arguments: where it starts, how many, how long it may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadArguments {
    start: Start,
    limit: usize,
    wait: Duration,
}

/// Checks each parameter against its documented range, naming it when refused.
fn arguments(query: &ReadQuery) -> Result<ReadArguments, ApiError> {
    let start = match (query.from, query.from_time_ms) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_argument(
                "give at most one of from and from_time_ms",
            ))
        }
        (Some(from), None) if from > OFFSET_MAX => {
            return Err(ApiError::out_of_range("from", 0..=OFFSET_MAX, from))
        }
        (None, Some(time)) if time > OFFSET_MAX => {
            return Err(ApiError::out_of_range("from_time_ms", 0..=OFFSET_MAX, time))
        }
        (None, Some(time)) => Start::Time(time),
        (from, None) => Start::Offset(from.unwrap_or(0)),
    };
    let limit = query.limit.unwrap_or(READ_PAGE_DEFAULT);
    if limit == 0 || limit > READ_PAGE_MAX {
        let allowed = 1..=READ_PAGE_MAX as u64;
        return Err(ApiError::out_of_range("limit", allowed, limit as u64));
    }
    let wait_ms = query.wait_ms.unwrap_or(0);
    if wait_ms > LONG_POLL_WAIT_MS_MAX {
        let allowed = 0..=LONG_POLL_WAIT_MS_MAX;
        return Err(ApiError::out_of_range("wait_ms", allowed, wait_ms));
    }
    let wait = Duration::from_millis(wait_ms);
    Ok(ReadArguments { start, limit, wait })
}

/// Reads one page of the topic's log without a group: no group's state changes.
#[utoipa::path(get, path = "/v1/topics/{topic}/messages", tag = "topics",
    description = "Reads the log without a group, from `from` (default: the oldest retained \
        message) or from the first message published at or after `from_time_ms`. Below the \
        retained start the page starts at the oldest retained message and `first` says so. \
        At most `limit` messages and 16 MiB of payloads (but always one message); page on \
        with `next`. With `wait_ms`, a read at the end of the log waits for a publish.",
    params(("topic" = crate::names::Name, Path, description = "Topic name"), ReadQuery),
    responses(
        (status = 200, description = "A page of the log (empty at its end)", body = ReadPage),
        (status = 400, description = "Invalid name, from (past the end), from_time_ms, limit or wait_ms, or both from and from_time_ms", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic", body = ErrorBody),
        (status = 429, description = "Too many long polls waiting", body = ErrorBody),
        (status = 503, description = "The topic is failed (topic_failed)", body = ErrorBody),
    ))]
pub async fn read_messages(
    State(state): State<AppState>,
    TopicPath { topic }: TopicPath,
    QueryParams(query): QueryParams<ReadQuery>,
) -> Result<Json<ReadPage>, ApiError> {
    let ReadArguments { start, limit, wait } = arguments(&query)?;
    let from = match start {
        Start::Offset(from) => from,
        Start::Time(time_ms) => state.backend.offset_at_time(&topic, time_ms).await?,
    };
    let page = if wait.is_zero() {
        read_once(&state, &topic, from, limit).await?
    } else {
        read_waiting(&state, &topic, from, limit, wait).await?
    };
    Ok(Json(page_body(page)))
}

/// One page, at once.
async fn read_once(
    state: &AppState,
    topic: &str,
    from: u64,
    limit: usize,
) -> Result<LogPage, ApiError> {
    Ok(state
        .backend
        .read_log(topic, from, limit, PAGE_BYTES_MAX)
        .await?)
}

/// Reads again whenever the topic is woken (a publish), at least every
/// [`LONG_POLL_RECHECK_MS`], until the page holds a message, `wait` has passed or the
/// server shuts down. Interest is registered before each read, so a publish that lands
/// during the read makes the wait after it return at once.
async fn read_waiting(
    state: &AppState,
    topic: &str,
    from: u64,
    limit: usize,
    wait: Duration,
) -> Result<LogPage, ApiError> {
    let deadline = Instant::now() + wait;
    let waiter = state.long_polls.waiter(topic, READER);
    // Taken at the first empty read, held until this returns or is dropped.
    let mut waiting = None;
    let closed = state.long_polls.closed();
    tokio::pin!(closed);
    closed.as_mut().enable();
    loop {
        let woken = waiter.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let page = read_once(state, topic, from, limit).await?;
        let now = Instant::now();
        if !page.messages.is_empty() || now >= deadline || state.long_polls.is_closing() {
            return Ok(page);
        }
        if waiting.is_none() {
            waiting = Some(state.long_polls.admit()?);
        }
        let recheck = now + Duration::from_millis(LONG_POLL_RECHECK_MS);
        tokio::select! {
            () = &mut woken => {}
            () = &mut closed => {}
            () = tokio::time::sleep_until(deadline.min(recheck)) => {}
        }
        state.long_polls.note_repoll();
    }
}

/// The JSON form of a page: each message's payload as text or base64, as deliveries.
fn page_body(page: LogPage) -> ReadPage {
    let (first, end, next) = (page.first, page.end, page.next());
    let messages = page
        .messages
        .into_iter()
        .map(|(offset, message)| {
            let (payload, (key, headers, published_at_ms)) = metadata::fields(message);
            let (payload, payload_base64) = encode_payload(payload);
            ReadMessage {
                offset,
                payload,
                payload_base64,
                key,
                headers,
                // Every message the log still holds has its publish time.
                published_at_ms: published_at_ms.unwrap_or(0),
            }
        })
        .collect();
    ReadPage {
        messages,
        first,
        next,
        end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query of `pairs` (`"name=value&..."`), numbers only, as the route parses it.
    fn query(pairs: &str) -> ReadQuery {
        let fields: Vec<String> = pairs
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap();
                format!("\"{name}\": {value}")
            })
            .collect();
        serde_json::from_str(&format!("{{{}}}", fields.join(","))).unwrap()
    }

    // Proves each parameter is checked against its documented range and a refusal names
    // it; from and from_time_ms exclude each other; the defaults apply when left out.
    #[test]
    fn arguments_are_checked_by_name() {
        let defaults = arguments(&query("")).unwrap();
        assert_eq!(defaults.start, Start::Offset(0));
        assert_eq!(
            (defaults.limit, defaults.wait),
            (READ_PAGE_DEFAULT, Duration::ZERO)
        );
        let timed = arguments(&query("from_time_ms=5&limit=10000&wait_ms=30000")).unwrap();
        assert_eq!(timed.start, Start::Time(5));
        for (bad, field) in [
            ("from=1&from_time_ms=2", "from_time_ms"),
            ("from=9223372036854775808", "from"),
            ("from_time_ms=9223372036854775808", "from_time_ms"),
            ("limit=0", "limit"),
            ("limit=10001", "limit"),
            ("wait_ms=30001", "wait_ms"),
        ] {
            let error = arguments(&query(bad)).unwrap_err();
            assert_eq!(error.status.as_u16(), 400, "{bad}");
            assert!(error.message.contains(field), "{bad}: {}", error.message);
        }
    }
}
