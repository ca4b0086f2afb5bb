//! The `parallel` workload's workers on mailroom, in each [`MailroomShape`].

use anyhow::Result;
use mailroom_client::DeliveryId;

use super::{
    consumer::poll_request, consumer::Held, create_groups, every_item, received, Brokers, Mailroom,
    MailroomConsumer, MailroomShape,
};
use crate::systems::{LogConsumer, Received, TopicSpec};
use crate::workload::parallel::{WindowSystem, WindowWorker};

/// A worker of a windowed group, in one of the two [`MailroomShape`]s.
#[derive(Debug)]
pub enum MailroomWorker {
    /// The one consumer of [`MailroomShape::Batch`] (`false`) or
    /// [`MailroomShape::AckNext`] (`true`: acks ride on the next poll).
    Batch(MailroomConsumer, bool),
    /// One of the W named consumers of [`MailroomShape::Tasks`].
    Task(MailroomTask),
}

/// One of the `W` consumers of [`MailroomShape::Tasks`]: its own consumer name, polling
/// with `poll_as` and acking the one delivery it owns.
#[derive(Debug)]
pub struct MailroomTask {
    client: Brokers,
    topic: String,
    group: String,
    name: String,
}

impl WindowSystem for Mailroom {
    type Worker = MailroomWorker;

    async fn prepare_windowed(&self, topic: &TopicSpec, window: u32) -> Result<()> {
        create_groups(self.client.pick(), topic, window).await
    }

    async fn workers(
        &self,
        topic: &TopicSpec,
        group: &str,
        window: u32,
    ) -> Result<Vec<MailroomWorker>> {
        if self.shape != MailroomShape::Tasks {
            let consumer = MailroomConsumer {
                client: self.client.clone(),
                topic: topic.name.clone(),
                group: group.to_owned(),
                prefetch: window,
                stream: None,
                fold: false,
                pending: Held::default(),
            };
            let ack_next = self.shape == MailroomShape::AckNext;
            return Ok(vec![MailroomWorker::Batch(consumer, ack_next)]);
        }
        // One shared client: its pool opens one keep-alive connection per task that is
        // mid-call, and reuses it for the task's next call.
        Ok((0..window)
            .map(|index| {
                MailroomWorker::Task(MailroomTask {
                    client: self.client.clone(),
                    topic: topic.name.clone(),
                    group: group.to_owned(),
                    name: format!("w{index}"),
                })
            })
            .collect())
    }
}

impl WindowWorker for MailroomWorker {
    type Handle = DeliveryId;

    async fn take(&mut self) -> Result<Vec<Received<DeliveryId>>> {
        match self {
            MailroomWorker::Batch(consumer, _) => {
                let request = poll_request(consumer.prefetch, &[]);
                let deliveries = consumer
                    .client
                    .pick()
                    .poll_batch(&consumer.topic, &consumer.group, &request)
                    .await?;
                Ok(deliveries.into_iter().map(received).collect())
            }
            MailroomWorker::Task(task) => {
                let delivery = task
                    .client
                    .pick()
                    .poll_as(&task.topic, &task.group, &task.name)
                    .await?;
                Ok(delivery.into_iter().map(received).collect())
            }
        }
    }

    async fn ack_all(&mut self, handles: Vec<DeliveryId>) -> Result<()> {
        match self {
            MailroomWorker::Batch(consumer, _) => {
                consumer.settle(handles, Vec::new()).await?;
            }
            MailroomWorker::Task(task) => {
                for handle in handles {
                    task.client
                        .pick()
                        .ack(&task.topic, &task.group, handle)
                        .await?;
                }
            }
        }
        Ok(())
    }

    fn acks_with_take(&self) -> bool {
        matches!(self, MailroomWorker::Batch(_, true))
    }

    async fn ack_then_take(
        &mut self,
        handles: Vec<DeliveryId>,
    ) -> Result<Vec<Received<DeliveryId>>> {
        let MailroomWorker::Batch(consumer, true) = self else {
            self.ack_all(handles).await?;
            return self.take().await;
        };
        let request = poll_request(consumer.prefetch, &handles);
        let (acked, deliveries) = consumer
            .client
            .pick()
            .ack_then_poll_batch(&consumer.topic, &consumer.group, &request)
            .await?;
        every_item("poll_batch ack", &handles, acked)?;
        Ok(deliveries.into_iter().map(received).collect())
    }
}
