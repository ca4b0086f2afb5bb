//! `mailroom-bench`: runs one workload against one broker and appends its result as a JSON
//! line (`run`), or turns collected lines into the markdown table (`table`).
//!
//! `bench/peers.sh` starts the brokers and calls `run` for every workload and system;
//! `bench/smoke.sh` does the same with tiny counts.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};

use mailroom_bench::ledger::{FailurePlan, Verdict};
use mailroom_bench::payload::{HEADER_BYTES, PAYLOAD_BYTES_MAX};
use mailroom_bench::probe::Probe;
use mailroom_bench::report::{Latency, RunReport};
use mailroom_bench::systems::mailroom::{Mailroom, MailroomShape, MessageMetadata};
use mailroom_bench::systems::nats::Nats;
use mailroom_bench::systems::rabbitmq::RabbitMq;
use mailroom_bench::systems::redis::Redis;
use mailroom_bench::systems::{LiveSystem, LogSystem, TopicSpec};
use mailroom_bench::workload::consume::{self, ConsumeParams};
use mailroom_bench::workload::disk;
use mailroom_bench::workload::live::{self, LiveParams};
use mailroom_bench::workload::parallel::{self, ParallelParams, WindowSystem, WINDOW_MAX};
use mailroom_bench::workload::publish::{self, PublishParams};
use mailroom_bench::workload::Measured;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Side-by-side broker benchmarks: mailroom vs Redis Streams, NATS JetStream, RabbitMQ"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one workload against one system and append the result to --out.
    Run(RunArgs),
    /// Render collected JSON lines as a markdown table.
    Table {
        /// The JSON-lines file `run --out` wrote.
        #[arg(long)]
        input: PathBuf,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum System {
    Mailroom,
    Redis,
    Nats,
    Rabbitmq,
    /// The disk itself (publish workload, 1 publisher, unbatched): --address is a
    /// directory on it; each message is a write + fdatasync, no broker.
    Disk,
}

/// How mailroom keeps W deliveries in flight in the parallel workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Shape {
    /// One consumer: poll_batch(max = W), then one ack_batch.
    Batch,
    /// W named consumers, each polling and acking one delivery at a time.
    Tasks,
    /// One consumer acking each round inside its next poll_batch (one request per round).
    AckNext,
}

/// How Redis acks in the parallel workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum RedisShape {
    /// XREADGROUP COUNT W, then one XACK: two round trips per round.
    Separate,
    /// Each round's XACK pipelined with the next XREADGROUP: one round trip per round.
    Pipelined,
}

