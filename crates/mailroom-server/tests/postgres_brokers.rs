//! The delivery rules across brokers: two brokers over one PostgreSQL database, with
//! calls alternating between them, answer as one broker would (docs/scale-out.md).

mod postgres_support;

use axum::http::Method;
use postgres_support::{ok, send, two_brokers};
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
