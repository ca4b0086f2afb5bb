//! The delivery rules across brokers: two brokers over one PostgreSQL database, with
//! calls alternating between them, answer as one broker would (docs/scale-out.md).

mod postgres_support;

use axum::http::Method;
use postgres_support::{database, ok, send, two_brokers, until};
use serde_json::{json, Value};

const GROUP: &str = "/v1/topics/t/groups/g";

fn id(delivery: &Value) -> String {
    json!({"offset": delivery["offset"], "attempt": delivery["attempt"]}).to_string()
}

// Proves a poll on A and a repeated poll on B return the same attempt, an ack on B for
// A's delivery succeeds, and an ack or nack naming an old attempt fails on both brokers.
#[tokio::test]
async fn calls_alternating_between_brokers_see_one_state() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(&b, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    for payload in ["one", "two"] {
        ok(&a, Method::POST, "/v1/topics/t/messages", payload).await;
    }
    let first = ok(&a, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(
        (first["offset"].clone(), first["attempt"].clone()),
        (json!(0), json!(1))
    );
    assert_eq!(first["payload"], "one");
    let again = ok(&b, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(again, first, "a repeated poll on B returns A's attempt");
    let nacked = ok(&b, Method::POST, &format!("{GROUP}/nack"), &id(&first)).await;
    assert_eq!(nacked["outcome"], "retry");
    let second = ok(&a, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(
        (second["offset"].clone(), second["attempt"].clone()),
        (json!(0), json!(2))
    );
    for broker in [&a, &b] {
        for route in ["ack", "nack"] {
            let (status, body) = send(
                broker,
                Method::POST,
                &format!("{GROUP}/{route}"),
                &id(&first),
            )
            .await;
            assert_eq!((status, body["error"].clone()), (409, json!("not_owned")));
        }
    }
    ok(&b, Method::POST, &format!("{GROUP}/ack"), &id(&second)).await;
    let next = ok(&b, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(
        (next["offset"].clone(), next["payload"].clone()),
        (json!(1), json!("two"))
    );
    let detail = ok(&a, Method::GET, GROUP, "").await;
    assert_eq!(detail["position"], 1, "{detail}");
}

// Proves two brokers racing the final nack of one message dead-letter it exactly once,
// round after round: one nack answers `dead_lettered`, the other `not_owned`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_final_nacks_dead_letter_once() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(&a, Method::PUT, GROUP, r#"{"max_attempts":1}"#).await;
    const ROUNDS: u64 = 60;
    for round in 0..ROUNDS {
        ok(
            &b,
            Method::POST,
            "/v1/topics/t/messages",
            &format!("m{round}"),
        )
        .await;
        let delivery = ok(&a, Method::POST, &format!("{GROUP}/poll"), "").await;
        assert_eq!(delivery["offset"], round);
        let body = id(&delivery);
        let route = format!("{GROUP}/nack");
        let (left, right) = tokio::join!(
            send(&a, Method::POST, &route, &body),
            send(&b, Method::POST, &route, &body)
        );
        let mut outcomes = [left, right].map(|(status, body)| match status {
            200 => body["outcome"].as_str().unwrap().to_owned(),
            _ => body["error"].as_str().unwrap().to_owned(),
        });
        outcomes.sort();
        assert_eq!(outcomes, ["dead_lettered", "not_owned"], "round {round}");
    }
    let page = ok(
        &b,
        Method::GET,
        &format!("{GROUP}/dead-letters?limit=1000"),
        "",
    )
    .await;
    let offsets: Vec<u64> = page["dead_letters"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|letter| letter["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, (0..ROUNDS).collect::<Vec<_>>());
}

// Proves a publish on A wakes a long poll waiting on B promptly (the coalesced NOTIFY),
// and prints how long the wake took.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn publish_on_one_broker_wakes_a_long_poll_on_the_other() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(&a, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    let mut delays = Vec::new();
    for round in 0..10u64 {
        let waiting = {
            let b = b.clone();
            tokio::spawn(async move {
                let body = r#"{"max":1,"wait_ms":10000}"#;
                let answer = ok(&b, Method::POST, &format!("{GROUP}/poll/batch"), body).await;
                (answer, std::time::Instant::now())
            })
        };
        // Let the long poll find nothing and wait (its wait is what is measured).
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let published = std::time::Instant::now();
        ok(
            &a,
            Method::POST,
            "/v1/topics/t/messages",
            &format!("m{round}"),
        )
        .await;
        let (answer, woken) = waiting.await.unwrap();
        let delivery = &answer["deliveries"][0];
        assert_eq!(delivery["offset"], round, "{answer}");
        ok(&b, Method::POST, &format!("{GROUP}/ack"), &id(delivery)).await;
        delays.push(woken.duration_since(published));
    }
    delays.sort();
    eprintln!(
        "cross-broker wake, publish on A to answer on B: median {:?}, max {:?}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
    // Far below the 5 s recheck a lost wake would fall back to.
    assert!(delays[delays.len() - 1] < std::time::Duration::from_secs(2));
}

// Proves W > 1, consumers, leases and batches hold across brokers: each consumer gets its
// own deliveries back from either broker, a lease made on A runs out by the database's
// clock for B, and ack-with-next-poll on B refills the slot A's poll left.
#[tokio::test]
async fn windows_leases_and_batches_across_brokers() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    let config = r#"{"max_attempts":2,"max_in_flight":3,"lease_ms":300}"#;
    ok(&a, Method::PUT, GROUP, config).await;
    let batch = (0..5).map(|n| format!(r#""m{n}""#)).collect::<Vec<_>>();
    let body = format!(r#"{{"messages":[{}]}}"#, batch.join(","));
    ok(&b, Method::POST, "/v1/topics/t/messages/batch", &body).await;
    let route = format!("{GROUP}/poll/batch");
    let x = ok(&a, Method::POST, &route, r#"{"consumer":"x","max":2}"#).await;
    let y = ok(&b, Method::POST, &route, r#"{"consumer":"y","max":2}"#).await;
    let offsets = |answer: &Value| -> Vec<u64> {
        answer["deliveries"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|delivery| delivery["offset"].as_u64().unwrap())
            .collect()
    };
    assert_eq!((offsets(&x), offsets(&y)), (vec![0, 1], vec![2]));
    let x_again = ok(&b, Method::POST, &route, r#"{"consumer":"x","max":2}"#).await;
    assert_eq!(x_again["deliveries"], x["deliveries"], "x's own, from B");
    // x acks offset 0 on B and polls again in the same call: the freed slot is refilled.
    let ack_then_poll = format!(
        r#"{{"consumer":"x","max":3,"ack":[{}]}}"#,
        id(&x["deliveries"][0])
    );
    let refilled = ok(&b, Method::POST, &route, &ack_then_poll).await;
    assert_eq!(offsets(&refilled), vec![1, 3], "{refilled}");
    // The leases run out by the database's clock, seen the same by both brokers.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (status, body) = send(
        &a,
        Method::POST,
        &format!("{GROUP}/ack"),
        &id(&y["deliveries"][0]),
    )
    .await;
    assert_eq!((status, body["error"].clone()), (409, json!("not_owned")));
    let after = ok(&a, Method::POST, &route, r#"{"consumer":"z","max":3}"#).await;
    let attempts: Vec<(u64, u64)> = after["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["offset"].as_u64().unwrap(),
                d["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(attempts, vec![(1, 2), (2, 2), (3, 2)], "{after}");
    let detail = ok(&b, Method::GET, GROUP, "").await;
    assert_eq!(detail["counters"]["expired_leases"], 3, "{detail}");
}

// Proves dead letters made on one broker are redriven and purged from the other, their
// payloads kept, and a redriven message comes back as a new attempt number.
#[tokio::test]
async fn dead_letters_redrive_and_purge_across_brokers() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(&a, Method::PUT, GROUP, r#"{"max_attempts":1}"#).await;
    for n in 0..3 {
        ok(&a, Method::POST, "/v1/topics/t/messages", &format!("m{n}")).await;
        let delivery = ok(&a, Method::POST, &format!("{GROUP}/poll"), "").await;
        let reject = json!({"offset": delivery["offset"], "attempt": 1, "kind": "reject", "reason": format!("bad {n}")});
        let nacked = ok(
            &a,
            Method::POST,
            &format!("{GROUP}/nack"),
            &reject.to_string(),
        )
        .await;
        assert_eq!(nacked["outcome"], "dead_lettered");
    }
    let page = ok(
        &b,
        Method::GET,
        &format!("{GROUP}/dead-letters?limit=2"),
        "",
    )
    .await;
    let letters = page["dead_letters"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"));
    assert_eq!(letters.len(), 2);
    assert_eq!(
        (letters[1]["offset"].clone(), letters[1]["reason"].clone()),
        (json!(1), json!("bad 1"))
    );
    assert_eq!(letters[0]["payload"], "m0");
    assert_eq!(page["next"], 2, "{page}");
    let redriven = ok(
        &b,
        Method::POST,
        &format!("{GROUP}/dead-letters/redrive"),
        r#"{"from":1,"to":2}"#,
    )
    .await;
    assert_eq!(redriven["count"], 1, "{redriven}");
    let again = ok(&a, Method::POST, &format!("{GROUP}/poll"), "").await;
    assert_eq!(
        (
            again["offset"].clone(),
            again["attempt"].clone(),
            again["payload"].clone()
        ),
        (json!(1), json!(2), json!("m1"))
    );
    let purged = ok(
        &a,
        Method::POST,
        &format!("{GROUP}/dead-letters/purge"),
        r#"{"from":0,"to":3}"#,
    )
    .await;
    assert_eq!(purged["count"], 2, "{purged}");
    let detail = ok(&b, Method::GET, GROUP, "").await;
    assert_eq!(detail["dead_letters"], 0, "{detail}");
}

// Regression: a group deleted and created again on B starts at version 1 again; A, which
// had cached the old group at version 1, must not serve the old state for the new one.
#[tokio::test]
async fn recreated_group_is_not_served_from_the_old_cache() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(
        &a,
        Method::PUT,
        GROUP,
        r#"{"max_attempts":1,"max_in_flight":2}"#,
    )
    .await;
    let before = ok(&a, Method::GET, GROUP, "").await;
    assert_eq!(before["max_in_flight"], 2, "{before}");
    ok(&b, Method::DELETE, GROUP, "").await;
    ok(
        &b,
        Method::PUT,
        GROUP,
        r#"{"max_attempts":1,"max_in_flight":1}"#,
    )
    .await;
    let after = ok(&a, Method::GET, GROUP, "").await;
    assert_eq!(after["max_in_flight"], 1, "{after}");
}

// A poll reads its window from the topic's own partition of the log, named by the topic
// id A cached. Proves that when B deletes the topic (dropping that partition) and makes
// it and the group again, A's next polls answer from the new topic, and that when B
// deletes it for good, A answers 404: never the old topic's rows, never a failed call.
#[tokio::test]
async fn polls_after_the_topic_is_made_again_on_another_broker() {
    let Some((a, b)) = two_brokers().await else {
        return;
    };
    let batch = format!("{GROUP}/poll/batch");
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(&a, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    ok(&a, Method::POST, "/v1/topics/t/messages", "old").await;
    let old = ok(&a, Method::POST, &batch, r#"{"max":4}"#).await;
    assert_eq!(old["deliveries"][0]["payload"], "old", "{old}");
    ok(&b, Method::DELETE, "/v1/topics/t", "").await;
    ok(&b, Method::PUT, "/v1/topics/t", "").await;
    ok(&b, Method::PUT, GROUP, r#"{"max_attempts":3}"#).await;
    ok(&b, Method::POST, "/v1/topics/t/messages", "new").await;
    // A still caches the old topic's id: its poll's guess reads a partition that is gone.
    let new = ok(&a, Method::POST, &batch, r#"{"max":4}"#).await;
    let deliveries = new["deliveries"].as_array().expect("deliveries");
    assert_eq!(deliveries.len(), 1, "{new}");
    assert_eq!(
        (&deliveries[0]["offset"], &deliveries[0]["attempt"]),
        (&json!(0), &json!(1)),
        "{new}"
    );
    assert_eq!(deliveries[0]["payload"], "new", "{new}");
    // Polled again, it is the same delivery (a repeated poll returns the consumer's own),
    // from the cache the first poll made of the new topic.
    let again = ok(&a, Method::POST, &batch, r#"{"max":4}"#).await;
    assert_eq!(again["deliveries"], new["deliveries"], "{again}");
    ok(&b, Method::DELETE, "/v1/topics/t", "").await;
    let (status, gone) = send(&a, Method::POST, &batch, r#"{"max":4}"#).await;
    assert_eq!(status, 404, "{gone}");
    assert_eq!(gone["error"], "unknown_topic", "{gone}");
}

// Proves the other brokers hear of a write only while one of them may be waiting: a
// publish, poll and ack with no long poll anywhere tell no one; then, with a long poll on
// B waiting for the window's one slot (its waiting mark written), an ack on A wakes it
// promptly, far below the 5 s recheck a lost wake would fall back to.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_are_told_only_while_another_broker_waits() {
    let Some(cluster) = postgres_support::cluster_url() else {
        return;
    };
    let url = postgres_support::fresh_database(&cluster).await;
    let (backend_a, a) = postgres_support::broker(&url).await;
    let (_, b) = postgres_support::broker(&url).await;
    ok(&a, Method::PUT, "/v1/topics/t", "").await;
    ok(
        &a,
        Method::PUT,
        GROUP,
        r#"{"max_attempts":3,"max_in_flight":1}"#,
    )
    .await;
    for payload in ["zero", "one", "two"] {
        ok(&a, Method::POST, "/v1/topics/t/messages", payload).await;
    }
    let as_x = r#"{"consumer":"x","max":1}"#;
    let route = format!("{GROUP}/poll/batch");
    let first = ok(&a, Method::POST, &route, as_x).await["deliveries"][0].clone();
    ok(&a, Method::POST, &format!("{GROUP}/ack"), &id(&first)).await;
    let second = ok(&a, Method::POST, &route, as_x).await["deliveries"][0].clone();
    assert_eq!(second["offset"], 1, "{second}");
    assert_eq!(
        backend_a.writes_told(),
        0,
        "no broker waits, so no one is told"
    );

    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            // Another consumer: the window's one slot is x's.
            let body = r#"{"consumer":"y","max":1,"wait_ms":10000}"#;
            let answer = ok(&b, Method::POST, &format!("{GROUP}/poll/batch"), body).await;
            (answer, std::time::Instant::now())
        })
    };
    wait_for_mark(&url).await;
    let acked = std::time::Instant::now();
    ok(&a, Method::POST, &format!("{GROUP}/ack"), &id(&second)).await;
    assert_eq!(backend_a.writes_told(), 1, "B waits: the ack is told");
    let (answer, woken) = waiting.await.unwrap();
    assert_eq!(answer["deliveries"][0]["offset"], 2, "{answer}");
    assert!(woken.duration_since(acked) < std::time::Duration::from_secs(2));
}

/// Waits until a broker has written topic `t`'s waiting mark.
async fn wait_for_mark(url: &str) {
    let marked = "SELECT waiting_broker <> 0 FROM mailroom_topics WHERE name = 't'";
    until(
        &database(url).await,
        marked,
        std::time::Duration::from_secs(10),
    )
    .await;
}
