//! `mailroom topic delete` and `mailroom group delete` against the real server binary:
//! what they print, how they fail, and what every other command sees afterwards.

mod cli_support;
mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{assert_fails_cleanly, documents, mailroom};
use common::{temp_dir, Deadline, ServerProcess, PROCESS_WAIT_MS_MAX};
use serde_json::{json, Value};

/// `mailroom --json ARGS` against `server`, which must succeed; its documents.
fn ok(server: &ServerProcess, args: &[&str]) -> Vec<Value> {
    documents(&mailroom(&server.url, None, &with_json(args), b""))
}

/// `mailroom --json ARGS` against `server`, which must fail with `code`.
fn fails(server: &ServerProcess, args: &[&str], code: &str) -> String {
    let output = mailroom(&server.url, None, &with_json(args), b"");
    assert_fails_cleanly(&args.join(" "), &output, code)
}

fn with_json<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    all
}

/// The payloads `consume` printed, in order.
fn consumed(server: &ServerProcess, topic: &str, group: &str) -> Vec<String> {
    ok(server, &["consume", topic, group])
        .iter()
        .map(|d| d["payload"].as_str().expect("a text payload").to_owned())
        .collect()
}

/// A topic with the groups given and the messages `m0`, `m1`, `m2`.
fn topic_with_groups(server: &ServerProcess, topic: &str, groups: &[&str]) {
    ok(server, &["topic", "create", topic]);
    for group in groups {
        ok(server, &["group", "create", topic, group]);
    }
    ok(server, &["publish", topic, "m0"]);
    ok(server, &["publish", topic, "m1"]);
    ok(server, &["publish", topic, "m2"]);
}

fn group_names(server: &ServerProcess, topic: &str) -> Vec<String> {
    let info = &ok(server, &["topic", "info", topic])[0];
    let groups = info["groups"].as_array().expect("groups");
    groups
        .iter()
        .map(|g| g["name"].as_str().expect("a name").to_owned())
        .collect()
}

// Proves `topic delete` answers with the documented line (text and JSON), takes the
// topic's groups and messages with it while another topic stays whole, makes every
// later use of the topic (and of its groups) fail with one clean `unknown_topic` line
// and exit 1, and frees the name for a new, empty topic without the old groups.
#[test]
fn topic_delete_takes_its_groups_and_messages() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    topic_with_groups(&server, "doomed", &["a", "b"]);
    topic_with_groups(&server, "kept", &["a"]);

    let text = mailroom(&server.url, None, &["topic", "delete", "doomed"], b"");
    assert!(text.status.success());
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "deleted topic doomed\n"
    );
    let names: Vec<Value> = ok(&server, &["topic", "list"])
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("kept")]);

    let message = "mailroom: server said 404 unknown_topic: unknown topic \"doomed\"";
    assert_eq!(
        fails(&server, &["topic", "delete", "doomed"], "unknown_topic"),
        message
    );
    for args in [
        &["topic", "info", "doomed"][..],
        &["group", "info", "doomed", "a"],
        &["group", "delete", "doomed", "b"],
        &["consume", "doomed", "a"],
        &["consume", "doomed", "a", "--batch", "8"],
        &["dead-letters", "doomed", "a"],
        &["publish", "doomed", "late"],
        &["group", "poll", "doomed", "a"],
    ] {
        assert_eq!(fails(&server, args, "unknown_topic"), message);
    }

    // The name is free again: the new topic is empty and has none of the old groups.
    assert_eq!(
        ok(&server, &["topic", "create", "doomed"])[0]["created"],
        true
    );
    let info = &ok(&server, &["topic", "info", "doomed"])[0];
    assert_eq!(
        (info["end"].clone(), info["groups"].clone()),
        (json!(0), json!([]))
    );
    fails(&server, &["group", "info", "doomed", "a"], "unknown_group");
    assert_eq!(consumed(&server, "kept", "a"), ["m0", "m1", "m2"]);
}

