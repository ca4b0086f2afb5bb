//! Every `mailroom` subcommand's bad-input paths against the real binary: no server,
//! a refused token, names that do not exist, names that cannot exist, missing arguments
//! and bad flag values. Each must end with a clear error and a non-zero exit, never a
//! panic or a `Debug` dump: exit 1 and one `mailroom: ...` line for a runtime failure,
//! exit 2 and clap's `error: ...` for a usage error.

mod cli_support;
mod common;

use cli_support::{assert_fails_cleanly, assert_usage_error, mailroom};
use common::{temp_dir, ServerProcess};

/// The token the servers in these tests require.
const TOKEN: &str = "s3cret-token";

/// One invocation of a client command. In `args`, `@t`, `@g` and `@c` stand for a
/// topic, group and channel name, filled in per test.
struct Template {
    args: &'static [&'static str],
    /// Lines for stdin (commands that publish each line of stdin).
    stdin: &'static str,
    /// The command creates the resource named by its last placeholder, so a missing
    /// name there is no error.
    creates: bool,
}

const fn run(args: &'static [&'static str]) -> Template {
    Template {
        args,
        stdin: "",
        creates: false,
    }
}

const fn create(args: &'static [&'static str]) -> Template {
    Template {
        args,
        stdin: "",
        creates: true,
    }
}

const fn piped(args: &'static [&'static str], stdin: &'static str) -> Template {
    Template {
        args,
        stdin,
        creates: false,
    }
}

/// Every client subcommand (all but `serve`), in each of its main forms.
const COMMANDS: &[Template] = &[
    create(&["topic", "create", "@t"]),
    run(&["topic", "list"]),
    run(&["topic", "info", "@t"]),
    run(&["topic", "delete", "@t"]),
    create(&["group", "create", "@t", "@g"]),
    run(&["group", "info", "@t", "@g"]),
    run(&["group", "delete", "@t", "@g"]),
    run(&["group", "poll", "@t", "@g"]),
    run(&[
        "group",
        "poll",
        "@t",
        "@g",
        "--max",
        "4",
        "--consumer",
        "w1",
    ]),
    run(&["group", "nack", "@t", "@g", "0", "1", "--kind", "reject"]),
    run(&["group", "touch", "@t", "@g", "0", "1"]),
    run(&["group", "redrive", "@t", "@g", "--from", "0"]),
    run(&["group", "purge", "@t", "@g"]),
    run(&["publish", "@t", "hello"]),
    piped(&["publish", "@t"], "one\ntwo\n"),
    run(&["consume", "@t", "@g"]),
    run(&["consume", "@t", "@g", "--batch", "8", "--consumer", "w1"]),
    run(&[
        "consume", "@t", "@g", "--exec", "true", "--nack", "--count", "1",
    ]),
    run(&["dead-letters", "@t", "@g"]),
    create(&["channel", "create", "@c"]),
    run(&["channel", "list"]),
    run(&["channel", "publish", "@c", "hello"]),
    piped(&["channel", "publish", "@c"], "one\ntwo\n"),
    run(&["channel", "subscribe", "@c", "--count", "1"]),
    run(&["channel", "close", "@c"]),
    run(&["stats"]),
    create(&["demo", "--channel", "@c", "--updates", "1"]),
];

impl Template {
    /// The arguments with `@t`, `@g` and `@c` replaced by `names(placeholder)`.
    fn fill<'a>(&self, names: impl Fn(&str) -> &'a str) -> Vec<&'a str> {
        self.args
            .iter()
            .map(|arg| match *arg {
                "@t" | "@g" | "@c" => names(arg),
                other => other,
            })
            .collect()
    }

    /// The placeholders in the arguments, in order.
    fn placeholders(&self) -> Vec<&'static str> {
        let kinds = self.args.iter().copied();
        kinds.filter(|arg| arg.starts_with('@')).collect()
    }

    fn display(&self) -> String {
        self.args.join(" ")
    }
}

/// Names that exist on the servers `populated` starts.
fn existing(placeholder: &str) -> &'static str {
    match placeholder {
        "@t" => "jobs",
        "@g" => "workers",
        _ => "live",
    }
}