/// How the publish workload's publishers wait for confirmations.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum PublishMode {
    /// One call (of --batch messages) at a time, each waiting for its confirmation.
    Calls,
    /// Up to --window messages sent and unconfirmed per connection (mailroom's publish
    /// stream, Redis pipelined XADD, JetStream async publish, RabbitMQ publisher confirms).
    Pipelined,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
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
struct RunArgs {
    #[arg(long, value_enum)]
    system: System,
    /// host:port of the broker (mailroom: its HTTP address).
    #[arg(long)]
    address: String,
    /// The broker's process id, for CPU and peak-RSS figures.
    #[arg(long)]
    broker_pid: Option<u32>,
    #[arg(long, value_enum)]
    workload: Workload,
    /// The durability row label (e.g. strict, relaxed).
    #[arg(long, default_value = "strict")]
    durability: String,
    /// What the durability row means for this system (e.g. "appendfsync always").
    #[arg(long, default_value = "")]
    durability_detail: String,
    /// Messages.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 100)]
    payload_bytes: usize,
    /// Concurrent publishers (publish workload).
    #[arg(long, default_value_t = 1)]
    publishers: usize,
    /// Messages per publish call (publish workload).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// How publishers wait for confirmations (publish workload); `pipelined` keeps
    /// --window messages in flight per publisher.
    #[arg(long, value_enum, default_value_t = PublishMode::Calls)]
    publish_mode: PublishMode,
    /// Consumer groups (fanout workload).
    #[arg(long, default_value_t = 4)]
    groups: usize,
    /// Failures allowed per message, so deliveries when nothing is released (retry
    /// workload).
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// Deliveries a consumer may hold unsettled (Redis COUNT, NATS fetch batch, RabbitMQ
    /// basic.qos, mailroom max_in_flight and poll_batch max).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=4096))]
    prefetch: u64,
    /// Deliveries in flight at once in one group (parallel workload): mailroom's
    /// `max_in_flight` with that many consumers, Redis's `XREADGROUP COUNT`. Messages
    /// in flight per publisher (publish workload, `--publish-mode pipelined`).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=i64::from(WINDOW_MAX)))]
    window: u32,
    /// How mailroom keeps the window in flight (parallel workload).
    #[arg(long, value_enum, default_value_t = Shape::Batch)]
    mailroom_shape: Shape,
    /// Consume over the consume stream (WebSocket, window = the prefetch) instead of
    /// poll/batch + ack/batch (mailroom's consume, retry and fanout workloads).
    #[arg(long)]
    mailroom_stream: bool,
    /// How Redis acks (parallel workload).
    #[arg(long, value_enum, default_value_t = RedisShape::Separate)]
    redis_shape: RedisShape,
    /// Reject every Nth message (retry workload; 10 = 10%).
    #[arg(long, default_value_t = 10)]
    fail_every: u64,
    /// Subscribers including the stalled one (live workload).
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// Publish rate in msgs/s, 0 = as fast as possible (live workload).
    #[arg(long, default_value_t = 2000)]
    rate: u64,
    /// Per-subscriber mailbox where the system has one (live workload).
    #[arg(long, default_value_t = 1024)]
    mailbox: u64,
    /// What each message carries besides its payload (mailroom, publish workload):
    /// none, a key and two headers, or a unique idempotency key. With any but `none`
    /// every publish goes through the batch endpoint, so compare at the same --batch.
    #[arg(long, value_enum, default_value_t = Metadata::None)]
    metadata: Metadata,
    /// Distinct keys with `--metadata keys` (each message gets one at random).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
    /// The JSON-lines file to append the result to.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `--metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Metadata {
    None,
    KeyHeaders,
    Idempotent,
    /// A key from `--keys` distinct ones (ordering keys, consume workload).
    Keys,
}

