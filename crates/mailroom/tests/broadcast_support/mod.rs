//! What the broadcast rule tests share: building a `Delivery` to compare with, and
//! draining a subscription.

use mailroom::broadcast::{Delivery, Subscription};

pub(crate) fn delivery(delivered: usize, dropped: usize) -> Delivery {
    Delivery { delivered, dropped }
}

pub(crate) fn drain<T>(sub: &Subscription<T>) -> Vec<T> {
    std::iter::from_fn(|| sub.poll()).collect()
}
