//! The client's pooled connections (hyper's pool) against a scripted HTTP/1.1 server
//! that counts the connections and requests it sees: calls reuse one connection, a
//! connection the server closes is replaced without the caller seeing an error, a
//! request that was sent is never sent again, and concurrent calls each get a connection
//! of their own. Whatever pools the client's connections must keep to these.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mailroom_client::{Client, ClientError, Timeouts};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Barrier};
use tokio::task::JoinHandle;

/// What the scripted server does with each request it reads.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Answers 200 and keeps the connection open.
    KeepOpen,
    /// Answers 200 without `Connection: close`, then closes the connection at once, so
    /// the client learns of it only when it next uses the connection.
    AnswerThenClose,
    /// Reads the request and closes the connection without an answer.
    NeverAnswer,
    /// Answers 200, then closes the connection when the test says so (`close_idle`).
    CloseWhenTold,
}

struct Server {
    url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// How many connections the server has closed.
    closed: watch::Receiver<usize>,
    /// Tells `CloseWhenTold` connections to close.
    close: Arc<tokio::sync::Notify>,
    task: JoinHandle<()>,
}

impl Server {
    /// A server answering by `script`; before each answer it waits at `barrier`, if
    /// given, so a test can hold several requests in flight at once.
    async fn start(script: Script, barrier: Option<Arc<Barrier>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (seen, asked) = (connections.clone(), requests.clone());
        let (closing, closed) = watch::channel(0);
        let closing = Arc::new(closing);
        let close = Arc::new(tokio::sync::Notify::new());
        let told = close.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                let (asked, barrier, closing) = (asked.clone(), barrier.clone(), closing.clone());
                let told = told.clone();
                tokio::spawn(async move {
                    let stream = serve(stream, script, asked, barrier).await;
                    if script == Script::CloseWhenTold {
                        told.notified().await;
                    }
                    drop(stream);
                    closing.send_modify(|count| *count += 1);
                });
            }
        });
        Server {
            url,
            connections,
            requests,
            closed,
            close,
            task,
        }
    }

    fn client(&self) -> Client {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(10),
        };
        Client::with_timeouts(&self.url, timeouts).expect("valid url")
    }

    /// Makes call number `call` (from 0), which must succeed, tells the server to close
    /// its connection (if the script waits to be told) and waits until it has closed
    /// `call + 1` connections.
    async fn call_then_await_close(&mut self, client: &Client, call: usize) {
        if let Err(error) = client.health().await {
            panic!("call {call} failed: {error}");
        }
        self.close.notify_one();
        self.closed
            .wait_for(|closed| *closed > call)
            .await
            .expect("server");
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves bodiless requests (the client's `health` call) on one connection, until the
/// client closes it or the script ends it; the caller closes it by dropping the stream.
async fn serve(
    mut stream: TcpStream,
    script: Script,
    requests: Arc<AtomicUsize>,
    barrier: Option<Arc<Barrier>>,
) -> TcpStream {
    let mut buffer = Vec::new();
    loop {
        let mut chunk = [0u8; 1024];
        let read = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return stream,
            Ok(read) => read,
        };
        buffer.extend_from_slice(&chunk[..read]);
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            buffer.drain(..end + 4);
            requests.fetch_add(1, Ordering::SeqCst);
            if script == Script::NeverAnswer {
                return stream;
            }
            if let Some(barrier) = &barrier {
                barrier.wait().await;
            }
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            let write = stream.write_all(answer).await;
            if write.is_err() || matches!(script, Script::AnswerThenClose | Script::CloseWhenTold) {
                return stream;
            }
        }
    }
}

// Proves sequential calls go over one connection instead of opening one each.
#[tokio::test]
async fn sequential_calls_reuse_one_connection() {
    let server = Server::start(Script::KeepOpen, None).await;
    let client = server.client();
    for _ in 0..20 {
        client.health().await.expect("answered");
    }
    assert_eq!(server.requests(), 20);
    assert_eq!(server.connections(), 1);
}

// Proves a connection the server closed after its answer is replaced: every call
// succeeds, whether the client saw the close before taking the connection or only when
// its request could not go out, and each request reaches the server once. Each call
// waits for the server to have closed the connection before, so it never races the
// close (a request written as the server closes can be lost in flight, and is then
// reported rather than sent again; the test below).
#[tokio::test]
async fn a_closed_connection_is_replaced_without_an_error() {
    let mut server = Server::start(Script::AnswerThenClose, None).await;
    let client = server.client();
    for call in 0..50 {
        server.call_then_await_close(&client, call).await;
    }
    assert_eq!(server.requests(), 50);
    assert_eq!(server.connections(), 50);
}

// Proves an idle connection the server closes while the client still holds it as open
// (its connection task has not yet read the close) sends nothing: the call's request
// comes back from it unsent and goes over a new connection, once.
#[tokio::test]
async fn a_request_an_idle_connection_could_not_send_goes_over_a_new_one() {
    let mut server = Server::start(Script::CloseWhenTold, None).await;
    let client = server.client();
    for call in 0..10 {
        server.call_then_await_close(&client, call).await;
    }
    assert_eq!(server.requests(), 10);
    assert_eq!(server.connections(), 10);
}

// Proves a request the server read is not sent again when the connection then breaks:
// the call fails with a transport error and the server saw the request once.
#[tokio::test]
async fn a_sent_request_is_never_sent_twice() {
    let server = Server::start(Script::NeverAnswer, None).await;
    let refused = server.client().health().await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::Http(http) if !http.is_connect()),
        "{refused:?}"
    );
    assert_eq!(server.requests(), 1);
    assert_eq!(server.connections(), 1);
}

// Proves calls in flight at once each get a connection, and those connections are all
// kept for the calls after them.
#[tokio::test]
async fn concurrent_calls_get_a_connection_each_and_keep_them() {
    const CALLS: usize = 8;
    let barrier = Arc::new(Barrier::new(CALLS));
    let server = Server::start(Script::KeepOpen, Some(barrier)).await;
    let client = server.client();
    for _round in 0..3 {
        let calls: Vec<_> = (0..CALLS)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { client.health().await })
            })
            .collect();
        for call in calls {
            call.await.expect("task").expect("answered");
        }
    }
    assert_eq!(server.requests(), 3 * CALLS);
    assert_eq!(server.connections(), CALLS);
}
