//! The HTTP handlers, one file per resource.

pub mod arguments;
pub mod batch;
pub mod batch_bodies;
pub mod batch_long_poll;
pub mod channels;
pub mod dead_letters;
pub mod deliveries;
pub mod group_control;
pub mod groups;
pub mod ops;
pub mod publish_stream;
pub mod topics;
