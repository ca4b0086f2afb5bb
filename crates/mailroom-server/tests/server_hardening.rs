//! Black-box tests of how the server treats its connections: a handler's panic answers
//! 500 and keeps the connection; a request head that does not arrive in time, or an idle
//! keep-alive connection, is closed after the header read timeout; prompt clients, long
//! polls and WebSocket subscribers are not; slow clients holding every slot of the
//! connection cap are evicted for a prompt one; shutdown closes idle connections at once.
//!
//! Each test runs a real [`Server`] on a loopback port and speaks HTTP/1.1 over a raw
//! TCP stream, so "the same connection" is literally one socket.

use std::time::Duration;

use axum::routing::get;
use mailroom_server::app::router;
use mailroom_server::config::{Config, FsyncPolicy};
use mailroom_server::connections::{serve_connections, ConnectionOptions};
use mailroom_server::listener::CappedListener;
use mailroom_server::server::SHUTDOWN_GRACE_MS_MAX;
use mailroom_server::{Server, ServerError};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The failsafe on anything a test awaits: far beyond every timeout configured here, so
/// it only ends a test that would otherwise hang.
const FAILSAFE_MS: u64 = 10_000;

/// A server on a free loopback port over a temporary store.
struct Running {
    address: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<Result<(), ServerError>>,
    _dir: tempfile::TempDir,
}

/// Starts the API with `header_read_timeout_ms`, plus whatever `extend` adds to the router.
async fn start(header_read_timeout_ms: u64, extend: fn(axum::Router) -> axum::Router) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_owned(),
        fsync: FsyncPolicy::Never,
        header_read_timeout_ms,
        ..Config::default()
    };
    let server = Server::start(config).await.unwrap();
    let address = server.local_addr().unwrap();
    let app = extend(router(server.state().clone()));
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let serving = tokio::spawn(server.serve_app(app, shutdown));
    Running {
        address,
        stop,
        serving,
        _dir: dir,
    }
}

/// One HTTP/1.1 connection read through a buffer.
struct Connection {
    stream: BufReader<TcpStream>,
}

/// A response's status and body.
struct Answer {
    status: u16,
    body: String,
}

impl Connection {
    async fn open(running: &Running) -> Connection {
        let stream = TcpStream::connect(running.address).await.unwrap();
        Connection {
            stream: BufReader::new(stream),
        }
    }

    async fn send(&mut self, raw: &str) {
        self.stream
            .get_mut()
            .write_all(raw.as_bytes())
            .await
            .unwrap();
    }

    /// Sends a request with `body` (JSON if it starts with `{`) and reads its answer,
    /// which must carry a length.
    async fn request(&mut self, method: &str, path: &str, body: &str) -> Answer {
        let content_type = if body.starts_with('{') {
            "Content-Type: application/json\r\n"
        } else {
            ""
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\n{content_type}\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.send(&request).await;
        failsafe(self.read_answer()).await
    }

    async fn read_answer(&mut self) -> Answer {
        let head = self.read_head().await;
        let status = head[9..12].parse().unwrap();
        let length = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().unwrap())
            })
            .unwrap_or_else(|| panic!("no content-length in {head:?}"));
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await.unwrap();
        Answer {
            status,
            body: String::from_utf8(body).unwrap(),
        }
    }

    /// The status line and headers, up to the blank line.
    async fn read_head(&mut self) -> String {
        let mut head = String::new();
        loop {
            let read = self.stream.read_line(&mut head).await.unwrap();
            assert!(read > 0, "connection closed mid-answer: {head:?}");
            if head.ends_with("\r\n\r\n") {
                return head;
            }
        }
    }

    /// Waits for the server to close the connection; returns what it sent before.
    async fn read_until_closed(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        match failsafe(self.stream.read_to_end(&mut rest)).await {
            Ok(_) => rest,
            // A reset is a close too.
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => rest,
            Err(error) => panic!("reading until close: {error}"),
        }
    }
}

