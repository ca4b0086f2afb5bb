//! With `--json`, a failure is one JSON object on stdout,
//! `{"error":{"code":...,"message":...}}` (with `status` when the server answered), as
//! the README says; the exit codes stay those of the plain form and stderr keeps its
//! one plain line. Without `--json`, stdout stays empty on a failure.

mod cli_support;
mod common;

use cli_support::{assert_fails_as_json, assert_fails_cleanly, mailroom};
use common::{temp_dir, ServerProcess};

// Proves a server's error answer becomes its code and status, and the message says
// what the plain line says.
#[test]
fn server_errors_carry_the_servers_code() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    let output = mailroom(&server.url, None, &["--json", "topic", "info", "nope"], b"");
    let error = assert_fails_as_json("topic info nope", &output, 1, "unknown_topic");
    assert_eq!(error["status"], 404, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("\"nope\""),
        "{error}"
    );

    let plain = mailroom(&server.url, None, &["topic", "info", "nope"], b"");
    assert_fails_cleanly("plain topic info nope", &plain, "unknown_topic");
    assert!(plain.stdout.is_empty(), "a plain failure printed a result");
}

// Proves a failure with no server answer gets the CLI's own code: `unreachable` when
// nothing listens at the address (exit 1), with no `status`.
#[test]
fn transport_errors_get_the_clis_codes() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [&["--json", "stats"][..], &["topic", "list", "--json"]] {
        let output = mailroom(&url, None, args, b"");
        let error = assert_fails_as_json(&args.join(" "), &output, 1, "unreachable");
        assert!(error.get("status").is_none(), "{error}");
        assert!(error["message"].as_str().unwrap().contains(&url), "{error}");
    }
}

// Proves bad usage is `usage` with exit 2, whether clap refused it (a bad name, an
// unknown flag) or the CLI did after parsing (a --server that is no URL).
#[test]
fn usage_errors_exit_2_as_json() {
    let url = "http://127.0.0.1:9";
    for args in [
        &["--json", "topic", "create", ".."][..],
        &["--json", "publish", "t", "m", "--no-such-flag"],
    ] {
        let output = mailroom(url, None, args, b"");
        assert_fails_as_json(&args.join(" "), &output, 2, "usage");
    }
    let output = mailroom("notaurl", None, &["--json", "stats"], b"");
    let error = assert_fails_as_json("--server notaurl", &output, 2, "usage");
    assert!(
        error["message"].as_str().unwrap().contains("--server"),
        "{error}"
    );
}

// Proves `serve --help` lists the server's flags and none of the client-only ones.
#[test]
fn serve_help_lists_only_server_flags() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains("--listen") && help.contains("--token"),
        "{help}"
    );
    for flag in ["--server", "--json", "--timeout"] {
        assert!(!help.contains(flag), "{flag} in {help}");
    }
}
