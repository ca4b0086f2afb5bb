//! A seeded, deterministic simulation of the mailroom store and the server's request
//! handling, in the spirit of TigerBeetle's VOPR and FoundationDB's simulator.
//!
//! One `u64` seed drives everything ([`Rng`]): the store's options, a random workload of
//! every store operation ([`Action`]: topics and groups created and deleted, single and
//! batch publishes, polls, acks, nacks of every kind with delays, touches, batch polls,
//! acks and nacks, ack-then-poll, redrive, purge, retention settings and passes,
//! checkpoints, syncs, and the simulated clock moving on so leases run out), and the
//! faults around the steps: restarts, power cuts between steps and at an exact change
//! inside an operation (torn, unsynced writes), a full disk, failing syncs and writes,
//! slow syncs (simulated time), and bit flips in durable files.
//!
//! The store runs on a [`Disk`] (a `SimStorage` that keeps what is durable) with a
//! `ManualClock`; the reference is the in-memory `mailroom::topic::Topic`, one per topic,
//! on a clock set to the same time. After every step every topic's answers and reads are
//! compared: lengths, groups, every group's dead letters, info, in-flight deliveries,
//! counters and settings, every retained message's bytes, the retention settings. An
//! operation that failed under a fault may or may not have happened; after the restart
//! the store must match the model with it or without it, and the model follows.
//!
//! Nothing in the checked path reads a wall clock or depends on thread timing: calls are
//! made one at a time from one thread with the blocking API, under `SyncPolicy::Always`,
//! so every sync round is led by the calling thread and checkpoints are written on it
//! (the log's sync thread exists but is never handed a round). `docs/simulation.md` has
//! the details and what is not simulated.
//!
//! # Example
//!
//! ```
//! let report = mailroom_sim::run(1, 50).expect("seed 1 passes");
//! assert_eq!(report.steps, 50);
//! // The same seed replays exactly.
//! assert_eq!(mailroom_sim::run(1, 50).unwrap().trace_hash, report.trace_hash);
//! ```

mod action;
mod candidates;
mod compare;
mod disk;
mod fault;
mod http_side;
mod model;
mod rng;
mod store_side;
mod trace;
mod wire;
mod world;

pub use action::{Action, CONSUMERS, GROUPS, TOPICS};
pub use disk::{files_under, Disk};
pub use rng::Rng;
pub use world::{run, Failure, Report};
