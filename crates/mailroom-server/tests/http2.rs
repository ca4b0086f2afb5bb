//! Black-box tests of cleartext HTTP/2 (h2c, prior knowledge) on the server's one port:
//! one connection carries many concurrent requests, each answered as over HTTP/1.1; a
//! client that starts the HTTP/2 preface and stops is closed after the header read
//! timeout, as a slow HTTP/1.1 client is; an HTTP/2 connection holds a slot of the
//! connection cap like any other.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http2::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mailroom_server::config::{Config, FsyncPolicy};
use mailroom_server::connections::{serve_connections, ConnectionOptions, H2_PREFACE};
use mailroom_server::listener::CappedListener;
use mailroom_server::Server;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The failsafe on anything a test awaits: it only ends a test that would otherwise hang.
const FAILSAFE: Duration = Duration::from_secs(20);

/// Requests sent at once on the one connection.
const CONCURRENT: usize = 64;

async fn failsafe<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(FAILSAFE, future)
        .await
        .expect("the test's failsafe ran out")
}

/// Opens one HTTP/2 connection (prior knowledge) to `address`.
async fn connect(address: std::net::SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(address).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    sender
}

/// Sends one request on `sender`; returns the status and the body.
async fn call(
    mut sender: SendRequest<Full<Bytes>>,
    address: std::net::SocketAddr,
    method: Method,
    path: &str,
    body: &str,
) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(format!("http://{address}{path}"))
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

// Proves one HTTP/2 connection carries many requests at once: 64 publishes sent together
// on it are all confirmed (201, each its own offset), and the topic then holds exactly 64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_carries_many_concurrent_requests() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_owned(),
        fsync: FsyncPolicy::Always,
        ..Config::default()
    };
    let server = Server::start(config).await.unwrap();
    let address = server.local_addr().unwrap();
    let serving = tokio::spawn(server.serve(std::future::pending()));

    let sender = failsafe(connect(address)).await;
    let (status, _) = failsafe(call(
        sender.clone(),
        address,
        Method::PUT,
        "/v1/topics/t",
        "",
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let publishes = (0..CONCURRENT).map(|i| {
        let sender = sender.clone();
        tokio::spawn(async move {
            call(
                sender,
                address,
                Method::POST,
                "/v1/topics/t/messages",
                &format!("m{i}"),
            )
            .await
        })
    });
    let mut offsets = Vec::new();
    for publish in publishes.collect::<Vec<_>>() {
        let (status, body) = failsafe(publish).await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        offsets.push(body["offset"].as_u64().unwrap());
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..CONCURRENT as u64).collect::<Vec<_>>());
    let (status, body) = failsafe(call(sender, address, Method::GET, "/v1/topics/t", "")).await;
    assert_eq!(status, StatusCode::OK);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["end"].as_u64(), Some(CONCURRENT as u64), "{body}");
    serving.abort();
}

/// Serves a one-route app with a 200 ms header read timeout and `slots` connections.
async fn serve_small(slots: usize) -> std::net::SocketAddr {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "served" }));
    let options = ConnectionOptions {
        header_read_timeout: Duration::from_millis(200),
    };
    tokio::spawn(serve_connections(
        CappedListener::new(socket, slots),
        app,
        options,
        std::future::pending(),
    ));
    address
}

// Proves a client that sends part of the HTTP/2 preface and stops is closed after the
// header read timeout (the server answers nothing and closes), not held for ever.
#[tokio::test]
async fn half_an_http2_preface_is_closed_after_the_timeout() {
    let address = serve_small(4).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(&H2_PREFACE[..12]).await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    // Closing with the client's bytes unread resets the connection: also a close.
    match failsafe(stream.read_to_end(&mut answer)).await {
        Ok(_) => assert!(answer.is_empty(), "{answer:?}"),
        Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset),
    }
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "closed after {:?}, before the timeout",
        started.elapsed()
    );
}

// Proves an HTTP/2 connection holds a slot of the connection cap: with one slot taken by
// it, an HTTP/1.1 client is answered 503 connection_limit, while the HTTP/2 connection
// keeps being served.
#[tokio::test]
async fn an_http2_connection_holds_a_slot_of_the_cap() {
    let address = serve_small(1).await;
    let sender = failsafe(connect(address)).await;
    let (status, body) = failsafe(call(sender.clone(), address, Method::GET, "/", "")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "served"));
    let mut other = TcpStream::connect(address).await.unwrap();
    other
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    failsafe(other.read_to_end(&mut answer)).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("connection_limit"), "{answer}");
    let (status, _) = failsafe(call(sender, address, Method::GET, "/", "")).await;
    assert_eq!(status, StatusCode::OK);
}
