//! Moving and pausing a group: [`Client::seek`], [`Client::pause`] and
//! [`Client::resume`].

use http::Method;
use mailroom_api::groups::{GroupPause, GroupSeeked, PauseGroup, SeekGroup, StartName};

use crate::{Client, ClientError, StartPosition};

impl Client {
    /// Moves `group` to `to` (the oldest retained message, the end of the log, or an
    /// offset within the retained log or at its end) and returns its new position.
    /// Deliveries in flight are no longer owned (their acks answer 409 `not_owned`); a
    /// message delivered again gets a new attempt number; dead letters stay.
    ///
    /// # Errors
    /// `invalid_argument` (400) for an offset outside the retained log, 404s, or a
    /// transport error.
    pub async fn seek(
        &self,
        topic: &str,
        group: &str,
        to: StartPosition,
    ) -> Result<u64, ClientError> {
        let body = match to {
            StartPosition::Earliest => SeekGroup {
                to: Some(StartName::Earliest),
                ..SeekGroup::default()
            },
            StartPosition::Latest => SeekGroup {
                to: Some(StartName::Latest),
                ..SeekGroup::default()
            },
            StartPosition::Offset(offset) => SeekGroup {
                offset: Some(offset),
                ..SeekGroup::default()
            },
        };
        let path = Self::group_path(topic, group, &["seek"])?;
        let request = self.request(Method::POST, &path).json(&body);
        let seeked: GroupSeeked = self.json(request).await?;
        Ok(seeked.position)
    }

    /// Pauses `group` until `until_ms` (Unix ms; `None`: until [`Client::resume`]):
    /// polls hand out nothing new, deliveries in flight can still be acked, nacked and
    /// touched.
    ///
    /// # Errors
    /// `invalid_argument` (400) for an `until_ms` not after the server's now or more than
    /// a week ahead, 404s, or a transport error.
    pub async fn pause(
        &self,
        topic: &str,
        group: &str,
        until_ms: Option<u64>,
    ) -> Result<GroupPause, ClientError> {
        let path = Self::group_path(topic, group, &["pause"])?;
        let request = self
            .request(Method::POST, &path)
            .json(&PauseGroup { until_ms });
        self.json(request).await
    }

    /// Ends `group`'s pause; the answer's `changed` says whether it was paused.
    ///
    /// # Errors
    /// 404s, or a transport error.
    pub async fn resume(&self, topic: &str, group: &str) -> Result<GroupPause, ClientError> {
        let path = Self::group_path(topic, group, &["resume"])?;
        let request = self.request(Method::POST, &path);
        self.json(request).await
    }
}
