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
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._loop import LEASE_TOUCH_FRACTION, RETRY_FIRST_S, ConsumerStats, failure_reason, retryable
from .consume_stream import CONSUME_STREAM_WINDOW_MAX, ConsumeStream, Key, Settlement
from .errors import MailroomError, NotOwned, StreamClosed
from .models import Delivery, GroupDetail, ItemResult, Settled

if TYPE_CHECKING:
    from .client import Group

T = TypeVar("T")

LEAVING_TRIES_MAX = 8
"""How often settling the last answers or releasing is tried on the way out."""


class _Stopped(Exception):
    """Raised inside the loop once ``stop`` was called while retrying."""


def window_for(window: int | None, batch: int, group: GroupDetail) -> int:
    """The window a loop opens its stream with."""
    if window is not None:
        return window
    return max(1, min(batch, group.max_in_flight, CONSUME_STREAM_WINDOW_MAX))


class Tally:
    """What both stream loops keep: answers counted into the stats, and the deliveries
    whose settlement is being sent again after a reconnect."""

    def __init__(self, stats: ConsumerStats, on_result: Callable[[ItemResult], None] | None):
        self.stats = stats
        self.on_result = on_result
        self.redo: set[Key] = set()

    def count(self, answers: list[Settled]) -> None:
        """Counts the answers to acks and nacks (touches' answers change nothing)."""
        for answer in answers:
            if answer.op == "touch" or answer.offset is None or answer.attempt is None:
                continue
            self.redo.discard((answer.offset, answer.attempt))
            if answer.op == "ack":
                if answer.outcome == "acked":
                    self.stats.acked += 1
                else:
                    self.stats.ack_refused += 1
                if self.on_result is not None:
                    result = ItemResult(answer.offset, answer.attempt, answer.outcome, answer.error)
                    self.on_result(result)
            elif answer.error is not None:
                self.stats.ack_refused += 1
            elif answer.outcome == "released":
                self.stats.released += 1
            else:
                self.stats.failed += 1

    def carried(self, pending: list[Settlement]) -> list[Settlement]:
        """The settlements of a broken stream to send again (touches are not)."""
        kept = [
            Settlement(s.op, s.offset, s.attempt, s.kind, s.reason, s.delay_ms)
            for s in pending
            if s.op != "touch"
        ]
        self.redo.update(s.key for s in kept)
        return kept

    def unhandled(self, deliveries: list[Delivery]) -> list[Delivery]:
        """The deliveries among ``deliveries`` no settlement of the loop covers."""
        return [d for d in deliveries if (d.offset, d.attempt) not in self.redo]


class StreamConsumer:
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
        self.group = group
        self.window = window
        self.batch = batch
        self.consumer = consumer
        """The consumer identity (the server's, once the first stream opened, if None)."""
        self.retry_max_s = retry_max_s
        self.stats = ConsumerStats()
        self._tally = Tally(self.stats, on_result)
        self._stop = threading.Event()
        self._stream: ConsumeStream | None = None
        self._open = False
        self._failed: set[Key] = set()
        self._in_context = False
        self._left: list[Delivery] = []
        self._gen: Generator[Delivery, None, None] | None = None

    def stop(self) -> None:
        """Ends the loop after the current delivery (thread-safe)."""
        self._stop.set()
        if self._stream is not None:
            self._stream.interrupt()

    def __enter__(self) -> StreamConsumer:
        self._in_context = True
        return self

    def __exit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
            self._gen.close()
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
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        reason = error if isinstance(error, str) else failure_reason(error)
        self._failed.add((delivery.offset, delivery.attempt))
        if self._open and self._stream is not None:
            self._send(Settlement("nack", delivery.offset, delivery.attempt, reason=reason))
            return
        try:  # the stream is closed (leaving): over HTTP
            self._retrying(lambda: self.group.nack(delivery, reason=reason), leaving=True)
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
        info = self._retrying(self.group.info)
        window = window_for(self.window, self.batch, info)
        self._connect(window)
        toucher = _Toucher(self, info.lease_ms)
        try:
            while (delivery := self._next(window)) is not None:
                key = (delivery.offset, delivery.attempt)
                try:
                    yield delivery
                except GeneratorExit:
                    self._leave(window, None if key in self._failed else delivery)
                    raise
                if key in self._failed:
                    self._failed.discard(key)
                else:
                    self._send(Settlement("ack", delivery.offset, delivery.attempt))
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
            elif (delivery.offset, delivery.attempt) not in self._tally.redo:
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
        self._tally.count(old.answers())
        carried = self._tally.carried(old.pending())
        old.close()
        self.stats.reconnects += 1
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
        left = ([current] if current is not None else []) + self._tally.unhandled(stream.buffered())
        stream.close()
        if self._in_context and current is not None:
            self._left = left  # __exit__ knows whether an exception ended the loop
        else:
            self._release(left)

    def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            self._retrying(
                lambda: client.nack_batch(topic, name, deliveries, kind="release"), leaving=True
            )
            self.stats.released += len(deliveries)
        except MailroomError:
            pass  # their leases (or this consumer's next stream) hand them out again

    def _retrying(self, call: Callable[[], T], leaving: bool = False) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        pause = RETRY_FIRST_S
        tries = 0
        while True:
            try:
                return call()
            except MailroomError as error:
                tries += 1
                if not retryable(error) or (leaving and tries > LEAVING_TRIES_MAX):
                    raise
                self.stats.reconnects += 1
                if self._stop.wait(pause) and not leaving:
                    raise _Stopped() from error
                pause = min(pause * 2, self.retry_max_s)


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
