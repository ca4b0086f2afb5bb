//! Benchmarks for `mailroom::topic`, each beside a naive peer measured in the same run: a
//! `Mutex` around a `Vec` of messages and a `HashMap` of group states, the obvious design
//! that serialises everything.
//!
//! Run: `cargo bench -p mailroom --bench topic` (append `-- --quick` for a short run;
//! `-- poll_ack/` for the single-op and batch consume cases side by side).
//! Before criterion starts, it prints the memory each design needs per retained message
//! beyond the payload, counted by a global allocator wrapper.

mod naive;
mod reports;

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use mailroom::group::GroupConfig;
use mailroom::topic::{Delivery, StartPosition, Topic};
use naive::Naive;
use reports::{consumer_progress_report, memory_report};

/// Messages per timed batch; a batch always starts from a fresh topic or group, so the
/// log's size stays bounded however many iterations criterion asks for.
const BATCH: u64 = 1 << 20;

/// Deliveries per batch poll and batch ack in the batch case of "poll_ack" (also its W).
const BATCH_OF: u32 = 64;

/// Runs `iters` operations in batches of at most [`BATCH`], timing only `run(batch)`.
fn batched(iters: u64, mut run: impl FnMut(u64) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let batch = left.min(BATCH);
        total += run(batch);
        left -= batch;
    }
    total
}

/// Splits `count` into `parts` near-equal shares.
fn shares(count: u64, parts: usize) -> Vec<u64> {
    (0..parts as u64)
        .map(|part| count / parts as u64 + u64::from(part < count % parts as u64))
        .collect()
}

fn publish(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish");
    group.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        group.bench_function(BenchmarkId::new("mailroom", threads), |b| {
            b.iter_custom(|iters| {
                batched(iters, |batch| {
                    let topic = Topic::new();
                    timed_threads(threads, batch, |count| {
                        for value in 0..count {
                            black_box(topic.publish(value));
                        }
                    })
                })
            })
        });
        group.bench_function(BenchmarkId::new("naive", threads), |b| {
            b.iter_custom(|iters| {
                batched(iters, |batch| {
                    let topic = Naive::new();
                    timed_threads(threads, batch, |count| {
                        for value in 0..count {
                            black_box(topic.publish(value));
                        }
                    })
                })
            })
        });
    }
    group.finish();
}

/// Runs `work(share)` on `threads` scoped threads released together; returns the wall time
/// from release to the last one finishing.
fn timed_threads(threads: usize, count: u64, work: impl Fn(u64) + Sync) -> Duration {
    if threads == 1 {
        let start = Instant::now();
        work(count);
        return start.elapsed();
    }
    let ready = Barrier::new(threads + 1);
    thread::scope(|scope| {
        for share in shares(count, threads) {
            let (ready, work) = (&ready, &work);
            scope.spawn(move || {
                ready.wait();
                work(share);
            });
        }
        ready.wait();
        let start = Instant::now();
        // Leaving the scope joins every worker.
        start
    })
    .elapsed()
}

/// A topic holding `BATCH` messages, to consume from.
fn filled_topic() -> Topic<u64> {
    let topic = Topic::new();
    for value in 0..BATCH {
        topic.publish(value);
    }
    topic
}

fn filled_naive() -> Naive<u64> {
    let topic = Naive::new();
    for value in 0..BATCH {
        topic.publish(value);
    }
    topic
}

