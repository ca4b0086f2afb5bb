"""The synchronous consumer loop.

    for delivery in client.group("orders", "billing").consume(batch=64):
        handle(delivery)

Deliveries come in batches (one long poll each). A delivery whose loop body finishes is
acked, all of a batch's acks riding on the poll for the next batch (one request, one
sync). While a batch is being handled, a background thread touches the leases of its
deliveries (every third of the group's ``lease_ms``) so a slow handler keeps them.

To nack with the exception as the reason and go on, either hand the loop a function
(``consumer.run(handle)``) or call ``consumer.fail(delivery, error)`` in your own
``except``. An exception that escapes the ``for`` body ends the loop: inside
``with group.consume() as consumer:`` that delivery is nacked with the exception as the
reason; the batch's other unhandled deliveries (and, without ``with``, that one too) are
released (handed back, not counted as failures).

When the server is unreachable (restarting, say) every call is tried again with a
doubling pause, so the loop resumes where it was: its deliveries in flight come back to
the same consumer with the same attempt, and an ack whose answer was lost is answered
``not_owned`` when repeated, which the loop counts (``stats.ack_refused``) and moves on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ._loop import LEASE_TOUCH_FRACTION, ConsumerStats, reason_of
from ._poll_book import PollBook
from ._shells import SyncShell
from .errors import MailroomError, NotOwned
from .models import Delivery, DeliveryRef, ItemResult

if TYPE_CHECKING:
    from .client import Group


class Consumer(SyncShell[PollBook]):
    """An iterator of deliveries that acks, nacks and keeps leases (see the module doc)."""

    def __init__(
        self,
        group: Group,
        batch: int,
        consumer: str | None,
        wait_ms: int,
        retry_max_s: float,
        on_result: Callable[[ItemResult], None] | None = None,
    ) -> None:
        super().__init__(group, retry_max_s, PollBook(ConsumerStats(), on_result))
        self.batch = batch
        self.consumer = consumer
        self.wait_ms = wait_ms
        self.on_result = on_result

    def stop(self) -> None:
        """Ends the loop after the current batch (thread-safe); its acks are still sent."""
        self._stop.set()

    def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` now with ``error`` as the reason (it is not acked later)."""
        self._book.failing(delivery)
        self._nack(delivery, reason_of(error), leaving=False)

    def _loop(self) -> Iterator[Delivery]:
        book = self._book
        lease_ms = self._retrying(lambda: self.group.info().lease_ms)
        while not self._stop.is_set():
            sent = book.poll_acks()
            batch = self._retrying(
                lambda: self.group.poll_batch(
                    self.batch, consumer=self.consumer, wait_ms=self.wait_ms, ack=sent
                )
            )
            deliveries = book.received(batch)
            toucher = _Toucher(self, lease_ms)
            try:
                for index, delivery in enumerate(deliveries):
                    try:
                        yield delivery
                    except GeneratorExit:
                        self._leave(deliveries[index:])
                        raise
                    book.handled(delivery)
            finally:
                toucher.finish()
            book.batch_done()
        self._send_acks(book.owed())

    def _leave(self, unhandled: list[Delivery]) -> None:
        """The loop was left early: send the acks owed, then settle what is unhandled."""
        self._stop.set()
        acks, release = self._book.leave(unhandled)
        self._send_acks(acks)
        self._release(release)

    def _send_acks(self, acks: list[DeliveryRef]) -> None:
        if not acks:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            results = self._retrying(lambda: client.ack_batch(topic, name, acks), leaving=True)
        except MailroomError:
            return
        self._book.acks_answered(results)

class _Toucher:
    """A thread that touches a batch's leases while the batch is being handled."""

    def __init__(self, consumer: Consumer, lease_ms: int | None) -> None:
        self._consumer = consumer
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if lease_ms:
            interval = lease_ms / 1000.0 / LEASE_TOUCH_FRACTION
            self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
            self._thread.start()

    def _run(self, interval: float) -> None:
        group, book = self._consumer.group, self._consumer._book
        while not self._done.wait(interval):
            for key, delivery in list(book.open.items()):
                try:
                    group.touch(delivery)
                except NotOwned:
                    book.touch_refused(key)
                except MailroomError:
                    pass  # unreachable for now: the next round tries again

    def finish(self) -> None:
        """Stops touching (the batch's acks go out with the next poll)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
