"""The decisions of the consume-stream loop, without I/O, for its sync and asyncio shells
(:mod:`mailroom.stream_consumer`, :mod:`mailroom.aio_stream_consumer`).

The loop acks on the socket each delivery whose body finished (unless it was failed),
counts the answers, and after a reconnect sends the unanswered acks and nacks again and
skips the deliveries they settle. This book holds that state: the shells ask it what to
send and tell it what arrived.
"""

from __future__ import annotations

from collections.abc import Callable

from ._loop import Book, ConsumerStats
from .consume_stream import CONSUME_STREAM_WINDOW_MAX, Key, Settlement
from .models import Delivery, GroupDetail, ItemResult, Settled


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


class StreamBook(Book):
    """The stream loop's state between its calls."""

    def __init__(
        self, stats: ConsumerStats, on_result: Callable[[ItemResult], None] | None
    ) -> None:
        super().__init__(stats)
        self.tally = Tally(stats, on_result)
        self.failed: set[Key] = set()
        """Deliveries the body failed: nacked, not to be acked when the body returns."""

    def failing(self, delivery: Delivery, reason: str) -> Settlement:
        """``delivery`` is nacked with ``reason``: the nack to send (on the socket, or
        over HTTP once the stream is closed)."""
        self.failed.add((delivery.offset, delivery.attempt))
        return Settlement("nack", delivery.offset, delivery.attempt, reason=reason)

    def wanted(self, delivery: Delivery) -> bool:
        """Whether a received delivery goes to the body: not when a settlement sent
        again after a reconnect covers it."""
        return (delivery.offset, delivery.attempt) not in self.tally.redo

    def handled(self, delivery: Delivery) -> Settlement | None:
        """The body finished with ``delivery``: its ack, or None when it was failed."""
        key = (delivery.offset, delivery.attempt)
        if key in self.failed:
            self.failed.discard(key)
            return None
        return Settlement("ack", delivery.offset, delivery.attempt)

    def unfailed(self, delivery: Delivery) -> Delivery | None:
        """The delivery the body was at when the loop was left, unless it was failed."""
        return None if (delivery.offset, delivery.attempt) in self.failed else delivery

    def reconnecting(self, answers: list[Settled], pending: list[Settlement]) -> list[Settlement]:
        """A broken stream's last answers and unanswered settlements: the settlements to
        send again on the next one."""
        self.tally.count(answers)
        carried = self.tally.carried(pending)
        self.stats.reconnects += 1
        return carried

    def leave(self, current: Delivery | None, buffered: list[Delivery]) -> list[Delivery]:
        """The stream is closed: of ``current`` (the body's, if the loop was left early)
        and the deliveries received but not handed out, those to release now."""
        left = ([current] if current is not None else []) + self.tally.unhandled(buffered)
        return self.leaving(left, keep=current is not None)
