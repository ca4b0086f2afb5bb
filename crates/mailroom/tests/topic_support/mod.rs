//! What the topic rule tests share: a topic with messages and a group, and the checks
//! they repeat.

use mailroom::topic::{DeliveryId, GroupInfo, Topic, TopicError};

pub(crate) fn id(offset: u64, attempt: u32) -> DeliveryId {
    DeliveryId { offset, attempt }
}

pub(crate) fn topic_with(
    messages: &[&'static str],
    group: &str,
    max_attempts: u32,
) -> Topic<&'static str> {
    let topic = Topic::new();
    for message in messages {
        topic.publish(*message);
    }
    topic.create_group(group, max_attempts).unwrap();
    topic
}

pub(crate) fn info(topic: &Topic<&'static str>, group: &str) -> GroupInfo {
    topic.group_info(group).unwrap()
}

pub(crate) fn assert_not_owned<T: std::fmt::Debug>(result: Result<T, TopicError>) {
    assert!(
        matches!(result, Err(TopicError::NotOwned { .. })),
        "expected NotOwned, got {result:?}"
    );
}
