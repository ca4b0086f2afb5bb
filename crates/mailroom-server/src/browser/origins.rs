//! Which origins a browser may call from, and the refusal of the others.
//!
//! The server's own origin (`http://` or `https://` and the request's `Host`) and the
//! `--cors-origin` list are allowed; any other `Origin` is foreign. [`cross_site_refusal`]
//! answers 403 `forbidden_origin` to a request that could change something or open a
//! stream when it names a foreign origin, or says `Sec-Fetch-Site: cross-site` /
//! `same-site` without an allowed origin. Requests with neither header (curl, SDKs)
//! pass.

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::config::ConfigError;
use crate::error::{shown, ApiError, ErrorCode};

/// The longest origin `--cors-origin` accepts, in bytes.
pub const ORIGIN_BYTES_MAX: usize = 256;

/// The `GET` routes that open a stream: checked like writes, since opening one takes a
/// subscriber slot (and a publish stream writes).
pub const STREAM_ROUTES: [&str; 3] = [
    "/v1/channels/{channel}/events",
    "/v1/channels/{channel}/ws",
    "/v1/topics/{topic}/publish/ws",
];

/// Checks and normalizes one `--cors-origin` value: `http` or `https`, a host and an
/// optional port, nothing else; the scheme and host in lower case, no trailing slash.
///
/// ```
/// use mailroom_server::browser::origins::parse_origin;
/// assert_eq!(parse_origin("HTTP://App.Example:8080/").unwrap(), "http://app.example:8080");
/// assert!(parse_origin("https://app.example/path").is_err());
/// assert!(parse_origin("*").is_err());
/// ```
///
/// # Errors
/// [`ConfigError::Invalid`] for anything else.
pub fn parse_origin(text: &str) -> Result<String, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        setting: "cors-origin",
        reason: format!("{text:?}: {reason} (expected http(s)://HOST[:PORT])"),
    };
    let lowered = text.trim().trim_end_matches('/').to_ascii_lowercase();
    if lowered.len() > ORIGIN_BYTES_MAX {
        return Err(invalid("too long"));
    }
    let host = lowered
        .strip_prefix("http://")
        .or_else(|| lowered.strip_prefix("https://"))
        .ok_or_else(|| invalid("not an http or https origin"))?;
    let host_char = |c: char| c.is_ascii_alphanumeric() || "-._:[]".contains(c);
    if host.is_empty() || !host.chars().all(host_char) {
        return Err(invalid("not a bare host and port"));
    }
    Ok(lowered)
}

/// Whether `origin` may call: the server's own (by the request's `Host`) or listed.
fn is_allowed(origin: &HeaderValue, headers: &HeaderMap, allowed: &[String]) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let own = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .is_some_and(|host| {
            let bare = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            bare.is_some_and(|bare| bare.eq_ignore_ascii_case(host))
        });
    own || allowed.iter().any(|listed| listed == origin)
}

/// Whether the request's `Origin` is listed in `--cors-origin`: the requests that get
/// CORS headers.
///
/// ```
/// use axum::http::HeaderMap;
/// use mailroom_server::browser::origins::is_listed;
/// let mut headers = HeaderMap::new();
/// headers.insert("origin", "https://app.example".parse().unwrap());
/// assert!(is_listed(&headers, &["https://app.example".to_owned()]));
/// assert!(!is_listed(&headers, &[]));
/// ```
pub fn is_listed(headers: &HeaderMap, allowed: &[String]) -> bool {
    headers
        .get(header::ORIGIN)
        .and_then(|origin| origin.to_str().ok())
        .is_some_and(|origin| allowed.iter().any(|listed| listed == origin))
}