/// A server requiring [`TOKEN`] with topic `jobs`, its group `workers`, a message, and
/// channel `live`.
fn populated() -> (tempfile::TempDir, ServerProcess) {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never", "--token", TOKEN]);
    for args in [
        &["topic", "create", "jobs"][..],
        &["group", "create", "jobs", "workers"],
        &["publish", "jobs", "m0"],
        &["channel", "create", "live"],
    ] {
        let output = mailroom(&server.url, Some(TOKEN), args, b"");
        assert!(output.status.success(), "{args:?}: {output:?}");
    }
    (dir, server)
}

// Proves every client command, with no server at the address, fails with exit 1 and
// one line that names the address and asks whether a server runs there.
#[test]
fn no_server_at_the_address() {
    // Bind and drop a listener: nothing listens on that port afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let hint = format!("is a mailroom server running at {url}?");
    for command in COMMANDS {
        let args = command.fill(existing);
        let output = mailroom(&url, None, &args, command.stdin.as_bytes());
        let line = assert_fails_cleanly(&command.display(), &output, &hint);
        assert!(line.contains("onnection refused"), "{line}");
    }
}

// Proves every client command, with a wrong token or none, fails with exit 1 and one
// line carrying the server's 401 and the hint to pass --token.
#[test]
fn refused_tokens() {
    let (_dir, server) = populated();
    for token in [Some("wrong-token"), None] {
        for command in COMMANDS {
            let args = command.fill(existing);
            let output = mailroom(&server.url, token, &args, command.stdin.as_bytes());
            let what = format!("{} with {token:?}", command.display());
            let line = assert_fails_cleanly(&what, &output, "401 unauthorized");
            assert!(line.contains("--token or MAILROOM_TOKEN"), "{line}");
        }
    }
}

// Proves every command naming a topic, group or channel that does not exist fails with
// exit 1 and one line with the server's code for it (`unknown_topic`, `unknown_group`,
// `unknown_channel`) and the name, one placeholder at a time, the others existing.
#[test]
fn names_that_do_not_exist() {
    let (_dir, server) = populated();
    for command in COMMANDS {
        let placeholders = command.placeholders();
        for (position, missing) in placeholders.iter().enumerate() {
            if command.creates && position == placeholders.len() - 1 {
                continue;
            }
            let args = command.fill(|p| if p == *missing { "nope" } else { existing(p) });
            let code = match *missing {
                "@t" => "unknown_topic",
                "@g" => "unknown_group",
                _ => "unknown_channel",
            };
            let output = mailroom(&server.url, Some(TOKEN), &args, command.stdin.as_bytes());
            let line = assert_fails_cleanly(&args.join(" "), &output, code);
            assert!(line.contains("\"nope\""), "{line}");
        }
    }
}

// Proves every command refuses a name that breaks the server's rule (empty, `..`, a
// slash) in any name position as a usage error (exit 2) that says
// what is wrong, before sending anything: the server's data stays as it was.
#[test]
fn names_that_cannot_exist() {
    let (_dir, server) = populated();
    // The rule itself (every character class, the length limit) is proven in the unit
    // tests of `names.rs`; here, the three ways a name would change the request path.
    let bad_names = ["", "..", "a/b"];
    for command in COMMANDS {
        for missing in command.placeholders() {
            for bad in bad_names {
                let args = command.fill(|p| if p == missing { bad } else { existing(p) });
                let output = mailroom(&server.url, Some(TOKEN), &args, command.stdin.as_bytes());
                let what = format!("{} with {bad:?}", command.display());
                assert_usage_error(&what, &output, " name \"");
            }
        }
    }
    let topics = mailroom(&server.url, Some(TOKEN), &["--json", "stats"], b"");
    let stats: serde_json::Value = serde_json::from_slice(&topics.stdout).expect("stats");
    assert_eq!(stats["topics"].as_array().map(Vec::len), Some(1), "{stats}");
    assert_eq!(stats["topics"][0]["end"], 1, "{stats}");
    assert_eq!(
        stats["channels"].as_array().map(Vec::len),
        Some(1),
        "{stats}"
    );
}

