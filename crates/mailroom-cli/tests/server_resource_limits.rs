//! Every resource bounded, against the real server binary: file descriptors run out no
//! more (topics and connections capped from a lowered `RLIMIT_NOFILE`, refused by name,
//! `/healthz` answering, restart working), dead-letter pages capped in bytes, and a
//! subscriber that never reads pinning no more memory than its mailbox's byte budget.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use common::{temp_dir, Deadline, ServerProcess};
use mailroom_client::{Client, CreateChannel, StartPosition};

/// The open-file limit the fd tests run the server under.
const FILES_MAX: u64 = 256;

/// The value of the series `name` (with its labels, as in the exposition).
async fn metric(server: &ServerProcess, series: &str) -> Option<f64> {
    let text = reqwest::get(server.at("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// One `GET path` on a fresh connection; the whole answer, once the server closes.
fn get_closing(server: &ServerProcess, path: &str) -> String {
    let mut stream = TcpStream::connect(server.address()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// File descriptors the process `pid` holds open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Creates topics `t0`, `t1`, ... until one is refused; returns how many were created
/// and the refusal.
async fn create_until_refused(client: &Client) -> (usize, mailroom_client::ClientError) {
    for index in 0.. {
        if let Err(error) = client.create_topic(&format!("t{index}")).await {
            return (index, error);
        }
    }
    unreachable!("the loop only ends by returning")
}

// Proves the fd-exhaustion finding is fixed: under an open-file limit of 256, topic
// creation stops at the named limit (409 topic_limit) sized from it, before any
// descriptor runs out; connections are still accepted up to their own cap, past which
// they are answered 503 connection_limit; /healthz answers throughout; /metrics shows
// usage against each limit; and the server restarts under the same limit with every
// topic, still refusing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fd_exhaustion_refuses_topics_by_name_and_keeps_serving() {
    let dir = temp_dir();
    let server = ServerProcess::start_with_open_files(dir.path(), &[], FILES_MAX);
    let client = server.client();
    let series = |resource: &str, kind: &str| format!("mailroom_{kind}{{resource=\"{resource}\"}}");
    assert_eq!(
        metric(&server, &series("open_files", "limit")).await,
        Some(FILES_MAX as f64)
    );
    let topics_max = metric(&server, &series("topics", "limit")).await.unwrap() as usize;
    let connections_max = metric(&server, &series("connections", "limit"))
        .await
        .unwrap() as usize;
    assert!(
        topics_max >= 1 && connections_max >= 1,
        "{topics_max} {connections_max}"
    );

    let (created, refused) = create_until_refused(&client).await;
    assert_eq!(created, topics_max);
    assert_eq!(refused.code(), Some("topic_limit"), "{refused}");
    assert!(refused.to_string().contains("--max-topics"), "{refused}");
    assert_eq!(
        metric(&server, &series("topics", "usage")).await,
        Some(topics_max as f64)
    );
    assert!(open_fds(server.pid()) < FILES_MAX as usize);

    // Connections held open (keep-alive) one by one until the server answers one 503:
    // it does so at its cap (less the few the test's clients keep in their pools).
    let mut held = Vec::new();
    let refusal = loop {
        let mut stream = TcpStream::connect(server.address()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = vec![0; 4096];
        let read = stream.read(&mut answer).unwrap();
        let answer = String::from_utf8_lossy(&answer[..read]).into_owned();
        if answer.starts_with("HTTP/1.1 503") {
            break answer;
        }
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        held.push(stream);
        assert!(held.len() <= connections_max, "served past the cap");
    };
    assert!(
        held.len() + 4 >= connections_max,
        "refused at {} of {connections_max}",
        held.len()
    );
    assert!(refusal.contains("connection_limit"), "{refusal}");
    assert!(refusal.contains("--max-connections"), "{refusal}");
    assert!(open_fds(server.pid()) < FILES_MAX as usize);
    drop(held);
    let deadline = Deadline::new("/healthz once the held connections closed");
    while !get_closing(&server, "/healthz").starts_with("HTTP/1.1 200") {
        deadline.check();
    }

    assert!(server.terminate().success());
    let server = ServerProcess::start_with_open_files(dir.path(), &[], FILES_MAX);
    let client = server.client();
    assert_eq!(client.list_topics().await.unwrap().len(), topics_max);
    let refused = client.create_topic("one-more").await.unwrap_err();
    assert_eq!(refused.code(), Some("topic_limit"));
    assert!(get_closing(&server, "/healthz").starts_with("HTTP/1.1 200"));
}

// Proves the dead-letter finding is fixed: with 1 MiB dead letters, one page asked for
// with limit 10000 holds at most 16 MiB of payloads (not every letter), names the next
// page, and walking the pages still returns every dead letter once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_page_of_large_letters_stays_under_the_byte_cap() {
    const LETTERS: usize = 24;
    const LETTER_BYTES: usize = 1 << 20;
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group("t", "g", 1, StartPosition::Earliest)
        .await
        .unwrap();
    for index in 0..LETTERS {
        client
            .publish("t", vec![index as u8; LETTER_BYTES])
            .await
            .unwrap();
        let delivery = client.poll("t", "g").await.unwrap().unwrap();
        client.nack("t", "g", delivery.id()).await.unwrap();
    }
    let first = client.dead_letters_page("t", "g", 0, 10_000).await.unwrap();
    let bytes: usize = first
        .dead_letters
        .iter()
        .map(|dead| dead.payload.len())
        .sum();
    assert!(
        bytes <= mailroom_client::api::limits::PAGE_BYTES_MAX,
        "{bytes}"
    );
    assert!(!first.dead_letters.is_empty() && first.dead_letters.len() < LETTERS);
    let next = first.next.expect("a next page");
    assert_eq!(next, first.dead_letters.len() as u64);
    let all = client.dead_letters("t", "g").await.unwrap();
    let offsets: Vec<u64> = all.iter().map(|dead| dead.offset).collect();
    assert_eq!(offsets, (0..LETTERS as u64).collect::<Vec<_>>());
    assert!(all.iter().all(|dead| dead.payload[0] == dead.offset as u8));
}

/// The resident memory of process `pid`, in bytes (`VmRSS` of `/proc/<pid>/status`).
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

// Proves the mailbox finding is fixed: an SSE subscriber that never reads, on a channel
// with a mailbox of 65,536 messages but a 4 MiB byte budget, fed 300 messages of 1 MiB,
// grows the server's resident memory by a bounded amount (not the ~300 MiB the count
// alone allowed); the messages past the budget are counted as drops, and /metrics shows
// queued bytes within the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_that_never_reads_pins_no_more_than_its_byte_budget() {
    const MESSAGES: usize = 300;
    const MESSAGE_BYTES: usize = 1 << 20;
    const BUDGET: usize = 4 << 20;
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    let settings = CreateChannel {
        max_subscribers: Some(1),
        mailbox_capacity: Some(65_536),
        mailbox_bytes: Some(BUDGET),
    };
    client.create_channel_with("c", &settings).await.unwrap();
    // A subscriber with a small receive buffer that reads its response head and then
    // nothing more.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let address: std::net::SocketAddr = server.address().parse().unwrap();
    socket.connect(&address.into()).unwrap();
    let mut subscriber: TcpStream = socket.into();
    subscriber
        .write_all(b"GET /v1/channels/c/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut head = [0; 12];
    subscriber.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    let before = resident_bytes(server.pid());
    let payload = bytes::Bytes::from(vec![b'x'; MESSAGE_BYTES]);
    let mut dropped = 0;
    for _ in 0..MESSAGES {
        dropped += client
            .publish_channel("c", payload.clone())
            .await
            .unwrap()
            .dropped;
    }
    let grown = resident_bytes(server.pid()).saturating_sub(before);
    // The budget, the socket buffers, the writer's batch and the allocator's slack: far
    // below the 300 MiB the messages weigh.
    assert!(
        grown < 96 << 20,
        "resident memory grew by {} MiB",
        grown >> 20
    );
    assert!(dropped as usize >= MESSAGES - 16, "only {dropped} dropped");
    let info = client.list_channels().await.unwrap();
    assert_eq!(
        (info[0].dropped, info[0].mailbox_bytes),
        (dropped, BUDGET as u64)
    );
    let series = |kind: &str| format!("mailroom_{kind}{{resource=\"mailbox_bytes\"}}");
    let queued = metric(&server, &series("usage")).await.unwrap();
    assert!(queued <= BUDGET as f64, "{queued}");
    assert_eq!(metric(&server, &series("limit")).await, Some(BUDGET as f64));
    drop(subscriber);
}