/// Awaits `future`, failing the test if it takes longer than [`FAILSAFE_MS`].
async fn failsafe<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_millis(FAILSAFE_MS), future)
        .await
        .expect("the failsafe timeout fired: the awaited event never happened")
}

fn no_extra_routes(app: axum::Router) -> axum::Router {
    app
}

// Proves a handler's panic is answered with 500 and the standard `internal` error body,
// and that the same connection then serves the next request.
#[tokio::test]
async fn panicking_handler_answers_500_and_keeps_the_connection() {
    fn with_panicking_route(app: axum::Router) -> axum::Router {
        app.route(
            "/test-only/panic",
            get(|| async {
                panic!("a deliberate panic in a test-only handler");
                #[allow(unreachable_code)]
                "unreachable"
            }),
        )
    }
    let running = start(10_000, with_panicking_route).await;
    let mut connection = Connection::open(&running).await;

    let answer = connection.request("GET", "/test-only/panic", "").await;
    assert_eq!(answer.status, 500);
    let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["error"], "internal");
    assert!(body["message"].is_string(), "{body}");
    assert!(
        !answer.body.contains("deliberate"),
        "the panic message leaked to the client: {}",
        answer.body
    );

    let next = connection.request("GET", "/healthz", "").await;
    assert_eq!(
        (next.status, next.body.as_str()),
        (200, r#"{"status":"ok"}"#)
    );
}

// Proves a client that sends half a request head and stops (slowloris) has its
// connection closed, unanswered, once the header read timeout passes.
#[tokio::test]
async fn half_a_request_head_is_closed_after_the_timeout() {
    let running = start(200, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    connection.send("GET /healthz HTTP/1.1\r\nHost: te").await;
    let sent_back = connection.read_until_closed().await;
    assert!(
        sent_back.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&sent_back)
    );
}

