//! What the kill -9 loops share: running the crash-loop child until it has printed a
//! number of lines and SIGKILLing it, reading only its complete lines, choosing the kill
//! points, copying a killed store's directory, and the loops' environment knobs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use bytes::Bytes;
use mailroom_store::DurableTopic;

/// How long a child may print nothing before it counts as stalled (say, deliveries that
/// lost their owner leave its consumers with nothing to do).
pub const CHILD_SILENCE_MAX: Duration = Duration::from_secs(30);

/// The environment variable `name` as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The loops' random draws (kill points, downtimes): a xorshift sequence that starts from
/// the first cycle's seed, so a rerun with the same `MAILROOM_CRASHLOOP_SEED` kills each
/// child at the same point.
pub struct Draws(u64);

impl Draws {
    /// The sequence for a loop whose first cycle has seed `first_seed`.
    pub fn new(first_seed: u64) -> Self {
        Draws(first_seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next cycle's draw (all 64 bits are usable).
    pub fn next_draw(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs the crash-loop child with `args`, hands each complete line it prints to `take`
/// (a line cut short by the kill is no confirmation, so it is dropped), and SIGKILLs it
/// once it has printed `lines_before_kill` lines; lines already in the pipe by then are
/// still handed over. Fails if `take` refuses a line, the child prints nothing for
/// [`CHILD_SILENCE_MAX`], it exits before the kill, or it did not die by the SIGKILL (it
/// exited by itself just before it, say with status 2 after finding a fault, or
/// panicked); each failure carries the child's stderr.
pub fn run_child_until_killed(
    args: &[String],
    lines_before_kill: u64,
    take: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailroom-store-crashloop"));
    child.args(args);
    run_until_killed(child, lines_before_kill, take)
}

/// [`run_child_until_killed`] for any `command` (the runner's own tests use a shell).
pub fn run_until_killed(
    mut command: Command,
    lines_before_kill: u64,
    mut take: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let lines = complete_lines(child.stdout.take().expect("piped stdout"));
    let stderr = collect(child.stderr.take().expect("piped stderr"));
    let with_stderr = |error: String| {
        let stderr = stderr.join().expect("read the child's stderr");
        format!("{error}; the child's stderr:\n{stderr}")
    };
    let (mut seen, mut killed) = (0, false);
    loop {
        let line = match lines.recv_timeout(CHILD_SILENCE_MAX) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the child printed nothing for {CHILD_SILENCE_MAX:?}"
            )),
        };
        if let Err(error) = line.and_then(|line| take(&line)) {
            child.kill().expect("kill the child");
            child.wait().expect("reap the child");
            return Err(with_stderr(error));
        }
        seen += 1;
        if seen == lines_before_kill && !killed {
            // SIGKILL; lines already in the pipe are still confirmed and read below.
            child.kill().expect("kill the child");
            killed = true;
        }
    }
    let status = child.wait().expect("reap the child");
    if !killed {
        return Err(with_stderr(format!(
            "the child exited by itself ({status}) after {seen} lines"
        )));
    }
    // `kill` succeeds on a child that has exited but is not reaped yet: only the status
    // tells a kill from a child that stopped on its own (a fault it found, a panic).
    if status.signal() != Some(SIGKILL) {
        return Err(with_stderr(format!(
            "the child was to die by SIGKILL but ended with {status} after {seen} lines"
        )));
    }
    Ok(())
}

/// SIGKILL's number (9 on every Unix).
const SIGKILL: i32 = 9;

/// The most of a child's stderr kept for a failure's message: its end, where the
/// reason for a failure is.
const STDERR_BYTES_MAX: usize = 64 << 10;

/// Reads `err` to its end on a thread; the handle answers its last
/// [`STDERR_BYTES_MAX`] bytes.
fn collect(mut err: ChildStderr) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match err.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    kept.extend_from_slice(&chunk[..read]);
                    let over = kept.len().saturating_sub(STDERR_BYTES_MAX);
                    kept.drain(..over);
                }
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// The child's complete lines, from a reader thread (so the parent can notice a child
/// that stalls); the channel closes at the end of the output.
fn complete_lines(out: ChildStdout) -> Receiver<String> {
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = BufReader::new(out);
        let mut line = String::new();
        while out.read_line(&mut line).expect("read the child's output") > 0 {
            if let Some(complete) = line.strip_suffix('\n') {
                if sender.send(complete.to_owned()).is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
    lines
}

/// Copies the directory tree `from` to `to` (a killed store, so that probing the copy
/// leaves the original for the next child to recover).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// Checks a killed store's messages: the ones known from earlier cycles (`known`, from
/// offset 0) are unchanged, the publishes this cycle confirmed (`published`) follow them
/// with no gap and hold their bytes, and at most `unconfirmed_max` more (the one
/// unconfirmed publish call) may follow; adopts everything found into `known`.
pub fn check_messages(
    topic: &DurableTopic,
    known: &mut Vec<Bytes>,
    published: &BTreeMap<u64, Bytes>,
    unconfirmed_max: u64,
) -> Result<(), String> {
    let before = known.len() as u64;
    let confirmed_end = before + published.len() as u64;
    if !published.keys().copied().eq(before..confirmed_end) {
        return Err(format!(
            "confirmed offsets {:?} after {before}",
            published.keys()
        ));
    }
    let len = topic.len();
    if len < confirmed_end || len - confirmed_end > unconfirmed_max {
        return Err(format!("log has {len}, {confirmed_end} confirmed"));
    }
    for offset in before..len {
        let found = topic.read(offset).map_err(|e| e.to_string())?;
        let found = found.ok_or(format!("message {offset} below the end {len} is missing"))?;
        match published.get(&offset) {
            Some(expected) if *expected != found => {
                return Err(format!(
                    "message {offset}: {found:?}, confirmed {expected:?}"
                ))
            }
            _ => known.push(found),
        }
    }
    for (offset, expected) in known.iter().enumerate() {
        let found = topic.read(offset as u64).map_err(|e| e.to_string())?;
        if found.as_ref() != Some(expected) {
            return Err(format!(
                "message {offset}: {found:?}, expected {expected:?}"
            ));
        }
    }
    Ok(())
}
