//! `mailroom dead-letters` (reasons, times, pages) and `mailroom group redrive|purge`
//! with offset ranges against the real server binary.

mod cli_support;
mod common;

use cli_support::{documents, mailroom};
use common::{temp_dir, ServerProcess};
use serde_json::Value;

fn ok(server: &ServerProcess, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    documents(&mailroom(&server.url, None, &all, b""))
}

fn offsets(documents: &[Value]) -> Vec<u64> {
    documents
        .iter()
        .map(|d| d["offset"].as_u64().expect("an offset"))
        .collect()
}

// Regression: `redrive --from N` without `--to` sent u64::MAX as the open end and the
// server refused it. Proves a range open at either end acts on exactly the dead letters
// inside it: `purge --to 1` takes offset 0, `redrive --from 2` puts back 2 and 3 (and
// they are delivered again), and offset 1 stays a dead letter.
#[test]
fn ranges_open_at_either_end() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "jobs"]);
    ok(
        &server,
        &["group", "create", "jobs", "g", "--max-attempts", "1"],
    );
    for n in 0..4 {
        ok(&server, &["publish", "jobs", &format!("m{n}")]);
    }
    let failing = ["consume", "jobs", "g", "--exec", "false", "--nack"];
    assert_eq!(offsets(&ok(&server, &failing)), [0, 1, 2, 3]);
    assert_eq!(
        offsets(&ok(&server, &["dead-letters", "jobs", "g"])),
        [0, 1, 2, 3]
    );

    let purged = ok(&server, &["group", "purge", "jobs", "g", "--to", "1"]);
    assert_eq!(purged[0]["count"], 1);
    let redriven = ok(&server, &["group", "redrive", "jobs", "g", "--from", "2"]);
    assert_eq!(redriven[0]["count"], 2);
    assert_eq!(offsets(&ok(&server, &["dead-letters", "jobs", "g"])), [1]);
    assert_eq!(offsets(&ok(&server, &["consume", "jobs", "g"])), [2, 3]);
}

/// A server with topic `jobs` whose group `g` has dead-lettered `m0` (rejected with the
/// reason "boom"), `m1` and `m2` (nacked after their one attempt, no reason).
fn three_dead_letters() -> (tempfile::TempDir, ServerProcess) {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    ok(&server, &["topic", "create", "jobs"]);
    ok(
        &server,
        &["group", "create", "jobs", "g", "--max-attempts", "1"],
    );
    for n in 0..3 {
        ok(&server, &["publish", "jobs", &format!("m{n}")]);
    }
    ok(&server, &["group", "poll", "jobs", "g"]);
    let reject = ["group", "nack", "jobs", "g", "0", "1", "--kind", "reject"];
    ok(&server, &[&reject[..], &["--reason", "boom"]].concat());
    let failing = ["consume", "jobs", "g", "--exec", "false", "--nack"];
    assert_eq!(offsets(&ok(&server, &failing)), [1, 2]);
    (dir, server)
}

// Proves each dead letter shows its reason and when it was dead-lettered, in JSON as
// `reason` and `at_ms` and for people as words and an RFC 3339 UTC time.
#[test]
fn dead_letters_show_reason_and_time() {
    let (_dir, server) = three_dead_letters();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let letters = ok(&server, &["dead-letters", "jobs", "g"]);
    assert_eq!(offsets(&letters), [0, 1, 2]);
    assert_eq!(letters[0]["reason"], "boom");
    assert_eq!(letters[1]["reason"], Value::Null);
    for letter in &letters {
        let at_ms = letter["at_ms"].as_u64().expect("at_ms");
        assert!(
            now_ms - 60_000 < at_ms && at_ms < now_ms + 60_000,
            "{letter}"
        );
        assert_eq!(letter["attempts"], 1, "{letter}");
    }
    let text = mailroom(&server.url, None, &["dead-letters", "jobs", "g"], b"");
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("offset 0 after 1 attempt at 20"),
        "{text}"
    );
    assert!(lines[0].ends_with("Z (boom): m0"), "{text}");
    assert!(lines[1].ends_with("Z (no reason): m1"), "{text}");
}

// Proves the paging: --limit lists one page and where the next starts, --from starts
// there, and --all follows every page to the end.
#[test]
fn dead_letters_page() {
    let (_dir, server) = three_dead_letters();
    let first = ok(&server, &["dead-letters", "jobs", "g", "--limit", "2"]);
    assert_eq!(offsets(&first[..2]), [0, 1]);
    assert_eq!(first[2], serde_json::json!({ "next": 2 }));
    assert_eq!(first.len(), 3);
    let last = ok(
        &server,
        &["dead-letters", "jobs", "g", "--from", "2", "--limit", "2"],
    );
    assert_eq!(offsets(&last), [2]);
    let all = ok(
        &server,
        &["dead-letters", "jobs", "g", "--limit", "1", "--all"],
    );
    assert_eq!(offsets(&all), [0, 1, 2]);
    let text = mailroom(
        &server.url,
        None,
        &["dead-letters", "jobs", "g", "--limit", "1"],
        b"",
    );
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.ends_with("\nnext: --from 1\n"), "{text}");
}
