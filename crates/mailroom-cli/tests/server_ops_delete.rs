//! Deleting topics and groups over HTTP, and reading dead letters in pages, against the
//! real `mailroom serve` binary.

mod common;

use std::time::Duration;

use common::{temp_dir, Deadline, ServerProcess};
use mailroom_client::{
    BatchPoll, Client, ClientError, GroupOptions, NackKind, NackOptions, StartPosition,
};
use serde_json::Value;

/// Messages dead-lettered for the pagination test.
const DEAD_LETTERS: u64 = 25;
/// How long a woken long poll may take to answer; far below its 30 s wait, so a poll
/// that was not woken fails the test.
const WOKEN_ANSWER_MS_MAX: u64 = 10_000;

fn api_code(error: ClientError) -> (u16, String) {
    match error {
        ClientError::Api { status, code, .. } => (status, code.to_string()),
        other => panic!("expected an API error, got {other}"),
    }
}

async fn create(client: &Client, topic: &str, group: &str) {
    client.create_topic(topic).await.unwrap();
    client
        .create_group(topic, group, 3, StartPosition::Earliest)
        .await
        .unwrap();
}

// Proves deletes answer 200 with the documented body, that a deleted group or topic is a
// 404 on every later use (and on a second delete), that other topics are untouched, and
// that the deletions survive a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topics_and_groups_are_gone_also_after_restart() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "always"]);
    let client = server.client();
    create(&client, "doomed", "g").await;
    create(&client, "kept", "g").await;
    client.publish("doomed", "one").await.unwrap();
    let http = reqwest::Client::new();

    let answer = http
        .delete(server.at("/v1/topics/kept/groups/g"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"topic": "kept", "group": "g", "deleted": true})
    );
    assert_eq!(
        api_code(client.poll("kept", "g").await.unwrap_err()),
        (404, "unknown_group".into())
    );
    assert_eq!(
        api_code(client.delete_group("kept", "g").await.unwrap_err()),
        (404, "unknown_group".into())
    );

    let answer = http
        .delete(server.at("/v1/topics/doomed"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"topic": "doomed", "deleted": true})
    );
    assert_eq!(
        api_code(client.publish("doomed", "two").await.unwrap_err()),
        (404, "unknown_topic".into())
    );
    assert_eq!(
        api_code(client.poll("doomed", "g").await.unwrap_err()),
        (404, "unknown_topic".into())
    );
    assert_eq!(
        api_code(client.delete_topic("doomed").await.unwrap_err()),
        (404, "unknown_topic".into())
    );

    assert!(server.terminate().success());
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    let names: Vec<String> = client
        .list_topics()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["kept".to_owned()]);
    assert!(client.topic_info("kept").await.unwrap().groups.is_empty());
    assert_eq!(
        api_code(client.topic_info("doomed").await.unwrap_err()),
        (404, "unknown_topic".into())
    );
    // The name is free again, and the new topic starts empty.
    assert!(client.create_topic("doomed").await.unwrap());
    assert_eq!(client.topic_info("doomed").await.unwrap().end, 0);
}

async fn long_polls_waiting(server: &ServerProcess) -> u64 {
    let text = server.client().metrics().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("mailroom_long_polls_waiting "))
        .map_or(0, |value| value.trim().parse().unwrap())
}

/// Starts a 30 s long poll on `topic`/`group` and returns once the server counts it
/// as waiting.
async fn waiting_long_poll(
    server: &ServerProcess,
    topic: &'static str,
    group: &'static str,
) -> tokio::task::JoinHandle<Result<Vec<mailroom_client::Delivery>, ClientError>> {
    let client = server.client();
    let poll = tokio::spawn(async move {
        let request = BatchPoll {
            consumer: None,
            max: 1,
            wait_ms: 30_000,
            ack: &[],
        };
        client.poll_batch(topic, group, &request).await
    });
    let deadline = Deadline::new("the server to count the long poll as waiting");
    while long_polls_waiting(server).await == 0 {
        deadline.check();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    poll
}

// Proves a long poll waiting on a topic ends at once with 404 `unknown_topic` when the
// topic is deleted, and one waiting on a group with 404 `unknown_group` when the group
// is deleted, and that the deleted topic's metric series are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_end_when_their_topic_or_group_is_deleted() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    create(&client, "doomed", "g").await;
    client.publish("doomed", "one").await.unwrap();
    let first = client.poll("doomed", "g").await.unwrap().unwrap();
    client.ack("doomed", "g", first.id()).await.unwrap();
    assert!(client.metrics().await.unwrap().contains("topic=\"doomed\""));

    let poll = waiting_long_poll(&server, "doomed", "g").await;
    client.delete_topic("doomed").await.unwrap();
    let answer = tokio::time::timeout(Duration::from_millis(WOKEN_ANSWER_MS_MAX), poll)
        .await
        .expect("the long poll ended")
        .unwrap();
    assert_eq!(api_code(answer.unwrap_err()), (404, "unknown_topic".into()));
    assert!(!client.metrics().await.unwrap().contains("topic=\"doomed\""));

    create(&client, "kept", "g").await;
    let poll = waiting_long_poll(&server, "kept", "g").await;
    client.delete_group("kept", "g").await.unwrap();
    let answer = tokio::time::timeout(Duration::from_millis(WOKEN_ANSWER_MS_MAX), poll)
        .await
        .expect("the long poll ended")
        .unwrap();
    assert_eq!(api_code(answer.unwrap_err()), (404, "unknown_group".into()));
}

