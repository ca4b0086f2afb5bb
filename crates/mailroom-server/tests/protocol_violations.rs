//! Black-box tests of requests that break HTTP/1.1 or WebSocket rules, over raw TCP so
//! that nothing on the client side tidies them up: a body length given two ways is read
//! by Transfer-Encoding and the connection closed (RFC 9112 §6.3); a query value that is not UTF-8 once
//! percent-decoded is 400 naming the parameter; WebSocket violations close with 1002,
//! 1007 or 1009 (RFC 6455 §7.4.1), never 1011.

use std::time::Duration;

use mailroom_server::config::{Config, FsyncPolicy};
use mailroom_server::Server;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The failsafe on anything a test awaits: it only ends a test that would hang.
const FAILSAFE_MS: u64 = 10_000;

/// A running server over a temporary store with topic `t`, its group `g` and channel
/// `c`; dropping it stops the server.
struct Running {
    address: std::net::SocketAddr,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_owned(),
        fsync: FsyncPolicy::Never,
        payload_bytes_max: 1024,
        ..Config::default()
    };
    let server = Server::start(config).await.unwrap();
    let address = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    let running = Running {
        address,
        _stop: stop,
        _dir: dir,
    };
    for setup in [
        "PUT /v1/topics/t",
        "PUT /v1/topics/t/groups/g",
        "PUT /v1/channels/c",
    ] {
        let (method, path) = setup.split_once(' ').unwrap();
        let body = if path.contains("groups") {
            r#"{"max_attempts":3}"#
        } else {
            ""
        };
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let answer = exchange(&running, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 20"), "{setup}: {answer}");
    }
    running
}

async fn failsafe<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_millis(FAILSAFE_MS), future)
        .await
        .expect("the server answered within the failsafe")
}

