//! The binary's own parts: its command line ([`args`]) and the dispatch of a `run` to a
//! system and a workload ([`dispatch`]).

pub mod args;
pub mod dispatch;
