//! `--timeout` (and `MAILROOM_TIMEOUT`) against the real binary: a server that accepts
//! and never answers makes every kind of command fail with exit 1 and one line naming
//! the limit, instead of hanging; `consume --follow` long polls outlive a short limit.

mod cli_support;
mod common;

use std::io::Read as _;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cli_support::{assert_fails_cleanly, assert_usage_error, mailroom};
use common::{temp_dir, ServerProcess, PROCESS_WAIT_MS_MAX};

/// What a command against the silent server must print.
const TIMED_OUT: &str = "request timed out after 200 ms";

/// A listener that accepts every connection and never reads or answers, on its own
/// thread; connections stay open until it is dropped.
struct SilentServer {
    url: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentServer {
    fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                held.extend(stream.ok());
            }
        });
        SilentServer {
            url: format!("http://{address}"),
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // One more connection wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// Proves each kind of command (plain calls, a publish from stdin, single and batch
// consume, a subscription's handshake, the demo) fails against a silent server with
// exit 1 and one line naming the 200 ms limit and the --timeout flag, in parallel so
// the whole table takes about one limit.
#[test]
fn commands_time_out_against_a_silent_server() {
    let server = SilentServer::start();
    let commands: &[(&[&str], &str)] = &[
        (&["topic", "list"], ""),
        (&["topic", "create", "t"], ""),
        (&["group", "poll", "t", "g", "--max", "4"], ""),
        (&["publish", "t"], "one\ntwo\n"),
        (&["consume", "t", "g"], ""),
        (&["consume", "t", "g", "--batch", "8"], ""),
        (&["dead-letters", "t", "g"], ""),
        (&["channel", "subscribe", "c", "--count", "1"], ""),
        (&["stats"], ""),
        (&["demo", "--channel", "c", "--updates", "1"], ""),
    ];
    std::thread::scope(|scope| {
        for (command, stdin) in commands {
            let url = server.url.as_str();
            scope.spawn(move || {
                let args = [&["--timeout", "0.2"], *command].concat();
                let output = mailroom(url, None, &args, stdin.as_bytes());
                let line = assert_fails_cleanly(&command.join(" "), &output, TIMED_OUT);
                assert!(line.contains(url), "{line}");
                assert!(line.contains("--timeout or MAILROOM_TIMEOUT"), "{line}");
            });
        }
    });
}

// Proves MAILROOM_TIMEOUT sets the limit when --timeout is not given.
#[test]
fn the_environment_sets_the_timeout() {
    let server = SilentServer::start();
    let output = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args(["--server", &server.url, "topic", "list"])
        .env("MAILROOM_TIMEOUT", "0.2")
        .env_remove("MAILROOM_TOKEN")
        .env_remove("MAILROOM_URL")
        .stdin(Stdio::null())
        .output()
        .expect("run mailroom");
    assert_fails_cleanly("MAILROOM_TIMEOUT=0.2 topic list", &output, TIMED_OUT);
}

// Proves a --timeout that is not a positive number of seconds within the maximum is a
// usage error naming the flag.
#[test]
fn bad_timeouts_are_usage_errors() {
    for bad in ["0", "-1", "soon", "NaN", "100000"] {
        // `=` keeps clap from reading `-1` as a flag of its own.
        let flag = format!("--timeout={bad}");
        let output = mailroom("http://127.0.0.1:9", None, &[&flag, "stats"], b"");
        assert_usage_error(&flag, &output, "seconds above 0");
    }
}

/// Waits for `child` to exit, failing the test after the process failsafe.
fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS_MAX);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "consume did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of an unlabelled series in the server's metrics.
fn metric(runtime: &tokio::runtime::Runtime, server: &ServerProcess, name: &str) -> Option<f64> {
    let text = runtime
        .block_on(server.client().metrics())
        .expect("metrics");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

// Proves `consume --batch --follow` with `--timeout 0.2` keeps its long poll open past
// the limit (the wait is added) and still takes a message published later.
#[test]
fn follow_long_polls_outlive_a_short_timeout() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
    for args in [
        &["topic", "create", "t"][..],
        &["group", "create", "t", "g"],
    ] {
        let output = mailroom(&server.url, None, args, b"");
        assert!(output.status.success(), "{args:?}: {output:?}");
    }
    let mut consume = Command::new(env!("CARGO_BIN_EXE_mailroom"))
        .args([
            "--server",
            &server.url,
            "--timeout",
            "0.2",
            "consume",
            "t",
            "g",
        ])
        .args(["--batch", "4", "--follow", "--count", "1"])
        .env_remove("MAILROOM_TOKEN")
        .env_remove("MAILROOM_URL")
        .env_remove("MAILROOM_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn consume");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS_MAX);
    while metric(&runtime, &server, "mailroom_long_polls_waiting") != Some(1.0) {
        assert!(Instant::now() < deadline, "the long poll never started");
        assert!(consume.try_wait().expect("try_wait").is_none(), "exited");
    }
    // Idling is the point: three limits pass while the long poll is held.
    std::thread::sleep(Duration::from_millis(600));
    assert!(consume.try_wait().expect("try_wait").is_none(), "timed out");
    let output = mailroom(&server.url, None, &["publish", "t", "late"], b"");
    assert!(output.status.success(), "{output:?}");
    let status = wait_for_exit(&mut consume);
    let mut stdout = String::new();
    let mut stderr = String::new();
    consume
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("stdout");
    consume
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(status.success(), "{status}: {stderr}");
    assert!(stdout.contains("late"), "{stdout}");
}
