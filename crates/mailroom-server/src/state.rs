//! What every handler shares: the backend, the live channels, the long-poll wake-ups,
//! the running publish streams, the metrics and the settings.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use mailroom_store::Store;
use tokio::sync::watch;

use crate::backend::{Backend, Embedded};
use crate::browser::tickets::Tickets;
use crate::channels::Channels;
use crate::config::{Config, FsyncPolicy};
use crate::long_poll::LongPolls;
use crate::metrics::Metrics;

/// The state behind the router: one shared [`AppShared`], whose fields it derefs to.
///
/// Every request clones and drops it several times (each middleware's state, each
/// handler's extractor), so it is one `Arc` (one atomic increment and decrement a clone)
/// rather than the eight of the fields it holds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use mailroom_server::{server::store_options, state::AppState, Config};
///
/// let dir = tempfile::tempdir().unwrap();
/// let config = Config::default();
/// let store = mailroom_store::Store::open(dir.path(), store_options(&config)).unwrap();
/// let state = AppState::new(store, config);
/// let twin = state.clone();
/// assert!(std::sync::Arc::ptr_eq(&state.metrics, &twin.metrics));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AppState(Arc<AppShared>);

impl std::ops::Deref for AppState {
    type Target = AppShared;

    fn deref(&self) -> &AppShared {
        &self.0
    }
}

/// What every handler shares, behind [`AppState`].
#[derive(Clone, Debug)]
pub struct AppShared {
    /// Where topics and groups are kept: the routes' only way to them.
    pub backend: Arc<dyn Backend>,
    /// The live channels.
    pub channels: Arc<Channels>,
    /// The exported metrics.
    pub metrics: Arc<Metrics>,
    /// The resolved settings.
    pub config: Arc<Config>,
    /// Wake-ups and the waiting count of long polls: the backend's
    /// ([`Backend::long_polls`]), which it wakes.
    pub long_polls: Arc<LongPolls>,
    /// The running publish streams, told to finish on shutdown.
    pub publish_streams: Arc<PublishStreams>,
    /// The outstanding stream tickets ([`crate::browser::tickets`]).
    pub tickets: Arc<Tickets>,
    /// Connections being served now: counted by the listener
    /// ([`CappedListener::counting`](crate::listener::CappedListener::counting)), read
    /// by `/metrics`.
    pub open_connections: Arc<AtomicUsize>,
}

impl AppState {
    /// State over an open store: the [`Embedded`] backend, whose calls without a
    /// deferred form run on the blocking pool only under `--fsync always`.
    /// Its disk use is reported for `config.data_dir`, and its fsync waits timed.
    pub fn new(store: Store, config: Config) -> AppState {
        let blocking_pool = config.fsync == FsyncPolicy::Always;
        let metrics = Arc::new(Metrics::new());
        let backend = Embedded::new(store, blocking_pool, Arc::new(LongPolls::default()))
            .with_data_dir(config.data_dir.clone())
            .with_sync_histogram(metrics.store_sync_seconds.clone());
        AppState::with_backend_and_metrics(Arc::new(backend), config, metrics)
    }

    /// State over any backend.
    pub fn with_backend(backend: Arc<dyn Backend>, config: Config) -> AppState {
        AppState::with_backend_and_metrics(backend, config, Arc::new(Metrics::new()))
    }

    fn with_backend_and_metrics(
        backend: Arc<dyn Backend>,
        config: Config,
        metrics: Arc<Metrics>,
    ) -> AppState {
        AppState(Arc::new(AppShared {
            long_polls: Arc::clone(backend.long_polls()),
            channels: backend
                .channels()
                .unwrap_or_else(|| Arc::new(Channels::default())),
            backend,
            metrics,
            config: Arc::new(config),
            publish_streams: Arc::new(PublishStreams::default()),
            tickets: Arc::new(Tickets::default()),
            open_connections: Arc::new(AtomicUsize::new(0)),
        }))
    }

    /// This state with `tickets` as its outstanding stream tickets (a test's own clock
    /// or limits); a clone made before keeps the old ones.
    #[must_use]
    pub fn with_tickets(mut self, tickets: Tickets) -> AppState {
        Arc::make_mut(&mut self.0).tickets = Arc::new(tickets);
        self
    }
}

