//! The client's time limits against a server that accepts connections and never
//! answers: every kind of call (HTTP, long poll, WebSocket handshake) fails with the
//! typed timeout error naming the limit that ran out, instead of hanging.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use mailroom_client::{
    BatchPoll, Client, ClientError, DeliveryId, StartPosition, TimeoutLimit, Timeouts,
};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The request limit under test: short, so the tests stay quick.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(200);

/// How long a test waits for the timeout error before declaring the call hung.
const FAILSAFE: Duration = Duration::from_secs(10);

/// A listener that accepts every connection and then neither reads nor writes: the
/// connect succeeds, the answer never comes. Connections stay open until it is dropped.
struct SilentServer {
    url: String,
    task: JoinHandle<()>,
}

impl SilentServer {
    async fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        SilentServer { url, task }
    }

    fn client(&self) -> Client {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            request: REQUEST_TIMEOUT,
        };
        Client::with_timeouts(&self.url, timeouts).expect("valid url")
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Awaits `call` (with a failsafe) and asserts it failed with the request limit of
/// length `after`, no sooner than that.
async fn assert_request_timeout<T: Debug>(
    what: &str,
    call: impl Future<Output = Result<T, ClientError>>,
    after: Duration,
) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(FAILSAFE, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: still waiting after {FAILSAFE:?}"));
    match outcome {
        Err(ClientError::Timeout { limit, after: was }) => {
            assert_eq!(limit, TimeoutLimit::Request, "{what}");
            assert_eq!(was, after, "{what}");
        }
        other => panic!("{what}: expected a request timeout, got {other:?}"),
    }
    assert!(
        started.elapsed() >= after,
        "{what}: failed before its limit"
    );
}

// Proves every HTTP call to a server that never answers fails with the request limit
// (200 ms), each in its own shape of call: plain, JSON body, poll, batch, dead letters.
#[tokio::test]
async fn http_calls_to_a_silent_server_time_out() {
    let server = SilentServer::start().await;
    let client = server.client();
    let id = DeliveryId {
        offset: 0,
        attempt: 1,
    };
    let limit = REQUEST_TIMEOUT;
    let group = client.create_group("t", "g", 3, StartPosition::Earliest);
    let ids = [id];
    // Concurrently, so the whole list takes about one limit.
    tokio::join!(
        assert_request_timeout("health", client.health(), limit),
        assert_request_timeout("create_topic", client.create_topic("t"), limit),
        assert_request_timeout("list_topics", client.list_topics(), limit),
        assert_request_timeout("publish", client.publish("t", "m"), limit),
        assert_request_timeout("create_group", group, limit),
        assert_request_timeout("poll", client.poll("t", "g"), limit),
        assert_request_timeout("ack", client.ack("t", "g", id), limit),
        assert_request_timeout("ack_batch", client.ack_batch("t", "g", &ids), limit),
        assert_request_timeout("dead_letters", client.dead_letters("t", "g"), limit),
        assert_request_timeout("delete_topic", client.delete_topic("t"), limit),
        assert_request_timeout("metrics", client.metrics(), limit),
    );
}

// Proves a long poll's limit is its wait plus the request limit: a silent server fails
// it after 300 + 200 ms, and the error says so.
#[tokio::test]
async fn a_long_poll_to_a_silent_server_times_out_after_wait_and_limit() {
    let server = SilentServer::start().await;
    let client = server.client();
    let quick = BatchPoll {
        consumer: None,
        max: 8,
        wait_ms: 0,
        ack: &[],
    };
    let poll = client.poll_batch("t", "g", &quick);
    assert_request_timeout("poll_batch wait 0", poll, REQUEST_TIMEOUT).await;
    let long = BatchPoll {
        wait_ms: 300,
        ..quick
    };
    let poll = client.poll_batch("t", "g", &long);
    let limit = REQUEST_TIMEOUT + Duration::from_millis(300);
    assert_request_timeout("poll_batch wait 300", poll, limit).await;
}

// Proves a WebSocket handshake (subscription, publish stream) with a server that
// accepts and never upgrades fails with the request limit.
#[tokio::test]
async fn websocket_handshakes_with_a_silent_server_time_out() {
    let server = SilentServer::start().await;
    let client = server.client();
    let subscribe = client.subscribe("c");
    assert_request_timeout("subscribe", subscribe, REQUEST_TIMEOUT).await;
    let stream = client.publish_stream("t");
    assert_request_timeout("publish_stream", stream, REQUEST_TIMEOUT).await;
}

// Proves the default limits are the documented constants and that `new` uses them.
#[test]
fn new_uses_the_default_limits() {
    let client = Client::new("http://127.0.0.1:7070").expect("valid url");
    assert_eq!(
        client.timeouts(),
        Timeouts {
            connect: mailroom_client::CONNECT_TIMEOUT_DEFAULT,
            request: mailroom_client::REQUEST_TIMEOUT_DEFAULT,
        }
    );
    assert_eq!(client.timeouts().connect, Duration::from_secs(5));
    assert_eq!(client.timeouts().request, Duration::from_secs(30));
}

// Proves a connection that is never made fails with the connect limit, named as such:
// a listener whose accept queue is full drops new SYNs, so the connect hangs.
#[tokio::test]
async fn a_connection_never_made_fails_with_the_connect_limit() {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(1).expect("listen");
    let address = listener.local_addr().expect("address");
    // Connections the listener never accepts, until one is not made: the queue is full.
    let mut held = Vec::new();
    let full = loop {
        let connect = tokio::net::TcpStream::connect(address);
        match tokio::time::timeout(Duration::from_millis(300), connect).await {
            Ok(Ok(stream)) if held.len() < 16 => held.push(stream),
            Ok(_) => break false,
            Err(_) => break true,
        }
    };
    assert!(
        full,
        "the accept queue never filled: {} connections made",
        held.len()
    );
    let limit = Duration::from_millis(300);
    let timeouts = Timeouts {
        connect: limit,
        request: Duration::from_secs(5),
    };
    let client = Client::with_timeouts(&format!("http://{address}"), timeouts).expect("url");
    let outcome = tokio::time::timeout(FAILSAFE, client.list_topics())
        .await
        .unwrap_or_else(|_| panic!("still connecting after {FAILSAFE:?}"));
    match outcome {
        Err(ClientError::Timeout {
            limit: which,
            after,
        }) => {
            assert_eq!(which, TimeoutLimit::Connect);
            assert_eq!(after, limit);
        }
        other => panic!("expected the connect limit, got {other:?}"),
    }
    drop(listener);
}
