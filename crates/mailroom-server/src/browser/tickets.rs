//! Stream tickets: short-lived, single-use stand-ins for the token, for the browser APIs
//! that cannot send `Authorization` (`EventSource`, `WebSocket`).
//!
//! `POST /v1/tickets` (with the token) issues one; `?ticket=...` on a `GET` under the
//! ticket's path prefix redeems it, once, within [`TICKET_LIFETIME_MS`]. Tickets live in
//! memory only, at most [`TICKETS_MAX`] at a time, and are never logged: the middleware
//! takes the parameter out of the request before anything else sees it.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use parking_lot::Mutex;
use tokio::time::Instant;

/// How long a ticket stays valid: long enough to open a stream right after getting one,
/// too short to be worth stealing.
pub const TICKET_LIFETIME_MS: u64 = 30_000;
/// The most tickets outstanding at once; issuing more answers 429 `too_many_tickets`.
pub const TICKETS_MAX: usize = 1024;
/// The longest path prefix a ticket may name, in bytes.
pub const TICKET_PATH_BYTES_MAX: usize = 512;
/// The random bytes in a ticket: 256 bits, far past guessing.
const TICKET_RANDOM_BYTES: usize = 32;

/// Why a ticket was not issued or not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TicketError {
    /// The path prefix is not one a ticket can name.
    #[error("a ticket's path must start with /v1/ and be at most {TICKET_PATH_BYTES_MAX} bytes without a query: {0}")]
    InvalidPath(String),
    /// [`TICKETS_MAX`] tickets are outstanding.
    #[error("{TICKETS_MAX} tickets are outstanding; use or let some expire first")]
    Full,
    /// No such ticket: never issued, used already, or expired.
    #[error("unknown, used or expired ticket")]
    Unknown,
    /// The ticket was issued for another path; it is used up all the same.
    #[error("this ticket opens only paths under {0}")]
    WrongPath(String),
    /// The system's random source failed.
    #[error("no randomness for a ticket: {0}")]
    Random(String),
}

#[derive(Debug)]
struct Issued {
    prefix: String,
    expires_at: Instant,
}

/// The outstanding tickets. The clock is tokio's, so tests can pause it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use mailroom_server::browser::tickets::{TicketError, Tickets};
/// let tickets = Tickets::default();
/// let ticket = tickets.issue("/v1/channels/news").unwrap();
/// assert_eq!(tickets.redeem(&ticket, "/v1/channels/news/events"), Ok(()));
/// assert_eq!(tickets.redeem(&ticket, "/v1/channels/news/events"), Err(TicketError::Unknown));
/// # }
/// ```
#[derive(Debug)]
pub struct Tickets {
    lifetime: Duration,
    capacity: usize,
    issued: Mutex<HashMap<String, Issued>>,
}

impl Default for Tickets {
    fn default() -> Tickets {
        Tickets::new(Duration::from_millis(TICKET_LIFETIME_MS), TICKETS_MAX)
    }
}

