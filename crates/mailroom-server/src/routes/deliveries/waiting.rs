//! The waiting half of `poll/batch`: one poll, or a long poll that re-polls on each
//! wake-up and at each due time until something comes, the wait ends or the server
//! shuts down.
//!
//! A long poll (`wait_ms` > 0) that finds nothing waits for the topic's wake-up, or until
//! the next time its group's answer changes by the clock (a delay ending, a lease running
//! out; see [`crate::long_poll`]), and re-polls, answering as soon as it has a delivery,
//! and `{"deliveries": []}` when the wait ends.

use std::time::Duration;

use mailroom_store::{MessageDelivery, PollScope};
use tokio::time::Instant;

use crate::error::ApiError;
use crate::long_poll::{TopicWaiter, LONG_POLL_RECHECK_MS};
use crate::state::AppState;

/// Polls once, without waiting (the backend tells the long polls of the leases it made).
pub(crate) async fn poll_once(
    state: &AppState,
    topic: &str,
    group: &str,
    consumer: Option<&str>,
    max: usize,
) -> Result<Vec<MessageDelivery>, ApiError> {
    Ok(state
        .backend
        .poll_batch(topic, group, consumer, max, PollScope::All)
        .await?)
}

/// Re-polls whenever the topic is woken, or the group's next due time comes (at least
/// every [`LONG_POLL_RECHECK_MS`]), until a poll finds something, `wait` has passed or the
/// server shuts down. Interest is registered before each poll, so a wake that lands
/// during the poll makes the wait after it return at once.
pub(crate) async fn long_poll(
    state: &AppState,
    topic: &str,
    group: &str,
    consumer: Option<&str>,
    max: usize,
    wait: Duration,
) -> Result<Vec<MessageDelivery>, ApiError> {
    let deadline = Instant::now() + wait;
    let waiter = state.long_polls.waiter(topic, group);
    // Taken at the first empty poll, held until this returns or is dropped.
    let mut waiting = None;
    let mut lease = None;
    let closed = state.long_polls.closed();
    tokio::pin!(closed);
    closed.as_mut().enable();
    loop {
        let woken = waiter.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let deliveries = poll_once(state, topic, group, consumer, max).await?;
        let now = Instant::now();
        if !deliveries.is_empty() || now >= deadline || state.long_polls.is_closing() {
            return Ok(deliveries);
        }
        if waiting.is_none() {
            waiting = Some(state.long_polls.admit()?);
            lease = group_lease(state, topic, group).await?;
        }
        let wake_at = arm(state, &waiter, topic, group, deadline, lease).await?;
        tokio::select! {
            () = &mut woken => {}
            () = &mut closed => {}
            () = tokio::time::sleep_until(wake_at) => {}
        }
        state.long_polls.note_repoll();
    }
}

/// The lease length of `group`; read once per long poll, since a group's settings never
/// change (a group re-created with others is what [`LONG_POLL_RECHECK_MS`] covers).
async fn group_lease(
    state: &AppState,
    topic: &str,
    group: &str,
) -> Result<Option<Duration>, ApiError> {
    let config = state.backend.group_config(topic, group).await?;
    Ok(config.lease_ms.map(Duration::from_millis))
}

/// Reads when `group`'s next clock event is due and arms `waiter` to wake then (or at
/// `deadline`, or after [`LONG_POLL_RECHECK_MS`], if sooner); returns that time.
///
/// Armed at `deadline` while the due time is read, so that a lease made by another
/// consumer's poll meanwhile (which this read may or may not see) wakes this waiter.
async fn arm(
    state: &AppState,
    waiter: &TopicWaiter<'_>,
    topic: &str,
    group: &str,
    deadline: Instant,
    lease: Option<Duration>,
) -> Result<Instant, ApiError> {
    waiter.arm(deadline, lease);
    let due_in = state.backend.next_due_in(topic, group).await?;
    let now = Instant::now();
    let mut wake_at = deadline.min(now + Duration::from_millis(LONG_POLL_RECHECK_MS));
    if let Some(due_in) = due_in {
        wake_at = wake_at.min(now + due_in);
    }
    waiter.arm(wake_at, lease);
    Ok(wake_at)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