/// Why a browser request is refused, or `None` if it may go on.
///
/// ```
/// use axum::http::HeaderMap;
/// use mailroom_server::browser::origins::foreign_origin;
/// let listed = vec!["https://app.example".to_owned()];
/// let mut headers = HeaderMap::new();
/// assert_eq!(foreign_origin(&headers, &listed), None, "curl sends no Origin");
/// headers.insert("origin", "https://app.example".parse().unwrap());
/// assert_eq!(foreign_origin(&headers, &listed), None);
/// headers.insert("origin", "https://evil.example".parse().unwrap());
/// assert!(foreign_origin(&headers, &listed).is_some());
/// ```
pub fn foreign_origin(headers: &HeaderMap, allowed: &[String]) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        if is_allowed(origin, headers, allowed) {
            return None;
        }
        let named = shown(&String::from_utf8_lossy(origin.as_bytes()));
        return Some(format!(
            "origin {named:?} is not allowed to call this server (see --cors-origin)"
        ));
    }
    let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    match site {
        Some(b"cross-site" | b"same-site") => {
            Some("a cross-site browser request without an allowed Origin is refused".to_owned())
        }
        _ => None,
    }
}

/// Whether the request needs the origin check: any method but `GET`, `HEAD` and
/// `OPTIONS`, and every request to a stream route or with a WebSocket upgrade.
fn is_guarded(request: &Request) -> bool {
    let writes = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let upgrade = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let stream = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| STREAM_ROUTES.contains(&path.as_str()));
    writes || upgrade || stream
}

/// The 403 `forbidden_origin` answer for a guarded request from a foreign origin, to be
/// sent instead of running its handler; `None` lets it through. Called by the router's
/// route layer (`app.rs`), so that the matched route is known: that layer also times
/// the request, one layer where two would each box the request's future again.
///
/// ```
/// use axum::body::Body;
/// use axum::http::{Request, StatusCode};
/// use mailroom_server::browser::origins::cross_site_refusal;
///
/// let listed = vec!["https://app.example".to_owned()];
/// let from = |origin: &str| {
///     Request::post("/v1/topics/t/messages").header("origin", origin).body(Body::empty()).unwrap()
/// };
/// assert!(cross_site_refusal(&from("https://app.example"), &listed).is_none());
/// let refused = cross_site_refusal(&from("https://evil.example"), &listed).unwrap();
/// assert_eq!(refused.status(), StatusCode::FORBIDDEN);
/// ```
pub fn cross_site_refusal(request: &Request, allowed: &[String]) -> Option<Response> {
    if !is_guarded(request) {
        return None;
    }
    let reason = foreign_origin(request.headers(), allowed)?;
    Some(ApiError::new(StatusCode::FORBIDDEN, ErrorCode::ForbiddenOrigin, reason).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    // Proves the rule: own and listed origins pass, others and cross-site fetches
    // without an origin are refused, requests without either header pass.
    #[test]
    fn foreign_origins_are_named() {
        let listed = vec!["http://app.example".to_owned()];
        let host = ("host", "broker.example:7070");
        let pass = [
            vec![host],
            vec![host, ("origin", "http://app.example")],
            vec![host, ("origin", "http://broker.example:7070")],
            vec![host, ("origin", "https://broker.example:7070")],
            vec![host, ("sec-fetch-site", "same-origin")],
            vec![host, ("sec-fetch-site", "none")],
            vec![
                host,
                ("origin", "http://app.example"),
                ("sec-fetch-site", "cross-site"),
            ],
        ];
        for pairs in pass {
            assert_eq!(foreign_origin(&headers(&pairs), &listed), None, "{pairs:?}");
        }
        let refuse = [
            vec![host, ("origin", "http://evil.example")],
            vec![host, ("origin", "null")],
            vec![host, ("origin", "http://app.example:8080")],
            vec![host, ("origin", "http://broker.example")],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![host, ("sec-fetch-site", "same-site")],
        ];
        for pairs in refuse {
            assert!(
                foreign_origin(&headers(&pairs), &listed).is_some(),
                "{pairs:?}"
            );
        }
    }

    // Proves origins are normalized and anything but a bare origin is refused.
    #[test]
    fn origins_parse_strictly() {
        assert_eq!(
            parse_origin("https://[::1]:9000").unwrap(),
            "https://[::1]:9000"
        );
        for bad in [
            "",
            "app.example",
            "ftp://app.example",
            "http://",
            "http://a b",
            "http://a/b",
            "http://a?b",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad:?} was accepted");
        }
        let long = format!("http://{}", "a".repeat(ORIGIN_BYTES_MAX));
        assert!(parse_origin(&long).is_err());
    }
}
