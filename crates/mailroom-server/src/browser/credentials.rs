//! The browser's ways to present the token where it cannot send `Authorization`: a
//! stream ticket in the query string, or the token in the WebSocket subprotocol list.

use axum::extract::Request;
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderValue, Uri};
use axum::response::Response;

/// The query parameter that carries a stream ticket.
pub const TICKET_PARAMETER: &str = "ticket";
/// The WebSocket subprotocol a browser offers, and the server answers, next to the one
/// that carries the token: `new WebSocket(url, ["mailroom.bearer",
/// "mailroom.bearer." + token])`. Only this name is ever sent back.
pub const BEARER_PROTOCOL: &str = "mailroom.bearer";

/// Takes `?ticket=...` out of the request's URI, so that no handler, log line or trace
/// downstream sees it, and returns it.
///
/// ```
/// use axum::extract::Request;
/// use mailroom_server::browser::credentials::take_ticket;
/// let mut request = Request::get("/v1/channels/a/events?x=1&ticket=abc").body(axum::body::Body::empty()).unwrap();
/// assert_eq!(take_ticket(&mut request).as_deref(), Some("abc"));
/// assert_eq!(request.uri(), "/v1/channels/a/events?x=1");
/// ```
pub fn take_ticket(request: &mut Request) -> Option<String> {
    let query = request.uri().query()?;
    let mut ticket = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((TICKET_PARAMETER, value)) => ticket = Some(value.to_owned()),
            _ if pair == TICKET_PARAMETER => ticket = Some(String::new()),
            _ => kept.push(pair),
        }
    }
    let ticket = ticket?;
    let path = request.uri().path();
    let rebuilt = if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    let mut parts = request.uri().clone().into_parts();
    parts.path_and_query = PathAndQuery::try_from(rebuilt).ok();
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    Some(ticket)
}

/// The token a WebSocket handshake offers as the subprotocol `mailroom.bearer.<token>`,
/// if it is a handshake and offers one.
pub fn subprotocol_token(request: &Request) -> Option<&str> {
    let upgrade = request.headers().get(header::UPGRADE)?;
    if !upgrade.as_bytes().eq_ignore_ascii_case(b"websocket") {
        return None;
    }
    request
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|protocol| {
            protocol
                .trim()
                .strip_prefix(BEARER_PROTOCOL)?
                .strip_prefix('.')
        })
}

/// Names [`BEARER_PROTOCOL`] as the accepted subprotocol of a WebSocket handshake that
/// authenticated with it: a browser fails a handshake whose answer names none of the
/// protocols it offered, and the one with the token must never be echoed.
pub fn accept_bearer_protocol(response: &mut Response) {
    if response.status() == axum::http::StatusCode::SWITCHING_PROTOCOLS {
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(BEARER_PROTOCOL),
        );
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    // Proves the ticket is taken out whatever its place in the query, and that other
    // queries are left alone.
    #[test]
    fn tickets_leave_the_uri() {
        let cases = [
            ("/a?ticket=t", Some("t"), "/a"),
            ("/a?ticket=t&b=1", Some("t"), "/a?b=1"),
            ("/a?b=1&ticket=t&c=2", Some("t"), "/a?b=1&c=2"),
            ("/a?ticketx=t", None, "/a?ticketx=t"),
            ("/a", None, "/a"),
        ];
        for (uri, ticket, left) in cases {
            let mut request = Request::get(uri).body(Body::empty()).unwrap();
            assert_eq!(take_ticket(&mut request).as_deref(), ticket, "{uri}");
            assert_eq!(request.uri(), left);
        }
    }

    // Proves the token is read only from a WebSocket handshake's protocol list.
    #[test]
    fn the_token_rides_in_the_protocol_list() {
        let handshake = |protocols: &str| {
            Request::get("/v1/channels/a/ws")
                .header("upgrade", "websocket")
                .header("sec-websocket-protocol", protocols)
                .body(Body::empty())
                .unwrap()
        };
        let offered = handshake("mailroom.bearer, mailroom.bearer.s3cret");
        assert_eq!(subprotocol_token(&offered), Some("s3cret"));
        assert_eq!(subprotocol_token(&handshake("mailroom.bearer")), None);
        assert_eq!(subprotocol_token(&handshake("other.s3cret")), None);
        let plain = Request::get("/v1/channels/a/ws")
            .header("sec-websocket-protocol", "mailroom.bearer.s3cret")
            .body(Body::empty())
            .unwrap();
        assert_eq!(subprotocol_token(&plain), None);
    }
}
