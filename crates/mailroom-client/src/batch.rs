//! Batch consumption: many deliveries per poll (optionally a long poll), and many
//! settlements per ack or nack, so a consumer pays two round trips per batch instead of
//! two per message, or one when it settles a batch with its next poll
//! ([`Client::ack_then_poll_batch`], [`Client::settle_then_poll_batch`]).

use http::Method;
use mailroom_api::batch::{
    AckBatchRequest, AckItem, AckOutcome, AckResults, NackBatchRequest, NackItem, NackResults,
    PollBatchRequest, PolledBatch,
};

use crate::{
    BatchItemError, Client, ClientError, Delivery, DeliveryId, NackKind, NackOptions, NackOutcome,
};

/// What to ask of [`Client::poll_batch`].
///
/// ```
/// use mailroom_client::BatchPoll;
/// // Up to 64 deliveries as consumer w1, waiting up to 5 s for the first.
/// let request = BatchPoll { consumer: Some("w1"), max: 64, wait_ms: 5_000, ack: &[] };
/// assert_eq!(request.max, 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchPoll<'a> {
    /// The consumer identity, or `None` for the anonymous consumer. Its own deliveries
    /// in flight come back first, then new ones.
    pub consumer: Option<&'a str>,
    /// The most deliveries to return, 1 to 65,536.
    pub max: u32,
    /// How long the server may hold the request for a first delivery, in milliseconds
    /// (0 to 30,000); 0 answers at once. The call's time limit is this wait plus the
    /// client's request limit ([`Timeouts::request`](crate::Timeouts::request)).
    pub wait_ms: u64,
    /// Deliveries to ack (at most 65,536, in order) before polling, in the same request
    /// and the same store transaction; empty acks nothing. Their results come back from
    /// [`Client::ack_then_poll_batch`] (and are dropped by [`Client::poll_batch`]).
    pub ack: &'a [DeliveryId],
}

/// Deliveries to nack with a poll ([`Client::settle_then_poll_batch`]), and the options
/// they share.
///
/// ```
/// use mailroom_client::{BatchNack, DeliveryId, NackOptions};
/// let failed = [DeliveryId { offset: 3, attempt: 1 }];
/// let nack = BatchNack { deliveries: &failed, options: &NackOptions::default() };
/// assert_eq!(nack.deliveries.len(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchNack<'a> {
    /// The deliveries, nacked in this order; empty nacks nothing.
    pub deliveries: &'a [DeliveryId],
    /// The kind, delay and reason, as for [`Client::nack_batch`].
    pub options: &'a NackOptions,
}

impl BatchNack<'static> {
    /// No nacks: a poll that acks at most.
    ///
    /// ```
    /// use mailroom_client::BatchNack;
    /// assert!(BatchNack::NOTHING.deliveries.is_empty());
    /// ```
    pub const NOTHING: BatchNack<'static> = BatchNack {
        deliveries: &[],
        options: &NackOptions {
            kind: NackKind::Nack,
            delay_ms: None,
            reason: None,
        },
    };
}

/// What [`Client::settle_then_poll_batch`] answers: one result per nack and per ack, in
/// request order, then the deliveries.
///
/// ```
/// use mailroom_client::SettledPoll;
/// let nothing = SettledPoll { nacked: Vec::new(), acked: Vec::new(), deliveries: Vec::new() };
/// assert!(nothing.deliveries.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettledPoll {
    /// What each nack did, or why it failed (`not_owned`).
    pub nacked: Vec<Result<NackOutcome, BatchItemError>>,
    /// Each ack's result.
    pub acked: Vec<Result<(), BatchItemError>>,
    /// The deliveries the poll handed out.
    pub deliveries: Vec<Delivery>,
}

/// The body of a nack batch.
fn nack_request(deliveries: &[DeliveryId], options: &NackOptions) -> NackBatchRequest {
    NackBatchRequest {
        deliveries: deliveries.to_vec(),
        kind: options.kind,
        delay_ms: options.delay_ms,
        reason: options.reason.clone(),
    }
}

