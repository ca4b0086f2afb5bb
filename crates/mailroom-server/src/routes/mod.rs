//! The HTTP handlers, one file per resource.

pub mod batch;
pub mod channels;
pub mod group_control;
pub mod groups;
pub mod ops;
pub mod topics;
