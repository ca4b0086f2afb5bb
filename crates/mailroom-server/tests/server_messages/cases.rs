//! The table of bad requests: each with the status, code and texts its answer must
//! carry, for the group routes and for the topic, channel and other routes.

use axum::http::Method;

use super::GROUP;

/// One bad request and what its answer must say.
pub(super) struct Case {
    pub(super) method: Method,
    pub(super) uri: String,
    pub(super) body: Vec<u8>,
    pub(super) status: u16,
    pub(super) code: &'static str,
    /// Texts the message must contain: the field, the offending value, the limit.
    pub(super) says: Vec<String>,
}

fn case(
    method: Method,
    uri: impl Into<String>,
    body: impl Into<Vec<u8>>,
    (status, code): (u16, &'static str),
    says: &[&str],
) -> Case {
    Case {
        method,
        uri: uri.into(),
        body: body.into(),
        status,
        code,
        says: says.iter().map(|text| (*text).to_owned()).collect(),
    }
}

/// Every bad request a client can send to the group routes, with what it must say.
pub(super) fn group_cases() -> Vec<Case> {
    let g = GROUP;
    let long = "c".repeat(129);
    let put = |body: &str, says: &[&str]| {
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            body.to_owned(),
            (400, "invalid_argument"),
            says,
        )
    };
    vec![
        put(
            r#"{"max_attempts":0}"#,
            &["max_attempts", "1..=1000000", "got 0"],
        ),
        put(r#"{"max_attempts":1000001}"#, &["max_attempts", "1000001"]),
        put(
            r#"{"max_attempts":1,"start":99}"#,
            &["start", "0..=1", "99"],
        ),
        put(
            r#"{"max_attempts":1,"lease_ms":0}"#,
            &["lease_ms", "604800000", "7 days", "got 0"],
        ),
        put(
            r#"{"max_attempts":1,"max_in_flight":0}"#,
            &["max_in_flight", "1..=65536", "got 0"],
        ),
        put(
            r#"{"max_attempts":1,"max_in_flight":65537}"#,
            &["max_in_flight", "65537"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"fixed","delay_ms":604800001}}"#,
            &["backoff.delay_ms", "604800000", "604800001"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"exponential","base_ms":10,"cap_ms":5}}"#,
            &["backoff.base_ms", "backoff.cap_ms", "10", "5"],
        ),
        put(
            r#"{"max_attempts":1,"backoff":{"kind":"exponential","base_ms":1,"cap_ms":604800001}}"#,
            &["backoff.cap_ms", "604800001"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":"3"}"#,
            (400, "invalid_body"),
            &["max_attempts", "\"3\""],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":-1}"#,
            (400, "invalid_body"),
            &["max_attempts", "-1"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"start":"middle"}"#,
            (400, "invalid_body"),
            &["start", "earliest"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"colour":1}"#,
            (400, "invalid_body"),
            &["colour"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            r#"{"max_attempts":1,"backoff":{"kind":"linear"}}"#,
            (400, "invalid_body"),
            &["backoff.kind", "linear"],
        ),
        case(
            Method::PUT,
            "/v1/topics/t/groups/h",
            "{",
            (400, "malformed_json"),
            &["request body"],
        ),
        case(
            Method::PUT,
            g,
            r#"{"max_attempts":2}"#,
            (409, "group_exists"),
            &["\"g\""],
        ),
        case(
            Method::PUT,
            "/v1/topics/nope/groups/h",
            r#"{"max_attempts":2}"#,
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            "/v1/topics/t/groups/nope/poll",
            "",
            (404, "unknown_group"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            format!("{g}/poll?consumer={long}"),
            "",
            (400, "invalid_argument"),
            &["consumer", "1..=128", "got 129"],
        ),
        case(
            Method::POST,
            format!("{g}/poll?consumer=a"),
            r#"{"consumer":"b"}"#,
            (400, "invalid_argument"),
            &["consumer", "\"a\"", "\"b\""],
        ),
        case(
            Method::POST,
            format!("{g}/poll?who=a"),
            "",
            (400, "bad_request"),
            &["who=a"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":0}"#,
            (400, "invalid_argument"),
            &["max", "1..=65536", "got 0"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"wait_ms":30001}"#,
            (400, "invalid_argument"),
            &["wait_ms", "30 seconds", "30001"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"ack":[{"offset":9223372036854775808,"attempt":1}]}"#,
            (400, "invalid_argument"),
            &["ack[0].offset", "9223372036854775808"],
        ),
        case(
            Method::POST,
            format!("{g}/poll/batch"),
            r#"{"max":1,"ack":[{"offset":"0"}]}"#,
            (400, "invalid_body"),
            &["ack[0].offset", "\"0\""],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            r#"{"offset":0,"attempt":2}"#,
            (409, "not_owned"),
            &["offset 0 attempt 2", "offset 0 attempt 1"],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            r#"{"offset":0}"#,
            (400, "invalid_body"),
            &["attempt"],
        ),
        case(
            Method::POST,
            format!("{g}/ack"),
            vec![b' '; 70_000],
            (413, "payload_too_large"),
            &["70000", "65536"],
        ),
        case(
            Method::POST,
            format!("{g}/nack"),
            r#"{"offset":0,"attempt":1,"kind":"maybe"}"#,
            (400, "invalid_body"),
            &["kind", "maybe"],
        ),
        case(
            Method::POST,
            format!("{g}/touch"),
            r#"{"offset":0,"attempt":2}"#,
            (409, "not_owned"),
            &["offset 0 attempt 2"],
        ),
        case(
            Method::POST,
            format!("{g}/ack/batch"),
            r#"{"deliveries":[]}"#,
            (400, "invalid_argument"),
            &["deliveries", "1..=65536", "got 0"],
        ),
        case(
            Method::POST,
            format!("{g}/nack/batch"),
            r#"{"deliveries":[{"offset":0,"attempt":2147483648}]}"#,
            (400, "invalid_argument"),
            &["deliveries[0].attempt", "2147483648"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?limit=0"),
            "",
            (400, "invalid_argument"),
            &["limit", "1..=10000", "got 0"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?limit=abc"),
            "",
            (400, "bad_request"),
            &["limit=abc"],
        ),
        case(
            Method::GET,
            format!("{g}/dead-letters?page=2"),
            "",
            (400, "bad_request"),
            &["page=2"],
        ),
        case(
            Method::POST,
            format!("{g}/dead-letters/redrive"),
            r#"{"from":5,"to":2}"#,
            (400, "invalid_argument"),
            &["from", "to", "5", "2"],
        ),
        case(
            Method::POST,
            format!("{g}/dead-letters/purge"),
            r#"{"to":9223372036854775808}"#,
            (400, "invalid_argument"),
            &["to", "9223372036854775808"],
        ),
        case(
            Method::DELETE,
            "/v1/topics/t/groups/nope",
            "",
            (404, "unknown_group"),
            &["\"nope\""],
        ),
    ]
}

/// Every bad request a client can send to the topic, channel and other routes.
pub(super) fn other_cases() -> Vec<Case> {
    let batch = "/v1/topics/t/messages/batch";
    vec![
        case(
            Method::PUT,
            "/v1/topics/bad%20name",
            "",
            (400, "invalid_name"),
            &["topic name", "\"bad name\"", "1..=128"],
        ),
        case(
            Method::PUT,
            format!("/v1/topics/{}", "x".repeat(129)),
            "",
            (400, "invalid_name"),
            &["longer than 128 bytes", "…"],
        ),
        case(
            Method::GET,
            "/v1/topics/nope",
            "",
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::DELETE,
            "/v1/topics/nope",
            "",
            (404, "unknown_topic"),
            &["\"nope\""],
        ),
        case(
            Method::POST,
            "/v1/topics/t/messages",
            vec![b'x'; 1025],
            (413, "payload_too_large"),
            &["1025", "1024"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":[]}"#,
            (400, "invalid_argument"),
            &["messages", "1..=10000", "got 0"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":[{"base64":"!"}]}"#,
            (400, "invalid_argument"),
            &["messages[0].base64"],
        ),
        case(
            Method::POST,
            batch,
            r#"{"messages":["a",7]}"#,
            (400, "invalid_body"),
            &["messages[1]", "base64"],
        ),
        case(
            Method::POST,
            batch,
            format!(r#"{{"messages":["{}"]}}"#, "y".repeat(1025)),
            (413, "payload_too_large"),
            &["messages[0]", "1025", "1024"],
        ),
        case(
            Method::POST,
            batch,
            "[1]",
            (400, "invalid_body"),
            &["array"],
        ),
        case(
            Method::PUT,
            "/v1/channels/d",
            r#"{"max_subscribers":0}"#,
            (400, "invalid_argument"),
            &["max_subscribers", "1..=10000", "got 0"],
        ),
        case(
            Method::PUT,
            "/v1/channels/d",
            r#"{"mailbox_capacity":65537}"#,
            (400, "invalid_argument"),
            &["mailbox_capacity", "65537"],
        ),
        case(
            Method::PUT,
            "/v1/channels/c",
            r#"{"max_subscribers":2}"#,
            (409, "channel_exists"),
            &["\"c\"", "max_subscribers 1"],
        ),
        case(
            Method::POST,
            "/v1/channels/c/messages",
            vec![b'x'; 1025],
            (413, "payload_too_large"),
            &["1025", "1024"],
        ),
        case(
            Method::POST,
            "/v1/channels/nope/messages",
            "x",
            (404, "unknown_channel"),
            &["\"nope\""],
        ),
        case(
            Method::GET,
            "/v1/channels/c/ws",
            "",
            (400, "not_websocket"),
            &["WebSocket"],
        ),
        case(
            Method::DELETE,
            "/v1/channels/nope",
            "",
            (404, "unknown_channel"),
            &["\"nope\""],
        ),
        case(
            Method::GET,
            "/v2/anything",
            "",
            (404, "not_found"),
            &["GET /v2/anything"],
        ),
        case(
            Method::DELETE,
            "/v1/topics",
            "",
            (405, "method_not_allowed"),
            &["DELETE", "/v1/topics"],
        ),
    ]
}
