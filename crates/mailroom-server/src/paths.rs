//! Path extractors that check the names in a route's path once, before the handler runs:
//! [`TopicPath`], [`GroupPath`] and [`ChannelPath`].
//!
//! Each takes the path's segments as axum's `Path` does (a segment that is not valid
//! percent-encoded UTF-8 gets `Path`'s own rejection) and checks every name with
//! [`check_name`], refusing a bad one with its 400 `invalid_name`. So a handler that
//! takes one of these holds checked names, and no handler checks them again. Extractors
//! run in the order of the handler's arguments, and these come before any body or query,
//! so a bad name is what a request with several mistakes is told about first.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use axum::{body::Body, http::Request, routing::get, Router};
//! use mailroom_server::paths::GroupPath;
//! use tower::ServiceExt as _;
//!
//! async fn handler(GroupPath { topic, group }: GroupPath) -> String {
//!     format!("{topic}/{group}")
//! }
//! let app = Router::new().route("/{topic}/{group}", get(handler));
//! let ok = Request::get("/orders/billing").body(Body::empty()).unwrap();
//! assert_eq!(app.clone().oneshot(ok).await.unwrap().status(), 200);
//! let bad = Request::get("/orders/%2E%2E").body(Body::empty()).unwrap();
//! assert_eq!(app.oneshot(bad).await.unwrap().status(), 400);
//! # }
//! ```

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::names::check_name;

/// The `{topic}` of a route, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPath {
    /// The topic's name.
    pub topic: String,
}

/// The `{topic}` and `{group}` of a route, checked in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPath {
    /// The topic's name.
    pub topic: String,
    /// The group's name.
    pub group: String,
}

/// The `{channel}` of a route, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelPath {
    /// The channel's name.
    pub channel: String,
}

/// Why a path extractor refused a request.
#[derive(Debug)]
pub enum PathRefused {
    /// The segments did not decode: `Path`'s own rejection, answered as `Path` answers.
    Segments(PathRejection),
    /// A name broke the rule: 400 `invalid_name`.
    Name(ApiError),
}

impl IntoResponse for PathRefused {
    fn into_response(self) -> Response {
        match self {
            PathRefused::Segments(rejection) => rejection.into_response(),
            PathRefused::Name(error) => error.into_response(),
        }
    }
}

/// The path's segments as `T`.
async fn segments<T, S>(parts: &mut Parts, state: &S) -> Result<T, PathRefused>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    match Path::<T>::from_request_parts(parts, state).await {
        Ok(Path(segments)) => Ok(segments),
        Err(rejection) => Err(PathRefused::Segments(rejection)),
    }
}

/// [`check_name`], refusing as [`PathRefused::Name`].
fn checked(kind: &str, name: &str) -> Result<(), PathRefused> {
    check_name(kind, name).map_err(PathRefused::Name)
}

impl<S: Send + Sync> FromRequestParts<S> for TopicPath {
    type Rejection = PathRefused;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, PathRefused> {
        let topic: String = segments(parts, state).await?;
        checked("topic", &topic)?;
        Ok(TopicPath { topic })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for GroupPath {
    type Rejection = PathRefused;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, PathRefused> {
        let (topic, group): (String, String) = segments(parts, state).await?;
        checked("topic", &topic)?;
        checked("group", &group)?;
        Ok(GroupPath { topic, group })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ChannelPath {
    type Rejection = PathRefused;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, PathRefused> {
        let channel: String = segments(parts, state).await?;
        checked("channel", &channel)?;
        Ok(ChannelPath { channel })
    }
}
