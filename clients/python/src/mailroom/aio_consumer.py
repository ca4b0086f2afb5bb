"""The asyncio consumer loop: ``async for delivery in group.consume(batch=64): ...``.

It works as :mod:`mailroom.consumer` does: acks ride on the next poll, leases are touched
by a task while a batch is handled, ``consumer.run(handler)`` (or ``consumer.fail``) nacks
with the exception as the reason, leaving the loop early inside ``async with`` nacks that
delivery with the exception and releases the rest, and calls to an unreachable server are
tried again with a doubling pause so the loop resumes after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._loop import LEASE_TOUCH_FRACTION, ConsumerStats, reason_of
from ._poll_book import PollBook
from ._shells import AsyncShell, Stopped
from .errors import MailroomError, NotOwned
from .models import Delivery, DeliveryRef, ItemResult

if TYPE_CHECKING:
    from .aio import AsyncGroup


class AsyncConsumer(AsyncShell[PollBook]):
    """An async iterator of deliveries that acks, nacks and keeps leases."""

    def __init__(
        self,
        group: AsyncGroup,
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
        """Ends the loop after the current batch; its acks are still sent."""
        self._stop.set()

    async def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` now with ``error`` as the reason (it is not acked later)."""
        self._book.failing(delivery)
        await self._nack(delivery, reason_of(error), leaving=False)

    async def _iterate(self) -> AsyncGenerator[Delivery, None]:
        book = self._book
        try:
            lease_ms = await self._retrying(self._lease_ms)
            while not self._stop.is_set():
                deliveries = book.received(await self._retrying(self._poller(book.poll_acks())))
                toucher = asyncio.ensure_future(self._touch(lease_ms)) if lease_ms else None
                try:
                    for index, delivery in enumerate(deliveries):
                        try:
                            yield delivery
                        except GeneratorExit:
                            await self._leave(deliveries[index:])
                            raise
                        book.handled(delivery)
                finally:
                    if toucher is not None:
                        toucher.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await toucher
                book.batch_done()
            await self._send_acks(book.owed())
        except Stopped:
            return

    async def _lease_ms(self) -> int | None:
        return (await self.group.info()).lease_ms

    def _poller(self, acks: list[DeliveryRef] | None) -> Callable[[], Awaitable[Any]]:
        return lambda: self.group.poll_batch(
            self.batch, consumer=self.consumer, wait_ms=self.wait_ms, ack=acks
        )

    async def _touch(self, lease_ms: int) -> None:
        interval = lease_ms / 1000.0 / LEASE_TOUCH_FRACTION
        while True:
            await asyncio.sleep(interval)
            for key, delivery in list(self._book.open.items()):
                try:
                    await self.group.touch(delivery)
                except NotOwned:
                    self._book.touch_refused(key)
                except MailroomError:
                    pass  # unreachable for now: the next round tries again

    async def _leave(self, unhandled: list[Delivery]) -> None:
        self._stop.set()
        acks, release = self._book.leave(unhandled)
        await self._send_acks(acks)
        await self._release(release)

    async def _send_acks(self, acks: list[DeliveryRef]) -> None:
        if not acks:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            results = await self._retrying(
                lambda: client.ack_batch(topic, name, acks), leaving=True
            )
        except MailroomError:
            return
        self._book.acks_answered(results)

