//! One request before it is sent: method, path and query, headers and body, built up by
//! the call methods and sent by [`Client::send`](crate::Client) over hyper's pooled
//! client.
//!
//! The client talks to hyper directly rather than through a general-purpose HTTP client:
//! mailroom's calls need no redirects, proxies or cookies, and the layers that provide
//! them parsed every request's URL twice more (about a fifth of the client's
//! instructions per unbatched publish, measured with callgrind).

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::uri::{self, Authority, InvalidUri, PathAndQuery, Scheme};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::Full;
use serde::Serialize;

use crate::ClientError;

/// A request being built. A header or body that cannot be encoded is kept as the
/// error the send returns, so building stays a chain of plain calls.
#[derive(Debug)]
pub(crate) struct Call {
    method: Method,
    /// The percent-encoded path, then `?` and the query if there is one. The URI is this
    /// under the client's authority, put together without parsing either again (a
    /// `url::Url` per call, then its text parsed into a `Uri`, cost about 2,500
    /// instructions of an unbatched publish in callgrind).
    target: String,
    headers: HeaderMap,
    body: Bytes,
    refused: Option<ClientError>,
}

impl Call {
    /// A bodiless `method` request of `path` (percent-encoded, from the client's
    /// `path`).
    pub(crate) fn new(method: Method, path: String) -> Call {
        Call {
            method,
            target: path,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            refused: None,
        }
    }

    /// Adds the header `name: value`; a value that is not a valid header value makes
    /// the send fail with [`ClientError::InvalidRequest`] naming the header.
    pub(crate) fn header(mut self, name: HeaderName, value: &str) -> Call {
        match HeaderValue::from_str(value) {
            Ok(value) => {
                self.headers.append(name, value);
            }
            Err(_) => self.refuse(ClientError::InvalidRequest(format!(
                "the value of the header {name} is not a valid header value"
            ))),
        }
        self
    }

    /// Sends `Authorization: Bearer <token>`.
    pub(crate) fn bearer_auth(self, token: &str) -> Call {
        self.header(AUTHORIZATION, &format!("Bearer {token}"))
    }

    /// The body, sent with the content type `content_type`.
    pub(crate) fn body(mut self, content_type: &'static str, body: impl Into<Bytes>) -> Call {
        self.headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        self.body = body.into();
        self
    }

    /// `value` as the JSON body.
    pub(crate) fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Call {
        match serde_json::to_vec(value) {
            Ok(json) => self.body("application/json", json),
            Err(error) => {
                self.refuse(ClientError::InvalidRequest(format!(
                    "the body could not be written as JSON: {error}"
                )));
                self
            }
        }
    }

    /// `value`'s fields as the query (`name=value&...`, form-encoded), in place of any
    /// query before.
    pub(crate) fn query<T: Serialize + ?Sized>(mut self, value: &T) -> Call {
        if let Some(start) = self.target.find('?') {
            self.target.truncate(start);
        }
        match serde_urlencoded::to_string(value) {
            Ok(query) if query.is_empty() => {}
            Ok(query) => {
                self.target.push('?');
                self.target.push_str(&query);
            }
            Err(error) => self.refuse(ClientError::InvalidRequest(format!(
                "the query could not be written: {error}"
            ))),
        }
        self
    }

    /// The hyper request to `authority` over plain HTTP, or the first thing that could
    /// not be encoded.
    pub(crate) fn into_request(
        self,
        authority: &Authority,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        if let Some(refused) = self.refused {
            return Err(refused);
        }
        let invalid = |error: InvalidUri| ClientError::InvalidUrl(error.to_string());
        let mut parts = uri::Parts::default();
        parts.scheme = Some(Scheme::HTTP);
        parts.authority = Some(authority.clone());
        parts.path_and_query =
            Some(PathAndQuery::from_maybe_shared(Bytes::from(self.target)).map_err(invalid)?);
        let uri =
            Uri::from_parts(parts).map_err(|error| ClientError::InvalidUrl(error.to_string()))?;
        let mut request = Request::new(Full::new(self.body));
        *request.method_mut() = self.method;
        *request.uri_mut() = uri;
        *request.headers_mut() = self.headers;
        Ok(request)
    }

    fn refuse(&mut self, error: ClientError) {
        self.refused.get_or_insert(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call::new(Method::POST, "/v1/topics/t".to_owned())
    }

    fn authority() -> Authority {
        Authority::from_static("127.0.0.1:7070")
    }

    // Proves the parts set on a call are the parts of the request it becomes.
    #[tokio::test]
    async fn a_call_becomes_its_request() {
        let request = call()
            .bearer_auth("secret")
            .header(HeaderName::from_static("idempotency-key"), "k-1")
            .json(&serde_json::json!({"a": 1}))
            .query(&[("from", 3)])
            .into_request(&authority())
            .unwrap();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(
            request.uri().to_string(),
            "http://127.0.0.1:7070/v1/topics/t?from=3"
        );
        assert_eq!(request.headers()[AUTHORIZATION], "Bearer secret");
        assert_eq!(request.headers()["idempotency-key"], "k-1");
        assert_eq!(request.headers()[CONTENT_TYPE], "application/json");
        let body = http_body_util::BodyExt::collect(request.into_body()).await;
        assert_eq!(body.unwrap().to_bytes(), Bytes::from_static(br#"{"a":1}"#));
    }

    // Proves a header value that cannot travel fails the send with the header's name,
    // instead of being dropped or panicking.
    #[test]
    fn a_bad_header_value_fails_the_send() {
        let refused = call()
            .header(HeaderName::from_static("idempotency-key"), "line\nbreak")
            .into_request(&authority())
            .unwrap_err();
        assert!(
            matches!(&refused, ClientError::InvalidRequest(why) if why.contains("idempotency-key")),
            "{refused:?}"
        );
    }

    // Proves an empty query leaves no `?` behind.
    #[test]
    fn an_empty_query_adds_nothing() {
        let none: [(&str, u64); 0] = [];
        let request = call().query(&none).into_request(&authority()).unwrap();
        assert_eq!(
            request.uri().to_string(),
            "http://127.0.0.1:7070/v1/topics/t"
        );
    }
}