/// The running publish streams (`routes::publish_stream`), so that shutdown can tell
/// them to finish and wait until they have: an upgraded WebSocket is no longer an HTTP
/// connection, so the connection loop's graceful shutdown does not wait for it.
///
/// Each stream holds a [`PublishStreamTicket`] while it runs; [`stop`](Self::stop) tells
/// every holder, present and future, to finish, and [`finished`](Self::finished)
/// completes once no ticket is left.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use mailroom_server::state::PublishStreams;
///
/// let streams = PublishStreams::default();
/// let mut ticket = streams.ticket();
/// let stream = tokio::spawn(async move {
///     ticket.stopping().await;
///     // ... send the confirmations owed and a close frame, then drop the ticket.
/// });
/// streams.stop();
/// streams.finished().await;
/// assert_eq!(streams.running(), 0);
/// stream.await.unwrap();
/// # }
/// ```
#[derive(Debug)]
pub struct PublishStreams {
    /// `true` once the server stops; every ticket holds a receiver, so the receiver
    /// count is the number of running streams.
    stop: watch::Sender<bool>,
}

impl Default for PublishStreams {
    fn default() -> PublishStreams {
        PublishStreams {
            stop: watch::Sender::new(false),
        }
    }
}

impl PublishStreams {
    /// A ticket for a stream about to run; it counts as running until the ticket drops.
    pub fn ticket(&self) -> PublishStreamTicket {
        PublishStreamTicket {
            stop: self.stop.subscribe(),
        }
    }

    /// Tells every stream, running or yet to start, to finish.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Completes once no stream is running (at once if none is).
    pub async fn finished(&self) {
        self.stop.closed().await;
    }

    /// How many streams are running.
    pub fn running(&self) -> usize {
        self.stop.receiver_count()
    }
}

/// A running publish stream's place in [`PublishStreams`]: held for as long as the
/// stream runs.
#[derive(Debug)]
pub struct PublishStreamTicket {
    stop: watch::Receiver<bool>,
}