/// A poll's answer items for the settlements it was sent (`field` of the answer), paired
/// with them; none sent, none expected.
fn answered<I: BatchItem>(
    field: &str,
    requested: &[DeliveryId],
    items: Option<Vec<I>>,
) -> Result<Vec<Result<I::Outcome, BatchItemError>>, ClientError> {
    match (requested.is_empty(), items) {
        (true, _) => Ok(Vec::new()),
        (false, Some(items)) => match_results(requested, items),
        (false, None) => Err(ClientError::UnexpectedResponse(format!(
            "a poll with settlements was answered without \"{field}\""
        ))),
    }
}

/// One item of a batch answer, whichever kind of batch: `outcome` or `error`.
trait BatchItem {
    /// What a settlement that worked did.
    type Outcome;
    /// The delivery it answers for, and its `outcome` and `error`.
    fn split(self) -> (DeliveryId, Option<Self::Outcome>, Option<BatchItemError>);
}

impl BatchItem for AckItem {
    type Outcome = AckOutcome;
    fn split(self) -> (DeliveryId, Option<AckOutcome>, Option<BatchItemError>) {
        let id = DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        };
        (id, self.outcome, self.error)
    }
}

impl BatchItem for NackItem {
    type Outcome = NackOutcome;
    fn split(self) -> (DeliveryId, Option<NackOutcome>, Option<BatchItemError>) {
        let id = DeliveryId {
            offset: self.offset,
            attempt: self.attempt,
        };
        (id, self.outcome, self.error)
    }
}

/// Pairs the answer's items with the requested deliveries, checking the server kept
/// their count and order.
fn match_results<I: BatchItem>(
    requested: &[DeliveryId],
    results: Vec<I>,
) -> Result<Vec<Result<I::Outcome, BatchItemError>>, ClientError> {
    if results.len() != requested.len() {
        return Err(ClientError::UnexpectedResponse(format!(
            "{} results for {} deliveries",
            results.len(),
            requested.len()
        )));
    }
    requested
        .iter()
        .zip(results)
        .map(|(id, item)| {
            let (answered, outcome, error) = item.split();
            if answered != *id {
                return Err(ClientError::UnexpectedResponse(format!(
                    "result for offset {} attempt {} where {} {} was asked",
                    answered.offset, answered.attempt, id.offset, id.attempt
                )));
            }
            match (outcome, error) {
                (Some(outcome), None) => Ok(Ok(outcome)),
                (None, Some(error)) => Ok(Err(error)),
                _ => Err(ClientError::UnexpectedResponse(
                    "expected exactly one of outcome and error".into(),
                )),
            }
        })
        .collect()
}

