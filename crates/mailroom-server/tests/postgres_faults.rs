//! The PostgreSQL backend's faults and refusals: a lost database answers 503
//! `store_unavailable` and the broker reconnects by itself, forgetting what it cached
//! and waking its long polls; a schema newer than the binary is refused at start.

mod postgres_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::Method;
use bytes::Bytes;
use mailroom_server::backend::postgres::PgError;
use mailroom_server::backend::Postgres;
use mailroom_server::backend::{Backend, BackendError};
use mailroom_server::long_poll::LongPolls;
use parking_lot::Mutex;
use postgres_support::{broker, cluster_url, database, fresh_database, ok, send, until};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long a test waits for a condition in the database before it fails.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// A TCP proxy in front of the database that the test can cut (closing every connection
/// through it, or one, and refusing new ones) and restore.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    /// Each connection's task, by the port its outbound side connects to the database
    /// from (the `client_port` PostgreSQL sees).
    connections: Arc<Mutex<Vec<Piped>>>,
}

/// A connection through the proxy: its outbound port and its task.
type Piped = (u16, JoinHandle<()>);

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<Piped>>> = Arc::default();
        let (flag, held) = (cut.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if flag.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let Ok(mut outbound) = TcpStream::connect(&target).await else {
                    continue;
                };
                let from = outbound.local_addr().unwrap().port();
                held.lock().push((
                    from,
                    tokio::spawn(async move {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }),
                ));
            }
        });
        Proxy {
            port,
            cut,
            connections,
        }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for (_, connection) in self.connections.lock().drain(..) {
            connection.abort();
        }
    }

    /// Refuses new connections and closes the one that reaches the database from
    /// `client_port`, leaving the others open.
    fn cut_one(&self, client_port: u16) {
        self.cut.store(true, Ordering::SeqCst);
        self.connections.lock().retain(|(from, connection)| {
            if *from == client_port {
                connection.abort();
            }
            *from != client_port
        });
    }

    /// The ports this proxy's open connections reach the database from.
    fn client_ports(&self) -> Vec<i32> {
        self.connections
            .lock()
            .iter()
            .map(|(from, _)| i32::from(*from))
            .collect()
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// `url` with its host and port replaced by `127.0.0.1:port`; also answers the old
/// `host:port`.
fn through(url: &str, port: u16) -> (String, String) {
    let (scheme_user, rest) = url.split_once('@').expect("the URL names a user");
    let (address, path) = rest.split_once('/').expect("the URL names a database");
    (
        format!("{scheme_user}@127.0.0.1:{port}/{path}"),
        address.to_owned(),
    )
}

/// A fresh database and a broker over it through a [`Proxy`]: the database's URL (for
/// sessions of the test's own, which bypass the proxy), the proxy, and the broker's
/// backend and router. `None` where the tests may be skipped.
async fn behind_proxy() -> Option<(String, Proxy, Arc<Postgres>, axum::Router)> {
    let url = fresh_database(&cluster_url()?).await;
    let (_, address) = through(&url, 0);
    let proxy = Proxy::start(address).await;
    let (proxied, _) = through(&url, proxy.port);
    let (backend, app) = broker(&proxied).await;
    Some((url, proxy, backend, app))
}

// Proves a broker whose database connection is lost answers 503 `store_unavailable` (and
// `/healthz` 503) instead of stale state, and recovers by itself once the database is
// reachable again, with what was confirmed before still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_database_answers_503_and_reconnects() {
    let Some((_, proxy, _, app)) = behind_proxy().await else {
        return;
    };
    ok(&app, Method::PUT, "/v1/topics/t", "").await;
    ok(
        &app,
        Method::PUT,
        "/v1/topics/t/groups/g",
        r#"{"max_attempts":3}"#,
    )
    .await;
    ok(&app, Method::POST, "/v1/topics/t/messages", "kept").await;
    proxy.cut();
    for (route, body) in [
        ("/v1/topics/t/messages", "x"),
        ("/v1/topics/t/groups/g/poll", ""),
    ] {
        let (status, body) = send(&app, Method::POST, route, body).await;
        assert_eq!(
            (status, body["error"].clone()),
            (503, json!("store_unavailable")),
            "{route}: {body}"
        );
    }
    let (status, _) = send(&app, Method::GET, "/healthz", "").await;
    assert_eq!(status, 503);
    proxy.restore();
    let delivery = ok(&app, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(
        (delivery["offset"].clone(), delivery["payload"].clone()),
        (json!(0), json!("kept"))
    );
    let (status, _) = send(&app, Method::GET, "/healthz", "").await;
    assert_eq!(status, 200);
}

// Proves a lost database seen only by a publish stream drops the broker's cached group
// states too, as one seen by any other call does: after a failover to an asynchronous
// standby a group's row may hold other content under the version the broker cached,
// and a broker still trusting its cache would accept an ack the stored state refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_stream_that_loses_the_database_drops_the_cache() {
    let Some(replaced) = Replaced::set_up().await else {
        return;
    };
    replaced.proxy.cut();
    let publisher = replaced.backend.publisher("t").unwrap();
    let lost = publisher.publish_batch(&[Bytes::from("b")]).unwrap().await;
    assert!(
        matches!(lost, Err(BackendError::Unavailable(_))),
        "{lost:?}"
    );
    replaced.ack_refused_once_restored().await;
}

