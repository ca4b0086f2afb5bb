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
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING

from ._loop import LEASE_TOUCH_FRACTION, LEAVING_TRIES_MAX, ConsumerStats, reason_of
from ._shells import AsyncShell, Stopped
from ._stream_book import StreamBook, window_for
from .aio_consume_stream import AsyncConsumeStream
from .consume_stream import Settlement
from .errors import MailroomError, StreamClosed
from .models import Delivery, ItemResult

if TYPE_CHECKING:
    from .aio import AsyncGroup


class AsyncStreamConsumer(AsyncShell[StreamBook]):
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
        super().__init__(group, retry_max_s, StreamBook(ConsumerStats(), on_result))
        self.window = window
        self.batch = batch
        self.consumer = consumer
        """The consumer identity (the server's, once the first stream opened, if None)."""
        self._tally = self._book.tally
        self._stream: AsyncConsumeStream | None = None
        self._open = False

    def stop(self) -> None:
        """Ends the loop after the current delivery."""
        self._stop.set()
        if self._stream is not None:
            self._stream.interrupt()

    async def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        reason = reason_of(error)
        nack = self._book.failing(delivery, reason)
        if self._open and self._stream is not None:
            await self._send(nack)
            return
        await self._nack(delivery, reason, leaving=True)  # the stream is closed (leaving)

    async def _iterate(self) -> AsyncGenerator[Delivery, None]:
        try:
            info = await self._retrying(self.group.info)
            window = window_for(self.window, self.batch, info)
            await self._connect(window)
            lease_ms = info.lease_ms
            toucher = asyncio.ensure_future(self._touch(lease_ms)) if lease_ms else None
            try:
                while (delivery := await self._next(window)) is not None:
                    try:
                        yield delivery
                    except GeneratorExit:
                        await self._leave(window, self._book.unfailed(delivery))
                        raise
                    ack = self._book.handled(delivery)
                    if ack is not None:
                        await self._send(ack)
            finally:
                if toucher is not None:
                    toucher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await toucher
            await self._leave(window, None)
        except Stopped:
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
            elif self._book.wanted(delivery):
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
        carried = self._book.reconnecting(old.answers(), old.pending())
        await old.close()
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
        release = self._book.leave(current, stream.buffered())
        await stream.close()
        await self._release(release)

