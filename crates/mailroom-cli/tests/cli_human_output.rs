//! What `mailroom` prints for people: words and units, never a Rust `Debug` value;
//! times as RFC 3339 UTC, never raw epoch milliseconds; counts with the right noun.

mod cli_support;
mod common;

use cli_support::mailroom;
use common::{temp_dir, ServerProcess};

/// `mailroom ARGS` (no `--json`), which must succeed; its stdout.
fn text(server: &ServerProcess, args: &[&str], stdin: &[u8]) -> String {
    let output = mailroom(&server.url, None, args, stdin);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Asserts `text` shows no sign of Rust's `Debug` formatting.
fn no_debug(what: &str, text: &str) {
    for sign in ["{ ", " }", "Some(", "None", "Exponential", "Fixed", "Retry"] {
        assert!(!text.contains(sign), "{what}: {sign:?} in {text}");
    }
}

// Proves group info shows a backoff in words and a dead letter's time as RFC 3339 UTC,
// a nack's outcome in words, and counts with the singular for one.
#[test]
fn group_info_dead_letters_and_counts_read_as_words() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    text(&server, &["topic", "create", "t"], b"");
    let create = ["group", "create", "t", "g", "--max-attempts", "1"];
    text(
        &server,
        &[&create[..], &["--backoff", "exp:1000:60000"]].concat(),
        b"",
    );
    let listed = text(&server, &["topic", "list"], b"");
    assert!(listed.contains("groups: g"), "{listed}");
    assert_eq!(
        text(&server, &["publish", "t"], b"m0\n"),
        "published 1 message to t at offsets 0..=0\n"
    );
    text(&server, &["group", "poll", "t", "g"], b"");
    let nacked = text(
        &server,
        &["group", "nack", "t", "g", "0", "1", "--reason", "boom"],
        b"",
    );
    assert_eq!(nacked, "nacked (dead-lettered)\n");

    let info = text(&server, &["group", "info", "t", "g"], b"");
    no_debug("group info", &info);
    assert!(
        info.contains("backoff exponential 1s doubling to 1m"),
        "{info}"
    );
    let note = info
        .lines()
        .find(|line| line.starts_with("dead letter:"))
        .expect("a dead-letter line");
    let (before, after) = note.split_once(" at ").expect("a time");
    assert_eq!(before, "dead letter: offset 0 after 1 attempt");
    let (time, reason) = after.split_once(": ").expect("a reason");
    assert_eq!(reason, "boom");
    is_rfc3339_utc(time);

    let letters = text(&server, &["dead-letters", "t", "g"], b"");
    no_debug("dead-letters", &letters);
    assert!(
        letters.contains(&format!(" at {time} (boom): m0")),
        "{letters}"
    );
    let redriven = text(&server, &["group", "redrive", "t", "g"], b"");
    assert_eq!(redriven, "redrove 1 dead letter\n");
}

/// Asserts `time` reads `YYYY-MM-DDTHH:MM:SS.mmmZ` and is this year or the next.
fn is_rfc3339_utc(time: &str) {
    let shape: String = time
        .chars()
        .map(|c| if c.is_ascii_digit() { 'd' } else { c })
        .collect();
    assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ", "{time}");
    let year: u64 = time[..4].parse().unwrap();
    let now_year = 1970
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 31_556_952;
    assert!(year + 1 >= now_year && year <= now_year + 1, "{time}");
}
