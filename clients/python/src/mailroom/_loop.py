"""What the sync and asyncio consumer loops share: their counters and retry policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import MailroomError, ServerError, TooManyRequests, TransportError
from .models import ItemResult

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
