//! The background retention task: every `--retention-interval-ms` it asks the backend
//! to apply each topic's retention ([`Backend::enforce_retention`]).
//!
//! A pass runs where the backend puts its store calls (the embedded store: on the
//! blocking pool under `--fsync always`, since deleting a segment fsyncs a directory).
//! A pass that fails, for one topic or for all, is logged and counted
//! ([`RetentionTask::errors`]) and the next pass tries again: retention never stops
//! the server. Passes do not overlap: the next waits for the one before. At shutdown
//! the task is told to stop and finishes the pass it is in, if any, before the final
//! sync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::Backend;

/// The background retention task, running until [`stop`](Self::stop).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::{sync::Arc, time::Duration};
/// use mailroom_server::{backend::Embedded, long_poll::LongPolls, retention::RetentionTask};
///
/// let dir = tempfile::tempdir()?;
/// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
/// let backend = Arc::new(Embedded::new(store, false, Arc::new(LongPolls::default())));
/// let task = RetentionTask::start(backend, Duration::from_millis(10));
/// task.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RetentionTask {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
    errors: Arc<AtomicU64>,
}

impl RetentionTask {
    /// Starts the task over `backend`, a pass every `interval` (the first one after
    /// `interval`).
    pub fn start(backend: Arc<dyn Backend>, interval: Duration) -> RetentionTask {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let errors = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&errors);
        let task = tokio::spawn(async move {
            let mut ticks =
                tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            // A pass that overran is not followed by a burst of catch-up passes.
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => pass(backend.as_ref(), &counted).await,
                    // Told to stop, or the task's handle was dropped: either way, stop.
                    _ = &mut stopped => return,
                }
            }
        });
        RetentionTask { stop, task, errors }
    }

    /// How many passes or topics failed so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Tells the task to stop and waits until it has (after the pass it is in).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(join) = self.task.await {
            tracing::error!(%join, "the retention task failed");
        }
    }
}

/// One pass: log what went and what failed.
async fn pass(backend: &dyn Backend, errors: &AtomicU64) {
    match backend.enforce_retention().await {
        Ok(pass) => {
            for (topic, removed) in &pass.removed {
                tracing::info!(
                    %topic,
                    segments = removed.segments,
                    bytes = removed.bytes,
                    messages = removed.messages,
                    "retention removed old segments"
                );
            }
            for (topic, error) in &pass.failed {
                let count = errors.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(%topic, %error, errors = count, "retention failed for a topic");
            }
        }
        Err(error) => {
            let count = errors.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(%error, errors = count, "retention pass failed");
        }
    }
}
