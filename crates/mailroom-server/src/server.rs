//! Starting and stopping: open the store, bind, serve, and shut down gracefully.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::{Retention, Store, StoreError, StoreOptions};
use tokio::net::TcpListener;

use crate::app::router;
use crate::backend::BackendError;
use crate::config::{Config, FsyncPolicy};
use crate::connections::{serve_connections, ConnectionOptions};
use crate::limits::{raise_open_files_limit, FileBudget};
use crate::listener::CappedListener;
use crate::retention::RetentionTask;
use crate::state::AppState;
use crate::topic_healing::HealingTask;

/// How long shutdown waits for in-flight requests and open streams (a subscriber that
/// stopped reading, say, or a publish stream still owing confirmations) before it
/// abandons them. The store is synced either way.
pub const SHUTDOWN_GRACE_MS_MAX: u64 = 10_000;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The store could not be opened or synced.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The data directory could not be created.
    #[error("creating data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The listen address could not be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The PostgreSQL store could not be reached or migrated.
    #[error("store: {0}")]
    Postgres(#[from] crate::backend::postgres::PgError),
    /// Serving failed, or a server task panicked.
    #[error("serving: {0}")]
    Serve(String),
}

/// A bound server with its store open, ready to [`serve`](Server::serve).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: AppState,
}

/// The store settings for a server configuration.
pub fn store_options(config: &Config) -> StoreOptions {
    let sync = match config.fsync {
        FsyncPolicy::Always => SyncPolicy::Always,
        FsyncPolicy::Never => SyncPolicy::Never,
        FsyncPolicy::Interval(period) => SyncPolicy::Interval(period),
    };
    // The config check keeps payload_bytes_max far below u32::MAX.
    let record_bytes_max = u32::try_from(config.payload_bytes_max).unwrap_or(u32::MAX);
    StoreOptions {
        log: LogOptions {
            sync,
            record_bytes_max,
            segment_bytes_max: config.segment_bytes,
            ..LogOptions::default()
        },
        retention: Retention {
            age_ms_max: config.retention_max_age_ms,
            bytes_max: config.retention_max_bytes,
            ..Retention::default()
        },
        topics_max: config
            .topics_max
            .unwrap_or(mailroom_store::TOPICS_MAX_DEFAULT),
        idempotency: mailroom_store::IdempotencyWindow {
            messages_max: config.idempotency_window_messages,
            age_ms_max: config.idempotency_window_ms,
        },
        ..StoreOptions::default()
    }
}

