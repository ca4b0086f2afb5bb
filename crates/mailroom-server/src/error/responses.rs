//! How an [`ApiError`] becomes an HTTP response: the JSON body, the `WWW-Authenticate`
//! header of a 401 and the log line of a server error; the answer to a panicked handler;
//! and the middleware that rewrites the framework's own rejections into the same shape.

use std::any::Any;

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::codes::code_for_status;
use super::{ApiError, ErrorBody};

/// The longest framework error body that is carried over into a JSON message.
const REJECTION_BODY_BYTES_MAX: usize = 4096;

impl ApiError {
    /// The response without the log line [`IntoResponse`] writes for server errors, for
    /// callers that have logged the fault in more detail already.
    fn unlogged_response(self) -> Response {
        let body = ErrorBody {
            error: self.code,
            message: self.message,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code.as_str(), message = %self.message, "request failed");
        }
        self.unlogged_response()
    }
}

/// The answer to a request whose handler panicked: 500 `internal` in the usual shape.
///
/// The panic's message goes to the log with `tracing::error!`, not to the client: it can
/// name internals, and the client can do nothing with it. This is the handler of the
/// catch-panic layer every served connection has, so a panic costs one request its
/// answer, never the connection it came on.
///
/// ```
/// use mailroom_server::error::panic_response;
/// let response = panic_response(Box::new("index out of bounds"));
/// assert_eq!(response.status(), 500);
/// ```
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = if let Some(text) = panic.downcast_ref::<&str>() {
        text
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.as_str()
    } else {
        "a panic without a message"
    };
    tracing::error!(panic = detail, "a request handler panicked; answering 500");
    ApiError::internal("the server failed while handling this request; the fault is logged")
        .unlogged_response()
}

/// Middleware: rewrites any error response that is not already JSON (a framework
/// rejection, a 405 from the router, ...) into the standard error shape, keeping its
/// text as the message. 422 becomes 400: the API documents one status for bad input.
pub async fn errors_as_json(request: Request<Body>, next: Next) -> Response {
    let method = request.method().clone();
    // A clone of the URI shares its bytes: no copy of the path on every request for the
    // rare answer that names it.
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, REJECTION_BODY_BYTES_MAX).await {
        // The router's 405 has no body. Its `Allow` header, which says what would have
        // worked, is added outside this layer, so the message can only point to it.
        _ if status == StatusCode::METHOD_NOT_ALLOWED => {
            format!(
                "{method} is not allowed on {}; the Allow header lists the methods that are",
                uri.path()
            )
        }
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).into_owned(),
        _ => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let mut rewritten = ApiError::new(status, code_for_status(status), text).into_response();
    // Keep headers such as `Allow` on a 405; drop the old body's length and type.
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;
    use std::sync::Arc;

    /// A subscriber that keeps the fields of every ERROR event, as text.
    #[derive(Default, Clone)]
    struct ErrorEvents(Arc<parking_lot::Mutex<Vec<String>>>);

    impl tracing::Subscriber for ErrorEvents {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() != tracing::Level::ERROR {
                return;
            }
            let mut text = String::new();
            event.record(
                &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                    let _ = write!(text, "{}={value:?} ", field.name());
                },
            );
            self.0.lock().push(text);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    // Proves a panic becomes one ERROR log line that carries the panic's message (as
    // &str or String payload), and a 500 `internal` answer that does not.
    #[test]
    fn panic_is_logged_once_and_answered_500() {
        for payload in [
            Box::new("secret detail") as Box<dyn Any + Send>,
            Box::new(String::from("secret detail")),
        ] {
            let events = ErrorEvents::default();
            let response =
                tracing::subscriber::with_default(events.clone(), || panic_response(payload));
            let logged = events.0.lock().clone();
            assert_eq!(logged.len(), 1, "{logged:?}");
            assert!(logged[0].contains("secret detail"), "{logged:?}");
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            let body = futures_util::FutureExt::now_or_never(axum::body::to_bytes(
                response.into_body(),
                usize::MAX,
            ))
            .expect("a full body is ready at once")
            .unwrap();
            let body: ErrorBody = serde_json::from_slice(&body).unwrap();
            assert_eq!(body.error, "internal");
            assert!(!body.message.contains("secret"), "{}", body.message);
        }
    }
}
