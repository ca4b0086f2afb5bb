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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
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
    from .aio import AsyncGroup

T = TypeVar("T")


class _Stopped(Exception):
    """Raised inside the loop once :meth:`AsyncConsumer.stop` was called while retrying."""


class AsyncConsumer:
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
        self.group = group
        self.batch = batch
        self.consumer = consumer
        self.wait_ms = wait_ms
        self.retry_max_s = retry_max_s
        self.on_result = on_result
        self.stats = ConsumerStats()
        self._stop = asyncio.Event()
        self._in_context = False
        self._settled: set[tuple[int, int]] = set()
        self._open: dict[tuple[int, int], Delivery] = {}
        self._left: list[Delivery] = []
        self._gen: AsyncGenerator[Delivery, None] | None = None

    def stop(self) -> None:
        """Ends the loop after the current batch; its acks are still sent."""
        self._stop.set()

    async def __aenter__(self) -> AsyncConsumer:
        self._in_context = True
        return self

    async def __aexit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
            # An exception that left `async for` has not closed the generator yet.
            await self._gen.aclose()
        left, self._left = self._left, []
        if left and error is not None and not isinstance(error, GeneratorExit):
            await self.fail(left.pop(0), error)
        await self._release(left)

    async def run(self, handler: Callable[[Delivery], Awaitable[Any]]) -> None:
        """Awaits ``handler`` on every delivery until :meth:`stop`: ack on return, nack on raise."""
        async for delivery in self:
            try:
                await handler(delivery)
            except Exception as error:  # noqa: BLE001 - any failure of the handler is a nack
                await self.fail(delivery, error)

    async def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` now with ``error`` as the reason (it is not acked later)."""
        reason = error if isinstance(error, str) else failure_reason(error)
        key = (delivery.offset, delivery.attempt)
        self._settled.add(key)
        self._open.pop(key, None)
        try:
            await self._retrying(lambda: self.group.nack(delivery, reason=reason))
            self.stats.failed += 1
        except NotOwned:
            self.stats.ack_refused += 1

    def __aiter__(self) -> AsyncIterator[Delivery]:
        self._gen = self._iterate()
        return self._gen

    async def _iterate(self) -> AsyncGenerator[Delivery, None]:
        try:
            lease_ms = await self._retrying(self._lease_ms)
            acks: list[DeliveryRef] = []
            while not self._stop.is_set():
                batch = await self._retrying(self._poller(acks))
                count_acks(self.stats, batch.acked, self.on_result)
                acks = []
                self._open = {(d.offset, d.attempt): d for d in batch.deliveries}
                toucher = asyncio.ensure_future(self._touch(lease_ms)) if lease_ms else None
                try:
                    for index, delivery in enumerate(batch.deliveries):
                        try:
                            yield delivery
                        except GeneratorExit:
                            await self._leave(batch.deliveries[index:], acks)
                            raise
                        if (delivery.offset, delivery.attempt) not in self._settled:
                            acks.append(delivery.ref())
                finally:
                    if toucher is not None:
                        toucher.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await toucher
                self._settled.clear()
            await self._send_acks(acks)
        except _Stopped:
            return

    async def _lease_ms(self) -> int | None:
        return (await self.group.info()).lease_ms

    def _poller(self, acks: list[DeliveryRef]) -> Callable[[], Awaitable[Any]]:
        return lambda: self.group.poll_batch(
            self.batch, consumer=self.consumer, wait_ms=self.wait_ms, ack=acks or None
        )

    async def _touch(self, lease_ms: int) -> None:
        interval = lease_ms / 1000.0 / LEASE_TOUCH_FRACTION
        while True:
            await asyncio.sleep(interval)
            for key, delivery in list(self._open.items()):
                try:
                    await self.group.touch(delivery)
                except NotOwned:
                    self._open.pop(key, None)
                except MailroomError:
                    pass  # unreachable for now: the next round tries again

    async def _leave(self, unhandled: list[Delivery], acks: list[DeliveryRef]) -> None:
        self._stop.set()
        await self._send_acks(acks)
        left = [d for d in unhandled if (d.offset, d.attempt) not in self._settled]
        if self._in_context:
            self._left = left
        else:
            await self._release(left)

    async def _send_acks(self, acks: list[DeliveryRef]) -> None:
        if not acks:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            results = await self._retrying(
                lambda: client.ack_batch(topic, name, acks), ignore_stop=True
            )
        except MailroomError:
            return
        count_acks(self.stats, results, self.on_result)

    async def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            await self._retrying(
                lambda: client.nack_batch(topic, name, deliveries, kind="release"),
                ignore_stop=True,
            )
            self.stats.released += len(deliveries)
        except MailroomError:
            pass  # their leases (or a later poll by this consumer) hand them out again

    async def _retrying(
        self, call: Callable[[], Awaitable[T]], ignore_stop: bool = False
    ) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        pause = RETRY_FIRST_S
        attempts = 0
        while True:
            try:
                return await call()
            except MailroomError as error:
                if not retryable(error):
                    raise
                attempts += 1
                if ignore_stop and attempts > 8:
                    raise
                self.stats.reconnects += 1
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), pause)
                if self._stop.is_set() and not ignore_stop:
                    raise _Stopped() from error
                pause = min(pause * 2, self.retry_max_s)
