//! `mailroom read`, `mailroom tail [--follow]` and `mailroom group seek --time` against
//! the real binary: what they print (text and `--json`), that reading moves no group,
//! and that a following tail prints a message published while it waits.

mod cli_support;
mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use cli_support::{assert_usage_error, documents, mailroom};
use common::{temp_dir, ServerProcess};
use serde_json::{json, Value};

/// Runs the CLI against `server` and returns its `--json` documents.
fn json_run(server: &ServerProcess, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    documents(&mailroom(&server.url, None, &all, b""))
}

/// Runs the CLI against `server` and returns its text output.
fn text_run(server: &ServerProcess, args: &[&str]) -> String {
    let output = mailroom(&server.url, None, args, b"");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Topic `t` with group `g` and messages `m0` to `m4` (`m1` with key `k`).
fn populated() -> (tempfile::TempDir, ServerProcess) {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    text_run(&server, &["topic", "create", "t"]);
    text_run(&server, &["group", "create", "t", "g"]);
    for i in 0..5 {
        let payload = format!("m{i}");
        let mut args = vec!["publish", "t", payload.as_str()];
        if i == 1 {
            args.extend(["--key", "k"]);
        }
        text_run(&server, &args);
    }
    (dir, server)
}

fn offsets(documents: &[Value]) -> Vec<u64> {
    documents
        .iter()
        .filter_map(|d| d["offset"].as_u64())
        .collect()
}

// Proves `read` prints every message with its metadata (JSON and text), `--from` and
// `--limit` page with a `next` line, `--from-time` starts by publish time, bad usage
// exits 2, and the group's position does not move.
#[test]
fn read_prints_the_log_and_moves_no_group() {
    let (_dir, server) = populated();
    let all = json_run(&server, &["read", "t"]);
    assert_eq!(offsets(&all), [0, 1, 2, 3, 4]);
    assert_eq!(all[1]["payload"], "m1");
    assert_eq!(all[1]["key"], "k");
    assert!(all[0]["published_at_ms"].as_u64().is_some());
    let page = json_run(&server, &["read", "t", "--from", "1", "--limit", "2"]);
    assert_eq!(offsets(&page), [1, 2]);
    assert_eq!(page.last().unwrap(), &json!({"next": 3}));
    let time = all[3]["published_at_ms"].as_u64().unwrap().to_string();
    let timed = json_run(&server, &["read", "t", "--from-time", &time]);
    let expected = all
        .iter()
        .position(|d| d["published_at_ms"].as_u64().unwrap() >= time.parse().unwrap())
        .unwrap() as u64;
    assert_eq!(offsets(&timed)[0], expected);
    let text = text_run(&server, &["read", "t", "--limit", "2"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("offset 0 at 20") && lines[0].ends_with(": m0"),
        "{text}"
    );
    assert!(lines[1].ends_with(": m1 key=k"), "{text}");
    assert_eq!(lines[2], "next: --from 2");
    let both = mailroom(
        &server.url,
        None,
        &["read", "t", "--from", "1", "--from-time", "5"],
        b"",
    );
    assert_usage_error("both starts", &both, "--from");
    let bad_time = mailroom(
        &server.url,
        None,
        &["read", "t", "--from-time", "soon"],
        b"",
    );
    assert_usage_error("bad time", &bad_time, "soon");
    let group = json_run(&server, &["group", "info", "t", "g"]);
    assert_eq!(group[0]["position"], 0, "{group:?}");
}

// Proves `tail -n 2` prints the last two messages, and `group seek --time` moves the
// group to the first message published at or after the time.
#[test]
fn tail_prints_the_end_and_seek_takes_a_time() {
    let (_dir, server) = populated();
    let tail = json_run(&server, &["tail", "t", "-n", "2"]);
    assert_eq!(offsets(&tail), [3, 4]);
    let all = json_run(&server, &["read", "t"]);
    let time = all[2]["published_at_ms"].as_u64().unwrap();
    let expected = all
        .iter()
        .position(|d| d["published_at_ms"].as_u64().unwrap() >= time)
        .unwrap();
    let seeked = json_run(
        &server,
        &["group", "seek", "t", "g", "--time", &time.to_string()],
    );
    assert_eq!(seeked, [json!({"position": expected})]);
    let end = json_run(
        &server,
        &["group", "seek", "t", "g", "--time", "2999-01-01T00:00:00Z"],
    );
    assert_eq!(end, [json!({"position": 5})]);
    let neither = mailroom(&server.url, None, &["group", "seek", "t", "g"], b"");
    assert_eq!(neither.status.code(), Some(2));
}

// Proves `tail --follow` prints the tail, then a message published while it waits,
// and keeps running until it is stopped.
#[test]
fn tail_follow_prints_new_messages() {
    let (_dir, server) = populated();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args([
            "--server",
            &server.url,
            "--json",
            "tail",
            "t",
            "-n",
            "1",
            "--follow",
        ])
        .env_remove("MAILROOM_TOKEN")
        .env_remove("MAILROOM_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tail");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["payload"], "m4");
    text_run(&server, &["publish", "t", "late"]);
    let next: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (next["offset"].as_u64(), next["payload"].as_str()),
        (Some(5), Some("late"))
    );
    assert!(child.try_wait().unwrap().is_none(), "still following");
    child.kill().unwrap();
    child.wait().unwrap();
}
