//! `mailroom-bench`: one load generator that runs the same workloads against mailroom and
//! the brokers users would pick instead (Redis Streams, NATS JetStream, RabbitMQ; over
//! PostgreSQL, PgQ and a hand-written `SKIP LOCKED` queue table), so every
//! figure can sit next to a peer measured the same way in the same run.
//!
//! # Shape
//! - [`workload`]: the workloads of the peer comparison, each written once against the traits in
//!   [`systems`]: publish, consume with ack, consume with failures (retry + dead letter),
//!   fan-out to several groups, and live fan-out to many subscribers with one stalled.
//! - [`systems`]: one adapter per broker, each speaking that broker's usual Rust client.
//! - [`ledger`]: the correctness check. Every run records each delivery and ends with a
//!   verdict: nothing lost, no unexpected duplicate, dead letters exact. A fast wrong answer
//!   is reported as a failure, never as a figure.
//! - [`probe`]: the broker's CPU seconds and peak RSS, read from `/proc/<pid>`; and
//!   [`database_probe`]: a PostgreSQL database's CPU, WAL flushes, commits and statements.
//! - [`report`] and [`table`]: one JSON line per run, and the markdown table with the
//!   ratio mailroom / peer built from those lines.
//!
//! # Messages
//! Every payload is ASCII (so no system pays for base64): the sequence number and the
//! publish time in hex, padded to the requested size. See [`payload`].

pub mod database_probe;
pub mod ledger;
pub mod payload;
pub mod probe;
pub mod report;
pub mod systems;
pub mod table;
pub mod workload;
