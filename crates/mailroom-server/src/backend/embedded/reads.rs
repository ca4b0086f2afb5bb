//! The embedded backend's reads that gather several store calls into one answer: a
//! listing, a topic's or a group's whole state, a page of the log, the metrics' gauges. Each runs where
//! [`Embedded::blocking`](super::Embedded::blocking) puts it.

use std::collections::HashMap;

use bytes::Bytes;
use mailroom::topic::{DeadLetterInfo, Message};
use mailroom_api::topic_health::FailedTopic;
use mailroom_store::{
    DeadLetterPage, DurableTopic, FailureKind, Store, StoreError, TopicIdempotency,
};

use crate::backend::log_reads::{check_from, fits};
use crate::backend::{
    GroupDetail, GroupGauges, LogPage, RetentionPass, RetentionState, TopicFailureState,
    TopicOffsets, TopicState,
};

/// A topic's retention, size and what retention removed.
pub(super) fn retention_state(topic: &DurableTopic) -> RetentionState {
    RetentionState {
        in_force: topic.effective_retention(),
        bytes: topic.bytes(),
        removed: topic.retention_removed(),
    }
}

/// Every topic with its offsets and groups; a failed one with its failure (and, if it
/// could not be opened, zeros: its numbers are unknown).
pub(super) fn list_topics(store: &Store) -> Result<Vec<TopicOffsets>, StoreError> {
    let failures = failures_by_topic(store);
    let mut topics = Vec::new();
    for name in store.topics() {
        let failure = failures.get(&name).cloned();
        match store.topic(&name) {
            Ok(topic) => topics.push(TopicOffsets {
                start: topic.start(),
                end: topic.len(),
                groups: topic.groups(),
                retention: retention_state(&topic),
                name,
                failure,
            }),
            Err(StoreError::TopicFailed { reason, .. }) => topics.push(TopicOffsets {
                start: 0,
                end: 0,
                groups: Vec::new(),
                retention: unknown_retention(store),
                name,
                failure: failure.or(Some(TopicFailureState {
                    kind: FailureKind::Stopped.as_str(),
                    reason,
                })),
            }),
            // Deleted between the listing and this lookup: simply skipped.
            Err(_) => {}
        }
    }
    Ok(topics)
}

