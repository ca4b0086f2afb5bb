//! The command line: the subcommands and every flag of `run`, and the labels a run's
//! flags give its row.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use mailroom_bench::workload::parallel::WINDOW_MAX;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Side-by-side broker benchmarks: mailroom vs Redis Streams, NATS JetStream, RabbitMQ"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run one workload against one system and append the result to --out.
    Run(Box<RunArgs>),
    /// Render collected JSON lines as a markdown table.
    Table {
        /// The JSON-lines file `run --out` wrote.
        #[arg(long)]
        input: PathBuf,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum System {
    Mailroom,
    Redis,
    Nats,
    Rabbitmq,
    /// The disk itself (publish workload, 1 publisher, unbatched): --address is a
    /// directory on it; each message is a write + fdatasync, no broker.
    Disk,
    /// PgQ (the `pgq` extension) in PostgreSQL: --address is the database URL.
    Pgq,
    /// The hand-written `FOR UPDATE SKIP LOCKED` queue table: --address is the database
    /// URL.
    SkipLocked,
}

/// How mailroom keeps W deliveries in flight in the parallel workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Shape {
    /// One consumer: poll_batch(max = W), then one ack_batch.
    Batch,
    /// W named consumers, each polling and acking one delivery at a time.
    Tasks,
    /// One consumer acking each round inside its next poll_batch (one request per round);
    /// also the consume, retry and fanout workloads' consumer, for its rounds without a
    /// rejection.
    AckNext,
}

/// How Redis acks in the parallel workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RedisShape {
    /// XREADGROUP COUNT W, then one XACK: two round trips per round.
    Separate,
    /// Each round's XACK pipelined with the next XREADGROUP: one round trip per round.
    Pipelined,
}

/// How the publish workload's publishers wait for confirmations.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PublishMode {
    /// One call (of --batch messages) at a time, each waiting for its confirmation.
    Calls,
    /// Up to --window messages sent and unconfirmed per connection (mailroom's publish
    /// stream, Redis pipelined XADD, JetStream async publish, RabbitMQ publisher confirms,
    /// PgQ's and the SKIP LOCKED table's autocommit inserts pipelined on one connection).
    Pipelined,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Workload {
    /// 1: publish, one or many publishers, single or batched calls.
    Publish,
    /// 2: consume with ack, one group, from a full log.
    Consume,
    /// 3: consume with 10% rejected until dead-lettered (max attempts 3).
    Retry,
    /// 4: fan-out, several groups read the same log.
    Fanout,
    /// 5: live fan-out to many subscribers, one stalled.
    Live,
    /// Issue 7: one group drained with --window deliveries in flight (mailroom, Redis).
    Parallel,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    #[arg(long, value_enum)]
    pub(crate) system: System,
    /// host:port of the broker (mailroom: its HTTP address; several brokers over one
    /// database: comma-separated, and every call goes to the next in turn; pgq and
    /// skip-locked: the database URL).
    #[arg(long)]
    pub(crate) address: String,
    /// The broker's process id, for CPU and peak-RSS figures (repeat for several
    /// brokers: their figures are summed).
    #[arg(long)]
    pub(crate) broker_pid: Vec<u32>,
    /// A PostgreSQL URL whose statistics (`pg_stat_wal`, `pg_stat_database`,
    /// `pg_stat_statements`) are read before and after the timed phase, with
    /// --database-pid.
    #[arg(long, requires = "database_pid")]
    pub(crate) database_url: Option<String>,
    /// The postmaster's process id: the CPU of it and its children is the database's.
    #[arg(long, requires = "database_url")]
    pub(crate) database_pid: Option<u32>,
    /// The name the run's row shows instead of the system's (e.g. "mailroom, 2
    /// brokers"); the table's ratios are against the row named `mailroom`.
    #[arg(long)]
    pub(crate) label: Option<String>,
    #[arg(long, value_enum)]
    pub(crate) workload: Workload,
    /// The durability row label (e.g. strict, relaxed).
    #[arg(long, default_value = "strict")]
    pub(crate) durability: String,
    /// What the durability row means for this system (e.g. "appendfsync always").
    #[arg(long, default_value = "")]
    pub(crate) durability_detail: String,
    /// Messages.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) count: u64,
    #[arg(long, default_value_t = 100)]
    pub(crate) payload_bytes: usize,
    /// Concurrent publishers (publish workload).
    #[arg(long, default_value_t = 1)]
    pub(crate) publishers: usize,
    /// Messages per publish call (publish workload).
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: usize,
    /// How publishers wait for confirmations (publish workload); `pipelined` keeps
    /// --window messages in flight per publisher.
    #[arg(long, value_enum, default_value_t = PublishMode::Calls)]
    pub(crate) publish_mode: PublishMode,
    /// Consumer groups (fanout workload).
    #[arg(long, default_value_t = 4)]
    pub(crate) groups: usize,
    /// Failures allowed per message, so deliveries when nothing is released (retry
    /// workload).
    #[arg(long, default_value_t = 3)]
    pub(crate) max_attempts: u32,
    /// Deliveries a consumer may hold unsettled (Redis COUNT, NATS fetch batch, RabbitMQ
    /// basic.qos, mailroom max_in_flight and poll_batch max).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) prefetch: u64,
    /// Deliveries in flight at once in one group (parallel workload): mailroom's
    /// `max_in_flight` with that many consumers, Redis's `XREADGROUP COUNT`. Messages
    /// in flight per publisher (publish workload, `--publish-mode pipelined`).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=i64::from(WINDOW_MAX)))]
    pub(crate) window: u32,
    /// How mailroom keeps the window in flight (parallel workload); `ack-next` also folds
    /// the consume workloads' acks into the next poll.
    #[arg(long, value_enum, default_value_t = Shape::Batch)]
    pub(crate) mailroom_shape: Shape,
    /// mailroom's groups' `max_in_flight` in the consume, retry and fanout workloads
    /// (default: the prefetch). The window counts offsets from a group's position, so a
    /// wider one lets a round go past a retry waiting there.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(WINDOW_MAX)))]
    pub(crate) mailroom_group_window: Option<u32>,
    /// Consume over the consume stream (WebSocket, window = the prefetch) instead of
    /// poll/batch + ack/batch (mailroom's consume, retry and fanout workloads).
    #[arg(long)]
    pub(crate) mailroom_stream: bool,
    /// How mailroom's batch publishes are written: the binary batch encoding (the
    /// client's default) or JSON.
    #[arg(long, value_enum, default_value_t = BatchBody::Binary)]
    pub(crate) batch_encoding: BatchBody,
    /// How Redis acks (parallel workload).
    #[arg(long, value_enum, default_value_t = RedisShape::Separate)]
    pub(crate) redis_shape: RedisShape,
    /// Reject every Nth message (retry workload; 10 = 10%).
    #[arg(long, default_value_t = 10)]
    pub(crate) fail_every: u64,
    /// Subscribers including the stalled one (live workload).
    #[arg(long, default_value_t = 100)]
    pub(crate) subscribers: usize,
    /// Publish rate in msgs/s, 0 = as fast as possible (live workload).
    #[arg(long, default_value_t = 2000)]
    pub(crate) rate: u64,
    /// Per-subscriber mailbox where the system has one (live workload).
    #[arg(long, default_value_t = 1024)]
    pub(crate) mailbox: u64,
    /// What each message carries besides its payload (mailroom, publish workload):
    /// none, a key and two headers, or a unique idempotency key. With any but `none`
    /// every publish goes through the batch endpoint, so compare at the same --batch.
    #[arg(long, value_enum, default_value_t = Metadata::None)]
    pub(crate) metadata: Metadata,
    /// Distinct keys with `--metadata keys` (each message gets one at random).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) keys: u32,
    /// The JSON-lines file to append the result to.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

/// `--batch-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BatchBody {
    Binary,
    Json,
}

