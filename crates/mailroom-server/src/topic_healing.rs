//! The background healing task: while a topic is failed in a way that reopening may
//! heal (stopped after a failed write or fsync, such as a full disk, or unreadable), it
//! asks the backend to reopen it ([`Backend::recover_topics`]), with a backoff from
//! [`HEAL_RETRY_MS_MIN`] doubling to [`HEAL_RETRY_MS_MAX`] while the failure lasts, and
//! back to the minimum once every topic serves. Damaged topics are left to
//! `POST /v1/topics/{topic}/repair` or `mailroom repair`: reopening cannot cure them.
//!
//! The store probes for space before it reopens a stopped topic, so a topic is not
//! reopened onto a disk that is still full. At shutdown the task is stopped before the
//! final sync.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::Backend;

/// The first wait before a failed topic is reopened, and the wait while none is failed.
pub const HEAL_RETRY_MS_MIN: u64 = 500;
/// The longest wait between two attempts to reopen failed topics.
pub const HEAL_RETRY_MS_MAX: u64 = 30_000;

/// The background healing task, running until [`stop`](Self::stop).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use mailroom_server::{backend::Embedded, long_poll::LongPolls, topic_healing::HealingTask};
///
/// let dir = tempfile::tempdir()?;
/// let store = mailroom_store::Store::open(dir.path(), Default::default())?;
/// let backend = Arc::new(Embedded::new(store, false, Arc::new(LongPolls::default())));
/// let task = HealingTask::start(backend);
/// task.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HealingTask {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl HealingTask {
    /// Starts the task over `backend`.
    pub fn start(backend: Arc<dyn Backend>) -> HealingTask {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut wait_ms = HEAL_RETRY_MS_MIN;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                    _ = &mut stopped => return,
                }
                wait_ms = attempt(backend.as_ref(), wait_ms).await;
            }
        });
        HealingTask { stop, task }
    }

    /// Tells the task to stop and waits until it has (after the attempt it is in).
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(join) = self.task.await {
            tracing::error!(%join, "the topic healing task failed");
        }
    }
}

/// One look at the failed topics: reopens those that may heal; returns the next wait.
async fn attempt(backend: &dyn Backend, wait_ms: u64) -> u64 {
    let healable = backend
        .health()
        .failed_topics
        .iter()
        .any(|failed| failed.kind != "damaged");
    if !healable {
        return HEAL_RETRY_MS_MIN;
    }
    let healed = backend.recover_topics().await;
    for topic in &healed {
        tracing::info!(%topic, "a failed topic was reopened and serves again");
    }
    let still_failed = backend
        .health()
        .failed_topics
        .iter()
        .any(|failed| failed.kind != "damaged");
    if still_failed {
        (wait_ms * 2).min(HEAL_RETRY_MS_MAX)
    } else {
        HEAL_RETRY_MS_MIN
    }
}
