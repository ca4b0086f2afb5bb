"""The asyncio consumer loop over the consume stream: ``group.consume(stream=True)``.

    consumer = client.group("orders", "billing").consume(stream=True, window=16)
    await consumer.run(handle)    # ack on return, nack with the exception as reason on raise

It works as :mod:`mailroom.stream_consumer` does (acks on the socket once the body
finishes, a task touching the leases of every delivery received and not settled,
reconnecting as the same consumer after a restart and sending the unanswered
settlements again, releasing what it leaves unhandled).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._loop import LEASE_TOUCH_FRACTION, RETRY_FIRST_S, ConsumerStats, failure_reason, retryable
from .aio_consume_stream import AsyncConsumeStream
from .consume_stream import Key, Settlement
from .errors import MailroomError, NotOwned, StreamClosed
from .models import Delivery, ItemResult
from .stream_consumer import LEAVING_TRIES_MAX, Tally, window_for

if TYPE_CHECKING:
    from .aio import AsyncGroup

T = TypeVar("T")


class _Stopped(Exception):
    """Raised inside the loop once ``stop`` was called while retrying."""


class AsyncStreamConsumer:
    """An async iterator of deliveries over the consume stream."""

    def __init__(
        self,
        group: AsyncGroup,
        window: int | None,
        batch: int,
        consumer: str | None,
        retry_max_s: float,
        on_result: Callable[[ItemResult], None] | None = None,
    ) -> None:
        self.group = group
        self.window = window
        self.batch = batch
        self.consumer = consumer
        """The consumer identity (the server's, once the first stream opened, if None)."""
        self.retry_max_s = retry_max_s
        self.stats = ConsumerStats()
        self._tally = Tally(self.stats, on_result)
        self._stop = asyncio.Event()
        self._stream: AsyncConsumeStream | None = None
        self._open = False
        self._failed: set[Key] = set()
        self._in_context = False
        self._left: list[Delivery] = []
        self._gen: AsyncGenerator[Delivery, None] | None = None

    def stop(self) -> None:
        """Ends the loop after the current delivery."""
        self._stop.set()
        if self._stream is not None:
            self._stream.interrupt()

    async def __aenter__(self) -> AsyncStreamConsumer:
        self._in_context = True
        return self

    async def __aexit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
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
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        reason = error if isinstance(error, str) else failure_reason(error)
        self._failed.add((delivery.offset, delivery.attempt))
        if self._open and self._stream is not None:
            await self._send(Settlement("nack", delivery.offset, delivery.attempt, reason=reason))
            return
        try:  # the stream is closed (leaving): over HTTP
            await self._retrying(lambda: self.group.nack(delivery, reason=reason), leaving=True)
            self.stats.failed += 1
        except NotOwned:
            self.stats.ack_refused += 1

    def __aiter__(self) -> AsyncIterator[Delivery]:
        self._gen = self._iterate()
        return self._gen

    async def _iterate(self) -> AsyncGenerator[Delivery, None]:
        try:
            info = await self._retrying(self.group.info)
            window = window_for(self.window, self.batch, info)
            await self._connect(window)
            lease_ms = info.lease_ms
            toucher = asyncio.ensure_future(self._touch(lease_ms)) if lease_ms else None
            try:
                while (delivery := await self._next(window)) is not None:
                    key = (delivery.offset, delivery.attempt)
                    try:
                        yield delivery
                    except GeneratorExit:
                        await self._leave(window, None if key in self._failed else delivery)
                        raise
                    if key in self._failed:
                        self._failed.discard(key)
                    else:
                        await self._send(Settlement("ack", delivery.offset, delivery.attempt))
            finally:
                if toucher is not None:
                    toucher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await toucher
            await self._leave(window, None)
        except _Stopped:
            return

    async def _next(self, window: int) -> Delivery | None:
        while True:
            stream = self._current()
            self._tally.count(stream.answers())
            if self._stop.is_set():
                return None
            delivery = await stream.receive()
            if delivery is None:
                if self._stop.is_set():
                    return None
                await self._reconnect(window)
            elif (delivery.offset, delivery.attempt) not in self._tally.redo:
                return delivery

    def _current(self) -> AsyncConsumeStream:
        assert self._stream is not None, "the loop's stream is opened first"
        return self._stream

    async def _connect(self, window: int, leaving: bool = False) -> None:
        group = self.group
        self._stream = await self._retrying(
            lambda: group.consume_stream(window, consumer=self.consumer), leaving
        )
        self.consumer = self._stream.consumer
        self._open = True
        if self._stop.is_set():
            self._stream.interrupt()

    async def _reconnect(self, window: int, leaving: bool = False) -> None:
        old = self._current()
        self._open = False
        self._tally.count(old.answers())
        carried = self._tally.carried(old.pending())
        await old.close()
        self.stats.reconnects += 1
        await self._connect(window, leaving)
        for settlement in carried:
            await self._send(settlement)

    async def _send(self, settlement: Settlement) -> None:
        try:
            await self._current().send(settlement)
        except StreamClosed:
            pass  # it stays unanswered: the next connection sends it again

    async def _touch(self, lease_ms: int) -> None:
        interval = lease_ms / 1000.0 / LEASE_TOUCH_FRACTION
        while True:
            await asyncio.sleep(interval)
            stream = self._stream
            if stream is None:
                continue
            for delivery in stream.unsettled():
                try:
                    await stream.touch(delivery)
                except MailroomError:
                    break  # the stream broke: the loop reconnects, the next round touches

    async def _leave(self, window: int, current: Delivery | None) -> None:
        """Awaits the answers owed, closes, and releases what was not handled."""
        self._stop.set()
        for _ in range(LEAVING_TRIES_MAX):
            try:
                stream = self._current()
                self._tally.count(await stream.flush(self.group.client.timeouts.request))
                break
            except StreamClosed:
                try:
                    await self._reconnect(window, leaving=True)
                except MailroomError:
                    break  # unreachable: their leases hand them out again
            except TimeoutError:
                break
        stream = self._current()
        self._open = False
        left = ([current] if current is not None else []) + self._tally.unhandled(stream.buffered())
        await stream.close()
        if self._in_context and current is not None:
            self._left = left
        else:
            await self._release(left)

    async def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            await self._retrying(
                lambda: client.nack_batch(topic, name, deliveries, kind="release"), leaving=True
            )
            self.stats.released += len(deliveries)
        except MailroomError:
            pass  # their leases (or this consumer's next stream) hand them out again

    async def _retrying(self, call: Callable[[], Awaitable[T]], leaving: bool = False) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        pause = RETRY_FIRST_S
        tries = 0
        while True:
            try:
                return await call()
            except MailroomError as error:
                tries += 1
                if not retryable(error) or (leaving and tries > LEAVING_TRIES_MAX):
                    raise
                self.stats.reconnects += 1
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), pause)
                if self._stop.is_set() and not leaving:
                    raise _Stopped() from error
                pause = min(pause * 2, self.retry_max_s)
