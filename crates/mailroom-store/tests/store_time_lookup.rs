//! Finding an offset by publish time (`DurableTopic::offset_at_time`): the first retained
//! message published at or after the time, checked against a linear scan, also across
//! segments and after a restart.

use std::sync::Arc;

use bytes::Bytes;
use mailroom_store::clock::{Clock as _, ManualClock};
use mailroom_store::log::LogOptions;
use mailroom_store::{Store, StoreOptions};

// Proves the lookup agrees with a scan of every message's publish time, for every time
// from before the first message to after the last, over several segments and after a
// reopen; runs of equal times answer their first offset.
#[test]
fn offset_at_time_matches_a_scan() {
    let clock = Arc::new(ManualClock::new(100));
    let options = || StoreOptions {
        clock: clock.clone(),
        log: LogOptions {
            segment_bytes_max: 4096,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut times = Vec::new();
    {
        let store = Store::open(dir.path(), options()).unwrap();
        store.create_topic("t").unwrap();
        let topic = store.topic("t").unwrap();
        for i in 0..300u64 {
            // Steps of 0, 1 or 2 ms: runs of equal times and gaps.
            clock.advance_ms(i % 3);
            times.push(clock.now_ms());
            topic.publish(Bytes::from(vec![b'x'; 100])).unwrap();
        }
    }
    let store = Store::open(dir.path(), options()).unwrap();
    let topic = store.topic("t").unwrap();
    for time in 90..=times[times.len() - 1] + 2 {
        let expected = times.iter().position(|&t| t >= time).unwrap_or(times.len());
        assert_eq!(
            topic.offset_at_time(time).unwrap(),
            expected as u64,
            "time {time}"
        );
    }
}
