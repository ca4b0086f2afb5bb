//! The `--exec` handler: a shell command that gets one message on stdin.

use std::process::Stdio;

use anyhow::Context as _;
use bytes::Bytes;
use tokio::io::AsyncWriteExt as _;

/// Runs `sh -c command` with the payload on stdin; `true` if it exited 0.
pub(super) async fn run_handler(command: &str, payload: &Bytes) -> anyhow::Result<bool> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the --exec command {command:?} with sh"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that exits without reading its input is its own business.
        let _ = stdin.write_all(payload).await;
    }
    Ok(child.wait().await?.success())
}
