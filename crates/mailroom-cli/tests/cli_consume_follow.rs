//! `mailroom consume --follow` without `--batch` waits in a long poll while the group is
//! idle, instead of polling again and again (it made 12 polls in 3 s): counted by the
//! server's per-route request counts, not by time.

mod cli_support;
mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use cli_support::{documents, mailroom};
use common::{temp_dir, Deadline, ServerProcess};

/// The server's metrics text.
fn metrics(server: &ServerProcess) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(server.client().metrics())
        .expect("metrics")
}

/// How many requests to `route` the server has answered (every status).
fn answered(text: &str, route: &str) -> u64 {
    let label = format!("route=\"{route}\"");
    text.lines()
        .filter(|line| line.starts_with("mailroom_http_request_duration_seconds_count{"))
        .filter(|line| line.contains(&label))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// How many long polls the server holds now.
fn waiting(text: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix("mailroom_long_polls_waiting "))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

/// Waits until the server holds one long poll; returns the metrics seen then.
fn until_waiting(server: &ServerProcess) -> String {
    let deadline = Deadline::new("the consumer to wait in a long poll");
    loop {
        let text = metrics(server);
        if waiting(&text) == 1 {
            return text;
        }
        deadline.check();
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

// Proves an idle `consume --follow` holds one long poll: it waits in a batch poll of
// one, takes the message published meanwhile from it, acks it with a poll that answers
// at once, and goes back to waiting: one long poll per idle spell, and no plain polls.
#[test]
fn idle_follow_waits_in_a_long_poll() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let json = |args: &[&str]| {
        documents(&mailroom(
            &server.url,
            None,
            &[&["--json"], args].concat(),
            b"",
        ))
    };
    json(&["topic", "create", "t"]);
    json(&["group", "create", "t", "g"]);
    let mut consumer = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args([
            "--server",
            &server.url,
            "--json",
            "consume",
            "t",
            "g",
            "--follow",
        ])
        .env_remove("MAILROOM_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn consumer");
    let poll = "/v1/topics/{topic}/groups/{group}/poll";
    let batch = "/v1/topics/{topic}/groups/{group}/poll/batch";

    let first = until_waiting(&server);
    assert_eq!((answered(&first, poll), answered(&first, batch)), (0, 0));

    json(&["publish", "t", "m0"]);
    let stdout = consumer.stdout.take().expect("piped stdout");
    let line = BufReader::new(stdout)
        .lines()
        .next()
        .expect("a line")
        .expect("UTF-8");
    let document: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(
        (&document["payload"], &document["outcome"]),
        (&"m0".into(), &"acked".into())
    );

    // The message came out of the long poll; the poll that acked it found nothing, and
    // the consumer waits again. (A long poll ends after 10 s without a message, which a
    // loaded machine could reach between the two counts: then one batch poll more.)
    let second = until_waiting(&server);
    assert_eq!((answered(&second, poll), answered(&second, batch)), (0, 2));
    consumer.kill().expect("kill the consumer");
    consumer.wait().expect("reap the consumer");
}
