"""Topics: their views, retention and idempotency window, health, recovery and repair.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .groups import GroupInfo


@dataclass
class RetentionInForce:
    """The retention in force for a topic: ``None`` is unlimited."""

    keep_unconsumed: bool = True
    max_age_ms: int | None = None
    max_bytes: int | None = None
    max_messages: int | None = None


@dataclass
class RetentionRemoved:
    """What retention removed from a topic since the server started."""

    messages: int = 0
    bytes: int = 0
    segments: int = 0


UNSET: Any = object()
"""Leaves a retention limit as it is (absent on the wire); ``None`` means unlimited."""


@dataclass
class Retention:
    """A topic's own retention limits as sent: each is UNSET (absent), None or a number."""

    max_age_ms: int | None = UNSET
    max_bytes: int | None = UNSET
    max_messages: int | None = UNSET
    keep_unconsumed: bool | None = UNSET

    def encode(self) -> dict[str, Any]:
        """The wire form: only the limits that were set."""
        return {
            item.name: getattr(self, item.name)
            for item in dataclasses.fields(self)
            if getattr(self, item.name) is not UNSET
        }


@dataclass
class IdempotencyWindow:
    """A topic's idempotency window: a repeated key among the last ``window_messages``
    messages published within ``window_ms`` answers the first offset. Sent at creation,
    ``None`` follows the server's default; in a topic's view both are in force."""

    window_messages: int | None = None
    window_ms: int | None = None

    def encode(self) -> dict[str, Any]:
        """The wire form: only the limits that were set."""
        return {
            item.name: getattr(self, item.name)
            for item in dataclasses.fields(self)
            if getattr(self, item.name) is not None
        }


@dataclass
class TopicSummary:
    """One topic in the topic list."""

    name: str
    start: int
    end: int
    groups: list[str] = field(default_factory=list)
    bytes: int | None = None
    retention: RetentionInForce | None = None
    removed: RetentionRemoved | None = None
    state: str = "ok"
    """``ok`` while the topic serves, ``failed`` while it cannot (see ``failure``)."""
    failure: str | None = None
    failure_kind: str | None = None
    """``damaged`` (repair it), ``unreadable`` or ``stopped`` (recover it)."""


@dataclass
class TopicInfo:
    """A topic's view: its offsets, groups, retention and disk use."""

    name: str
    start: int
    end: int
    groups: list[GroupInfo] = field(default_factory=list)
    bytes: int | None = None
    retention: RetentionInForce | None = None
    removed: RetentionRemoved | None = None
    idempotency: IdempotencyWindow | None = None
    """The idempotency window in force (the topic's own over the server's defaults)."""
    state: str = "ok"
    """``ok`` while the topic serves, ``failed`` while it cannot (see ``failure``)."""
    failure: str | None = None
    failure_kind: str | None = None
    """``damaged`` (repair it), ``unreadable`` or ``stopped`` (recover it)."""


@dataclass
class FailedTopic:
    """One failed topic in a degraded ``/healthz``."""

    topic: str
    kind: str
    reason: str


@dataclass
class Health:
    """``/healthz``: ``ok``; ``degraded`` with the failed topics; ``unhealthy`` with a reason."""

    status: str
    reason: str | None = None
    failed_topics: list[FailedTopic] | None = None


@dataclass
class TopicRecovered:
    """The answer to a recover: ``recovered`` is whether the topic was failed."""

    topic: str
    recovered: bool


@dataclass
class TopicRepairReport:
    """The answer to a repair: whether it was damaged, the damage, and what was moved."""

    topic: str
    repaired: bool
    damage: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