// Proves the same of connections lost while they idled in the pool, which no call saw
// fail: the pool finds them closed when it next hands one out, and the broker forgets
// what it cached before any call plans from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_lost_while_idle_drop_the_cache() {
    let Some(replaced) = Replaced::set_up().await else {
        return;
    };
    replaced.proxy.cut();
    // Once the database has ended the broker's sessions, their sockets are closed at
    // both ends.
    let none = "SELECT count(*) = 0 FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()";
    until(&replaced.direct, none, WITHIN).await;
    replaced.ack_refused_once_restored().await;
}

// Proves a broker whose listening connection was lost wakes its long polls once it
// listens again: a publish on another broker while it did not listen told it nothing,
// and without that wake its long poll would sleep to its 5 s recheck (it reconnects
// within 200 ms). Only the listening connection is cut; the broker's pool, which the
// long poll's calls use, stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_back_from_a_cut_wakes_its_long_polls() {
    let Some((url, proxy, _, cut_off)) = behind_proxy().await else {
        return;
    };
    let (_, other) = broker(&url).await;
    ok(&other, Method::PUT, "/v1/topics/t", "").await;
    let config = r#"{"max_attempts":3}"#;
    ok(&other, Method::PUT, "/v1/topics/t/groups/g", config).await;
    let direct = database(&url).await;
    let waiting = tokio::spawn(async move {
        let body = r#"{"max":1,"wait_ms":20000}"#;
        ok(
            &cut_off,
            Method::POST,
            "/v1/topics/t/groups/g/poll/batch",
            body,
        )
        .await
    });
    // The long poll found nothing and marked the topic as waited on.
    let marked = "SELECT waiting_until_ms > 0 FROM mailroom_topics WHERE name = 't'";
    until(&direct, marked, WITHIN).await;
    // Both brokers listen; the cut-off one's session is the one through the proxy.
    let listeners = "FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'";
    until(&direct, &format!("SELECT count(*) = 2 {listeners}"), WITHIN).await;
    let through_proxy = format!("SELECT client_port {listeners} AND client_port = ANY($1)");
    let row = direct
        .query_one(&through_proxy, &[&proxy.client_ports()])
        .await;
    let listener: i32 = row.unwrap().get(0);
    proxy.cut_one(u16::try_from(listener).unwrap());
    let gone = format!(
        "SELECT count(*) = 0 FROM pg_stat_activity \
         WHERE datname = current_database() AND client_port = {listener}"
    );
    until(&direct, &gone, WITHIN).await;
    ok(&other, Method::POST, "/v1/topics/t/messages", "m").await;
    proxy.restore();
    let restored = std::time::Instant::now();
    let answer = waiting.await.unwrap();
    assert_eq!(answer["deliveries"][0]["payload"], "m", "{answer}");
    // Far below the recheck, which came about 5 s after the long poll began to wait.
    let woken = restored.elapsed();
    assert!(woken < std::time::Duration::from_millis(2500), "{woken:?}");
}

/// A broker behind a proxy whose cached state of group `g` no longer matches `g`'s row.
struct Replaced {
    proxy: Proxy,
    backend: Arc<Postgres>,
    app: axum::Router,
    /// `g`'s delivery in flight, as the broker cached it.
    held: serde_json::Value,
    /// A session of the test's own, not through the proxy.
    direct: tokio_postgres::Client,
}