// Proves `group delete` answers with the documented line, removes only that group (its
// topic, messages and sibling group stay, the sibling's position untouched), makes
// later uses of it fail with one clean `unknown_group` line, refuses a missing topic
// with `unknown_topic`, and that a group made again under the same name starts afresh.
#[test]
fn group_delete_takes_only_that_group() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    topic_with_groups(&server, "jobs", &["gone", "stays", "quiet"]);
    ok(&server, &["consume", "jobs", "gone", "--count", "2"]);
    ok(&server, &["consume", "jobs", "stays", "--count", "1"]);

    assert_eq!(
        ok(&server, &["group", "delete", "jobs", "gone"]),
        vec![json!({ "topic": "jobs", "group": "gone", "deleted": true })]
    );
    let text = mailroom(
        &server.url,
        None,
        &["group", "delete", "jobs", "quiet"],
        b"",
    );
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "deleted group quiet on jobs\n"
    );

    let message = "mailroom: server said 404 unknown_group: unknown group \"gone\"";
    assert_eq!(
        fails(
            &server,
            &["group", "delete", "jobs", "gone"],
            "unknown_group"
        ),
        message
    );
    for args in [
        &["group", "info", "jobs", "gone"][..],
        &["consume", "jobs", "gone"],
        &["consume", "jobs", "gone", "--batch", "8"],
        &["dead-letters", "jobs", "gone"],
        &["group", "poll", "jobs", "gone", "--max", "2"],
        &["group", "purge", "jobs", "gone"],
    ] {
        assert_eq!(fails(&server, args, "unknown_group"), message);
    }
    fails(
        &server,
        &["group", "delete", "missing", "gone"],
        "unknown_topic",
    );

    assert_eq!(group_names(&server, "jobs"), ["stays"]);
    assert_eq!(ok(&server, &["topic", "info", "jobs"])[0]["end"], 3);
    assert_eq!(consumed(&server, "jobs", "stays"), ["m1", "m2"]);
    // Made again, the group remembers nothing of the deleted one's progress.
    ok(&server, &["group", "create", "jobs", "gone"]);
    assert_eq!(consumed(&server, "jobs", "gone"), ["m0", "m1", "m2"]);
}

/// `mailroom consume ARGS` running in the background, its stdout piped.
fn background_consumer(server: &ServerProcess, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["--server", &server.url, "--json", "consume"])
        .args(args)
        .env_remove("MAILROOM_TOKEN")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn consumer")
}

/// Waits for `child` to exit and returns its output; fails the test if it does not.
fn exited(mut child: Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS_MAX);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "the consumer kept running");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// How many long polls the server holds open, from its metrics.
fn long_polls_waiting(server: &ServerProcess) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let text = runtime
        .block_on(server.client().metrics())
        .expect("metrics");
    text.lines()
        .find_map(|line| line.strip_prefix("mailroom_long_polls_waiting "))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

// Proves what a running `consume --follow` sees when its topic or group is deleted
// under it: a consumer held in a long poll (`--batch`) and one polling one message at a
// time both stop with exit 1 and one clean line naming the missing topic or group,
// after settling what they had already received.
#[test]
fn following_consumers_stop_when_their_topic_or_group_goes() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "doomed"]);
    ok(&server, &["group", "create", "doomed", "g"]);
    let waiting = background_consumer(&server, &["doomed", "g", "--follow", "--batch", "4"]);
    let deadline = Deadline::new("the server to count the consumer's long poll as waiting");
    while long_polls_waiting(&server) == 0 {
        deadline.check();
        std::thread::sleep(Duration::from_millis(10));
    }
    ok(&server, &["topic", "delete", "doomed"]);
    let output = exited(waiting);
    assert_fails_cleanly("long poll", &output, "unknown_topic");

    topic_with_groups(&server, "jobs", &["g"]);
    let mut polling = background_consumer(&server, &["jobs", "g", "--follow"]);
    let stdout = polling.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut first = Vec::new();
    for _ in 0..3 {
        let line = lines.next().expect("a line").expect("UTF-8");
        let document: Value = serde_json::from_str(&line).expect("JSON");
        first.push((document["payload"].clone(), document["outcome"].clone()));
    }
    assert_eq!(first[2], (json!("m2"), json!("acked")));
    ok(&server, &["group", "delete", "jobs", "g"]);
    let output = exited(polling);
    assert_eq!(
        assert_fails_cleanly("poll loop", &output, "unknown_group"),
        "mailroom: server said 404 unknown_group: unknown group \"g\""
    );
}
