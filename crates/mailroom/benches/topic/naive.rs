//! The peer the topic benchmarks measure beside mailroom: one lock around the whole
//! topic, as a first implementation would have it.

use std::collections::HashMap;
use std::sync::Mutex;

/// The peer: one lock around the whole topic, as a first implementation would have it.
pub struct Naive<M> {
    inner: Mutex<NaiveInner<M>>,
}

struct NaiveInner<M> {
    log: Vec<M>,
    groups: HashMap<String, NaiveGroup>,
}

struct NaiveGroup {
    position: u64,
    attempt: u32,
    in_flight: bool,
}

impl<M: Clone> Naive<M> {
    pub fn new() -> Self {
        Naive {
            inner: Mutex::new(NaiveInner {
                log: Vec::new(),
                groups: HashMap::new(),
            }),
        }
    }

    pub fn publish(&self, message: M) -> u64 {
        let mut inner = self.inner.lock().unwrap();
        inner.log.push(message);
        inner.log.len() as u64 - 1
    }

    pub fn create_group(&self, name: &str, position: u64) {
        let group = NaiveGroup {
            position,
            attempt: 0,
            in_flight: false,
        };
        self.inner
            .lock()
            .unwrap()
            .groups
            .insert(name.to_owned(), group);
    }

    pub fn poll(&self, name: &str) -> Option<(u64, u32, M)> {
        let mut inner = self.inner.lock().unwrap();
        let NaiveInner { log, groups } = &mut *inner;
        let group = groups.get_mut(name)?;
        if !group.in_flight {
            if group.position >= log.len() as u64 {
                return None;
            }
            group.attempt += 1;
            group.in_flight = true;
        }
        let message = log[group.position as usize].clone();
        Some((group.position, group.attempt, message))
    }

    pub fn ack(&self, name: &str, offset: u64, attempt: u32) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let Some(group) = inner.groups.get_mut(name) else {
            return false;
        };
        if !group.in_flight || group.position != offset || group.attempt != attempt {
            return false;
        }
        group.position += 1;
        group.attempt = 0;
        group.in_flight = false;
        true
    }
}
