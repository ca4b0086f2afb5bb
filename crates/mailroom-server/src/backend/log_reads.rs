//! Reading a topic's log without a group ([`Backend::read_log`](super::Backend::read_log)):
//! the page a backend answers, and the rules every backend cuts it by.
//!
//! A page starts at `from`, or at the oldest retained offset when `from` is below it
//! (its [`first`](LogPage::first) then says where it really started); `from` past the
//! log's end is refused. It holds at most `limit` messages and stops before the message
//! whose payload would take it past `bytes_max`, but always holds at least one, so a
//! message larger than the cap is read alone and paging never gets stuck.

use bytes::Bytes;
use mailroom::group::ArgumentError;
use mailroom::topic::{Message, TopicError};
use mailroom_store::StoreError;

/// One page of a topic's log, by ascending offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The messages with their offsets, publish times and metadata.
    pub messages: Vec<(u64, Message<Bytes>)>,
    /// The offset the page starts at: the `from` asked for, or the oldest retained
    /// offset if that was above it.
    pub first: u64,
    /// The log's end when the page was read.
    pub end: u64,
}

impl LogPage {
    /// The `from` of the page after this one: one past its last message, or
    /// [`first`](Self::first) when it is empty.
    pub fn next(&self) -> u64 {
        self.messages
            .last()
            .map_or(self.first, |(offset, _)| offset + 1)
    }
}

/// Refuses a `from` past `end`, naming the field and the range allowed (any offset up
/// to the end: below the retained start reads from the start).
pub(crate) fn check_from(from: u64, end: u64) -> Result<(), StoreError> {
    if from <= end {
        return Ok(());
    }
    Err(StoreError::Topic(TopicError::InvalidArgument(
        ArgumentError::OutOfRange {
            field: "from",
            min: 0,
            max: end,
            got: from,
        },
    )))
}

/// Whether a page already holding `held_bytes` of payloads in `count` messages may take
/// one more of `bytes` under the cap `bytes_max`: always the first, then while the sum
/// stays at most the cap.
pub(crate) fn fits(count: usize, held_bytes: usize, bytes: usize, bytes_max: usize) -> bool {
    count == 0 || held_bytes.saturating_add(bytes) <= bytes_max
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the byte cap admits a first message of any size, then stops before the
    // message that would pass the cap, and that `from` up to the end is accepted.
    #[test]
    fn cap_and_from_rules() {
        assert!(fits(0, 0, usize::MAX, 1));
        assert!(fits(1, 4, 4, 8));
        assert!(!fits(1, 4, 5, 8));
        assert!(check_from(5, 5).is_ok());
        assert!(check_from(0, 0).is_ok());
        let error = check_from(6, 5).unwrap_err().to_string();
        assert!(error.contains("from"), "{error}");
    }

    // Proves `next` follows the last message, or stays at `first` for an empty page.
    #[test]
    fn next_of_a_page() {
        let empty = LogPage {
            messages: Vec::new(),
            first: 7,
            end: 7,
        };
        assert_eq!(empty.next(), 7);
        let message = Message::new(Bytes::from_static(b"x"), Some(1), Default::default());
        let page = LogPage {
            messages: vec![(7, message.clone()), (8, message)],
            first: 7,
            end: 9,
        };
        assert_eq!(page.next(), 9);
    }
}
