//! mailroom: a message broker for when delivery state must be exact.
//!
//! This crate holds the pure, in-memory semantics. It does no I/O, reads no clock (time is
//! passed in through [`clock::Clock`]) and
//! depends on no async runtime, so the durable store, the server and embedded users all
//! share one implementation of the rules.
//!
//! - [`broadcast`]: live channels. Best-effort fan-out to a capped set of subscribers, each
//!   with a bounded mailbox; a full mailbox drops the newest message for that subscriber
//!   alone, and the publisher is told.
//! - [`topic`]: a retained, append-only log read by independent consumer groups, each with
//!   its own cursor, attempt, in-flight delivery and dead-letter queue.
//! - [`group`]: the consumer-group state machine that every home of a topic reuses, with
//!   leases, nack kinds, delayed retry, redrive and parallel deliveries as optional settings.
//! - [`clock`]: the narrow time trait through which homes feed time to the state machine.

pub mod broadcast;
pub mod clock;
pub mod group;
pub mod topic;
