//! Shared helpers for the black-box server tests: start the real `mailroom` binary on a
//! free port with a temporary data directory, find its address from its stdout, stop it.

#![allow(dead_code)] // Each test file uses a different subset.

pub mod group_load;
pub mod postgres_cluster;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mailroom_client::Client;

/// How long a test waits for the server to print its address or to exit.
pub const PROCESS_WAIT_MS_MAX: u64 = 20_000;

/// How long a test awaits a condition on a running server (a long poll counted as
/// waiting, enough publishes confirmed, a subscriber slot freed) before it fails.
pub const CONDITION_WAIT_MAX: Duration = Duration::from_secs(20);

/// The deadline of one wait for a condition: [`check`](Self::check) fails the test,
/// naming what it awaited, once [`CONDITION_WAIT_MAX`] has passed since [`new`](Self::new).
pub struct Deadline {
    at: Instant,
    awaited: &'static str,
}

impl Deadline {
    /// Starts the wait for `awaited`.
    pub fn new(awaited: &'static str) -> Self {
        Deadline {
            at: Instant::now() + CONDITION_WAIT_MAX,
            awaited,
        }
    }

    /// Fails the test if the wait has run out.
    pub fn check(&self) {
        assert!(
            Instant::now() < self.at,
            "waited {CONDITION_WAIT_MAX:?} for {}",
            self.awaited
        );
    }
}

/// A running `mailroom serve` child process, killed on drop.
pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The data directory (owned by the test).
    pub data: PathBuf,
}

impl ServerProcess {
    /// Starts the binary with `--listen 127.0.0.1:0 --data <data>` and `extra` flags, and
    /// waits for the `mailroom listening on http://...` line.
    pub fn start(data: &Path, extra: &[&str]) -> ServerProcess {
        Self::start_with_env(data, extra, &[])
    }

    /// As [`ServerProcess::start`], with extra environment variables.
    pub fn start_with_env(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> ServerProcess {
        let command = Command::new(env!("CARGO_BIN_EXE_mailroom"));
        Self::spawn(command, data, extra, env)
    }

    /// As [`ServerProcess::start`], with the open-file limit (soft and hard
    /// `RLIMIT_NOFILE`) lowered to `files_max`: a shell sets it and `exec`s the server,
    /// so the child keeps the shell's pid and the limit.
    pub fn start_with_open_files(data: &Path, extra: &[&str], files_max: u64) -> ServerProcess {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit -n {files_max} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_mailroom"));
        Self::spawn(command, data, extra, &[])
    }

    /// As [`ServerProcess::start`], with the server's stderr written to `log` and
    /// `RUST_LOG` as given (`None`: unset, so the server's own default filter applies):
    /// a shell redirects stderr and `exec`s the server, which keeps the shell's pid.
    pub fn start_logging_to(data: &Path, log: &Path, rust_log: Option<&str>) -> ServerProcess {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(match rust_log {
                None => "unset RUST_LOG; exec \"$0\" \"$@\" 2>\"$LOG_FILE\"",
                Some(_) => "exec \"$0\" \"$@\" 2>\"$LOG_FILE\"",
            })
            .arg(env!("CARGO_BIN_EXE_mailroom"))
            .env("LOG_FILE", log);
        let env = rust_log.map(|filter| ("RUST_LOG", filter));
        Self::spawn(command, data, &[], env.as_slice())
    }

    fn spawn(
        mut command: Command,
        data: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ServerProcess {
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(extra)
            .env("RUST_LOG", "warn")
            .env_remove("MAILROOM_TOKEN")
            .env_remove("MAILROOM_MAX_PAYLOAD_BYTES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn mailroom");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        // Reading blocks until the server prints the line or exits (EOF).
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(address) = line.strip_prefix("mailroom listening on ") {
                        break address.trim().to_owned();
                    }
                }
                _ => {
                    let status = child.wait().expect("wait");
                    panic!("server exited before listening: {status}");
                }
            }
        };
        ServerProcess {
            child,
            url,
            data: data.to_owned(),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A client for this server.
    pub fn client(&self) -> Client {
        Client::new(&self.url).expect("valid url")
    }

    /// `url` + `path`.
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The `host:port` part.
    pub fn address(&self) -> String {
        self.url.trim_start_matches("http://").to_owned()
    }

    /// SIGKILL: no shutdown path runs at all.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
    }

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS_MAX);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads Server-Sent Events from a streaming HTTP response.
pub struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

/// One SSE event: its `event:` name (if any) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next event with data (comments and keep-alives skipped); `None` at the end
    /// of the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let text = String::from_utf8(block).expect("SSE is UTF-8");
                let mut event = None;
                let mut data = Vec::new();
                for line in text.lines() {
                    if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                    } else if let Some(value) = line.strip_prefix("event:") {
                        event = Some(value.trim().to_owned());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(SseEvent {
                    event,
                    data: data.join("\n"),
                });
            }
            match self.response.chunk().await.expect("SSE stream") {
                Some(chunk) => self.buffer.extend_from_slice(&chunk),
                None => return None,
            }
        }
    }
}

/// A fresh temporary data directory.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Two brokers (`mailroom serve --store URL`) over the database at `url`, each given a
/// data directory of its own as a user may give one beside `--store` (it stays unused),
/// and the two directories.
pub fn two_brokers(url: &str) -> (ServerProcess, ServerProcess, [tempfile::TempDir; 2]) {
    let dirs = [temp_dir(), temp_dir()];
    let a = ServerProcess::start(dirs[0].path(), &["--store", url]);
    let b = ServerProcess::start(dirs[1].path(), &["--store", url]);
    (a, b, dirs)
}

/// The variable naming the PostgreSQL test cluster's URL.
pub const POSTGRES_URL_VARIABLE: &str = "MAILROOM_TEST_POSTGRES";

/// A fresh database on the PostgreSQL test cluster (`MAILROOM_TEST_POSTGRES`, from
/// `scripts/postgres.sh start DIR`), or `None` where the test may be skipped.
///
/// # Panics
/// Under `CI=true` without the variable: CI must not skip these tests.
pub async fn fresh_postgres_database() -> Option<String> {
    let cluster = match std::env::var(POSTGRES_URL_VARIABLE) {
        Ok(url) => url,
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{POSTGRES_URL_VARIABLE} is not set under CI=true: start scripts/postgres.sh first"
            )
        }
        Err(_) => {
            eprintln!(
                "not run: {POSTGRES_URL_VARIABLE} is not set (scripts/postgres.sh start DIR)"
            );
            return None;
        }
    };
    let (client, connection) = tokio_postgres::connect(&cluster, tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    tokio::spawn(connection);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("mailroom_cli_{}_{nanos}", std::process::id());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    let (base, _) = cluster.rsplit_once('/').expect("the URL names a database");
    Some(format!("{base}/{name}"))
}