impl Tickets {
    /// Tickets valid for `lifetime`, at most `capacity` outstanding.
    pub fn new(lifetime: Duration, capacity: usize) -> Tickets {
        Tickets {
            lifetime,
            capacity,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// How long each ticket stays valid.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// Issues a ticket for one `GET` under `prefix`.
    ///
    /// # Errors
    /// [`TicketError::InvalidPath`], [`TicketError::Full`] or [`TicketError::Random`].
    pub fn issue(&self, prefix: &str) -> Result<String, TicketError> {
        let valid = prefix.starts_with("/v1/")
            && prefix.len() <= TICKET_PATH_BYTES_MAX
            && !prefix.contains(['?', '#'])
            && !prefix.split('/').any(|segment| segment == "..");
        if !valid {
            return Err(TicketError::InvalidPath(crate::error::shown(prefix)));
        }
        let mut random = [0u8; TICKET_RANDOM_BYTES];
        getrandom::fill(&mut random).map_err(|error| TicketError::Random(error.to_string()))?;
        let ticket = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
        let now = Instant::now();
        let mut issued = self.issued.lock();
        if issued.len() >= self.capacity {
            issued.retain(|_, ticket| ticket.expires_at > now);
        }
        if issued.len() >= self.capacity {
            return Err(TicketError::Full);
        }
        let entry = Issued {
            prefix: prefix.to_owned(),
            expires_at: now + self.lifetime,
        };
        issued.insert(ticket.clone(), entry);
        Ok(ticket)
    }

    /// Uses up `ticket` to open `path`.
    ///
    /// # Errors
    /// [`TicketError::Unknown`] for a ticket never issued, used or expired;
    /// [`TicketError::WrongPath`] for one issued for another prefix (it is used up).
    pub fn redeem(&self, ticket: &str, path: &str) -> Result<(), TicketError> {
        let issued = self.issued.lock().remove(ticket);
        let issued = issued
            .filter(|issued| issued.expires_at > Instant::now())
            .ok_or(TicketError::Unknown)?;
        if !under(path, &issued.prefix) {
            return Err(TicketError::WrongPath(issued.prefix));
        }
        Ok(())
    }

    /// How many tickets are held (expired ones until the next full issue drops them).
    pub fn outstanding(&self) -> usize {
        self.issued.lock().len()
    }
}

/// Whether `path` is `prefix` or under it by whole segments.
fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/') || prefix.ends_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a ticket opens its prefix by whole segments only.
    #[test]
    fn prefixes_match_whole_segments() {
        assert!(under("/v1/channels/a/events", "/v1/channels/a"));
        assert!(under("/v1/channels/a", "/v1/channels/a"));
        assert!(under("/v1/channels/a/ws", "/v1/channels/"));
        assert!(!under("/v1/channels/ab/events", "/v1/channels/a"));
        assert!(!under("/v1/topics/a", "/v1/channels/a"));
    }

    // Proves tickets are single use, bound to their path, and random.
    #[tokio::test]
    async fn tickets_are_single_use_and_bound() {
        let tickets = Tickets::default();
        let first = tickets.issue("/v1/channels/a/events").unwrap();
        let second = tickets.issue("/v1/channels/a/events").unwrap();
        assert_ne!(first, second);
        assert!(first.len() >= 43, "256 bits in base64: {first}");
        assert_eq!(
            tickets.redeem(&first, "/v1/channels/b/events"),
            Err(TicketError::WrongPath("/v1/channels/a/events".into()))
        );
        assert_eq!(
            tickets.redeem(&first, "/v1/channels/a/events"),
            Err(TicketError::Unknown),
            "used up by the wrong-path attempt"
        );
        assert_eq!(tickets.redeem(&second, "/v1/channels/a/events"), Ok(()));
        assert_eq!(
            tickets.redeem("made-up", "/v1/channels/a/events"),
            Err(TicketError::Unknown)
        );
        for bad in ["/healthz", "/v1/a?b", "/v1/../metrics", "v1/a"] {
            assert!(
                matches!(tickets.issue(bad), Err(TicketError::InvalidPath(_))),
                "{bad}"
            );
        }
    }

    // Proves a ticket expires after its lifetime, on tokio's paused clock.
    #[tokio::test(start_paused = true)]
    async fn tickets_expire() {
        let tickets = Tickets::default();
        let early = tickets.issue("/v1/channels/a").unwrap();
        let late = tickets.issue("/v1/channels/a").unwrap();
        tokio::time::advance(Duration::from_millis(TICKET_LIFETIME_MS - 1)).await;
        assert_eq!(tickets.redeem(&early, "/v1/channels/a"), Ok(()));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            tickets.redeem(&late, "/v1/channels/a"),
            Err(TicketError::Unknown)
        );
    }

    // Proves the map is bounded, and that expired tickets make room again.
    #[tokio::test(start_paused = true)]
    async fn outstanding_tickets_are_bounded() {
        let tickets = Tickets::new(Duration::from_secs(1), 3);
        for _ in 0..3 {
            tickets.issue("/v1/channels/a").unwrap();
        }
        assert_eq!(tickets.issue("/v1/channels/a"), Err(TicketError::Full));
        assert_eq!(tickets.outstanding(), 3);
        tokio::time::advance(Duration::from_secs(1)).await;
        tickets.issue("/v1/channels/a").unwrap();
        assert_eq!(tickets.outstanding(), 1);
        assert_eq!(Tickets::default().outstanding(), 0);
        assert_eq!(TICKETS_MAX, Tickets::default().capacity);
    }
}
