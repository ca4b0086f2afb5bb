"""The consumer loop over the consume stream: ``group.consume(stream=True)``.

    consumer = client.group("orders", "billing").consume(stream=True, window=16, consumer="w1")
    consumer.run(handle)        # ack on return, nack with the exception as reason on raise

It behaves as :class:`mailroom.consumer.Consumer` does, over one WebSocket instead of
long polls: a delivery whose loop body finishes is acked on the socket at once (the
server settles what arrives together in one write); ``run(handler)`` or ``fail`` nack
with the exception as the reason; a thread touches the leases of every delivery received
and not settled (every third of the group's ``lease_ms``) while the body runs.

The window: ``window``, or else the smaller of ``batch`` and the group's
``max_in_flight``.

Restarts: when the connection breaks (a server killed and started again, say) the loop
opens the stream again with a doubling pause, as the same consumer (the identity the
server made up the first time, if none was given). The server hands that consumer its
deliveries still in flight first, with the same attempts; acks and nacks that got no
answer are sent again (an ack that had applied is answered ``not_owned``, counted in
``stats.ack_refused``), and a delivery they settle is not handed to the body twice.

Leaving: :meth:`StreamConsumer.stop` ends the loop after the current delivery; the
answers owed are awaited, the stream is closed, and the deliveries received but not
handled are released (handed back, not failures). As with the polling loop, an exception
escaping the ``for`` body inside ``with`` nacks that delivery with it as the reason.
A delivery the server had sent but the loop had not read by then stays in flight until
its lease runs out or the same consumer comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ._loop import LEASE_TOUCH_FRACTION, LEAVING_TRIES_MAX, ConsumerStats, reason_of
from ._shells import SyncShell
from ._stream_book import StreamBook, window_for
from .consume_stream import ConsumeStream, Settlement
from .errors import MailroomError, StreamClosed
from .models import Delivery, ItemResult

if TYPE_CHECKING:
    from .client import Group


class StreamConsumer(SyncShell[StreamBook]):
    """An iterator of deliveries over the consume stream (see the module doc)."""

    def __init__(
        self,
        group: Group,
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
        self._stream: ConsumeStream | None = None
        self._open = False

    def stop(self) -> None:
        """Ends the loop after the current delivery (thread-safe)."""
        self._stop.set()
        if self._stream is not None:
            self._stream.interrupt()

    def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        reason = reason_of(error)
        nack = self._book.failing(delivery, reason)
        if self._open and self._stream is not None:
            self._send(nack)
            return
        self._nack(delivery, reason, leaving=True)  # the stream is closed (leaving)

    def _loop(self) -> Iterator[Delivery]:
        info = self._retrying(self.group.info)
        window = window_for(self.window, self.batch, info)
        self._connect(window)
        toucher = _Toucher(self, info.lease_ms)
        try:
            while (delivery := self._next(window)) is not None:
                try:
                    yield delivery
                except GeneratorExit:
                    self._leave(window, self._book.unfailed(delivery))
                    raise
                ack = self._book.handled(delivery)
                if ack is not None:
                    self._send(ack)
        finally:
            toucher.finish()
        self._leave(window, None)

    def _next(self, window: int) -> Delivery | None:
        """The next delivery for the body; None once stopped. Reconnects as needed."""
        while True:
            stream = self._current()
            self._tally.count(stream.answers())
            if self._stop.is_set():
                return None
            delivery = stream.receive()
            if delivery is None:
                if self._stop.is_set():
                    return None
                self._reconnect(window)
            elif self._book.wanted(delivery):
                return delivery

    def _current(self) -> ConsumeStream:
        assert self._stream is not None, "the loop's stream is opened first"
        return self._stream

    def _connect(self, window: int, leaving: bool = False) -> None:
        group = self.group
        self._stream = self._retrying(
            lambda: group.consume_stream(window, consumer=self.consumer), leaving
        )
        self.consumer = self._stream.consumer
        self._open = True
        if self._stop.is_set():
            self._stream.interrupt()

    def _reconnect(self, window: int, leaving: bool = False) -> None:
        """Opens the stream again as the same consumer; sends the unanswered again."""
        old = self._current()
        self._open = False
        carried = self._book.reconnecting(old.answers(), old.pending())
        old.close()
        self._connect(window, leaving)
        for settlement in carried:
            self._send(settlement)

    def _send(self, settlement: Settlement) -> None:
        try:
            self._current().send(settlement)
        except StreamClosed:
            pass  # it stays unanswered: the next connection sends it again

    def _leave(self, window: int, current: Delivery | None) -> None:
        """Awaits the answers owed, closes, and releases what was not handled."""
        self._stop.set()
        for _ in range(LEAVING_TRIES_MAX):
            try:
                stream = self._current()
                self._tally.count(stream.flush(self.group.client.timeouts.request))
                break
            except StreamClosed:
                try:
                    self._reconnect(window, leaving=True)
                except MailroomError:
                    break  # unreachable: their leases hand them out again
            except TimeoutError:
                break
        stream = self._current()
        self._open = False
        release = self._book.leave(current, stream.buffered())
        stream.close()
        self._release(release)

class _Toucher:
    """A thread touching the leases of the deliveries received and not settled."""

    def __init__(self, consumer: StreamConsumer, lease_ms: int | None) -> None:
        self._consumer = consumer
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if lease_ms:
            interval = lease_ms / 1000.0 / LEASE_TOUCH_FRACTION
            self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
            self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._done.wait(interval):
            stream = self._consumer._stream
            if stream is None:
                continue
            for delivery in stream.unsettled():
                try:
                    stream.touch(delivery)
                except MailroomError:
                    break  # the stream broke: the loop reconnects, the next round touches

    def finish(self) -> None:
        """Stops touching."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
