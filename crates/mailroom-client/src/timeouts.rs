//! The client's time limits: how long connecting may take, and how long a request may
//! wait for its whole answer.
//!
//! A server that accepts the connection and never answers, or an address that swallows
//! packets, would otherwise hang a call forever. Every HTTP call and every WebSocket
//! handshake is bounded by these limits and fails with
//! [`ClientError::Timeout`](crate::ClientError::Timeout), which names the limit and its
//! length. A long poll ([`BatchPoll::wait_ms`](crate::BatchPoll::wait_ms)) gets its wait
//! *plus* the request limit, so the server's hold never counts against the limit. An
//! open subscription or publish stream is not timed: waiting for the next message is
//! its job.

use std::future::Future;
use std::time::Duration;

use crate::{ClientError, TimeoutLimit};

/// How long connecting to the server may take by default: long enough for a slow
/// network, short enough that a black-holed address fails while the user still waits.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

/// How long one request may take by default, from sending it to the end of the answer
/// (not counting a long poll's wait): far above any healthy server's answer time.
pub const REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// The client's time limits.
///
/// Every HTTP call and every WebSocket handshake is bounded by them, and fails with
/// [`ClientError::Timeout`] (naming the limit and its length) when one runs out, so a
/// server that accepts the connection and never answers cannot hang a call. A long poll
/// ([`BatchPoll::wait_ms`](crate::BatchPoll::wait_ms)) gets its wait plus the request
/// limit. An open subscription or publish stream is not timed: waiting for the next
/// message is its job.
///
/// ```
/// use std::time::Duration;
/// use mailroom_client::{Client, Timeouts};
/// let timeouts = Timeouts { connect: Duration::from_secs(1), request: Duration::from_secs(10) };
/// let client = Client::with_timeouts("http://127.0.0.1:7070", timeouts)?;
/// assert_eq!(client.timeouts(), timeouts);
/// assert_eq!(Timeouts::default().request, mailroom_client::REQUEST_TIMEOUT_DEFAULT);
/// # Ok::<(), mailroom_client::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timeouts {
    /// How long opening a TCP connection may take (name lookup included).
    pub connect: Duration,
    /// How long a request may take: for an HTTP call, from its start (connecting
    /// included) until the whole answer arrived; for a WebSocket handshake, from the
    /// open connection until the upgrade.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: CONNECT_TIMEOUT_DEFAULT,
            request: REQUEST_TIMEOUT_DEFAULT,
        }
    }
}

impl Timeouts {
    /// The limit for a long poll that lets the server hold the request `wait_ms`: the
    /// wait plus the request limit, never less than either.
    pub(crate) fn long_poll(&self, wait_ms: u64) -> Duration {
        self.request.saturating_add(Duration::from_millis(wait_ms))
    }
}

/// Runs `work`, or fails with [`ClientError::Timeout`] naming `limit` once `after` ran out.
pub(crate) async fn within<T, E>(
    limit: TimeoutLimit,
    after: Duration,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, ClientError>
where
    ClientError: From<E>,
{
    match tokio::time::timeout(after, work).await {
        Ok(result) => result.map_err(ClientError::from),
        Err(_elapsed) => Err(ClientError::Timeout { limit, after }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a long poll's limit is its wait plus the request limit, saturating instead
    // of overflowing for absurd waits.
    #[test]
    fn long_polls_get_their_wait_added() {
        let timeouts = Timeouts {
            connect: Duration::from_millis(10),
            request: Duration::from_millis(200),
        };
        assert_eq!(timeouts.long_poll(0), Duration::from_millis(200));
        assert_eq!(timeouts.long_poll(500), Duration::from_millis(700));
        let huge = Timeouts {
            request: Duration::MAX,
            ..timeouts
        };
        assert_eq!(huge.long_poll(u64::MAX), Duration::MAX);
    }

    // Proves `within` passes results through and turns a run-out limit into the typed
    // error that names the limit and its length.
    #[tokio::test(start_paused = true)]
    async fn within_names_the_limit_that_ran_out() {
        let quick = within(TimeoutLimit::Request, Duration::from_secs(1), async {
            Ok::<_, ClientError>(7)
        });
        assert_eq!(quick.await.expect("in time"), 7);
        let never = within(
            TimeoutLimit::Connect,
            Duration::from_millis(250),
            std::future::pending::<Result<(), ClientError>>(),
        );
        match never.await {
            Err(ClientError::Timeout { limit, after }) => {
                assert_eq!(limit, TimeoutLimit::Connect);
                assert_eq!(after, Duration::from_millis(250));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }
}
