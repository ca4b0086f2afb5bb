//! A group call's transaction with its `BEGIN` and its `COMMIT` sent in the pipelines
//! of the statements beside them, not awaited alone as `Client::transaction` does: the
//! `BEGIN` rides ahead of the lock, the `COMMIT` behind the writes and reads, so a call
//! costs two round trips where it cost five.
//!
//! PostgreSQL answers a `COMMIT` of a transaction that an earlier statement aborted
//! with `ROLLBACK`, not an error; every statement before the `COMMIT` is awaited in the
//! same join as the `COMMIT`, so their first error is the call's error and success is
//! reported only when each of them succeeded. A checked condition that must stop the
//! commit (a message missing from the log) is checked in the SQL, where it aborts the
//! transaction (`group_write.rs`, `group.rs`).

use deadpool_postgres::Object;

/// A pooled connection with a transaction that was begun (or is being begun) on it.
///
/// Dropped before [`finish`](Self::finish) (the call's future was dropped mid-way), the
/// connection leaves the pool and closes, so PostgreSQL rolls back whatever the
/// transaction did; it is never handed to another call inside a transaction.
pub(super) struct Open {
    client: Option<Object>,
}

impl Open {
    pub(super) fn new(client: Object) -> Open {
        Open {
            client: Some(client),
        }
    }

    /// The connection, to send the transaction's statements on.
    pub(super) fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("the connection is held until finish")
    }

    /// Ends the call: after a committed one, the connection goes back to the pool;
    /// after a failed one, the transaction (if any is left) is rolled back first, and a
    /// connection that cannot even roll back is closed.
    pub(super) async fn finish(mut self, committed: bool) {
        let Some(client) = self.client.take() else {
            return;
        };
        if committed {
            return;
        }
        // A pipelined COMMIT may already have ended the aborted transaction; a ROLLBACK
        // then only draws a warning.
        if client.batch_execute("ROLLBACK").await.is_err() {
            drop(Object::take(client));
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}
