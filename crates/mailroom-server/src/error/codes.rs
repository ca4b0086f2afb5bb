//! The status and stable code each error gets: the library's, the store's and the
//! broadcast's errors as [`ApiError`]s, and the code of a framework rejection that has
//! only a status.

use axum::http::StatusCode;
use mailroom::broadcast::BroadcastError;
use mailroom::group::ArgumentError;
use mailroom::topic::TopicError;
use mailroom_store::StoreError;

use super::{ApiError, ErrorCode};

impl From<TopicError> for ApiError {
    fn from(error: TopicError) -> ApiError {
        let message = error.to_string();
        match error {
            // The code says "invalid_argument" already; the Display's "invalid argument: "
            // prefix would say it twice.
            TopicError::InvalidArgument(argument) => argument.into(),
            TopicError::UnknownGroup { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownGroup, message)
            }
            TopicError::GroupExists { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::GroupExists, message)
            }
            TopicError::NotOwned { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::NotOwned, message)
            }
            // A rule added to the library later is still a refused request, not a fault.
            _ => ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, message),
        }
    }
}

impl From<ArgumentError> for ApiError {
    /// The library's refusal of an argument in the server's wording. The library's field
    /// names are the JSON fields' names (`consumer`, `lease_ms`, `backoff.cap_ms`, ...),
    /// so its field, bound and value make the message.
    fn from(error: ArgumentError) -> ApiError {
        match error {
            ArgumentError::OutOfRange {
                field,
                min,
                max,
                got,
            } => ApiError::out_of_range(field, min..=max, got),
            ArgumentError::LengthOutOfRange {
                field,
                min,
                max,
                got,
            } => ApiError::length_out_of_range(field, min..=max, got),
            ArgumentError::CountOutOfRange {
                field,
                items,
                min,
                max,
                got,
            } => ApiError::count_out_of_range(
                field,
                items,
                usize::try_from(min).unwrap_or(usize::MAX)
                    ..=usize::try_from(max).unwrap_or(usize::MAX),
                usize::try_from(got).unwrap_or(usize::MAX),
            ),
            // The rest carry no range to word: the library's text is the message.
            other => ApiError::invalid_argument(other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        let message = error.to_string();
        match error {
            StoreError::Topic(topic) => topic.into(),
            StoreError::UnknownTopic { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownTopic, message)
            }
            StoreError::InvalidName { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidName, message)
            }
            StoreError::InvalidArgument { reason } => ApiError::invalid_argument(reason),
            StoreError::FailStopped { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StoreFailed,
                message,
            ),
            StoreError::TopicLimit { topics_max } => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::TopicLimit,
                format!(
                    "the server holds {topics_max} topics, its limit (--max-topics, sized \
                     from the open-file limit by default); delete one first"
                ),
            ),
            // The other topics serve: this one says where and why, and how it heals.
            StoreError::TopicFailed { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::TopicFailed,
                message,
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::StorageError,
                message,
            ),
        }
    }
}

impl From<BroadcastError> for ApiError {
    fn from(error: BroadcastError) -> ApiError {
        let message = error.to_string();
        match error {
            BroadcastError::SubscriberLimit { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::SubscriberLimit, message)
            }
            // The library's "broker is closed" names its own type; to a client, the
            // channel was closed (deleted) while the request ran.
            BroadcastError::Closed => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownChannel,
                "the channel was closed",
            ),
            _ => ApiError::invalid_argument(message),
        }
    }
}

/// The stable code for a framework rejection with this status and no code of its own.
pub(super) fn code_for_status(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::BadRequest,
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::UPGRADE_REQUIRED => ErrorCode::UpgradeRequired,
        _ if status.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{DeliveryId, NotOwned};

    // Proves each topic rule maps to the status and stable code the API documents.
    #[test]
    fn topic_errors_map_to_documented_statuses() {
        let cases = [
            (
                TopicError::InvalidArgument(ArgumentError::Unsupported { reason: "x" }),
                400,
                "invalid_argument",
            ),
            (
                TopicError::UnknownGroup { group: "g".into() },
                404,
                "unknown_group",
            ),
            (
                TopicError::GroupExists { group: "g".into() },
                409,
                "group_exists",
            ),
            (
                TopicError::NotOwned {
                    group: "g".into(),
                    source: NotOwned {
                        requested: DeliveryId {
                            offset: 0,
                            attempt: 1,
                        },
                        current: None,
                    },
                },
                409,
                "not_owned",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status.as_u16(), api.code.as_str()), (status, code));
        }
        let unknown = ApiError::from(StoreError::UnknownTopic { topic: "t".into() });
        assert_eq!(
            (unknown.status.as_u16(), unknown.code.as_str()),
            (404, "unknown_topic")
        );
    }

    // Proves an invalid argument from the library or the store becomes a message that is
    // its reason alone (the code already says "invalid_argument", so the Display's
    // "invalid argument: " prefix would say it twice), and that the library's typed
    // refusals read as the server's own wording of their field, bound and value.
    #[test]
    fn invalid_arguments_are_not_prefixed_twice() {
        let from_topic = ApiError::from(TopicError::InvalidArgument(
            ArgumentError::LengthOutOfRange {
                field: "consumer",
                min: 1,
                max: 128,
                got: 0,
            },
        ));
        let from_store = ApiError::from(StoreError::InvalidArgument {
            reason: "limit must be in 1..=10000, got 0".into(),
        });
        let wrapped = ApiError::from(StoreError::Topic(TopicError::InvalidArgument(
            ArgumentError::OutOfRange {
                field: "lease_ms",
                min: 1,
                max: 604_800_000,
                got: 0,
            },
        )));
        let counted = ApiError::from(TopicError::InvalidArgument(
            ArgumentError::CountOutOfRange {
                field: "ack",
                items: "deliveries",
                min: 0,
                max: 4,
                got: 5,
            },
        ));
        let unsupported = ApiError::from(TopicError::InvalidArgument(ArgumentError::Unsupported {
            reason: "a delay needs a clock",
        }));
        for (api, reason) in [
            (from_topic, "consumer must be 1..=128 bytes long, got 0"),
            (from_store, "limit must be in 1..=10000, got 0"),
            (wrapped, "lease_ms must be in 1..=604800000 (7 days), got 0"),
            (counted, "ack must list at most 4 deliveries, got 5"),
            (unsupported, "a delay needs a clock"),
        ] {
            assert_eq!(
                (api.code.as_str(), api.message.as_str()),
                ("invalid_argument", reason)
            );
        }
    }
}