// Proves a missing subcommand or positional argument is a usage error (exit 2) naming
// what is missing. No server is needed: parsing fails first.
#[test]
fn missing_arguments() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "Usage: mailroom"),
        (&["topic"], "Usage: mailroom topic"),
        (&["group"], "Usage: mailroom group"),
        (&["channel"], "Usage: mailroom channel"),
        (&["topic", "create"], "<TOPIC>"),
        (&["topic", "info"], "<TOPIC>"),
        (&["topic", "delete"], "<TOPIC>"),
        (&["group", "create", "jobs"], "<GROUP>"),
        (&["group", "info", "jobs"], "<GROUP>"),
        (&["group", "delete"], "<TOPIC>"),
        (&["group", "delete", "jobs"], "<GROUP>"),
        (&["group", "poll", "jobs"], "<GROUP>"),
        (&["group", "nack", "jobs", "w", "0"], "<ATTEMPT>"),
        (&["group", "touch", "jobs", "w"], "<OFFSET>"),
        (&["group", "redrive", "jobs"], "<GROUP>"),
        (&["group", "purge"], "<TOPIC>"),
        (&["publish"], "<TOPIC>"),
        (&["consume", "jobs"], "<GROUP>"),
        (&["dead-letters", "jobs"], "<GROUP>"),
        (&["channel", "create"], "<CHANNEL>"),
        (&["channel", "publish"], "<CHANNEL>"),
        (&["channel", "subscribe"], "<CHANNEL>"),
        (&["channel", "close"], "<CHANNEL>"),
        (&["consume", "jobs", "w", "--nack"], "--exec"),
        (
            &["consume", "jobs", "w", "--nack-kind", "release"],
            "--nack",
        ),
    ];
    for (args, expected) in cases {
        let output = mailroom("http://127.0.0.1:9", None, args, b"");
        let stderr = String::from_utf8_lossy(&output.stderr);
        // A bare `mailroom topic` prints its help (to stderr) instead of one error line.
        if stderr.starts_with("error: ") {
            assert_usage_error(&args.join(" "), &output, expected);
        } else {
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(expected), "{args:?}: {stderr}");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        }
    }
}

// Proves flag and argument values the CLI can judge alone are usage errors (exit 2)
// that name the flag or argument.
#[test]
fn values_refused_while_parsing() {
    let cases: &[(&[&str], &str)] = &[
        (&["consume", "jobs", "w", "--batch", "0"], "--batch"),
        (&["consume", "jobs", "w", "--batch", "65537"], "--batch"),
        (&["consume", "jobs", "w", "--count", "-1"], "'-1'"),
        (
            &[
                "consume",
                "jobs",
                "w",
                "--exec",
                "x",
                "--nack",
                "--nack-kind",
                "drop",
            ],
            "expected nack, release or reject",
        ),
        (&["group", "poll", "jobs", "w", "--max", "0"], "--max"),
        (
            &["group", "create", "jobs", "w", "--start", "soon"],
            "expected earliest",
        ),
        (
            &["group", "create", "jobs", "w", "--backoff", "exp:1"],
            "expected fixed:MS",
        ),
        (
            &["group", "create", "jobs", "w", "--max-attempts", "x"],
            "--max-attempts",
        ),
        (&["group", "nack", "jobs", "w", "x", "1"], "<OFFSET>"),
        (
            &["group", "nack", "jobs", "w", "0", "1", "--kind", "drop"],
            "--kind",
        ),
        (&["group", "redrive", "jobs", "w", "--to", "x"], "--to"),
        (
            &[
                "group",
                "purge",
                "jobs",
                "w",
                "--from",
                "9223372036854775808",
            ],
            "--from",
        ),
        (
            &["channel", "create", "c", "--max-subscribers", "many"],
            "--max-subscribers",
        ),
        (&["publish", "jobs", "m", "--file", "f"], "--file"),
        (&["demo", "--drivers", "0"], "--drivers"),
        (&["demo", "--drivers", "18446744073709551615"], "--drivers"),
        (&["serve", "--fsync", "sometimes"], "--fsync"),
        (&["serve", "--listen", "127.0.0.1:99999"], "--listen"),
        (&["topic", "list", "--bogus"], "--bogus"),
        (&["frobnicate"], "frobnicate"),
    ];
    for (args, expected) in cases {
        let output = mailroom("http://127.0.0.1:9", None, args, b"");
        assert_usage_error(&args.join(" "), &output, expected);
    }
}