impl Client {
    /// Polls up to `request.max` deliveries: the consumer's own in flight first, then
    /// new ones, as the group's window (`max_in_flight`) allows. With `wait_ms` > 0 the
    /// server answers as soon as it has at least one, or with none when the wait ends.
    ///
    /// # Errors
    /// `invalid_argument` (400) for `max`, `wait_ms` or a consumer out of range;
    /// `too_many_long_polls` (429) when the server has too many waiting; 404s for
    /// unknown names; or a transport error.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{BatchPoll, Client};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let request = BatchPoll { consumer: Some("w1"), max: 100, wait_ms: 10_000, ack: &[] };
    /// let deliveries = client.poll_batch("orders", "billing", &request).await?;
    /// let ids: Vec<_> = deliveries.iter().map(|delivery| delivery.id()).collect();
    /// if !ids.is_empty() {
    ///     for result in client.ack_batch("orders", "billing", &ids).await? {
    ///         result.expect("still ours: no lease ran out");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
    ) -> Result<Vec<Delivery>, ClientError> {
        let (_, deliveries) = self.ack_then_poll_batch(topic, group, request).await?;
        Ok(deliveries)
    }

    /// Acks `request.ack` in order, then polls as [`poll_batch`](Client::poll_batch), in
    /// ONE request and one store transaction (one sync on the server): a consumer working
    /// in rounds acks the last round and gets the next one in a single round trip, and
    /// the window slots its acks free are refilled by this poll. Returns one result per
    /// ack (what [`ack_batch`](Client::ack_batch) would say), then the deliveries. Under a
    /// long poll the acks are done once, at the start.
    ///
    /// # Errors
    /// As [`Client::poll_batch`], and `invalid_argument` (400) for more than 65,536 acks.
    /// A delivery not in flight is an item error (`not_owned`), not an error of the call.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{BatchPoll, Client};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let mut done = Vec::new();
    /// loop {
    ///     let request = BatchPoll { consumer: Some("w1"), max: 16, wait_ms: 1_000, ack: &done };
    ///     let (acked, deliveries) = client.ack_then_poll_batch("orders", "billing", &request).await?;
    ///     assert!(acked.iter().all(Result::is_ok), "a lease ran out");
    ///     // ... process the deliveries, then ack them with the next poll.
    ///     done = deliveries.iter().map(|delivery| delivery.id()).collect();
    ///     if done.is_empty() {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
    ) -> Result<(Vec<Result<(), BatchItemError>>, Vec<Delivery>), ClientError> {
        let settled = self
            .settle_then_poll_batch(topic, group, request, &BatchNack::NOTHING)
            .await?;
        Ok((settled.acked, settled.deliveries))
    }

    /// Nacks `nack.deliveries` (all with `nack.options`), then acks `request.ack`, then
    /// polls as [`poll_batch`](Client::poll_batch), in ONE request and one store call: a
    /// consumer that rejected part of a round settles all of it with its next poll. Each
    /// settlement succeeds or fails alone, as in [`nack_batch`](Client::nack_batch) and
    /// [`ack_batch`](Client::ack_batch). Under a long poll the settlements are done once,
    /// at the start.
    ///
    /// # Errors
    /// As [`Client::ack_then_poll_batch`], and `invalid_argument` (400) for nack options
    /// out of range or for more than 65,536 acks and nacks together.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{BatchNack, BatchPoll, Client, NackKind, NackOptions};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let reject = NackOptions { kind: NackKind::Reject, ..NackOptions::default() };
    /// let (mut done, mut failed) = (Vec::new(), Vec::new());
    /// loop {
    ///     let request = BatchPoll { consumer: Some("w1"), max: 16, wait_ms: 1_000, ack: &done };
    ///     let nack = BatchNack { deliveries: &failed, options: &reject };
    ///     let settled = client.settle_then_poll_batch("orders", "billing", &request, &nack).await?;
    ///     if settled.deliveries.is_empty() {
    ///         break;
    ///     }
    ///     // ... process them; keep the ids of those that worked and of those that did not.
    ///     (done, failed) = settled.deliveries.iter().map(|delivery| delivery.id()).partition(|id| id.offset % 10 != 0);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settle_then_poll_batch(
        &self,
        topic: &str,
        group: &str,
        request: &BatchPoll<'_>,
        nack: &BatchNack<'_>,
    ) -> Result<SettledPoll, ClientError> {
        let body = PollBatchRequest {
            consumer: request.consumer.map(str::to_owned),
            max: request.max,
            wait_ms: Some(request.wait_ms),
            ack: (!request.ack.is_empty()).then(|| request.ack.to_vec()),
            nack: (!nack.deliveries.is_empty())
                .then(|| nack_request(nack.deliveries, nack.options)),
        };
        let path = Self::group_path(topic, group, &["poll", "batch"])?;
        let call = self.request(Method::POST, &path).json(&body);
        // The server may hold the request `wait_ms` before it starts answering.
        let limit = self.timeouts().long_poll(request.wait_ms);
        let polled: PolledBatch = Self::decode(&self.send_within(call, limit).await?)?;
        let acked = answered("acked", request.ack, polled.acked)?
            .into_iter()
            .map(|item| item.map(|AckOutcome::Acked| ()))
            .collect();
        let nacked = answered("nacked", nack.deliveries, polled.nacked)?;
        let deliveries = polled
            .deliveries
            .into_iter()
            .map(Delivery::try_from)
            .collect::<Result<Vec<_>, ClientError>>()?;
        Ok(SettledPoll {
            nacked,
            acked,
            deliveries,
        })
    }

    /// Acknowledges each delivery in order. Each item is what a single
    /// [`ack`](Client::ack) would have said at its turn; one failing does not stop the
    /// others.
    ///
    /// # Errors
    /// `invalid_argument` (400) for an empty list or more than 65,536; 404s for unknown
    /// names; or a transport error. A delivery not in flight is an item error
    /// (`not_owned`), not an error of the call.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{Client, DeliveryId};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let ids = [DeliveryId { offset: 0, attempt: 1 }, DeliveryId { offset: 1, attempt: 1 }];
    /// let results = client.ack_batch("orders", "billing", &ids).await?;
    /// for (id, result) in ids.iter().zip(results) {
    ///     if let Err(error) = result {
    ///         eprintln!("offset {}: {error}", id.offset);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack_batch(
        &self,
        topic: &str,
        group: &str,
        deliveries: &[DeliveryId],
    ) -> Result<Vec<Result<(), BatchItemError>>, ClientError> {
        let body = AckBatchRequest {
            deliveries: deliveries.to_vec(),
        };
        let path = Self::group_path(topic, group, &["ack", "batch"])?;
        let call = self.request(Method::POST, &path).json(&body);
        let answer: AckResults = self.json(call).await?;
        let results = match_results(deliveries, answer.results)?;
        Ok(results
            .into_iter()
            .map(|item| item.map(|AckOutcome::Acked| ()))
            .collect())
    }

    /// Nacks, releases or rejects each delivery in order, all with `options`. Each item
    /// is what a single [`nack_with`](Client::nack_with) would have said at its turn.
    ///
    /// # Errors
    /// As for [`Client::ack_batch`], and `invalid_argument` (400) for a delay or reason
    /// out of range.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{Client, DeliveryId, NackKind, NackOptions};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let ids = [DeliveryId { offset: 7, attempt: 2 }];
    /// let release = NackOptions { kind: NackKind::Release, ..NackOptions::default() };
    /// let results = client.nack_batch("orders", "billing", &ids, &release).await?;
    /// println!("{results:?}");
    /// # Ok(()) }
    /// ```
    pub async fn nack_batch(
        &self,
        topic: &str,
        group: &str,
        deliveries: &[DeliveryId],
        options: &NackOptions,
    ) -> Result<Vec<Result<NackOutcome, BatchItemError>>, ClientError> {
        let body = nack_request(deliveries, options);
        let path = Self::group_path(topic, group, &["nack", "batch"])?;
        let call = self.request(Method::POST, &path).json(&body);
        let answer: NackResults = self.json(call).await?;
        match_results(deliveries, answer.results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(offset: u64, attempt: u32) -> DeliveryId {
        DeliveryId { offset, attempt }
    }

    fn nack_items(json: &str) -> Vec<NackItem> {
        serde_json::from_str::<NackResults>(json)
            .expect("valid answer")
            .results
    }

    fn ack_items(json: &str) -> Vec<AckItem> {
        serde_json::from_str::<AckResults>(json)
            .expect("valid answer")
            .results
    }

    // Proves an answer decodes item by item (outcome or error), in request order.
    #[test]
    fn results_pair_with_requests() {
        let answer = nack_items(
            r#"{"results":[{"offset":1,"attempt":1,"outcome":"released"},
            {"offset":2,"attempt":3,"error":{"code":"not_owned","message":"gone"}}]}"#,
        );
        let results = match_results(&[id(1, 1), id(2, 3)], answer).unwrap();
        assert_eq!(results[0], Ok(NackOutcome::Released));
        assert_eq!(results[1].as_ref().unwrap_err().code, "not_owned");
    }

    // Proves an answer that does not match the request (count, order, or both or
    // neither of outcome and error) is refused rather than misattributed.
    #[test]
    fn mismatched_answers_are_refused() {
        let one = r#"{"results":[{"offset":1,"attempt":1,"outcome":"acked"}]}"#;
        assert!(match_results(&[id(1, 1), id(2, 1)], ack_items(one)).is_err());
        assert!(match_results(&[id(1, 2)], ack_items(one)).is_err());
        let neither = r#"{"results":[{"offset":1,"attempt":1}]}"#;
        assert!(match_results(&[id(1, 1)], ack_items(neither)).is_err());
        let both = r#"{"results":[{"offset":1,"attempt":1,"outcome":"acked",
            "error":{"code":"not_owned","message":"x"}}]}"#;
        assert!(match_results(&[id(1, 1)], ack_items(both)).is_err());
    }
}
