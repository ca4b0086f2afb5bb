//! Running the `mailroom` binary as a user would, and judging how it failed.

#![allow(dead_code)] // Each test file uses a different subset.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Runs `mailroom --server URL [--token TOKEN] ARGS` with `stdin`, `MAILROOM_URL` and
/// `MAILROOM_TOKEN` cleared so only the flags count, and returns its output.
pub fn mailroom(url: &str, token: Option<&str>, args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mailroom"));
    command.args(["--server", url]);
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    let mut child = command
        .args(args)
        .env_remove("MAILROOM_TOKEN")
        .env_remove("MAILROOM_URL")
        // A panic must show as a panic message, not depend on the caller's settings.
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mailroom");
    // A command that fails before reading stdin closes the pipe; that is not our error.
    let _ = child.stdin.take().expect("piped stdin").write_all(stdin);
    child.wait_with_output().expect("wait for mailroom")
}

/// The JSON documents a successful command printed, one per line.
pub fn documents(output: &Output) -> Vec<Value> {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// What a failed run must never print: a panic, a backtrace, or a Rust `Debug` dump
/// of an error value instead of its message.
const UNCLEAN: [&str; 7] = [
    "panicked",
    "backtrace",
    "Error {",
    "Os {",
    "Api {",
    "kind:",
    "Custom {",
];

/// Asserts `output` is a runtime failure reported cleanly: exit code 1 and exactly one
/// stderr line, `mailroom: ...`, that contains `expected`; returns that line.
pub fn assert_fails_cleanly(what: &str, output: &Output, expected: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: not one line: {stderr}");
    assert!(stderr.starts_with("mailroom: "), "{what}: {stderr}");
    assert!(
        stderr.contains(expected),
        "{what}: no {expected:?}: {stderr}"
    );
    for unclean in UNCLEAN {
        assert!(!stderr.contains(unclean), "{what}: {unclean:?} in {stderr}");
    }
    stderr.trim_end().to_owned()
}

/// Asserts `output` is a usage error in clap's form: exit code 2, a first line
/// `error: ...` that contains `expected`, no panic or dump, and nothing on stdout.
pub fn assert_usage_error(what: &str, output: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("error: "), "{what}: {stderr}");
    assert!(
        stderr.contains(expected),
        "{what}: no {expected:?}: {stderr}"
    );
    for unclean in UNCLEAN {
        assert!(!stderr.contains(unclean), "{what}: {unclean:?} in {stderr}");
    }
    assert!(output.stdout.is_empty(), "{what}: printed a result");
}

/// Asserts `output` is a `--json` failure: exit code `exit`, one line of JSON on stdout,
/// `{"error":{"code":CODE,"message":...}}` with the code `code`, and the plain
/// `mailroom: ...` (or clap's `error: ...`) line still on stderr for a person; returns
/// the error object.
pub fn assert_fails_as_json(what: &str, output: &Output, exit: i32, code: &str) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(exit), "{what}: {stderr}");
    assert_eq!(stdout.lines().count(), 1, "{what}: not one line: {stdout}");
    let document: Value = serde_json::from_str(&stdout).expect("a JSON error");
    let error = document["error"].clone();
    assert_eq!(error["code"], code, "{what}: {document}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {document}"
    );
    assert!(
        stderr.starts_with("mailroom: ") || stderr.starts_with("error: "),
        "{what}: {stderr}"
    );
    for unclean in UNCLEAN {
        assert!(!stdout.contains(unclean), "{what}: {unclean:?} in {stdout}");
    }
    error
}
