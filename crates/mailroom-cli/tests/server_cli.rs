//! The `mailroom` subcommands against a real server, through their `--json` output.

mod cli_support;
mod common;

use std::process::{Command, Output, Stdio};

use cli_support::documents;
use common::{temp_dir, ServerProcess};

/// Runs `mailroom --server URL --json ARGS` with `stdin`, and returns its output.
fn mailroom(server: &ServerProcess, args: &[&str], stdin: &[u8]) -> Output {
    let args = [&["--json"], args].concat();
    cli_support::mailroom(&server.url, None, &args, stdin)
}

// Proves the topic commands work end to end: create, publish one message and many lines
// from stdin, consume with a failing handler and --nack until the message is
// dead-lettered, consume the rest with acks, and read the dead letters and stats.
#[test]
fn topic_commands_end_to_end() {
    let dir = temp_dir();
    // Durability is not under test here, and 2,400 synced acks would dominate the run.
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    assert_eq!(
        documents(&mailroom(&server, &["topic", "create", "jobs"], b""))[0]["created"],
        true
    );
    let group = ["group", "create", "jobs", "workers", "--max-attempts", "2"];
    documents(&mailroom(&server, &group, b""));
    assert_eq!(
        documents(&mailroom(&server, &["publish", "jobs", "poison"], b""))[0]["offset"],
        0
    );
    let lines = (1..=1200).map(|n| format!("job {n}\n")).collect::<String>();
    let published = documents(&mailroom(&server, &["publish", "jobs"], lines.as_bytes()));
    assert_eq!(published[0]["published"], 1200);
    assert_eq!(
        (
            published[0]["first_offset"].clone(),
            published[0]["last_offset"].clone()
        ),
        (1.into(), 1200.into())
    );

    // The handler fails on "poison": two attempts, then a dead letter.
    let failing = [
        "consume",
        "jobs",
        "workers",
        "--count",
        "2",
        "--exec",
        "! grep -q poison",
        "--nack",
    ];
    let nacked = documents(&mailroom(&server, &failing, b""));
    let outcomes: Vec<_> = nacked
        .iter()
        .map(|d| {
            (
                d["offset"].clone(),
                d["attempt"].clone(),
                d["outcome"].clone(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (0.into(), 1.into(), "nacked (will retry)".into()),
            (0.into(), 2.into(), "nacked (dead-lettered)".into()),
        ]
    );
    // Without --nack a failing handler stops and leaves the delivery in flight.
    let stuck = mailroom(
        &server,
        &["consume", "jobs", "workers", "--exec", "false"],
        b"",
    );
    assert!(!stuck.status.success());
    let info = documents(&mailroom(
        &server,
        &["group", "info", "jobs", "workers"],
        b"",
    ));
    assert_eq!(
        info[0]["in_flight"],
        serde_json::json!({ "offset": 1, "attempt": 1 })
    );

    let consumed = documents(&mailroom(&server, &["consume", "jobs", "workers"], b""));
    assert_eq!(consumed.len(), 1200);
    assert_eq!(
        (
            consumed[0]["payload"].clone(),
            consumed[0]["attempt"].clone()
        ),
        ("job 1".into(), 1.into())
    );
    assert_eq!(consumed[1199]["payload"], "job 1200");
    assert!(consumed.iter().all(|d| d["outcome"] == "acked"));

    let letters = documents(&mailroom(
        &server,
        &["dead-letters", "jobs", "workers"],
        b"",
    ));
    assert_eq!(
        (
            letters.len(),
            letters[0]["payload"].clone(),
            letters[0]["attempts"].clone()
        ),
        (1, "poison".into(), 2.into())
    );
    let stats = documents(&mailroom(&server, &["stats"], b""));
    let group = &stats[0]["topics"][0]["groups"][0];
    assert_eq!(
        (
            group["position"].clone(),
            group["lag"].clone(),
            group["dead_letters"].clone()
        ),
        (1201.into(), 0.into(), 1.into())
    );
    let listed = documents(&mailroom(&server, &["topic", "list"], b""));
    assert_eq!(listed[0]["end"], 1201);
    // A failing call prints the server's error and exits non-zero.
    let missing = mailroom(&server, &["topic", "info", "missing"], b"");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("unknown_topic"));
}

// Proves `mailroom demo` runs the live-channel scenario and its counts add up: the fast
// subscribers receive every update, the publish answers account for every subscriber,
// and whatever the slow one missed is exactly the drops reported. (The mailbox holds
// all 400 updates so a loaded CI machine cannot make a fast subscriber drop; drops
// themselves are proven in server_channels.rs.)
#[test]
fn demo_counts_add_up() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &[]);
    let output = mailroom(
        &server,
        &[
            "demo",
            "--updates",
            "400",
            "--mailbox-capacity",
            "400",
            "--slow-delay-ms",
            "1",
        ],
        b"",
    );
    let lines = documents(&output);
    let received: Vec<u64> = lines[..3]
        .iter()
        .map(|d| d["received"].as_u64().unwrap())
        .collect();
    assert_eq!(
        &received[..2],
        &[400, 400],
        "fast subscribers got everything"
    );
    let summary = &lines[3];
    let (delivered, dropped) = (
        summary["delivered"].as_u64().unwrap(),
        summary["dropped"].as_u64().unwrap(),
    );
    assert_eq!(delivered + dropped, 3 * 400);
    assert_eq!(
        received[2] + dropped,
        400,
        "the slow subscriber's drops are the only drops"
    );
    // The channel subscribe command sees a channel's messages and ends when it closes.
    documents(&mailroom(
        &server,
        &["channel", "create", "c", "--max-subscribers", "1"],
        b"",
    ));
    let mut subscriber = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["--server", &server.url, "channel", "subscribe", "c"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the subscriber holds the channel's only slot.
    while documents(&mailroom(&server, &["channel", "list"], b""))[0]["subscribers"] != 1 {
        std::thread::yield_now();
    }
    documents(&mailroom(
        &server,
        &["channel", "publish", "c"],
        b"one\ntwo\n",
    ));
    documents(&mailroom(&server, &["channel", "close", "c"], b""));
    let printed = subscriber.wait_with_output_helper();
    assert_eq!(printed, "one\ntwo\n");
}

