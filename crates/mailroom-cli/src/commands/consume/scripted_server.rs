//! A scripted server for the consume loops' unit tests.

use std::sync::Mutex;

use bytes::Bytes;
use mailroom_client::{
    BatchItemError, BatchNack, BatchPoll, ChannelDelivery, ChannelInfo, ClientError,
    DeadLetterPage, Delivery, DeliveryId, GroupDetail, GroupOptions, NackKind, NackOptions,
    NackOutcome, NewMessage, SettledPoll, SubscribeOptions, TopicInfo, TopicRepairReport,
    TopicSummary,
};

use super::Args;
use crate::api::{Api, Messages};

/// A scripted server: hands out `deliveries` in order, records every settlement
/// (with the nack kind), and records every batch poll and each settlement request sent
/// on its own.
#[derive(Default)]
pub(super) struct Scripted {
    pub(super) deliveries: Mutex<Vec<Delivery>>,
    pub(super) settled: Mutex<Vec<(&'static str, DeliveryId)>>,
    pub(super) batch_polls: Mutex<Vec<BatchPollSeen>>,
    /// How many `ack/batch` and `nack/batch` requests came on their own.
    pub(super) settle_requests: Mutex<u32>,
    /// Offsets whose ack the server refuses (as if their lease ran out).
    pub(super) refuse: Vec<u64>,
}

/// One batch poll as the scripted server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BatchPollSeen {
    pub(super) consumer: Option<String>,
    pub(super) max: u32,
    pub(super) wait_ms: u64,
    /// How many acks and nacks it carried.
    pub(super) acks: usize,
    pub(super) nacks: usize,
}

pub(super) struct NoMessages;

impl Messages for NoMessages {
    async fn next_message(&mut self) -> Option<Result<Bytes, ClientError>> {
        None
    }
}

fn unused<T>() -> Result<T, ClientError> {
    Err(ClientError::UnexpectedResponse(
        "not used by consume".into(),
    ))
}

fn kind_name(kind: NackKind) -> &'static str {
    match kind {
        NackKind::Nack => "nack",
        NackKind::Release => "release",
        NackKind::Reject => "reject",
    }
}

impl Scripted {
    fn next(&self) -> Option<Delivery> {
        let mut deliveries = self.deliveries.lock().unwrap();
        (!deliveries.is_empty()).then(|| deliveries.remove(0))
    }

    fn ack_one(&self, id: DeliveryId) -> Result<(), BatchItemError> {
        if self.refuse.contains(&id.offset) {
            return Err(BatchItemError {
                code: "not_owned".into(),
                message: "lease ran out".into(),
            });
        }
        self.settled.lock().unwrap().push(("ack", id));
        Ok(())
    }

    fn nack_all(
        &self,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Vec<Result<NackOutcome, BatchItemError>> {
        let mut settled = self.settled.lock().unwrap();
        settled.extend(ids.iter().map(|id| (kind_name(options.kind), *id)));
        ids.iter().map(|_| Ok(NackOutcome::DeadLettered)).collect()
    }
}

impl Api for Scripted {
    type Subscription = NoMessages;

