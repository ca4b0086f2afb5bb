//! What every handler shares: the store, the live channels, the long-poll wake-ups, the
//! metrics and the settings.

use std::sync::Arc;

use mailroom_store::{Store, StoreError};

use crate::channels::Channels;
use crate::config::{Config, FsyncPolicy};
use crate::error::ApiError;
use crate::long_poll::LongPolls;
use crate::metrics::Metrics;

/// The state behind the router. Cloning is cheap: every field is shared.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The durable store of topics and groups.
    pub store: Store,
    /// The live channels.
    pub channels: Arc<Channels>,
    /// The exported metrics.
    pub metrics: Arc<Metrics>,
    /// The resolved settings.
    pub config: Arc<Config>,
    /// Wake-ups and the waiting count of long polls.
    pub long_polls: Arc<LongPolls>,
    /// Whether store calls run on the async worker itself rather than the blocking pool
    /// (see [`AppState::blocking`]).
    store_calls_inline: bool,
}

impl AppState {
    /// State over an open store.
    pub fn new(store: Store, config: Config) -> AppState {
        AppState {
            store,
            channels: Arc::new(Channels::default()),
            metrics: Arc::new(Metrics::new()),
            store_calls_inline: config.fsync != FsyncPolicy::Always,
            config: Arc::new(config),
            long_polls: Arc::new(LongPolls::default()),
        }
    }

    /// Runs a store call where it costs least.
    ///
    /// Under `--fsync always` a store call waits for fdatasync (milliseconds), which must
    /// not stall the async workers that serve every other connection, so it runs on the
    /// blocking pool. Under any other policy a store call does not wait for the disk: it
    /// writes to the page cache under short locks, so it runs inline on the async worker,
    /// saving the hand-off to the blocking pool and back (two context switches, which
    /// were most of the server's CPU). The trade-off: the rare call that does touch the
    /// disk (a checkpoint, a segment roll and its sync) then stalls that one worker for
    /// as long, the way a single-threaded server like Redis takes such pauses on its
    /// main thread.
    ///
    /// # Errors
    /// The call's own error, mapped to its API status; 500 `internal` if it panicked on
    /// the blocking pool.
    pub async fn blocking<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        if self.store_calls_inline {
            return call(&self.store).map_err(ApiError::from);
        }
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || call(&store)).await {
            Ok(result) => result.map_err(ApiError::from),
            Err(join) => Err(ApiError::internal(format!("store task failed: {join}"))),
        }
    }
}
