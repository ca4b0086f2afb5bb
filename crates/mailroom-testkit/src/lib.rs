//! Test support shared by the mailroom crates' tests. Dev-only: no crate depends on it
//! except as a `[dev-dependencies]` entry, and it is never published.
//!
//! - [`strategy`]: the proptest strategies the model tests draw group settings, nack kinds
//!   and offset ranges from, so the in-memory and the durable model tests explore the
//!   same space.
//! - [`model`]: small pieces of the reference models, written once from the rules.
//! - `store` (feature `store`): opening a store, a topic or a log on simulated storage,
//!   the option sets and fixtures several store tests share, a topic that restarts or
//!   loses power between model steps, and unwrapping the store's rule errors.
//!
//! The store helpers use the same `mailroom_store` crate instance as the integration
//! tests that call them (integration tests link the library, not its test build), so a
//! `Store` from here is the test's `Store`.

pub mod model;
#[cfg(feature = "store")]
pub mod store;
pub mod strategy;
