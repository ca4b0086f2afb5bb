//! The fixed values the fake answers with: the topic and the group every call describes.

use mailroom_client::{
    DeadLetterNote, DeliveryId, GroupCounters, GroupDetail, GroupInfo, InFlightDelivery, TopicInfo,
};

use super::Fake;

impl Fake {
    /// The topic every topic call describes: offsets 0..6 and one group.
    pub fn info(topic: &str) -> TopicInfo {
        TopicInfo {
            name: topic.into(),
            start: 0,
            end: 6,
            groups: vec![Fake::detail().info],
            retention: Default::default(),
            bytes: 0,
            removed: Default::default(),
            state: Default::default(),
            failure: None,
            failure_kind: None,
            idempotency: None,
        }
    }

    /// The detail every `group_detail` answers with.
    pub fn detail() -> GroupDetail {
        GroupDetail {
            info: GroupInfo {
                name: "g".into(),
                position: 4,
                attempt: 2,
                in_flight: Some(DeliveryId {
                    offset: 4,
                    attempt: 2,
                }),
                max_attempts: 3,
                lag: 2,
                dead_letters: 1,
                paused: false,
                paused_until_ms: None,
            },
            lease_ms: Some(500),
            backoff: None,
            max_in_flight: 2,
            counters: GroupCounters::default(),
            deliveries: vec![InFlightDelivery {
                offset: 5,
                attempt: 1,
                consumer: Some("worker-1".into()),
                lease_deadline_ms: Some(1_000),
            }],
            dead_letter_notes: vec![DeadLetterNote {
                offset: 1,
                attempts: 3,
                reason: Some("boom".into()),
                at_ms: 9,
            }],
        }
    }
}