impl PublishStreamTicket {
    /// Completes once the server stops (at once if it already has).
    pub async fn stopping(&mut self) {
        // The sender lives in the state the stream also holds, so it is not dropped
        // first; were it, no stop could come any more.
        if self.stop.wait_for(|stopped| *stopped).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::Router;
    use futures_util::FutureExt as _;
    use http_body_util::BodyExt as _;
    use mailroom::group::DeliveryId;
    use mailroom_store::storage::{SimStorage, SyncGate, Watched};
    use serde_json::{json, Value};
    use tower::ServiceExt as _;

    use super::*;
    use crate::metrics::{Metrics, TopicLabels};

    /// The router over a store under `--fsync always` whose syncs wait at `gate`, with
    /// topic `t` and group `g` (three attempts, one delivery in flight at a time), and
    /// the store behind it.
    fn strict_app(gate: &Arc<SyncGate>) -> (AppState, Router, Store) {
        let config = Config {
            fsync: FsyncPolicy::Always,
            ..Config::default()
        };
        let storage = Watched::new(Arc::new(SimStorage::new()), Arc::clone(gate));
        let options = crate::server::store_options(&config);
        let store = Store::open_with(Arc::new(storage), Path::new("/data"), options).unwrap();
        store.create_topic("t").unwrap();
        store.topic("t").unwrap().create_group("g", 3).unwrap();
        let state = AppState::new(store.clone(), config);
        (state.clone(), crate::app::router(state), store)
    }

    fn post(uri: &str, body: &'static str) -> Request<Body> {
        Request::post(uri).body(Body::from(body)).unwrap()
    }

    /// Polls a request's handler once with every sync held back, checks that it is
    /// waiting (for durability), and drops it, as axum does when the client goes away.
    fn drop_mid_await(app: &Router, gate: &SyncGate, request: Request<Body>) {
        let uri = request.uri().clone();
        let _held = gate.hold();
        let mut handler = Box::pin(app.clone().oneshot(request));
        assert!(
            handler.as_mut().now_or_never().is_none(),
            "{uri}: the handler should be waiting for fdatasync"
        );
    }

    async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    // Proves the publish-stream tracker: `finished` waits for every ticket, running and
    // stopped alike, and `stopping` completes for tickets taken before and after `stop`.
    #[tokio::test]
    async fn publish_streams_are_stopped_and_awaited() {
        let streams = PublishStreams::default();
        assert!(streams.finished().now_or_never().is_some(), "none running");
        let mut before = streams.ticket();
        let second = streams.ticket();
        assert_eq!(streams.running(), 2);
        assert!(
            before.stopping().now_or_never().is_none(),
            "not stopped yet"
        );
        streams.stop();
        before.stopping().await;
        let mut after = streams.ticket();
        after.stopping().await;
        drop((before, after));
        assert!(
            streams.finished().now_or_never().is_none(),
            "one still runs"
        );
        drop(second);
        streams.finished().await;
        assert_eq!(streams.running(), 0);
    }

    // Proves that a handler dropped while it awaits durability (the client went away) did
    // its store call but confirmed it to nobody (no metric counted, no long-poll slot
    // kept), and that later calls work and see its effect: the next publish gets the next
    // offset, the dropped poll's delivery is still the consumer's, the dropped ack settled.
    #[tokio::test]
    async fn handlers_dropped_mid_await_leave_the_server_working() {
        let gate = Arc::new(SyncGate::default());
        let (state, app, store) = strict_app(&gate);
        let topic = store.topic("t").unwrap();
        let group = Metrics::group("t", "g");
        let counted = |family: &prometheus_client::metrics::family::Family<_, _>| {
            prometheus_client::metrics::counter::Counter::<u64>::get(&family.get_or_create(&group))
        };
        let first = |offset| DeliveryId { offset, attempt: 1 };

        drop_mid_await(&app, &gate, post("/v1/topics/t/messages", "first"));
        let (status, body) = send(&app, post("/v1/topics/t/messages", "second")).await;
        assert_eq!((status, body), (StatusCode::CREATED, json!({"offset": 1})));
        let publishes = TopicLabels { topic: "t".into() };
        assert_eq!(state.metrics.publishes.get_or_create(&publishes).get(), 1);

        drop_mid_await(&app, &gate, post("/v1/topics/t/groups/g/poll", ""));
        assert_eq!(topic.in_flight("g").unwrap(), vec![first(0)]);
        assert_eq!(counted(&state.metrics.deliveries), 0);
        let (status, body) = send(&app, post("/v1/topics/t/groups/g/poll", "")).await;
        // Every delivery carries its publish time (the store clock's, so not fixed here).
        let published_at_ms = body["published_at_ms"].as_u64().expect("a publish time");
        let again = json!({"offset": 0, "attempt": 1, "payload": "first",
                           "published_at_ms": published_at_ms});
        assert_eq!((status, body), (StatusCode::OK, again));

        let ack = r#"{"offset":0,"attempt":1}"#;
        drop_mid_await(&app, &gate, post("/v1/topics/t/groups/g/ack", ack));
        assert!(topic.in_flight("g").unwrap().is_empty());
        assert_eq!(counted(&state.metrics.acks), 0);
        let (status, body) = send(&app, post("/v1/topics/t/groups/g/ack", ack)).await;
        assert_eq!(
            (status, &body["error"]),
            (StatusCode::CONFLICT, &json!("not_owned"))
        );

        // A long poll dropped while its poll awaits durability was never admitted.
        let long_poll = r#"{"max":4,"wait_ms":30000}"#;
        drop_mid_await(
            &app,
            &gate,
            post("/v1/topics/t/groups/g/poll/batch", long_poll),
        );
        assert_eq!(topic.in_flight("g").unwrap(), vec![first(1)]);
        assert_eq!(state.long_polls.waiting(), 0);
        // One dropped while it waits (the window is full) gives its slot back.
        let waiter = tokio::spawn(app.clone().oneshot(post(
            "/v1/topics/t/groups/g/poll/batch",
            r#"{"max":4,"wait_ms":30000,"consumer":"w2"}"#,
        )));
        while state.long_polls.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        assert_eq!(state.long_polls.waiting(), 0);
        assert_eq!(counted(&state.metrics.deliveries), 1);

        let (status, body) = send(
            &app,
            post("/v1/topics/t/groups/g/poll/batch", r#"{"max":4}"#),
        )
        .await;
        assert_eq!(
            (status, &body["deliveries"][0]["payload"]),
            (StatusCode::OK, &json!("second"))
        );
        let acks = r#"{"deliveries":[{"offset":1,"attempt":1}]}"#;
        let (status, body) = send(&app, post("/v1/topics/t/groups/g/ack/batch", acks)).await;
        assert_eq!(
            (status, &body["results"][0]["outcome"]),
            (StatusCode::OK, &json!("acked"))
        );
        assert_eq!(
            (
                counted(&state.metrics.deliveries),
                counted(&state.metrics.acks)
            ),
            (2, 1)
        );
        assert!(topic.in_flight("g").unwrap().is_empty());
    }
}
