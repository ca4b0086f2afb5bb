"""What the sync and asyncio consumer loops share: their counters, their retry policy and
the decisions they make without I/O (:class:`Book`); each loop is a thin shell that does
the I/O (threads and blocking calls, or tasks and awaits) around them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import MailroomError, ServerError, TooManyRequests, TransportError
from .models import Delivery, ItemResult

RETRY_FIRST_S = 0.05
"""The first pause before a call is tried again after the server was unreachable."""

LEASE_TOUCH_FRACTION = 3
"""Leases are touched every ``lease_ms / LEASE_TOUCH_FRACTION`` while a batch is handled."""


@dataclass
class ConsumerStats:
    """What a consumer loop did so far."""

    acked: int = 0
    """Acks the server confirmed."""
    ack_refused: int = 0
    """Acks answered ``not_owned`` (the lease ran out, or a retried ack had been applied)."""
    failed: int = 0
    """Deliveries nacked because the handler failed."""
    released: int = 0
    """Deliveries handed back unhandled (the loop was left early)."""
    reconnects: int = 0
    """Calls tried again because the server was unreachable or overloaded."""


def retryable(error: MailroomError) -> bool:
    """Whether a call that failed this way is worth trying again after a pause."""
    return isinstance(error, (TransportError, ServerError, TooManyRequests))


def count_acks(
    stats: ConsumerStats,
    results: list[ItemResult] | None,
    on_result: Callable[[ItemResult], None] | None,
) -> None:
    """Counts the results of acks sent with a poll (or in an ack batch)."""
    for result in results or []:
        if result.outcome == "acked":
            stats.acked += 1
        else:
            stats.ack_refused += 1
        if on_result is not None:
            on_result(result)


def failure_reason(error: BaseException) -> str:
    """The nack reason for a handler's exception (the server caps reasons' length)."""
    text = f"{type(error).__name__}: {error}"
    return text[:1024]


LEAVING_TRIES_MAX = 8
"""How often a call is tried on the way out (last acks, releases) before the loop gives
up on it: the leases hand those deliveries out again anyway."""


class Retry:
    """The pauses between the tries of one call while the server is unreachable: a
    doubling pause up to ``retry_max_s``, and on the way out (``leaving``) only
    :data:`LEAVING_TRIES_MAX` tries. The loops do the waiting; this decides how long."""

    def __init__(self, stats: ConsumerStats, retry_max_s: float, leaving: bool) -> None:
        self.stats = stats
        self.retry_max_s = retry_max_s
        self.leaving = leaving
        self.tries = 0
        self.pause = RETRY_FIRST_S

    def after(self, error: MailroomError) -> float | None:
        """The pause before the next try after ``error``, or None to give up (raise it)."""
        self.tries += 1
        if not retryable(error) or (self.leaving and self.tries > LEAVING_TRIES_MAX):
            return None
        self.stats.reconnects += 1
        pause, self.pause = self.pause, min(self.pause * 2, self.retry_max_s)
        return pause

    def stops(self, stop_set: bool) -> bool:
        """Whether a stop seen during the pause ends the loop (not on the way out)."""
        return stop_set and not self.leaving


class Book:
    """What both consumer loops decide without I/O, whatever they consume over: the nack
    reason and count of a failed delivery, and which deliveries are nacked or released
    when the loop is left."""

    def __init__(self, stats: ConsumerStats) -> None:
        self.stats = stats
        self.in_context = False
        """Inside ``with``: leaving the loop hands its unhandled deliveries to ``__exit__``."""
        self.left: list[Delivery] = []

    def nacked(self, refused: bool) -> None:
        """Counts a handler failure's nack (``refused``: answered ``not_owned``)."""
        if refused:
            self.stats.ack_refused += 1
        else:
            self.stats.failed += 1

    def released(self, count: int) -> None:
        """Counts deliveries handed back unhandled."""
        self.stats.released += count

    def leaving(self, left: list[Delivery], keep: bool) -> list[Delivery]:
        """The deliveries to release now of those ``left`` unhandled; inside ``with``
        (and ``keep``) none: ``__exit__`` knows whether an exception ended the loop."""
        if self.in_context and keep:
            self.left = left
            return []
        return left

    def exiting(self, error: BaseException | None) -> tuple[Delivery | None, list[Delivery]]:
        """At ``__exit__``: the delivery to nack with ``error`` (the one whose body raised
        it), and the others to release."""
        left, self.left = self.left, []
        if left and error is not None and not isinstance(error, GeneratorExit):
            return left[0], left[1:]
        return None, left


def reason_of(error: BaseException | str) -> str:
    """The nack reason ``fail`` sends: a string as it is, an exception described."""
    return error if isinstance(error, str) else failure_reason(error)
