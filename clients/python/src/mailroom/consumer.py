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
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._loop import (
    LEASE_TOUCH_FRACTION,
    RETRY_FIRST_S,
    ConsumerStats,
    count_acks,
    failure_reason,
    retryable,
)
from .errors import MailroomError, NotOwned
from .models import Delivery, DeliveryRef, ItemResult

if TYPE_CHECKING:
    from .client import Group

T = TypeVar("T")


class _Stopped(Exception):
    """Raised inside the loop once :meth:`Consumer.stop` was called while retrying."""


class Consumer:
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
        self.group = group
        self.batch = batch
        self.consumer = consumer
        self.wait_ms = wait_ms
        self.retry_max_s = retry_max_s
        self.on_result = on_result
        self.stats = ConsumerStats()
        self._stop = threading.Event()
        self._in_context = False
        self._settled: set[tuple[int, int]] = set()
        self._open: dict[tuple[int, int], Delivery] = {}
        self._left: list[Delivery] = []
        self._gen: Generator[Delivery, None, None] | None = None

    def stop(self) -> None:
        """Ends the loop after the current batch (thread-safe); its acks are still sent."""
        self._stop.set()

    def __enter__(self) -> Consumer:
        self._in_context = True
        return self

    def __exit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
            self._gen.close()  # settles now what a `break` or an exception left behind
        left, self._left = self._left, []
        if left and error is not None and not isinstance(error, GeneratorExit):
            self.fail(left.pop(0), error)
        self._release(left)

    def run(self, handler: Callable[[Delivery], Any]) -> None:
        """Calls ``handler`` on every delivery until :meth:`stop`: ack on return, nack on raise."""
        for delivery in self:
            try:
                handler(delivery)
            except Exception as error:  # noqa: BLE001 - any failure of the handler is a nack
                self.fail(delivery, error)

    def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` now with ``error`` as the reason (it is not acked later)."""
        reason = error if isinstance(error, str) else failure_reason(error)
        self._settle(delivery)
        try:
            self._retrying(lambda: self.group.nack(delivery, reason=reason))
            self.stats.failed += 1
        except NotOwned:
            self.stats.ack_refused += 1

    def __iter__(self) -> Iterator[Delivery]:
        self._gen = self._iterate()
        return self._gen

    def _iterate(self) -> Generator[Delivery, None, None]:
        try:
            yield from self._loop()
        except _Stopped:
            return

    def _loop(self) -> Iterator[Delivery]:
        lease_ms = self._retrying(lambda: self.group.info().lease_ms)
        acks: list[DeliveryRef] = []
        while not self._stop.is_set():
            sent = acks
            batch = self._retrying(
                lambda: self.group.poll_batch(
                    self.batch, consumer=self.consumer, wait_ms=self.wait_ms, ack=sent or None
                )
            )
            count_acks(self.stats, batch.acked, self.on_result)
            acks = []
            self._open = {(d.offset, d.attempt): d for d in batch.deliveries}
            toucher = _Toucher(self, lease_ms)
            try:
                for index, delivery in enumerate(batch.deliveries):
                    try:
                        yield delivery
                    except GeneratorExit:
                        self._leave(batch.deliveries[index:], acks)
                        raise
                    if (delivery.offset, delivery.attempt) not in self._settled:
                        acks.append(delivery.ref())
            finally:
                toucher.finish()
            self._settled.clear()
        self._send_acks(acks)

    def _leave(self, unhandled: list[Delivery], acks: list[DeliveryRef]) -> None:
        """The loop was left early: send the acks owed, then settle what is unhandled."""
        self._stop.set()
        self._send_acks(acks)
        left = [d for d in unhandled if (d.offset, d.attempt) not in self._settled]
        if self._in_context:
            self._left = left  # __exit__ knows whether an exception ended the loop
        else:
            self._release(left)

    def _send_acks(self, acks: list[DeliveryRef]) -> None:
        if not acks:
            return
        try:
            results = self._retrying(lambda: self.group.client.ack_batch(
                self.group.topic, self.group.name, acks), ignore_stop=True)
        except MailroomError:
            return
        count_acks(self.stats, results, self.on_result)

    def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        try:
            self._retrying(
                lambda: self.group.client.nack_batch(
                    self.group.topic, self.group.name, deliveries, kind="release"
                ),
                ignore_stop=True,
            )
            self.stats.released += len(deliveries)
        except MailroomError:
            pass  # their leases (or a later poll by this consumer) hand them out again

    def _settle(self, delivery: Delivery) -> None:
        key = (delivery.offset, delivery.attempt)
        self._settled.add(key)
        self._open.pop(key, None)

    def _retrying(self, call: Callable[[], T], ignore_stop: bool = False) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        pause = RETRY_FIRST_S
        attempts = 0
        while True:
            try:
                return call()
            except MailroomError as error:
                if not retryable(error):
                    raise
                attempts += 1
                # On the way out give up after a few tries: the leases hand them back.
                if ignore_stop and attempts > 8:
                    raise
                self.stats.reconnects += 1
                if self._stop.wait(pause) and not ignore_stop:
                    raise _Stopped() from error
                pause = min(pause * 2, self.retry_max_s)


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
        group = self._consumer.group
        while not self._done.wait(interval):
            for key, delivery in list(self._consumer._open.items()):
                try:
                    group.touch(delivery)
                except NotOwned:
                    self._consumer._open.pop(key, None)
                except MailroomError:
                    pass  # unreachable for now: the next round tries again

    def finish(self) -> None:
        """Stops touching (the batch's acks go out with the next poll)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
