//! The commands: one module per resource (`topic`, `group`, `channel`) with one file per
//! verb, and one file per command that is a verb of its own.

pub mod channel;
pub mod consume;
pub mod dead_letters;
pub mod demo;
pub mod group;
pub mod publish;
pub mod read;
pub mod repair;
pub mod serve;
pub mod stats;
pub mod tail;
pub mod topic;