/// Sends `request` on a new connection and reads until the server closes it.
async fn exchange(running: &Running, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(running.address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    failsafe(stream.read_to_end(&mut answer)).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// How many messages topic `t` holds (its `end`).
async fn published(running: &Running) -> u64 {
    let answer = exchange(
        running,
        b"GET /v1/topics/t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    let info: serde_json::Value = serde_json::from_str(body).unwrap();
    info["end"].as_u64().unwrap()
}

// Proves a request with both Content-Length and Transfer-Encoding is framed by
// Transfer-Encoding alone and its connection closed after the answer (RFC 9112 §6.3:
// reject, or process by Transfer-Encoding and close; hyper does the latter and drops the
// Content-Length before the router could see it): the bytes after the chunked body,
// which a proxy trusting Content-Length would take for the next request, are never read.
#[tokio::test]
async fn content_length_with_transfer_encoding_closes_the_connection() {
    let running = start().await;
    let smuggled = "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nS";
    for (first, second) in [
        ("Content-Length: 5", "Transfer-Encoding: chunked"),
        ("Transfer-Encoding: chunked", "Content-Length: 5"),
    ] {
        let request = format!(
            "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\n{first}\r\n{second}\r\n\r\n\
             3\r\nabc\r\n0\r\n\r\n{smuggled}"
        );
        // `exchange` reads to the end: the server closed the connection.
        let answer = exchange(&running, request.as_bytes()).await;
        assert_eq!(
            answer.matches("HTTP/1.1").count(),
            1,
            "one answer: {answer}"
        );
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
    // Each published "abc" (its chunked body); neither smuggled request ran.
    assert_eq!(published(&running).await, 2);
}

// Proves `?consumer=%ff` (not UTF-8 once decoded) is 400 naming `consumer`, as the same
// bytes in a JSON body are, instead of becoming U+FFFD and colliding with `%fe`; a
// percent-encoded UTF-8 consumer is taken.
#[tokio::test]
async fn query_values_must_be_utf8_once_decoded() {
    let running = start().await;
    let poll = |query: &str| {
        format!(
            "POST /v1/topics/t/groups/g/poll?{query} HTTP/1.1\r\nHost: x\r\n\
             Connection: close\r\nContent-Length: 0\r\n\r\n"
        )
    };
    for query in ["consumer=%ff", "consumer=a%fe", "consumer=%c3"] {
        let answer = exchange(&running, poll(query).as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{query}: {answer}");
        assert!(answer.contains("\"bad_request\""), "{query}: {answer}");
        assert!(
            answer.contains("query parameter consumer="),
            "{query}: {answer}"
        );
    }
    let body = "{\"consumer\":\"\u{fffd}\"}".replace('\u{fffd}', "\\xff");
    let in_body = format!(
        "POST /v1/topics/t/groups/g/poll HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len() - 3
    );
    let mut raw = in_body.into_bytes();
    raw.extend_from_slice(b"{\"consumer\":\"\xff\"}");
    let answer = exchange(&running, &raw).await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "body: {answer}");
    let answer = exchange(&running, poll("consumer=%e2%82%ac").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 204 "), "{answer}");
}

/// A WebSocket connection over a raw stream.
struct RawSocket {
    stream: TcpStream,
}

impl RawSocket {
    /// Opens `path` with a WebSocket handshake and checks the 101.
    async fn open(running: &Running, path: &str) -> RawSocket {
        let mut stream = TcpStream::connect(running.address).await.unwrap();
        let handshake = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(handshake.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8];
            failsafe(stream.read_exact(&mut byte)).await.unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101 "), "{path}: {head}");
        RawSocket { stream }
    }

    /// Sends one final frame with `opcode`, masked unless `masked` is false.
    async fn send(&mut self, opcode: u8, payload: &[u8], masked: bool) {
        let mut frame = vec![0x80 | opcode];
        let mask_bit = if masked { 0x80 } else { 0 };
        match payload.len() {
            len @ 0..=125 => frame.push(mask_bit | len as u8),
            len @ 126..=65_535 => {
                frame.push(mask_bit | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(mask_bit | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        let key = [0x12, 0x34, 0x56, 0x78];
        if masked {
            frame.extend_from_slice(&key);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        } else {
            frame.extend_from_slice(payload);
        }
        // The server may close before it has read everything of a large frame.
        let _ = self.stream.write_all(&frame).await;
    }

    /// Reads frames until a close frame; returns its code (`None` if the connection
    /// ended without one).
    async fn close_code(&mut self) -> Option<u16> {
        loop {
            let mut head = [0u8; 2];
            failsafe(self.stream.read_exact(&mut head)).await.ok()?;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut len = [0u8; 2];
                    self.stream.read_exact(&mut len).await.ok()?;
                    u64::from(u16::from_be_bytes(len))
                }
                127 => {
                    let mut len = [0u8; 8];
                    self.stream.read_exact(&mut len).await.ok()?;
                    u64::from_be_bytes(len)
                }
                len => u64::from(len),
            };
            let mut payload = vec![0u8; usize::try_from(len).unwrap()];
            self.stream.read_exact(&mut payload).await.ok()?;
            if head[0] & 0x0f == 0x8 {
                return Some(u16::from_be_bytes([payload[0], payload[1]]));
            }
        }
    }
}

/// The three violations and the code each must close with, for an endpoint whose
/// largest accepted frame is under `too_big` bytes.
async fn violations_close_with_their_codes(path: &str, too_big: usize) {
    let running = start().await;
    let cases: [(&str, u8, Vec<u8>, bool, u16); 4] = [
        ("unmasked frame", 0x2, b"x".to_vec(), false, 1002),
        ("reserved opcode", 0x3, b"x".to_vec(), true, 1002),
        (
            "text that is not UTF-8",
            0x1,
            vec![b'a', 0xff, 0xfe],
            true,
            1007,
        ),
        ("frame over the limit", 0x2, vec![b'x'; too_big], true, 1009),
    ];
    for (what, opcode, payload, masked, code) in cases {
        let mut socket = RawSocket::open(&running, path).await;
        socket.send(opcode, &payload, masked).await;
        assert_eq!(socket.close_code().await, Some(code), "{path}: {what}");
    }
}

// Proves a channel subscriber's protocol violations close with 1002, 1007 and 1009.
#[tokio::test]
async fn subscriber_violations_close_with_their_codes() {
    violations_close_with_their_codes("/v1/channels/c/ws", 8 << 10).await;
}

// Proves a publish stream's protocol violations close with 1002, 1007 and 1009 (a
// frame more than 64 KiB over the payload limit), after the answers owed.
#[tokio::test]
async fn publish_stream_violations_close_with_their_codes() {
    violations_close_with_their_codes("/v1/topics/t/publish/ws", 1024 + (64 << 10) + 1).await;
}