    // Consume polls with `poll/batch` alone, and settles with it or with `ack/batch` and
    // `nack/batch`: the single-delivery calls fail the run if it ever makes them.
    async fn poll(&self, _: &str, _: &str) -> Result<Option<Delivery>, ClientError> {
        unused()
    }
    async fn poll_as(&self, _: &str, _: &str, _: &str) -> Result<Option<Delivery>, ClientError> {
        unused()
    }
    async fn settle_then_poll_batch(
        &self,
        _: &str,
        _: &str,
        request: &BatchPoll<'_>,
        nack: &BatchNack<'_>,
    ) -> Result<SettledPoll, ClientError> {
        let nacked = self.nack_all(nack.deliveries, nack.options);
        let acked = request.ack.iter().map(|id| self.ack_one(*id)).collect();
        self.batch_polls.lock().unwrap().push(BatchPollSeen {
            consumer: request.consumer.map(str::to_owned),
            max: request.max,
            wait_ms: request.wait_ms,
            acks: request.ack.len(),
            nacks: nack.deliveries.len(),
        });
        let deliveries = (0..request.max).map_while(|_| self.next()).collect();
        Ok(SettledPoll {
            nacked,
            acked,
            deliveries,
        })
    }
    async fn ack_batch(
        &self,
        _: &str,
        _: &str,
        ids: &[DeliveryId],
    ) -> Result<Vec<Result<(), BatchItemError>>, ClientError> {
        *self.settle_requests.lock().unwrap() += 1;
        Ok(ids.iter().map(|id| self.ack_one(*id)).collect())
    }
    async fn nack_with(
        &self,
        _: &str,
        _: &str,
        _: DeliveryId,
        _: &NackOptions,
    ) -> Result<NackOutcome, ClientError> {
        unused()
    }
    async fn nack_batch(
        &self,
        _: &str,
        _: &str,
        ids: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError> {
        *self.settle_requests.lock().unwrap() += 1;
        Ok(self.nack_all(ids, options))
    }
    async fn create_topic(&self, _: &str) -> Result<bool, ClientError> {
        unused()
    }
    async fn create_topic_with(
        &self,
        _: &str,
        _: &mailroom_client::RetentionSettings,
    ) -> Result<bool, ClientError> {
        unused()
    }
    async fn create_topic_with_window(
        &self,
        _: &str,
        _: &mailroom_client::RetentionSettings,
        _: &mailroom_client::IdempotencySettings,
    ) -> Result<bool, ClientError> {
        unused()
    }
    async fn change_retention(
        &self,
        _: &str,
        _: &mailroom_client::RetentionSettings,
    ) -> Result<TopicInfo, ClientError> {
        unused()
    }
    async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
        unused()
    }
    async fn topic_info(&self, _: &str) -> Result<TopicInfo, ClientError> {
        unused()
    }
    async fn publish(&self, _: &str, _: Bytes) -> Result<u64, ClientError> {
        unused()
    }
    async fn publish_messages(&self, _: &str, _: &[NewMessage]) -> Result<Vec<u64>, ClientError> {
        unused()
    }
    async fn publish_batch(&self, _: &str, _: &[Bytes]) -> Result<Vec<u64>, ClientError> {
        unused()
    }
    async fn dead_letters_page(
        &self,
        _: &str,
        _: &str,
        _: u64,
        _: usize,
    ) -> Result<DeadLetterPage, ClientError> {
        unused()
    }
    async fn create_channel(
        &self,
        _: &str,
        _: u64,
        _: u64,
        _: Option<u64>,
    ) -> Result<bool, ClientError> {
        unused()
    }
    async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
        unused()
    }
    async fn publish_channel(&self, _: &str, _: Bytes) -> Result<ChannelDelivery, ClientError> {
        unused()
    }
    async fn close_channel(&self, _: &str) -> Result<(), ClientError> {
        unused()
    }
    async fn delete_topic(&self, _: &str) -> Result<(), ClientError> {
        unused()
    }
    async fn recover_topic(&self, _: &str) -> Result<bool, ClientError> {
        unused()
    }
    async fn repair_topic(&self, _: &str) -> Result<TopicRepairReport, ClientError> {
        unused()
    }
    async fn subscribe_with(
        &self,
        _: &str,
        _: SubscribeOptions,
    ) -> Result<NoMessages, ClientError> {
        unused()
    }
    async fn create_group_with(
        &self,
        _: &str,
        _: &str,
        _: &GroupOptions,
    ) -> Result<(), ClientError> {
        unused()
    }
    async fn group_detail(&self, _: &str, _: &str) -> Result<GroupDetail, ClientError> {
        unused()
    }
    async fn delete_group(&self, _: &str, _: &str) -> Result<(), ClientError> {
        unused()
    }
    async fn touch(&self, _: &str, _: &str, _: DeliveryId) -> Result<(), ClientError> {
        unused()
    }
    async fn redrive(
        &self,
        _: &str,
        _: &str,
        _: Option<std::ops::Range<u64>>,
    ) -> Result<u64, ClientError> {
        unused()
    }
    async fn purge(
        &self,
        _: &str,
        _: &str,
        _: Option<std::ops::Range<u64>>,
    ) -> Result<u64, ClientError> {
        unused()
    }
    async fn seek(
        &self,
        _: &str,
        _: &str,
        _: mailroom_client::StartPosition,
    ) -> Result<u64, ClientError> {
        unused()
    }
    async fn pause(
        &self,
        _: &str,
        _: &str,
        _: Option<u64>,
    ) -> Result<mailroom_client::GroupPause, ClientError> {
        unused()
    }
    async fn resume(&self, _: &str, _: &str) -> Result<mailroom_client::GroupPause, ClientError> {
        unused()
    }
    async fn seek_to_time(&self, _: &str, _: &str, _: u64) -> Result<u64, ClientError> {
        unused()
    }
    async fn read(
        &self,
        _: &str,
        _: mailroom_client::ReadFrom,
        _: usize,
        _: u64,
    ) -> Result<mailroom_client::LogPage, ClientError> {
        unused()
    }
}

pub(super) fn scripted(payloads: &[&'static str]) -> Scripted {
    let deliveries = payloads
        .iter()
        .enumerate()
        .map(|(n, payload)| Delivery {
            offset: n as u64,
            attempt: 1,
            payload: Bytes::from_static(payload.as_bytes()),
            key: None,
            headers: Default::default(),
            published_at_ms: None,
        })
        .collect();
    Scripted {
        deliveries: Mutex::new(deliveries),
        ..Scripted::default()
    }
}

pub(super) fn args(exec: Option<&str>, nack: bool, count: Option<u64>) -> Args {
    Args {
        topic: "t".into(),
        group: "g".into(),
        count,
        follow: false,
        exec: exec.map(str::to_owned),
        nack,
        nack_kind: None,
        batch: None,
        stream: false,
        window: None,
        consumer: None,
    }
}

pub(super) fn id(offset: u64) -> DeliveryId {
    DeliveryId { offset, attempt: 1 }
}
