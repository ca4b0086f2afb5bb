//! One file per command.

pub mod channel;
pub mod consume;
pub mod dead_letters;
pub mod demo;
pub mod group;
pub mod group_control;
pub mod publish;
pub mod serve;
pub mod stats;
pub mod topic;
