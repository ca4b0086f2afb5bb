//! How a failed command reads on stderr: `mailroom: ` and one line saying what went
//! wrong, with a hint where the usual fix is known (no server at that address, a token
//! refused, something other than mailroom answering, a server that does not answer).

use mailroom_client::{ClientError, TimeoutLimit};

/// The line printed (after `mailroom: `) when a command fails.
///
/// The error's chain is joined with `: `, leaving out any link whose text an earlier one
/// already printed: the client's errors wrap their sources *and* print them, so plain
/// `{:#}` would say "connection refused" three times. Lines are joined with spaces, so a
/// multi-line message (from a server, or a parser) cannot break the one-line promise.
pub fn one_line(error: &anyhow::Error, server: &str) -> String {
    let mut text = String::new();
    for link in error.chain() {
        let link = link.to_string();
        let link = link.trim();
        if link.is_empty() || text.contains(link) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(link);
    }
    // An error body without a message leaves a dangling separator.
    let mut text = text.trim_end_matches([':', ' ']).to_owned();
    if let Some(hint) = hint(error, server) {
        text.push_str(&format!(" ({hint})"));
    }
    // Multi-line messages (a TOML parse error draws the line and a caret) are joined
    // line by line, each trimmed, so the result stays readable on one line.
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    lines
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The code a `--json` error carries: the server's error code when it answered with
/// one, else what kind of failure it was.
pub fn code(error: &anyhow::Error) -> &str {
    let Some(client) = error
        .chain()
        .find_map(|link| link.downcast_ref::<ClientError>())
    else {
        return "failed";
    };
    match client {
        _ if refused(error) => "unreachable",
        ClientError::Api { code, .. } => code.as_str(),
        ClientError::InvalidUrl(_) => "invalid_url",
        ClientError::InvalidName(_) => "invalid_name",
        ClientError::InvalidRequest(_) => "invalid_request",
        ClientError::Timeout { .. } => "timeout",
        ClientError::Http(http) if http.is_connect() => "unreachable",
        ClientError::Http(_) => "http",
        ClientError::WebSocket(_) => "websocket",
        ClientError::StreamClosed { .. } => "stream_closed",
        ClientError::UnexpectedResponse(_) => "unexpected_response",
        _ => "failed",
    }
}

/// The HTTP status of the server's error answer, if the failure was one.
pub fn status(error: &anyhow::Error) -> Option<u16> {
    error
        .chain()
        .find_map(|link| match link.downcast_ref::<ClientError>() {
            Some(ClientError::Api { status, .. }) => Some(*status),
            _ => None,
        })
}

/// Whether the connection was refused: no server listens at the address.
fn refused(error: &anyhow::Error) -> bool {
    error.chain().any(|link| {
        link.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// What the user can do about `error`, when the fix is a known one.
fn hint(error: &anyhow::Error, server: &str) -> Option<String> {
    let refused = refused(error);
    let client = error
        .chain()
        .find_map(|link| link.downcast_ref::<ClientError>());
    match client? {
        ClientError::Http(http) if http.is_connect() || refused => Some(format!(
            "is a mailroom server running at {server}? set --server or MAILROOM_URL"
        )),
        ClientError::WebSocket(_) if refused => Some(format!(
            "is a mailroom server running at {server}? set --server or MAILROOM_URL"
        )),
        ClientError::Timeout {
            limit: TimeoutLimit::Connect,
            ..
        } => Some(format!(
            "is {server} reachable? set --server or MAILROOM_URL; \
             a slow network may need a longer --timeout or MAILROOM_TIMEOUT"
        )),
        ClientError::Timeout { .. } => Some(format!(
            "is {server} a mailroom server, and not overloaded? \
             a slow server may need a longer --timeout or MAILROOM_TIMEOUT"
        )),
        ClientError::Api { status: 401, .. } => {
            Some("pass the server's token with --token or MAILROOM_TOKEN".to_owned())
        }
        // Mailroom's errors carry a code; `http_<status>` means the body had none.
        ClientError::Api { code, .. } if code.as_str().starts_with("http_") => {
            Some(format!("is {server} a mailroom server?"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source and also returns it, as thiserror's
    /// `#[error("..: {0}")]` with `#[from]` does.
    #[derive(Debug)]
    struct Repeating(std::io::Error);

    impl std::fmt::Display for Repeating {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "reading: {}", self.0)
        }
    }

    impl std::error::Error for Repeating {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    // Proves a link already printed by an earlier one is left out, distinct links are
    // joined with `: `, and line breaks in a message become spaces.
    #[test]
    fn repeated_links_are_dropped_and_lines_joined() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let error = anyhow::Error::new(Repeating(io)).context("opening jobs.txt");
        assert_eq!(
            one_line(&error, "http://x"),
            "opening jobs.txt: reading: no such file"
        );
        let error = anyhow::anyhow!("first line\n   |\n  second\tline  \n");
        assert_eq!(one_line(&error, "http://x"), "first line | second line");
    }

    // Proves the hints: a 401 names the token flag, a body without a mailroom error code
    // asks whether the server is mailroom, and other API errors get no hint.
    #[test]
    fn api_errors_get_their_hints() {
        let api = |status, code: &str, message: &str| {
            anyhow::Error::new(ClientError::Api {
                status,
                code: code.into(),
                message: message.into(),
            })
        };
        let refused = one_line(&api(401, "unauthorized", "wrong bearer token"), "u");
        assert_eq!(
            refused,
            "server said 401 unauthorized: wrong bearer token \
             (pass the server's token with --token or MAILROOM_TOKEN)"
        );
        assert_eq!(
            one_line(&api(404, "http_404", ""), "http://x"),
            "server said 404 http_404 (is http://x a mailroom server?)"
        );
        assert_eq!(
            one_line(&api(404, "unknown_topic", "unknown topic \"t\""), "u"),
            "server said 404 unknown_topic: unknown topic \"t\""
        );
    }

    // Proves each timeout names the limit and its length, and points at the server
    // address and the --timeout flag.
    #[test]
    fn timeouts_get_their_hints() {
        let timeout = |limit, ms| {
            anyhow::Error::new(ClientError::Timeout {
                limit,
                after: std::time::Duration::from_millis(ms),
            })
        };
        let connect = one_line(&timeout(TimeoutLimit::Connect, 5_000), "http://x");
        assert_eq!(
            connect,
            "connecting timed out after 5000 ms (is http://x reachable? set --server or \
             MAILROOM_URL; a slow network may need a longer --timeout or MAILROOM_TIMEOUT)"
        );
        let request = one_line(&timeout(TimeoutLimit::Request, 200), "http://x");
        assert_eq!(
            request,
            "request timed out after 200 ms (is http://x a mailroom server, and not \
             overloaded? a slow server may need a longer --timeout or MAILROOM_TIMEOUT)"
        );
    }

    // Proves a request the client could not encode (a token with a line break, say)
    // reports as such, not as a transport failure.
    #[test]
    fn an_unencodable_request_has_its_own_code() {
        let error = anyhow::Error::new(ClientError::InvalidRequest(
            "the value of the header authorization is not a valid header value".into(),
        ));
        assert_eq!(code(&error), "invalid_request");
    }
}
