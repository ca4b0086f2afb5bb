//! `mailroom publish --key K --header NAME=VALUE` and the key, headers and publish time in
//! `group poll` and `consume` output, against the real server binary.

mod cli_support;
mod common;

use cli_support::{documents, mailroom};
use common::{temp_dir, ServerProcess};
use serde_json::{json, Value};

fn ok(server: &ServerProcess, args: &[&str], stdin: &[u8]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    documents(&mailroom(&server.url, None, &all, stdin))
}

/// `document` without its publish time, which must be there.
fn without_time(mut document: Value) -> Value {
    let object = document.as_object_mut().expect("an object");
    assert!(object
        .remove("published_at_ms")
        .and_then(|at| at.as_u64())
        .is_some());
    document
}

// Proves --key and repeated --header reach the server for one message and for every line
// of stdin, and that `group poll` and `consume` show them (and nothing for a bare message).
#[test]
fn publish_flags_reach_poll_and_consume_output() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "t"], b"");
    ok(
        &server,
        &["group", "create", "t", "g", "--max-in-flight", "4"],
        b"",
    );
    ok(&server, &["group", "create", "t", "c"], b"");
    let one = [
        "publish",
        "t",
        "one",
        "--key",
        "k1",
        "--header",
        "trace=t-1",
        "--header",
        "a=b=c",
    ];
    assert_eq!(ok(&server, &one, b""), [json!({"topic": "t", "offset": 0})]);
    let lines = ["publish", "t", "--key", "k2"];
    ok(&server, &lines, b"two\nthree\n");
    ok(&server, &["publish", "t", "bare"], b"");

    let polled = ok(&server, &["group", "poll", "t", "g", "--max", "4"], b"");
    let polled: Vec<Value> = polled.into_iter().map(without_time).collect();
    // Offset 2 shares key k2 with offset 1, in flight: ordering keys hold it back
    // (docs/semantics.md, "Ordering keys"); group c below delivers it with its key.
    assert_eq!(
        polled,
        [
            json!({"offset": 0, "attempt": 1, "payload": "one", "key": "k1",
                   "headers": {"trace": "t-1", "a": "b=c"}}),
            json!({"offset": 1, "attempt": 1, "payload": "two", "key": "k2"}),
            json!({"offset": 3, "attempt": 1, "payload": "bare"}),
        ]
    );
    let consumed = ok(&server, &["consume", "t", "c", "--exec", "true"], b"");
    let first = without_time(consumed[0].clone());
    assert_eq!(first["key"], json!("k1"));
    let third = without_time(consumed[2].clone());
    assert_eq!((&third["offset"], &third["key"]), (&json!(2), &json!("k2")));
    assert_eq!(first["headers"], json!({"trace": "t-1", "a": "b=c"}));

    let bad = mailroom(
        &server.url,
        None,
        &["publish", "t", "x", "--header", "novalue"],
        b"",
    );
    assert!(!bad.status.success(), "a header without = is refused");
}

// Proves `publish --idempotency-key` stores the first publish and answers a repeat with
// the first offset and `"duplicate": true` (in words too), storing nothing, and that the
// flag is refused without a message argument and with a key past its limit.
#[test]
fn publish_idempotency_key_says_when_the_answer_is_a_duplicate() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "t"], b"");
    ok(&server, &["publish", "t", "before"], b"");
    let once = ["publish", "t", "pay 7", "--idempotency-key", "invoice-7"];
    let first = json!({"topic": "t", "offset": 1, "duplicate": false});
    assert_eq!(ok(&server, &once, b""), [first]);
    let again = json!({"topic": "t", "offset": 1, "duplicate": true});
    assert_eq!(ok(&server, &once, b""), [again]);
    let words = mailroom(&server.url, None, &once, b"");
    let words = String::from_utf8_lossy(&words.stdout).into_owned();
    assert!(
        words.contains("duplicate") && words.contains("offset 1"),
        "{words}"
    );
    let info = ok(&server, &["topic", "info", "t"], b"");
    assert_eq!(info[0]["end"], json!(2), "the repeats stored nothing");

    let lines = mailroom(
        &server.url,
        None,
        &["publish", "t", "--idempotency-key", "k"],
        b"a\nb\n",
    );
    assert!(!lines.status.success(), "lines cannot share one key");
    let long = "k".repeat(257);
    let refused = mailroom(
        &server.url,
        None,
        &["--json", "publish", "t", "x", "--idempotency-key", &long],
        b"",
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(stderr.contains("idempotency_key"), "{stderr}");
}
