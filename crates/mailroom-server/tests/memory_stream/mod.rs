//! What the in-process publish-stream tests share: an in-memory WebSocket the server's
//! stream loop runs on, and a server state over a store whose syncs wait at a gate.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::ws::Message;
use futures_util::{Sink, Stream};
use mailroom_server::config::FsyncPolicy;
use mailroom_server::state::AppState;
use mailroom_server::Config;
use mailroom_store::storage::{SimStorage, SyncGate, Watched};
use mailroom_store::Store;
use tokio::sync::mpsc;

/// The server's end of an in-memory WebSocket: frames the test queued come in, frames
/// the server sends go out to the test.
pub struct MemorySocket {
    /// Frames the test queued, read by the server.
    pub incoming: mpsc::Receiver<Result<Message, axum::Error>>,
    /// Frames the server sends, read by the test.
    pub outgoing: mpsc::UnboundedSender<Message>,
}

impl Stream for MemorySocket {
    type Item = Result<Message, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.incoming.poll_recv(cx)
    }
}

impl Sink<Message> for MemorySocket {
    type Error = axum::Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), axum::Error> {
        self.outgoing.send(message).map_err(axum::Error::new)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
}

/// State over a store under `--fsync always` whose syncs wait at `gate`, with topic `t`.
pub fn gated_state(gate: &Arc<SyncGate>) -> AppState {
    let config = Config {
        fsync: FsyncPolicy::Always,
        ..Config::default()
    };
    let storage = Watched::new(Arc::new(SimStorage::new()), Arc::clone(gate));
    let options = mailroom_server::server::store_options(&config);
    let store = Store::open_with(Arc::new(storage), Path::new("/data"), options).unwrap();
    store.create_topic("t").unwrap();
    AppState::new(store, config)
}