impl Replaced {
    /// Sets up topic `t` with groups `g` and `h` and one message, which `g` holds in
    /// flight (cached by the broker) and `h` has acked; then, behind the broker's back,
    /// gives `g`'s row `h`'s state under `g`'s own version (what a failover to an
    /// asynchronous standby can leave). `None` where the tests may be skipped.
    async fn set_up() -> Option<Replaced> {
        let (url, proxy, backend, app) = behind_proxy().await?;
        ok(&app, Method::PUT, "/v1/topics/t", "").await;
        for group in ["g", "h"] {
            let uri = format!("/v1/topics/t/groups/{group}");
            ok(&app, Method::PUT, &uri, r#"{"max_attempts":3}"#).await;
        }
        ok(&app, Method::POST, "/v1/topics/t/messages", "a").await;
        let held = ok(&app, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
        let done = ok(&app, Method::POST, "/v1/topics/t/groups/h/poll", "").await;
        ok(&app, Method::POST, "/v1/topics/t/groups/h/ack", &ack(&done)).await;
        let direct = database(&url).await;
        direct
            .execute(
                "UPDATE mailroom_groups g SET state = h.state FROM mailroom_groups h \
                 WHERE g.name = 'g' AND h.name = 'h'",
                &[],
            )
            .await
            .unwrap();
        Some(Replaced {
            proxy,
            backend,
            app,
            held,
            direct,
        })
    }

    /// Restores the proxy and acks the held delivery, again while the broker answers
    /// 503 (its first call may still meet a pooled connection the cut closed); the ack
    /// must be refused, as the stored state has nothing in flight.
    async fn ack_refused_once_restored(&self) {
        self.proxy.restore();
        let uri = "/v1/topics/t/groups/g/ack";
        let mut answer = send(&self.app, Method::POST, uri, &ack(&self.held)).await;
        for _ in 0..10 {
            if answer.0 != 503 {
                break;
            }
            answer = send(&self.app, Method::POST, uri, &ack(&self.held)).await;
        }
        assert_ne!(
            answer.0, 200,
            "the ack was judged against the stale cache: {answer:?}"
        );
    }
}

/// The ack body of `delivery`.
fn ack(delivery: &serde_json::Value) -> String {
    json!({"offset": delivery["offset"], "attempt": delivery["attempt"]}).to_string()
}

// Proves a database migrated by a newer binary is refused at start, naming both versions.
#[tokio::test]
async fn newer_schema_is_refused() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    drop(broker(&url).await);
    let client = database(&url).await;
    let newer = mailroom_server::backend::postgres::version_known() + 1;
    client
        .execute("UPDATE mailroom_schema SET version = $1", &[&newer])
        .await
        .unwrap();
    let refused = Postgres::connect(&url, Arc::new(LongPolls::default())).await;
    match refused {
        Err(PgError::NewerSchema { found, known }) => {
            assert_eq!((found, known + 1), (newer, newer))
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

// Proves a broker started twice on one database migrates once and keeps what is there.
#[tokio::test]
async fn restarted_broker_keeps_the_schema_and_data() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (first, second) = tokio::join!(broker(&url), broker(&url));
    ok(&first.1, Method::PUT, "/v1/topics/t", "").await;
    ok(&second.1, Method::POST, "/v1/topics/t/messages", "m").await;
    drop((first, second));
    let (_, again) = broker(&url).await;
    let topic = ok(&again, Method::GET, "/v1/topics/t", "").await;
    assert_eq!(topic["end"], 1, "{topic}");
}

// Proves the fencing the design rests on: a session that took a group's row lock (as a
// broker paused mid-transaction would hold it) keeps other brokers' calls on that group
// waiting only until PostgreSQL ends its idle transaction; then the other broker's call
// goes through, and the paused session's late write cannot commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_transaction_loses_its_lock_and_cannot_commit() {
    let Some(cluster) = cluster_url() else { return };
    let url = fresh_database(&cluster).await;
    let (_, app) = broker(&url).await;
    ok(&app, Method::PUT, "/v1/topics/t", "").await;
    ok(
        &app,
        Method::PUT,
        "/v1/topics/t/groups/g",
        r#"{"max_attempts":3}"#,
    )
    .await;
    ok(&app, Method::POST, "/v1/topics/t/messages", "m").await;
    let mut paused = database(&url).await;
    paused
        .batch_execute("SET idle_in_transaction_session_timeout = 300")
        .await
        .unwrap();
    let transaction = paused.transaction().await.unwrap();
    transaction
        .execute(
            "SELECT version FROM mailroom_groups WHERE name = 'g' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    // The "paused" session now idles inside its transaction; the broker's poll waits for
    // the lock, and gets it once PostgreSQL has ended that transaction.
    let started = std::time::Instant::now();
    let delivery = ok(&app, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(delivery["attempt"], 1);
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
    let late = transaction
        .execute("UPDATE mailroom_groups SET version = version + 100", &[])
        .await;
    let committed = match late {
        Ok(_) => transaction.commit().await.is_ok(),
        Err(_) => false,
    };
    assert!(!committed, "the paused session's late write committed");
    let again = ok(&app, Method::POST, "/v1/topics/t/groups/g/poll", "").await;
    assert_eq!(
        again, delivery,
        "the state is the broker's, untouched by the late write"
    );
}
