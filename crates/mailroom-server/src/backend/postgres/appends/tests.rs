//! A model of how queued publishes are cut into combined appends and answered.

use proptest::prelude::*;

use super::*;

/// A queued publish as the model draws it: its kind, its messages' payload sizes, and
/// whether one of its messages has an idempotency key.
#[derive(Debug, Clone)]
struct Drawn {
    metadata: bool,
    window: bool,
    keyed: bool,
    sizes: Vec<usize>,
}

fn drawn() -> impl Strategy<Value = Drawn> {
    let sizes = prop_oneof![
        8 => proptest::collection::vec(0usize..64, 1..4),
        1 => proptest::collection::vec(Just(COMBINED_BYTES_MAX / 3), 1..3),
        1 => (1usize..3).prop_map(|n| vec![1; n * COMBINED_MESSAGES_MAX / 4]),
    ];
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.2),
        sizes,
    )
        .prop_map(|(metadata, window, keyed, sizes)| Drawn {
            metadata,
            window: metadata && window,
            keyed: metadata && keyed,
            sizes,
        })
}

fn work(drawn: &Drawn, tag: usize) -> Work {
    let payloads: Vec<Bytes> = drawn
        .sizes
        .iter()
        .enumerate()
        .map(|(n, &size)| {
            let mut payload = format!("{tag}.{n}.").into_bytes();
            payload.resize(payload.len().max(size), b'x');
            Bytes::from(payload)
        })
        .collect();
    if !drawn.metadata {
        return Work::Payloads(payloads);
    }
    let mut messages = payloads
        .into_iter()
        .map(|payload| {
            let mut message = NewMessage::bare(payload);
            message.metadata.key = Some(format!("k{tag}"));
            message
        })
        .collect::<Vec<_>>();
    if drawn.keyed {
        messages[0].metadata.idempotency_key = Some(format!("i{tag}"));
    }
    let window = drawn.window.then(IdempotencyWindow::default);
    Work::Messages(messages, window)
}

fn payloads_of(work: &Work) -> Vec<Bytes> {
    match work {
        Work::Payloads(payloads) => payloads.clone(),
        Work::Messages(messages, _) => messages.iter().map(|m| m.payload.clone()).collect(),
    }
}

fn queue_of(drawn: &[Drawn]) -> (Vec<Waiter>, Vec<oneshot::Receiver<Answer>>) {
    let (mut queue, mut waits) = (Vec::new(), Vec::new());
    for (tag, one) in drawn.iter().enumerate() {
        let (answer, wait) = oneshot::channel();
        queue.push(Waiter {
            work: work(one, tag),
            answer,
        });
        waits.push(wait);
    }
    (queue, waits)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // Proves a combined append takes the longest run of the queue's first publishes that
    // are of one kind, carry no idempotency key unless alone, and fit the limits; at
    // least one.
    #[test]
    fn a_combined_append_takes_the_longest_run_that_joins_and_fits(
        drawn in proptest::collection::vec(drawn(), 1..12),
    ) {
        let (queue, _) = queue_of(&drawn);
        let fits = fitting(&queue);
        let joins = |n: usize| {
            let messages: usize = queue[..n].iter().map(|w| w.work.len()).sum();
            let bytes: usize = queue[..n].iter().map(|w| w.work.bytes()).sum();
            queue[..n].iter().all(|w| queue[0].work.joins(&w.work))
                && messages <= COMBINED_MESSAGES_MAX
                && bytes <= COMBINED_BYTES_MAX
        };
        prop_assert!(fits >= 1 && fits <= queue.len());
        prop_assert!(fits == 1 || joins(fits), "{fits} taken that do not join");
        prop_assert!(fits == queue.len() || !joins(fits + 1), "{fits} is not the longest");
        let unkeyed = |w: &Waiter| match &w.work {
            Work::Messages(messages, _) => !keyed(messages),
            Work::Payloads(_) => true,
        };
        prop_assert!(fits == 1 || queue[..fits].iter().all(unkeyed));
    }

    // Proves the combined write carries every taken publish's messages in arrival order,
    // and each publish is answered exactly its own share of the write's answer.
    #[test]
    fn each_publish_is_answered_its_own_share_in_arrival_order(
        drawn in proptest::collection::vec(drawn(), 1..12),
        start in 0u64..1_000,
    ) {
        let (mut queue, waits) = queue_of(&drawn);
        let fits = fitting(&queue);
        let mut taken: Vec<Waiter> = queue.drain(..fits).collect();
        let expected: Vec<Bytes> = taken.iter().flat_map(|w| payloads_of(&w.work)).collect();
        let (write, counts) = combined(&mut taken).expect("one kind");
        prop_assert_eq!(payloads_of(&write), expected);
        let count = write.len() as u64;
        let result = match &write {
            Work::Payloads(_) => Ok(Written::Offsets(start..start + count)),
            Work::Messages(..) => Ok(Written::Stored(
                (start..start + count)
                    .map(|offset| Stored { offset, duplicate: offset % 3 == 0 })
                    .collect(),
            )),
        };
        answer_each(taken, &counts, &result);
        let mut next = start;
        for (tag, mut wait) in waits.into_iter().take(fits).enumerate() {
            let messages = drawn[tag].sizes.len() as u64;
            match wait.try_recv().unwrap().unwrap() {
                Written::Offsets(offsets) => prop_assert_eq!(offsets, next..next + messages),
                Written::Stored(answers) => {
                    let offsets: Vec<u64> = answers.iter().map(|a| a.offset).collect();
                    prop_assert_eq!(offsets, (next..next + messages).collect::<Vec<_>>());
                    prop_assert!(answers.iter().all(|a| a.duplicate == (a.offset % 3 == 0)));
                }
            }
            next += messages;
        }
    }
}

// Proves every publish a failed combined append carried gets that error, as its own.
#[test]
fn every_publish_of_a_failed_append_gets_its_error() {
    let drawn = Drawn {
        metadata: false,
        window: false,
        keyed: false,
        sizes: vec![1],
    };
    let (taken, waits) = queue_of(&[drawn.clone(), drawn]);
    let failed = Err(BackendError::Store(StoreError::UnknownTopic {
        topic: "t".into(),
    }));
    answer_each(taken, &[1, 1], &failed);
    for mut wait in waits {
        let error = wait.try_recv().unwrap().unwrap_err();
        assert!(matches!(
            error,
            BackendError::Store(StoreError::UnknownTopic { topic }) if topic == "t"
        ));
    }
}

// Proves publishes of two kinds are never written as one.
#[test]
fn two_kinds_make_no_combined_write() {
    let bare = Drawn {
        metadata: false,
        window: false,
        keyed: false,
        sizes: vec![1],
    };
    let keyed = Drawn {
        metadata: true,
        ..bare.clone()
    };
    let (mut taken, _) = queue_of(&[bare, keyed]);
    assert!(combined(&mut taken).is_none());
}

// Proves a write answered with too few answers fails its publishes instead of handing
// one an empty answer.
#[test]
fn a_short_answer_is_an_error_not_a_missing_offset() {
    let drawn = Drawn {
        metadata: true,
        window: false,
        keyed: false,
        sizes: vec![1, 1],
    };
    let (taken, mut waits) = queue_of(&[drawn]);
    let short = Ok(Written::Stored(vec![Stored {
        offset: 0,
        duplicate: false,
    }]));
    answer_each(taken, &[2], &short);
    assert!(waits[0].try_recv().unwrap().is_err());
}