// Proves a connection that never sends a byte is closed too: the clock starts at accept.
#[tokio::test]
async fn silent_connection_is_closed_after_the_timeout() {
    let running = start(200, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    assert!(connection.read_until_closed().await.is_empty());
}

// Proves an idle keep-alive connection is closed once the timeout passes after its last
// response.
#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_the_timeout() {
    let running = start(200, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    assert_eq!(connection.request("GET", "/healthz", "").await.status, 200);
    assert!(connection.read_until_closed().await.is_empty());
}

// Proves a keep-alive client that sends each request within the timeout keeps one
// connection for longer than the timeout: the clock restarts with every request.
#[tokio::test]
async fn prompt_keep_alive_client_keeps_its_connection() {
    const TIMEOUT_MS: u64 = 600;
    let running = start(TIMEOUT_MS, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    // Five gaps of a third of the timeout: the connection lives 5/3 of a timeout.
    for _ in 0..5 {
        assert_eq!(connection.request("GET", "/healthz", "").await.status, 200);
        tokio::time::sleep(Duration::from_millis(TIMEOUT_MS / 3)).await;
    }
    assert_eq!(connection.request("GET", "/healthz", "").await.status, 200);
}

// Proves the timeout does not cut a request that is being handled: a long poll that
// waits three times the timeout is answered.
#[tokio::test]
async fn long_poll_longer_than_the_timeout_is_answered() {
    let running = start(200, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    let created = connection.request("PUT", "/v1/topics/t", "").await;
    assert_eq!(created.status, 201, "{}", created.body);
    let group = "/v1/topics/t/groups/g";
    let created = connection
        .request("PUT", group, r#"{"max_attempts":3}"#)
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let started = std::time::Instant::now();
    let poll = connection
        .request(
            "POST",
            &format!("{group}/poll/batch"),
            r#"{"max":1,"wait_ms":600}"#,
        )
        .await;
    assert_eq!(
        (poll.status, poll.body.as_str()),
        (200, r#"{"deliveries":[]}"#)
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_eq!(connection.request("GET", "/healthz", "").await.status, 200);
}

// Proves a WebSocket subscriber that hears nothing for longer than the timeout is still
// connected and receives the next message: an upgraded connection is not timed.
#[tokio::test]
async fn websocket_subscriber_outlives_the_timeout() {
    const TIMEOUT_MS: u64 = 200;
    let running = start(TIMEOUT_MS, no_extra_routes).await;
    let mut publisher = Connection::open(&running).await;
    let created = publisher.request("PUT", "/v1/channels/c", "{}").await;
    assert_eq!(created.status, 201, "{}", created.body);
    let mut subscriber = Connection::open(&running).await;
    subscriber
        .send(
            "GET /v1/channels/c/ws HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .await;
    let head = failsafe(subscriber.read_head()).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");

    // Silence on the upgraded connection for three timeouts: this wait is what is tested.
    tokio::time::sleep(Duration::from_millis(3 * TIMEOUT_MS)).await;
    // The publisher's connection idled as long, so the server has closed it: use a new one.
    let mut publisher = Connection::open(&running).await;
    let published = publisher
        .request("POST", "/v1/channels/c/messages", "hello")
        .await;
    assert!(published.status < 300, "{}", published.body);
    // An unmasked text frame of five bytes: FIN + text opcode, length, payload.
    let mut frame = [0; 7];
    failsafe(subscriber.stream.read_exact(&mut frame))
        .await
        .unwrap();
    assert_eq!(&frame, b"\x81\x05hello");
}

// Proves shutdown closes an idle keep-alive connection at once rather than waiting out
// the grace period for it, and that serving then ends cleanly.
#[tokio::test]
async fn shutdown_closes_idle_connections() {
    let running = start(60_000, no_extra_routes).await;
    let mut connection = Connection::open(&running).await;
    assert_eq!(connection.request("GET", "/healthz", "").await.status, 200);
    running.stop.send(()).unwrap();
    // Half the grace period: an idle connection waited for rather than closed would only
    // close when the grace period ends, so it fails here instead of just slowing the test.
    let half_grace = Duration::from_millis(SHUTDOWN_GRACE_MS_MAX / 2);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(half_grace, connection.stream.read_to_end(&mut rest));
    assert_eq!(
        closed.await.expect("idle connection still open").unwrap(),
        0
    );
    let served = tokio::time::timeout(half_grace, running.serving);
    served.await.expect("serving did not end").unwrap().unwrap();
}

// Proves slow clients cannot starve the others: with every slot of the connection cap
// held by clients that trickle half a request head, a new client is told at once that
// the cap is reached (503 connection_limit), and is served once the timeout frees those
// slots, on a multi-threaded runtime with all of them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_holding_every_slot_are_evicted_for_a_prompt_one() {
    const SLOTS: usize = 8;
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    let app = axum::Router::new().route("/", get(|| async { "served" }));
    let options = ConnectionOptions {
        header_read_timeout: Duration::from_millis(200),
    };
    let listener = CappedListener::new(socket, SLOTS);
    tokio::spawn(serve_connections(
        listener,
        app,
        options,
        std::future::pending(),
    ));

    let mut slow = Vec::new();
    for _ in 0..SLOTS {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
        slow.push(stream);
    }
    let ask = || async {
        let mut prompt = TcpStream::connect(address).await.unwrap();
        prompt
            .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        // The answer, then the close (at once past the cap; else once the connection has
        // idled for the timeout).
        let mut answer = Vec::new();
        failsafe(prompt.read_to_end(&mut answer)).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    };
    let refused = ask().await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("connection_limit"), "{refused}");
    // Retried as a client told 503 would, until the slow clients' slots are freed.
    let answer = failsafe(async {
        loop {
            let answer = ask().await;
            if !answer.starts_with("HTTP/1.1 503") {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("served"), "{answer}");
    for mut stream in slow {
        let mut rest = Vec::new();
        // Closed unanswered; a reset is a close too.
        match failsafe(stream.read_to_end(&mut rest)).await {
            Ok(_) => assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest)),
            Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset),
        }
    }
}