/// `--metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Metadata {
    None,
    KeyHeaders,
    Idempotent,
    /// A key from `--keys` distinct ones (ordering keys, consume workload).
    Keys,
}

impl RunArgs {
    /// The row's variant: what sets this run apart from others of its workload.
    pub(crate) fn variant(&self) -> String {
        let size = if self.payload_bytes.is_multiple_of(1024) {
            format!("{} KiB", self.payload_bytes / 1024)
        } else {
            format!("{} B", self.payload_bytes)
        };
        let window = match self.mailroom_group_window {
            Some(window) => format!(", group window {window}"),
            None => String::new(),
        };
        match self.workload {
            Workload::Publish if self.publish_mode == PublishMode::Pipelined => format!(
                "{size}, {} pub, pipelined W {}",
                self.publishers, self.window
            ),
            Workload::Publish if self.metadata != Metadata::None => format!(
                "{size}, {} pub, batch {}, {}",
                self.publishers,
                self.batch,
                match self.metadata {
                    Metadata::KeyHeaders => "key + 2 headers",
                    Metadata::Keys => "keys",
                    _ => "idempotency key",
                }
            ),
            Workload::Publish if self.batch > 1 => {
                format!("{size}, {} pub, batch {}", self.publishers, self.batch)
            }
            Workload::Publish => format!("{size}, {} pub, unbatched", self.publishers),
            Workload::Consume if self.mailroom_stream => {
                format!(
                    "{size}, 1 group, prefetch {}, consume stream",
                    self.prefetch
                )
            }
            Workload::Consume if self.metadata == Metadata::Keys => format!(
                "{size}, 1 group, prefetch {}, {} keys",
                self.prefetch, self.keys
            ),
            Workload::Consume => format!("{size}, 1 group, prefetch {}{window}", self.prefetch),
            Workload::Retry => format!(
                "{size}, 1 in {} rejected, max {}, prefetch {}{window}",
                self.fail_every, self.max_attempts, self.prefetch
            ),
            Workload::Fanout => format!(
                "{size}, {} groups, prefetch {}{window}",
                self.groups, self.prefetch
            ),
            Workload::Parallel if self.mailroom_shape == Shape::Tasks => format!(
                "{size}, 1 group, W {}, W consumers x 1 delivery (old shape)",
                self.window
            ),
            Workload::Parallel if self.mailroom_shape == Shape::AckNext => {
                format!("{size}, 1 group, W {}, ack with next poll", self.window)
            }
            Workload::Parallel if self.redis_shape == RedisShape::Pipelined => format!(
                "{size}, 1 group, W {}, XACK with next XREADGROUP (pipelined)",
                self.window
            ),
            Workload::Parallel => format!("{size}, 1 group, W {}", self.window),
            Workload::Live => format!(
                "{size}, {} subs (1 stalled), {}/s",
                self.subscribers, self.rate
            ),
        }
    }

    /// What the run's latency figures measure.
    pub(crate) fn latency_kind(&self) -> &'static str {
        match self.workload {
            Workload::Publish if self.publish_mode == PublishMode::Pipelined => {
                "sent until its confirmation was taken (window full or end), per message"
            }
            Workload::Publish if self.system == System::Disk => "write + fdatasync, per message",
            Workload::Publish => "publish call until confirmed, per message",
            Workload::Consume | Workload::Retry | Workload::Fanout => {
                "asking for a delivery's batch until the ack/nack calls settling it returned"
            }
            Workload::Parallel => "asking for a delivery's batch until its ack call returned",
            Workload::Live => "publish stamp to arrival at a reading subscriber",
        }
    }
}
