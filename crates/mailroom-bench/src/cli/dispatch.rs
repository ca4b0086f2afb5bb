//! From the parsed flags to a run: which system to connect to, and which workload to
//! drive against it.

use anyhow::Result;

use super::args::{BatchBody, Metadata, PublishMode, RedisShape, RunArgs, Shape, System, Workload};
use mailroom_bench::database_probe::DatabaseProbe;
use mailroom_bench::ledger::FailurePlan;
use mailroom_bench::probe::Probe;
use mailroom_bench::systems::mailroom::{Mailroom, MailroomShape, MessageMetadata};
use mailroom_bench::systems::nats::Nats;
use mailroom_bench::systems::pgq::Pgq;
use mailroom_bench::systems::rabbitmq::RabbitMq;
use mailroom_bench::systems::redis::Redis;
use mailroom_bench::systems::skip_locked::SkipLocked;
use mailroom_bench::systems::{LiveSystem, LogSystem, TopicSpec};
use mailroom_bench::workload::consume::{self, ConsumeParams};
use mailroom_bench::workload::disk;
use mailroom_bench::workload::live::{self, LiveParams};
use mailroom_bench::workload::parallel::{self, ParallelParams, WindowSystem};
use mailroom_bench::workload::publish::{self, PublishParams};
use mailroom_bench::workload::Measured;
use mailroom_client::BatchEncoding;

/// Runs the workload `args` name against the system they name.
pub(crate) async fn measure(args: &RunArgs) -> Result<Measured> {
    anyhow::ensure!(
        args.mailroom_shape == Shape::Batch
            || (args.system == System::Mailroom && args.workload == Workload::Parallel)
            || (args.system == System::Mailroom
                && args.mailroom_shape == Shape::AckNext
                && !args.mailroom_stream
                && matches!(
                    args.workload,
                    Workload::Consume | Workload::Retry | Workload::Fanout
                )),
        "--mailroom-shape applies to mailroom's parallel workload, and ack-next also to its \
         consume, retry and fanout workloads over poll/batch"
    );
    anyhow::ensure!(
        !args.mailroom_stream
            || (args.system == System::Mailroom && args.workload != Workload::Parallel),
        "--mailroom-stream applies to mailroom's consume, retry and fanout workloads only"
    );
    anyhow::ensure!(
        args.mailroom_group_window.is_none()
            || (args.system == System::Mailroom
                && matches!(
                    args.workload,
                    Workload::Consume | Workload::Retry | Workload::Fanout
                )),
        "--mailroom-group-window applies to mailroom's consume, retry and fanout workloads only"
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
            let urls: Vec<String> = args
                .address
                .split(',')
                .map(|address| format!("http://{address}"))
                .collect();
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            let encoding = match args.batch_encoding {
                BatchBody::Binary => BatchEncoding::Binary,
                BatchBody::Json => BatchEncoding::Json,
            };
            let mut system = Mailroom::brokers(&urls, shape)?
                .with_metadata(metadata)
                .with_batch_encoding(encoding);
            if args.mailroom_stream {
                system = system.streamed();
            }
            if let Some(window) = args.mailroom_group_window {
                system = system.with_group_window(window);
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
        System::Pgq | System::SkipLocked
            if matches!(args.workload, Workload::Live | Workload::Parallel) =>
        {
            anyhow::bail!("PgQ and the SKIP LOCKED table run the log workloads only")
        }
        System::Pgq => {
            let mut pgq = Pgq::connect(&args.address).await?;
            if matches!(
                args.workload,
                Workload::Consume | Workload::Retry | Workload::Fanout
            ) {
                pgq = pgq.ticking_every(usize::try_from(args.prefetch)?);
            }
            dispatch_log(&pgq, args, &tag).await
        }
        System::SkipLocked => {
            let system = SkipLocked::connect(&args.address).await?;
            dispatch_log(&system, args, &tag).await
        }
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
    parallel::run(system, &topic, params, probe(args).await?).await
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
        return live::run(system, &format!("{tag}-live"), params, probe(args).await?).await;
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
            publish::run(system, &topic, params, probe(args).await?).await
        }
        Workload::Consume | Workload::Retry | Workload::Fanout => {
            let params = ConsumeParams {
                count: args.count,
                payload_bytes: args.payload_bytes,
                plan,
            };
            consume::run(system, &topic, params, probe(args).await?).await
        }
        Workload::Live => anyhow::bail!("live is dispatched separately"),
        Workload::Parallel => anyhow::bail!("parallel is dispatched separately"),
    }
}

/// The probe of the brokers named by --broker-pid and of the database named by
/// --database-url, if any.
async fn probe(args: &RunArgs) -> Result<Option<Probe>> {
    let database = match (&args.database_url, args.database_pid) {
        (Some(url), Some(pid)) => Some(DatabaseProbe::connect(url, pid).await?),
        _ => None,
    };
    if args.broker_pid.is_empty() && database.is_none() {
        return Ok(None);
    }
    let probe = Probe::brokers(args.broker_pid.clone());
    Ok(Some(match database {
        Some(database) => probe.with_database(database),
        None => probe,
    }))
}
