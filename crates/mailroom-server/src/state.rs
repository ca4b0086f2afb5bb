//! What every handler shares: the store, the live channels, the metrics and the settings.

use std::sync::Arc;

use mailroom_store::{Store, StoreError};

use crate::channels::Channels;
use crate::config::Config;
use crate::error::ApiError;
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
}

impl AppState {
    /// State over an open store.
    pub fn new(store: Store, config: Config) -> AppState {
        AppState {
            store,
            channels: Arc::new(Channels::default()),
            metrics: Arc::new(Metrics::new()),
            config: Arc::new(config),
        }
    }

    /// Runs a store call on the blocking pool: store calls wait for fsync, which must
    /// not stall the async workers that serve every other connection.
    ///
    /// # Errors
    /// The call's own error, mapped to its API status; 500 `internal` if it panicked.
    pub async fn blocking<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || call(&store)).await {
            Ok(result) => result.map_err(ApiError::from),
            Err(join) => Err(ApiError::internal(format!("store task failed: {join}"))),
        }
    }
}