/// A group holding [`DEAD_LETTERS`] dead letters, made in descending offset order.
async fn dead_lettered(client: &Client) {
    client.create_topic("t").await.unwrap();
    let options = GroupOptions {
        max_in_flight: Some(64),
        ..GroupOptions::new(3)
    };
    client.create_group_with("t", "g", &options).await.unwrap();
    for n in 0..DEAD_LETTERS {
        client.publish("t", format!("m{n}")).await.unwrap();
    }
    let request = BatchPoll {
        consumer: None,
        max: 64,
        wait_ms: 0,
        ack: &[],
    };
    let mut ids: Vec<_> = client
        .poll_batch("t", "g", &request)
        .await
        .unwrap()
        .iter()
        .map(|d| d.id())
        .collect();
    assert_eq!(ids.len() as u64, DEAD_LETTERS);
    ids.reverse();
    let reject = NackOptions {
        kind: NackKind::Reject,
        ..NackOptions::default()
    };
    for outcome in client.nack_batch("t", "g", &ids, &reject).await.unwrap() {
        outcome.unwrap();
    }
}

// Proves walking the dead letters page by page, for several page sizes, yields every
// dead letter exactly once by ascending offset with its payload, that the last page's
// `next` is null, and that the unpaged call and the plain GET still return them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_walk_every_dead_letter_once() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let client = server.client();
    dead_lettered(&client).await;
    let all: Vec<u64> = (0..DEAD_LETTERS).collect();
    for limit in [1usize, 7, 25, 10_000] {
        let (mut offsets, mut pages, mut from) = (Vec::new(), 0, Some(0));
        while let Some(start) = from {
            let page = client
                .dead_letters_page("t", "g", start, limit)
                .await
                .unwrap();
            assert!(!page.dead_letters.is_empty() && page.dead_letters.len() <= limit);
            for letter in &page.dead_letters {
                assert_eq!(letter.payload, format!("m{}", letter.offset).into_bytes());
                offsets.push(letter.offset);
            }
            pages += 1;
            // A `next` that does not advance would loop forever: fail instead.
            assert!(
                pages <= DEAD_LETTERS as usize,
                "limit {limit}: the walk does not end"
            );
            from = page.next;
        }
        assert_eq!(offsets, all, "limit {limit}");
        assert_eq!(
            pages,
            (DEAD_LETTERS as usize).div_ceil(limit),
            "limit {limit}"
        );
    }
    let every: Vec<u64> = client
        .dead_letters("t", "g")
        .await
        .unwrap()
        .iter()
        .map(|d| d.offset)
        .collect();
    assert_eq!(every, all);
    let plain: Value = reqwest::get(server.at("/v1/topics/t/groups/g/dead-letters"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        plain["dead_letters"].as_array().unwrap().len() as u64,
        DEAD_LETTERS
    );
    assert_eq!(plain["next"], Value::Null);
    let from_middle = client.dead_letters_page("t", "g", 20, 3).await.unwrap();
    let offsets: Vec<u64> = from_middle.dead_letters.iter().map(|d| d.offset).collect();
    assert_eq!((offsets, from_middle.next), (vec![20, 21, 22], Some(23)));
}

// Proves a malformed page query (limit out of range or not a number, negative from, an
// unknown parameter) is a 400 with the JSON error body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_page_queries_are_400_json() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    create(&server.client(), "t", "g").await;
    for query in [
        "limit=0",
        "limit=10001",
        "limit=abc",
        "from=-1",
        "from=x",
        "page=2",
    ] {
        let url = server.at(&format!("/v1/topics/t/groups/g/dead-letters?{query}"));
        let answer = reqwest::get(url).await.unwrap();
        assert_eq!(answer.status(), 400, "{query}");
        let body: Value = answer.json().await.unwrap();
        assert!(
            body["error"].is_string() && body["message"].is_string(),
            "{query}: {body}"
        );
    }
}