fn poll_ack_one_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("poll_ack");
    group.throughput(Throughput::Elements(1));
    let topic = filled_topic();
    group.bench_function("mailroom_handle", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                topic.create_group("g", 3).unwrap();
                let handle = topic.group("g").unwrap();
                let start = Instant::now();
                for _ in 0..batch {
                    let delivery = handle.poll().unwrap().unwrap();
                    handle.ack(black_box(delivery.id())).unwrap();
                }
                let elapsed = start.elapsed();
                topic.delete_group("g").unwrap();
                elapsed
            })
        })
    });
    group.bench_function("mailroom_by_name", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                topic.create_group("g", 3).unwrap();
                let start = Instant::now();
                for _ in 0..batch {
                    let delivery = topic.poll("g").unwrap().unwrap();
                    topic.ack("g", black_box(delivery.id())).unwrap();
                }
                let elapsed = start.elapsed();
                topic.delete_group("g").unwrap();
                elapsed
            })
        })
    });
    // The same messages moved 64 at a time: one poll_batch and one ack_batch per 64,
    // with W = 64 so that a batch is never cut short by the window.
    group.bench_function("mailroom_poll_batch_ack_batch_64", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                let config = GroupConfig::new(3).with_max_in_flight(BATCH_OF);
                topic
                    .create_group_with("g", StartPosition::Earliest, config)
                    .unwrap();
                let handle = topic.group("g").unwrap();
                let mut ids = Vec::with_capacity(BATCH_OF as usize);
                let start = Instant::now();
                let mut left = batch;
                while left > 0 {
                    let max = left.min(u64::from(BATCH_OF)) as usize;
                    let deliveries = handle.poll_batch(None, max).unwrap();
                    assert_eq!(deliveries.len(), max);
                    ids.clear();
                    ids.extend(deliveries.iter().map(Delivery::id));
                    black_box(deliveries);
                    for result in handle.ack_batch(black_box(&ids)).unwrap() {
                        result.unwrap();
                    }
                    left -= max as u64;
                }
                let elapsed = start.elapsed();
                topic.delete_group("g").unwrap();
                elapsed
            })
        })
    });
    let naive = filled_naive();
    group.bench_function("naive", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                naive.create_group("g", 0);
                let start = Instant::now();
                for _ in 0..batch {
                    let (offset, attempt, message) = naive.poll("g").unwrap();
                    black_box(message);
                    assert!(naive.ack("g", black_box(offset), attempt));
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

/// Poll + ack cycles with one thread per group, `groups` groups at once.
fn poll_ack_groups(c: &mut Criterion) {
    let mut group = c.benchmark_group("poll_ack_groups");
    group.throughput(Throughput::Elements(1));
    let topic = filled_topic();
    let naive = filled_naive();
    for groups in [1usize, 2, 4, 16] {
        let names: Vec<String> = (0..groups).map(|index| format!("g{index}")).collect();
        group.bench_function(BenchmarkId::new("mailroom_handle", groups), |b| {
            b.iter_custom(|iters| {
                batched(iters, |batch| {
                    let handles: Vec<_> = names
                        .iter()
                        .map(|name| {
                            topic.create_group(name, 3).unwrap();
                            topic.group(name).unwrap()
                        })
                        .collect();
                    let share = shares(batch, groups);
                    let elapsed = timed_groups(&share, |index, count| {
                        let handle = &handles[index];
                        for _ in 0..count {
                            let delivery = handle.poll().unwrap().unwrap();
                            handle.ack(black_box(delivery.id())).unwrap();
                        }
                    });
                    names
                        .iter()
                        .for_each(|name| topic.delete_group(name).unwrap());
                    elapsed
                })
            })
        });
        group.bench_function(BenchmarkId::new("mailroom_by_name", groups), |b| {
            b.iter_custom(|iters| {
                batched(iters, |batch| {
                    for name in &names {
                        topic.create_group(name, 3).unwrap();
                    }
                    let share = shares(batch, groups);
                    let elapsed = timed_groups(&share, |index, count| {
                        let name = names[index].as_str();
                        for _ in 0..count {
                            let delivery = topic.poll(name).unwrap().unwrap();
                            topic.ack(name, black_box(delivery.id())).unwrap();
                        }
                    });
                    names
                        .iter()
                        .for_each(|name| topic.delete_group(name).unwrap());
                    elapsed
                })
            })
        });
        group.bench_function(BenchmarkId::new("naive", groups), |b| {
            b.iter_custom(|iters| {
                batched(iters, |batch| {
                    names.iter().for_each(|name| naive.create_group(name, 0));
                    let share = shares(batch, groups);
                    timed_groups(&share, |index, count| {
                        let name = names[index].as_str();
                        for _ in 0..count {
                            let (offset, attempt, message) = naive.poll(name).unwrap();
                            black_box(message);
                            assert!(naive.ack(name, offset, attempt));
                        }
                    })
                })
            })
        });
    }
    group.finish();
}

/// Runs `work(group, count)` on one thread per entry of `counts`, released together.
fn timed_groups(counts: &[u64], work: impl Fn(usize, u64) + Sync) -> Duration {
    let ready = Barrier::new(counts.len() + 1);
    thread::scope(|scope| {
        for (index, &count) in counts.iter().enumerate() {
            let (ready, work) = (&ready, &work);
            scope.spawn(move || {
                ready.wait();
                work(index, count);
            });
        }
        ready.wait();
        Instant::now()
    })
    .elapsed()
}

/// Publishing while a consumer group drains on another thread: the publisher's rate.
fn publish_beside_consumer(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish_beside_consumer");
    group.throughput(Throughput::Elements(1));
    group.bench_function("mailroom", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                let topic = Topic::new();
                topic.create_group("reader", 1).unwrap();
                let reader = topic.group("reader").unwrap();
                beside_consumer(
                    || {
                        for value in 0..batch {
                            black_box(topic.publish(value));
                        }
                    },
                    || {
                        if let Some(delivery) = reader.poll().unwrap() {
                            reader.ack(delivery.id()).unwrap();
                        }
                    },
                )
            })
        })
    });
    group.bench_function("naive", |b| {
        b.iter_custom(|iters| {
            batched(iters, |batch| {
                let topic = Naive::new();
                topic.create_group("reader", 0);
                beside_consumer(
                    || {
                        for value in 0..batch {
                            black_box(topic.publish(value));
                        }
                    },
                    || {
                        if let Some((offset, attempt, _)) = topic.poll("reader") {
                            topic.ack("reader", offset, attempt);
                        }
                    },
                )
            })
        })
    });
    group.finish();
}