impl RunArgs {
    fn variant(&self) -> String {
        let size = if self.payload_bytes.is_multiple_of(1024) {
            format!("{} KiB", self.payload_bytes / 1024)
        } else {
            format!("{} B", self.payload_bytes)
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
            Workload::Consume => format!("{size}, 1 group, prefetch {}", self.prefetch),
            Workload::Retry => format!(
                "{size}, 1 in {} rejected, max {}, prefetch {}",
                self.fail_every, self.max_attempts, self.prefetch
            ),
            Workload::Fanout => {
                format!("{size}, {} groups, prefetch {}", self.groups, self.prefetch)
            }
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

    fn latency_kind(&self) -> &'static str {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Table { input } => match table(&input) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => run_command(&args),
    }
}

fn table(input: &PathBuf) -> Result<()> {
    let text =
        std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let runs = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<Vec<RunReport>, _>>()
        .context("parsing results")?;
    print!("{}", mailroom_bench::table::render(&runs));
    Ok(())
}

/// Exit codes: 0 passed, 1 the run could not be carried out, 2 its correctness check failed.
fn run_command(args: &RunArgs) -> ExitCode {
    if !(HEADER_BYTES..=PAYLOAD_BYTES_MAX).contains(&args.payload_bytes) {
        eprintln!("error: --payload-bytes must be in {HEADER_BYTES}..={PAYLOAD_BYTES_MAX}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(measure(args));
    let errored = outcome.is_err();
    let report = build_report(args, outcome);
    summarise(&report);
    if let Err(error) = append(args.out.as_ref(), &report) {
        eprintln!("error: writing the result: {error:#}");
        return ExitCode::FAILURE;
    }
    // Dropping the runtime with clients' background tasks still alive must not hang.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match (errored, report.passed()) {
        (true, _) => ExitCode::FAILURE,
        (false, true) => ExitCode::SUCCESS,
        (false, false) => ExitCode::from(2),
    }
}

async fn measure(args: &RunArgs) -> Result<Measured> {
    anyhow::ensure!(
        args.mailroom_shape == Shape::Batch
            || (args.system == System::Mailroom && args.workload == Workload::Parallel),
        "--mailroom-shape applies to mailroom's parallel workload only"
    );
    anyhow::ensure!(
        !args.mailroom_stream
            || (args.system == System::Mailroom && args.workload != Workload::Parallel),
        "--mailroom-stream applies to mailroom's consume, retry and fanout workloads only"
    );
    anyhow::ensure!(
        args.redis_shape == RedisShape::Separate
            || (args.system == System::Redis && args.workload == Workload::Parallel),
        "--redis-shape applies to Redis's parallel workload only"
    );
    let tag = format!(
        "b{}x{}",
        std::process::id(),
        mailroom_bench::payload::now_ns() % 1_000_000_000
    );
    match args.system {
        System::Disk => {
            anyhow::ensure!(
                args.workload == Workload::Publish
                    && args.publishers == 1
                    && args.batch == 1
                    && args.publish_mode == PublishMode::Calls,
                "the disk runs the unbatched single-publisher publish workload only"
            );
            let dir = std::path::PathBuf::from(&args.address);
            let (count, bytes) = (args.count, args.payload_bytes);
            tokio::task::spawn_blocking(move || disk::run(&dir, count, bytes)).await?
        }
        System::Mailroom => {
            let shape = match args.mailroom_shape {
                Shape::Batch => MailroomShape::Batch,
                Shape::Tasks => MailroomShape::Tasks,
                Shape::AckNext => MailroomShape::AckNext,
            };
            let metadata = match args.metadata {
                Metadata::None => MessageMetadata::None,
                Metadata::KeyHeaders => MessageMetadata::KeyAndHeaders,
                Metadata::Idempotent => MessageMetadata::IdempotencyKey,
                Metadata::Keys => MessageMetadata::Keys(args.keys),
            };
            let mut system =
                Mailroom::new(&format!("http://{}", args.address), shape)?.with_metadata(metadata);
            if args.mailroom_stream {
                system = system.streamed();
            }
            if args.workload == Workload::Parallel {
                return windowed(&system, args, &tag).await;
            }
            dispatch(&system, args, &tag).await
        }
        System::Redis if args.workload == Workload::Parallel => {
            let mut redis = Redis::connect(&args.address).await?;
            if args.redis_shape == RedisShape::Pipelined {
                redis = redis.pipelined();
            }
            windowed(&redis, args, &tag).await
        }
        System::Redis => dispatch(&Redis::connect(&args.address).await?, args, &tag).await,
        System::Nats | System::Rabbitmq if args.workload == Workload::Parallel => {
            anyhow::bail!("the parallel workload runs against mailroom and Redis only")
        }
        System::Nats => dispatch(&Nats::connect(&args.address).await?, args, &tag).await,
        System::Rabbitmq => {
            anyhow::ensure!(
                args.workload != Workload::Live,
                "RabbitMQ is not part of the live fan-out workload"
            );
            dispatch_log(&RabbitMq::connect(&args.address).await?, args, &tag).await
        }
    }
}

/// Issue 7: one group drained with a window of deliveries in flight.
async fn windowed<S: WindowSystem>(system: &S, args: &RunArgs, tag: &str) -> Result<Measured> {
    let topic = TopicSpec {
        name: format!("{tag}_parallel"),
        groups: vec!["g0".to_owned()],
        prefetch: usize::try_from(args.window).unwrap_or(1),
        max_attempts: 1,
    };
    let params = ParallelParams {
        count: args.count,
        payload_bytes: args.payload_bytes,
        window: args.window,
    };
    parallel::run(system, &topic, params, probe(args)).await
}

/// Systems that do both logs and live channels.
async fn dispatch<S: LogSystem + LiveSystem>(
    system: &S,
    args: &RunArgs,
    tag: &str,
) -> Result<Measured> {
    if args.workload == Workload::Live {
        let params = LiveParams {
            count: args.count,
            payload_bytes: args.payload_bytes,
            subscribers: args.subscribers,
            rate_per_s: args.rate,
            mailbox: args.mailbox,
        };
        return live::run(system, &format!("{tag}-live"), params, probe(args)).await;
    }
    dispatch_log(system, args, tag).await
}

async fn dispatch_log<S: LogSystem>(system: &S, args: &RunArgs, tag: &str) -> Result<Measured> {
    let groups = match args.workload {
        Workload::Fanout => args.groups,
        _ => 1,
    };
    let topic = TopicSpec {
        name: format!("{tag}_{:?}", args.workload).to_lowercase(),
        groups: (0..groups).map(|g| format!("g{g}")).collect(),
        prefetch: usize::try_from(args.prefetch).unwrap_or(1),
        max_attempts: if args.workload == Workload::Retry {
            args.max_attempts
        } else {
            1
        },
    };
    let plan = match args.workload {
        Workload::Retry => FailurePlan::EveryNth(args.fail_every),
        _ => FailurePlan::None,
    };
    match args.workload {
        Workload::Publish => {
            let params = PublishParams {
                count: args.count,
                payload_bytes: args.payload_bytes,
                publishers: args.publishers,
                batch: args.batch,
                window: (args.publish_mode == PublishMode::Pipelined)
                    .then(|| usize::try_from(args.window).unwrap_or(1)),
            };
            publish::run(system, &topic, params, probe(args)).await
        }
        Workload::Consume | Workload::Retry | Workload::Fanout => {
            let params = ConsumeParams {
                count: args.count,
                payload_bytes: args.payload_bytes,
                plan,
            };
            consume::run(system, &topic, params, probe(args)).await
        }
        Workload::Live => anyhow::bail!("live is dispatched separately"),
        Workload::Parallel => anyhow::bail!("parallel is dispatched separately"),
    }
}

fn probe(args: &RunArgs) -> Option<Probe> {
    args.broker_pid.map(Probe::new)
}

fn build_report(args: &RunArgs, outcome: Result<Measured>) -> RunReport {
    let mut report = RunReport {
        workload: format!("{:?}", args.workload).to_lowercase(),
        variant: args.variant(),
        system: format!("{:?}", args.system).to_lowercase(),
        durability: args.durability.clone(),
        durability_detail: args.durability_detail.clone(),
        latency_kind: args.latency_kind().to_owned(),
        ..RunReport::default()
    };
    match outcome {
        Err(error) => {
            report.verdict = Verdict::from_problems(vec![format!("run failed: {error:#}")]);
        }
        Ok(measured) => {
            let seconds = measured.elapsed.as_secs_f64();
            report.messages = measured.messages;
            report.seconds = seconds;
            report.msgs_per_s = measured.messages as f64 / seconds.max(1e-9);
            report.latency = Latency::of(&measured.latency);
            report.verdict = measured.verdict;
            report.subscribers = measured.subscribers;
            report.notes = measured.notes;
            if let Some(usage) = measured.usage {
                report.broker_cpu_s = Some(usage.cpu_seconds);
                report.broker_peak_rss_bytes = Some(usage.peak_rss_bytes);
                report.peak_rss_per_run = usage.peak_is_per_run;
            }
        }
    }
    report
}

fn summarise(report: &RunReport) {
    let verdict = if report.passed() {
        "ok".to_owned()
    } else {
        format!("FAIL {:?}", report.verdict.problems)
    };
    eprintln!(
        "{} / {} / {} / {}: {} msgs in {:.2} s = {:.0} msgs/s, p50 {} µs p99 {} µs p99.9 {} µs, cpu {:?} s, rss {:?} B — {verdict}",
        report.workload,
        report.variant,
        report.durability,
        report.system,
        report.messages,
        report.seconds,
        report.msgs_per_s,
        report.latency.p50_us,
        report.latency.p99_us,
        report.latency.p999_us,
        report.broker_cpu_s.map(|s| (s * 10.0).round() / 10.0),
        report.broker_peak_rss_bytes,
    );
}

fn append(out: Option<&PathBuf>, report: &RunReport) -> Result<()> {
    let line = serde_json::to_string(report)?;
    match out {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            writeln!(file, "{line}")?;
        }
        None => println!("{line}"),
    }
    Ok(())
}