/// One topic with every group's state; a failed one with its failure (zeros if it could
/// not be opened).
pub(super) fn topic_state(store: &Store, name: String) -> Result<TopicState, StoreError> {
    let failure = failures_by_topic(store).remove(&name);
    let handle = match store.topic(&name) {
        Ok(handle) => handle,
        Err(StoreError::TopicFailed { reason, .. }) => {
            return Ok(TopicState {
                retention: unknown_retention(store),
                name,
                start: 0,
                end: 0,
                groups: Vec::new(),
                failure: failure.or(Some(TopicFailureState {
                    kind: FailureKind::Stopped.as_str(),
                    reason,
                })),
                idempotency: None,
            })
        }
        Err(other) => return Err(other),
    };
    let mut groups = Vec::new();
    for group in handle.groups() {
        match handle.group_info(&group) {
            Ok(info) => groups.push(info),
            // Deleted since the listing: not an error for the caller.
            Err(StoreError::Topic(_)) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(TopicState {
        name,
        start: handle.start(),
        end: handle.len(),
        groups,
        retention: retention_state(&handle),
        failure,
        // A topic without a window of its own reads as one over any backend: the
        // server's defaults (the PostgreSQL backend keeps no window of a topic's own).
        idempotency: (handle.own_idempotency() != TopicIdempotency::default())
            .then(|| handle.idempotency_window()),
    })
}

/// The failed topics, for `/healthz`.
pub(super) fn failed_topics(store: &Store) -> Vec<FailedTopic> {
    store
        .topic_failures()
        .into_iter()
        .map(|failure| FailedTopic {
            topic: failure.topic,
            kind: failure.kind.as_str().to_owned(),
            reason: failure.reason,
        })
        .collect()
}

fn failures_by_topic(store: &Store) -> HashMap<String, TopicFailureState> {
    store
        .topic_failures()
        .into_iter()
        .map(|failure| {
            let state = TopicFailureState {
                kind: failure.kind.as_str(),
                reason: failure.reason,
            };
            (failure.topic, state)
        })
        .collect()
}

/// The retention shown for a topic that could not be opened: the store's defaults (its
/// own settings could not be read), nothing counted.
fn unknown_retention(store: &Store) -> RetentionState {
    RetentionState {
        in_force: store.retention_defaults(),
        bytes: 0,
        removed: Default::default(),
    }
}

/// Everything known of one group.
pub(super) fn group_detail(
    store: &Store,
    topic: &str,
    group: &str,
) -> Result<GroupDetail, StoreError> {
    let topic = store.topic(topic)?;
    Ok(GroupDetail {
        info: topic.group_info(group)?,
        config: topic.group_config(group)?,
        counters: topic.group_counters(group)?,
        in_flight: topic.in_flight_details(group)?,
        dead_letters: topic.dead_letter_info(group)?,
    })
}

/// The lag and counters of every group; groups and topics deleted meanwhile are skipped.
pub(super) fn group_gauges(store: &Store) -> Result<Vec<GroupGauges>, StoreError> {
    let mut gauges = Vec::new();
    for name in store.topics() {
        let Ok(topic) = store.topic(&name) else {
            continue;
        };
        for group in topic.groups() {
            let Ok(info) = topic.group_info(&group) else {
                continue;
            };
            let counters = topic.group_counters(&group).unwrap_or_default();
            gauges.push(GroupGauges {
                topic: name.clone(),
                group,
                lag: info.lag,
                counters,
            });
        }
    }
    Ok(gauges)
}

/// One retention pass over every topic, by the clock of the store; a topic deleted
/// meanwhile is skipped, one that fails is reported and does not stop the rest.
pub(super) fn enforce_retention(store: &Store, now_ms: u64) -> RetentionPass {
    let mut pass = RetentionPass::default();
    for name in store.topics() {
        let Ok(topic) = store.topic(&name) else {
            continue;
        };
        match topic.enforce_retention(now_ms) {
            Ok(removed) if removed.segments > 0 => pass.removed.push((name, removed)),
            Ok(_) | Err(StoreError::UnknownTopic { .. }) => {}
            Err(error) => pass.failed.push((name, error.to_string())),
        }
    }
    pass
}

/// A page of `topic`'s log from `from` (see [`LogPage`] for the rules), one record read
/// per message. Retention removing the page's next message while it is read ends the
/// page there (the next page then starts at the new start, and says so); removing the
/// first one restarts the page at the new start.
pub(super) fn read_log(
    topic: &DurableTopic,
    from: u64,
    limit: usize,
    bytes_max: usize,
) -> Result<LogPage, StoreError> {
    let end = topic.len();
    check_from(from, end)?;
    let mut page = LogPage {
        messages: Vec::new(),
        first: from.max(topic.start()),
        end,
    };
    let mut bytes = 0;
    let mut offset = page.first;
    while offset < end && page.messages.len() < limit {
        let Some(message) = topic.read_message(offset)? else {
            let start = topic.start();
            if page.messages.is_empty() && start > offset {
                (page.first, offset) = (start, start);
                continue;
            }
            break;
        };
        if !fits(page.messages.len(), bytes, message.payload.len(), bytes_max) {
            break;
        }
        bytes += message.payload.len();
        page.messages.push((offset, message));
        offset += 1;
    }
    Ok(page)
}

/// One page of `group`'s dead letters, each with its message: the payload the dead
/// letter kept, with the publish time and metadata the log holds for it (none once
/// retention deleted the message).
pub(super) fn dead_letter_page(
    topic: &DurableTopic,
    group: &str,
    from: u64,
    limit: usize,
) -> Result<DeadLetterPage<Message<Bytes>>, StoreError> {
    let page = topic.dead_letter_page(group, from, limit)?;
    let letters = page
        .letters
        .into_iter()
        .map(|letter| {
            Ok(DeadLetterInfo {
                message: topic.message_at(letter.offset, letter.message)?,
                offset: letter.offset,
                attempts: letter.attempts,
                reason: letter.reason,
                at_ms: letter.at_ms,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(DeadLetterPage {
        letters,
        next: page.next,
    })
}