trait WaitOutput {
    fn wait_with_output_helper(&mut self) -> String;
}

impl WaitOutput for std::process::Child {
    fn wait_with_output_helper(&mut self) -> String {
        let mut text = String::new();
        std::io::Read::read_to_string(self.stdout.as_mut().unwrap(), &mut text).unwrap();
        assert!(self.wait().unwrap().success());
        text
    }
}

/// Serves one request on a server logging to a file with `rust_log` (`None`: unset), stops
/// it, and returns what it logged.
fn log_of_one_request(rust_log: Option<&str>) -> String {
    let dir = temp_dir();
    let log = dir.path().join("stderr");
    let server = ServerProcess::start_logging_to(&dir.path().join("data"), &log, rust_log);
    let output = mailroom(&server, &["topic", "create", "logged"], b"");
    assert!(output.status.success(), "{output:?}");
    assert!(server.terminate().success());
    std::fs::read_to_string(&log).expect("the server's stderr")
}

// Proves the access log is off by default (one line per request costs every request a
// `write(2)` and its formatting, see BENCHMARKS.md) and on with RUST_LOG=info, where its
// line names the route pattern and the status.
#[test]
fn access_log_is_off_unless_asked_for() {
    let quiet = log_of_one_request(None);
    assert!(!quiet.contains("mailroom::access"), "{quiet}");
    let logged = log_of_one_request(Some("info"));
    let line = logged
        .lines()
        .find(|line| line.contains("mailroom::access"))
        .unwrap_or_else(|| panic!("no access-log line in {logged}"));
    assert!(line.contains("/v1/topics/{topic}"), "{line}");
    assert!(line.contains("status=201"), "{line}");
}
