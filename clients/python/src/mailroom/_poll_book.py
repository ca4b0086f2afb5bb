"""The decisions of the polling consumer loop, without I/O, for its sync and asyncio
shells (:mod:`mailroom.consumer`, :mod:`mailroom.aio_consumer`).

The loop polls a batch carrying the acks of the batch before, hands the deliveries to
the body one by one, acks each whose body finished (unless it was failed), and keeps the
leases of the batch's open deliveries touched. This book holds that state: the shells
ask it what to send and tell it what was answered.
"""

from __future__ import annotations

from collections.abc import Callable

from ._loop import Book, ConsumerStats, count_acks
from .models import Delivery, DeliveryRef, ItemResult, PolledBatch

Key = tuple[int, int]


def key_of(delivery: Delivery) -> Key:
    """A delivery's ``(offset, attempt)``."""
    return (delivery.offset, delivery.attempt)


class PollBook(Book):
    """The polling loop's state between its calls."""

    def __init__(
        self, stats: ConsumerStats, on_result: Callable[[ItemResult], None] | None
    ) -> None:
        super().__init__(stats)
        self.on_result = on_result
        self.acks: list[DeliveryRef] = []
        """The acks of the batch being handled, sent with the next poll."""
        self.settled: set[Key] = set()
        """The batch's deliveries failed already (not to be acked)."""
        self.open: dict[Key, Delivery] = {}
        """The batch's deliveries whose leases are touched."""

    def poll_acks(self) -> list[DeliveryRef] | None:
        """The acks the next poll carries (None: none)."""
        return self.acks or None

    def received(self, batch: PolledBatch) -> list[Delivery]:
        """A poll's answer: counts the acks it carried; the deliveries to hand out."""
        count_acks(self.stats, batch.acked, self.on_result)
        self.acks = []
        self.open = {key_of(d): d for d in batch.deliveries}
        return batch.deliveries

    def handled(self, delivery: Delivery) -> None:
        """The body finished with ``delivery``: it is acked unless it was failed."""
        if key_of(delivery) not in self.settled:
            self.acks.append(delivery.ref())

    def batch_done(self) -> None:
        """Every delivery of the batch was handed out."""
        self.settled.clear()

    def failing(self, delivery: Delivery) -> None:
        """``delivery`` is nacked now: no ack later, no more touches."""
        key = key_of(delivery)
        self.settled.add(key)
        self.open.pop(key, None)

    def touch_refused(self, key: Key) -> None:
        """A touch was answered ``not_owned``: the lease is gone, stop touching it."""
        self.open.pop(key, None)

    def acks_answered(self, results: list[ItemResult] | None) -> None:
        """Counts the answers to an ack batch sent on the way out."""
        count_acks(self.stats, results, self.on_result)

    def owed(self) -> list[DeliveryRef]:
        """The acks not sent yet, to send on the way out (an ack batch)."""
        acks, self.acks = self.acks, []
        return acks

    def leave(self, unhandled: list[Delivery]) -> tuple[list[DeliveryRef], list[Delivery]]:
        """The loop was left early at ``unhandled[0]``: the acks owed, and what to release."""
        acks = self.owed()
        left = [d for d in unhandled if key_of(d) not in self.settled]
        return acks, self.leaving(left, keep=True)