impl Server {
    /// Raises the soft open-file limit to the hard one, sizes the caps the config leaves
    /// open from it ([`crate::limits`]; the values in force are filled into the config),
    /// opens (or creates) the store in `config.data_dir` and binds `config.listen`.
    ///
    /// # Errors
    /// [`ServerError::DataDir`], [`ServerError::Store`] (for example another server holds
    /// the directory's lock) or [`ServerError::Bind`].
    pub async fn start(mut config: Config) -> Result<Server, ServerError> {
        let files_max = raise_open_files_limit();
        let budget = FileBudget::sized(files_max, config.connections_max, config.topics_max);
        if !budget.fits() {
            tracing::warn!(
                ?budget,
                "the topic and connection caps do not fit the open-file limit: the server \
                 may run out of file descriptors before a cap refuses anything"
            );
        }
        tracing::info!(
            files_max,
            topics_max = budget.topics_max,
            connections_max = budget.connections_max,
            "limits"
        );
        config.topics_max = Some(budget.topics_max);
        config.connections_max = Some(budget.connections_max);
        if let Some(url) = config.store.clone() {
            let long_polls = std::sync::Arc::new(crate::long_poll::LongPolls::default());
            let options = store_options(&config);
            let options = crate::backend::postgres::PgOptions {
                retention: options.retention,
                idempotency: options.idempotency,
            };
            let backend = crate::backend::Postgres::connect_with(&url, long_polls, options).await?;
            let listener = Server::bind(&config).await?;
            return Ok(Server {
                listener,
                state: AppState::with_backend(std::sync::Arc::new(backend), config),
            });
        }
        let dir = config.data_dir.clone();
        let options = store_options(&config);
        let opened = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|source| ServerError::DataDir {
                path: dir.clone(),
                source,
            })?;
            Store::open(&dir, options).map_err(ServerError::from)
        })
        .await
        .map_err(|join| ServerError::Serve(join.to_string()))?;
        let store = opened?;
        let listener = Server::bind(&config).await?;
        Ok(Server {
            listener,
            state: AppState::new(store, config),
        })
    }

    async fn bind(config: &Config) -> Result<TcpListener, ServerError> {
        TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind {
                address: config.listen,
                source,
            })
    }

    /// The address actually bound (the real port when the config asked for port 0).
    ///
    /// # Errors
    /// The operating system's error, which does not happen for a bound socket.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state, for embedding and tests.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves the API ([`router`]) until `shutdown` completes, then: stops accepting,
    /// closes every live channel (streams end once drained), answers every waiting long
    /// poll, tells every publish stream to stop reading, confirm what it wrote and close
    /// with 1001 (Going Away), waits up to [`SHUTDOWN_GRACE_MS_MAX`] for in-flight
    /// requests and those publish streams (then drops what is still open), and syncs the
    /// store.
    ///
    /// Every connection has the config's `header_read_timeout_ms` to deliver each
    /// request's head, and a handler's panic is answered with 500 `internal`
    /// ([`serve_connections`] says more).
    ///
    /// # Errors
    /// [`ServerError::Serve`] if a server task panicked; [`ServerError::Store`] if the
    /// final sync failed.
    pub async fn serve<F>(self, shutdown: F) -> Result<(), ServerError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let app = router(self.state.clone());
        self.serve_app(app, shutdown).await
    }

    /// As [`serve`](Server::serve), with `app` in place of the API's router: for embedding
    /// the API in a larger router (build it from [`router`] over [`state`](Server::state)).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use axum::routing::get;
    /// use mailroom_server::{app::router, Config, Server};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let listen = "127.0.0.1:0".parse()?;
    /// let config = Config { listen, data_dir: dir.path().into(), ..Config::default() };
    /// let server = Server::start(config).await?;
    /// let app = router(server.state().clone()).route("/hello", get(|| async { "hi" }));
    /// // Serves until the shutdown future completes: here, at once.
    /// server.serve_app(app, async {}).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`serve`](Server::serve).
    pub async fn serve_app<F>(self, app: Router, shutdown: F) -> Result<(), ServerError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Server { listener, state } = self;
        let options = ConnectionOptions {
            header_read_timeout: Duration::from_millis(state.config.header_read_timeout_ms),
        };
        let channels = state.channels.clone();
        let long_polls = state.long_polls.clone();
        let publish_streams = state.publish_streams.clone();
        let retention = RetentionTask::start(
            state.backend.clone(),
            Duration::from_millis(state.config.retention_interval_ms),
        );
        let healing = HealingTask::start(state.backend.clone());
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            tracing::info!(
                "shutting down: no new connections; closing live channels, long polls \
                 and publish streams"
            );
            channels.close_all();
            long_polls.close();
            publish_streams.stop();
            let _ = stopping_tx.send(());
        };
        let connections_max = state
            .config
            .connections_max
            .unwrap_or(crate::limits::CONNECTIONS_MAX);
        let listener = CappedListener::new(listener, connections_max)
            .with_send_buffer_bytes(state.config.socket_send_buffer_bytes)
            .counting(state.open_connections.clone());
        let serving = serve_connections(listener, app, options, signal);
        let task = tokio::spawn(serving);
        let abort = task.abort_handle();
        let grace = async move {
            if stopping_rx.await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(SHUTDOWN_GRACE_MS_MAX)).await;
        };
        // Upgraded publish streams run outside the connections the task waits for, and
        // owe confirmations of what they wrote: the final sync comes after them.
        let publish_streams = state.publish_streams.clone();
        let drained = async move {
            task.await
                .map_err(|join| ServerError::Serve(join.to_string()))?;
            publish_streams.finished().await;
            Ok::<(), ServerError>(())
        };
        tokio::select! {
            drained = drained => drained?,
            () = grace => {
                tracing::warn!(
                    streams = state.publish_streams.running(),
                    "shutdown grace period over; abandoning open connections and streams"
                );
                abort.abort();
            }
        }
        // Retention deletes files: it is done before the final sync.
        retention.stop().await;
        healing.stop().await;
        state.backend.sync().await.map_err(|error| match error {
            BackendError::Store(error) => ServerError::Store(error),
            other => ServerError::Serve(other.to_string()),
        })?;
        tracing::info!("store synced; stopped");
        Ok(())
    }
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