// Proves values only the server can judge, and local failures (a bad --server URL, a
// token that cannot be sent, an unreadable file, non-UTF-8 input, a missing config
// file), end with exit 1 and one line that says what was wrong, never echoing the token.
#[test]
fn values_refused_at_run_time() {
    let (_dir, server) = populated();
    let long_consumer = "c".repeat(300);
    let cases: &[(&[&str], &[u8], &str)] = &[
        (
            &["group", "create", "jobs", "g", "--max-attempts", "0"],
            b"",
            "max_attempts",
        ),
        (
            &["group", "create", "jobs", "g", "--max-in-flight", "0"],
            b"",
            "max_in_flight",
        ),
        (
            &["group", "create", "jobs", "g", "--lease-ms", "0"],
            b"",
            "lease_ms",
        ),
        (
            &["group", "nack", "jobs", "workers", "0", "1"],
            b"",
            "not_owned",
        ),
        (
            &["group", "touch", "jobs", "workers", "0", "1"],
            b"",
            "not_owned",
        ),
        (
            &[
                "group", "redrive", "jobs", "workers", "--from", "5", "--to", "2",
            ],
            b"",
            "from",
        ),
        (
            &["group", "poll", "jobs", "workers", "--consumer", ""],
            b"",
            "consumer",
        ),
        (
            &[
                "consume",
                "jobs",
                "workers",
                "--batch",
                "2",
                "--consumer",
                &long_consumer,
            ],
            b"",
            "consumer",
        ),
        (
            &["channel", "create", "c", "--max-subscribers", "0"],
            b"",
            "max_subscribers",
        ),
        (
            &["channel", "create", "c", "--mailbox-capacity", "0"],
            b"",
            "mailbox_capacity",
        ),
        (
            &["publish", "jobs", "--file", "/nonexistent/lines"],
            b"",
            "opening /nonexistent/lines",
        ),
        (
            &["publish", "jobs"],
            b"ok\na\xffb\n",
            "lines of stdin: reading line 2",
        ),
        (
            &["channel", "publish", "live"],
            b"\xff\n",
            "reading line 1 of stdin",
        ),
    ];
    for (args, stdin, expected) in cases {
        let output = mailroom(&server.url, Some(TOKEN), args, stdin);
        assert_fails_cleanly(&args.join(" "), &output, expected);
    }
    let url = server.url.as_str();
    // A config file TOML refuses with a multi-line, caret-drawing message.
    let config_dir = temp_dir();
    let config = config_dir.path().join("bad.toml");
    std::fs::write(&config, "listen = 5\n").expect("write the config file");
    let config = config.to_str().expect("a UTF-8 path");
    let runs: &[(&str, Option<&str>, &[&str], &str)] = &[
        (url, Some("has space"), &["topic", "list"], "invalid token"),
        (url, Some(""), &["topic", "list"], "invalid token"),
        (url, Some("line\nbreak"), &["stats"], "invalid token"),
        (
            url,
            None,
            &["serve", "--config", "/nonexistent/mailroom.toml"],
            "/nonexistent",
        ),
        (
            url,
            None,
            &["serve", "--config", config],
            "expected socket address",
        ),
        (
            url,
            Some(""),
            &["serve", "--listen", "127.0.0.1:0"],
            "invalid token",
        ),
    ];
    for (url, token, args, expected) in runs {
        let output = mailroom(url, *token, args, b"");
        let line = assert_fails_cleanly(&args.join(" "), &output, expected);
        assert!(
            !line.contains("has space") && !line.contains("line\nbreak"),
            "{line}"
        );
    }
}

// Proves a `--server` value that is not a server URL is bad usage, as the README says:
// exit 2 and one `mailroom: ...` line naming the flag and the value; nothing is sent.
#[test]
fn bad_server_value_exits_2() {
    for (server, args) in [
        ("notaurl", ["topic", "list"]),
        ("ftp://x", ["stats", "--json"]),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mailroom"))
            .arg("--server")
            .arg(server)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{server}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{server}: {stderr}");
        assert!(stderr.starts_with("mailroom: "), "{server}: {stderr}");
        assert!(stderr.contains(&format!("--server {server:?}")), "{stderr}");
    }
}