/// Times `publish` while `consume_one` runs in a loop on another thread until it is done.
fn beside_consumer(publish: impl FnOnce() + Send, consume_one: impl Fn() + Sync) -> Duration {
    let done = std::sync::atomic::AtomicBool::new(false);
    let ready = Barrier::new(2);
    thread::scope(|scope| {
        scope.spawn(|| {
            ready.wait();
            while !done.load(Ordering::Relaxed) {
                consume_one();
            }
        });
        ready.wait();
        let start = Instant::now();
        publish();
        let elapsed = start.elapsed();
        done.store(true, Ordering::Relaxed);
        elapsed
    })
}

/// Whole-log runs at 1M and 10M messages: the per-message cost of publishing them all and
/// of one group consuming them all should not grow with the log.
fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("scale");
    group.sample_size(10);
    for messages in [1_000_000u64, 10_000_000] {
        group.throughput(Throughput::Elements(messages));
        let label = format!("{}M", messages / 1_000_000);
        group.bench_function(BenchmarkId::new("mailroom_publish", &label), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let topic = Topic::new();
                        let start = Instant::now();
                        for value in 0..messages {
                            black_box(topic.publish(value));
                        }
                        start.elapsed()
                    })
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("naive_publish", &label), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let topic = Naive::new();
                        let start = Instant::now();
                        for value in 0..messages {
                            black_box(topic.publish(value));
                        }
                        start.elapsed()
                    })
                    .sum()
            })
        });
        let topic = Topic::new();
        let naive = Naive::new();
        for value in 0..messages {
            topic.publish(value);
            naive.publish(value);
        }
        group.bench_function(BenchmarkId::new("mailroom_poll_ack", &label), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        topic
                            .create_group_at("g", 3, StartPosition::Earliest)
                            .unwrap();
                        let handle = topic.group("g").unwrap();
                        let start = Instant::now();
                        while let Some(delivery) = handle.poll().unwrap() {
                            handle.ack(black_box(delivery.id())).unwrap();
                        }
                        let elapsed = start.elapsed();
                        topic.delete_group("g").unwrap();
                        elapsed
                    })
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("naive_poll_ack", &label), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        naive.create_group("g", 0);
                        let start = Instant::now();
                        while let Some((offset, attempt, message)) = naive.poll("g") {
                            black_box(message);
                            naive.ack("g", offset, attempt);
                        }
                        start.elapsed()
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

fn main() {
    memory_report();
    consumer_progress_report();
    // Short runs: the machine is a shared 2-core box; medians are what we quote.
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    publish(&mut criterion);
    poll_ack_one_group(&mut criterion);
    poll_ack_groups(&mut criterion);
    publish_beside_consumer(&mut criterion);
    scaling(&mut criterion);
    criterion.final_summary();
}
