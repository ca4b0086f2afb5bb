//! Consumer groups in full: creating one with its settings (lease, backoff,
//! `max_in_flight`) and reading its detailed state.

use http::Method;
use mailroom_api::groups::CreateGroup;

use crate::{Backoff, Client, ClientError, GroupDetail, GroupInfo, StartPosition};

/// The settings of a new group. `GroupOptions::new(n)` sets `max_attempts` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupOptions {
    /// Failures allowed per message, as the wire format defines it
    /// ([`CreateGroup::max_attempts`]).
    pub max_attempts: u32,
    /// Where the group starts.
    pub start: StartPosition,
    /// Each delivery's lease in milliseconds; `None`: owned until acked or nacked.
    pub lease_ms: Option<u64>,
    /// Delay before a failed message is redelivered; `None`: at once.
    pub backoff: Option<Backoff>,
    /// Deliveries in flight at once (W); `None`: 1.
    pub max_in_flight: Option<u32>,
}

impl GroupOptions {
    /// A group allowing `max_attempts`, from the earliest message, with no other setting.
    pub fn new(max_attempts: u32) -> GroupOptions {
        GroupOptions {
            max_attempts,
            start: StartPosition::Earliest,
            lease_ms: None,
            backoff: None,
            max_in_flight: None,
        }
    }

    fn body(&self) -> CreateGroup {
        CreateGroup {
            max_attempts: self.max_attempts,
            start: Some(self.start.into()),
            lease_ms: self.lease_ms,
            backoff: self.backoff,
            max_in_flight: self.max_in_flight,
        }
    }
}

impl Client {
    /// Creates a consumer group on a topic.
    ///
    /// # Errors
    /// `group_exists` (409), `invalid_argument` (400), `unknown_topic` (404), or a
    /// transport error.
    pub async fn create_group(
        &self,
        topic: &str,
        group: &str,
        max_attempts: u32,
        start: StartPosition,
    ) -> Result<(), ClientError> {
        let body = CreateGroup {
            max_attempts,
            start: Some(start.into()),
            lease_ms: None,
            backoff: None,
            max_in_flight: None,
        };
        let request = self
            .request(Method::PUT, &Self::group_path(topic, group, &[])?)
            .json(&body);
        self.send(request).await?;
        Ok(())
    }

    /// One group's position, attempt, in-flight delivery, lag and dead-letter count.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn group_info(&self, topic: &str, group: &str) -> Result<GroupInfo, ClientError> {
        self.json(self.request(Method::GET, &Self::group_path(topic, group, &[])?))
            .await
    }

    /// Creates a group with `options` (lease, backoff, `max_in_flight`).
    ///
    /// # Errors
    /// `group_exists` (409), `invalid_argument` (400) for a setting out of range, 404s
    /// for unknown names, or a transport error.
    pub async fn create_group_with(
        &self,
        topic: &str,
        group: &str,
        options: &GroupOptions,
    ) -> Result<(), ClientError> {
        let request = self
            .request(Method::PUT, &Self::group_path(topic, group, &[])?)
            .json(&options.body());
        self.send(request).await?;
        Ok(())
    }

    /// A group's full state.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError> {
        let request = self.request(Method::GET, &Self::group_path(topic, group, &[])?);
        self.json(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    // Proves only the settings given are sent, so a plain group has no other setting.
    #[test]
    fn group_options_send_only_what_is_set() {
        let plain = serde_json::to_value(GroupOptions::new(3).body()).unwrap();
        assert_eq!(plain, json!({ "max_attempts": 3, "start": "earliest" }));
        let mut options = GroupOptions::new(2);
        options.lease_ms = Some(100);
        options.backoff = Some(Backoff::Fixed { delay_ms: 5 });
        options.max_in_flight = Some(4);
        let body = serde_json::to_value(options.body()).unwrap();
        assert_eq!(body["backoff"], json!({ "kind": "fixed", "delay_ms": 5 }));
        assert_eq!(body["lease_ms"], json!(100));
        assert_eq!(body["max_in_flight"], json!(4));
    }
}
