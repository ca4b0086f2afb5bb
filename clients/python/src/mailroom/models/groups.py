"""Consumer groups: their views and counters, backoff, dead letters, seeks and pauses.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Union

from .decoding import _decode
from .deliveries import DeliveryRef


@dataclass
class InFlightDelivery:
    """A delivery in flight as a group's view lists it: who polled it, until when."""

    offset: int
    attempt: int
    consumer: str | None = None
    """The consumer that polled it, or ``None`` for the anonymous consumer."""
    lease_deadline_ms: int | None = None
    """When its lease runs out (Unix ms; may be past), or ``None`` without a lease."""

    def ref(self) -> DeliveryRef:
        """The ``(offset, attempt)`` that acks, nacks and touches name."""
        return DeliveryRef(self.offset, self.attempt)


@dataclass
class FixedBackoff:
    """The same delay after every failure."""

    delay_ms: int

    def encode(self) -> dict[str, Any]:
        """The wire form."""
        return {"kind": "fixed", "delay_ms": self.delay_ms}


@dataclass
class ExponentialBackoff:
    """A delay doubling from ``base_ms`` up to ``cap_ms``."""

    base_ms: int
    cap_ms: int

    def encode(self) -> dict[str, Any]:
        """The wire form."""
        return {"kind": "exponential", "base_ms": self.base_ms, "cap_ms": self.cap_ms}


Backoff = Union[FixedBackoff, ExponentialBackoff]


def decode_backoff(body: dict[str, Any] | None) -> Backoff | None:
    """A backoff from its wire form (``kind`` picks the class)."""
    if body is None:
        return None
    if body.get("kind") == "fixed":
        return FixedBackoff(body["delay_ms"])
    return ExponentialBackoff(body["base_ms"], body["cap_ms"])


@dataclass
class GroupCounters:
    """A group's event counters."""

    redeliveries: int = 0
    releases: int = 0
    expired_leases: int = 0
    redrives: int = 0
    purged: int = 0


@dataclass
class DeadLetterNote:
    """A dead letter without its payload: why and when it was given up on."""

    offset: int
    attempts: int
    at_ms: int = 0
    reason: str | None = None


@dataclass
class DeadLetter:
    """A message a group gave up on, with its payload."""

    offset: int
    attempts: int
    at_ms: int = 0
    payload: bytes = b""
    reason: str | None = None
    key: str | None = None
    headers: dict[str, str] | None = None
    published_at_ms: int | None = field(default=None, compare=False)


@dataclass
class DeadLetterPage:
    """One page of dead letters; ``next`` is the following page's ``from`` (or None)."""

    dead_letters: list[DeadLetter] = field(default_factory=list)
    next: int | None = None


@dataclass
class GroupInfo:
    """A group's state in short (as a topic's view lists it)."""

    name: str
    position: int
    attempt: int
    max_attempts: int
    lag: int
    dead_letters: int
    in_flight: DeliveryRef | None = None
    paused: bool = False
    paused_until_ms: int | None = None


@dataclass
class GroupDetail(GroupInfo):
    """A group's full view: state, settings, counters, deliveries in flight, dead letters."""

    lease_ms: int | None = None
    backoff: Backoff | None = None
    max_in_flight: int = 1
    counters: GroupCounters = field(default_factory=GroupCounters)
    deliveries: list[InFlightDelivery] = field(default_factory=list)
    dead_letter_notes: list[DeadLetterNote] = field(default_factory=list)

    @classmethod
    def decode(cls, body: dict[str, Any]) -> GroupDetail:
        """From the wire (the backoff's ``kind`` picks its class)."""
        plain = {key: value for key, value in body.items() if key != "backoff"}
        hints = typing.get_type_hints(cls)
        values = {
            item.name: _decode(hints[item.name], plain[item.name])
            for item in dataclasses.fields(cls)
            if item.name in plain
        }
        return cls(**values, backoff=decode_backoff(body.get("backoff")))


@dataclass
class GroupSeeked:
    """The answer to a seek: the group's new position (the next message it delivers)."""

    topic: str
    group: str
    position: int


@dataclass
class GroupPause:
    """The answer to a pause or resume: the pause as it now stands.

    ``changed`` is whether a resume ended a pause (a pause always sets it).
    """

    topic: str
    group: str
    paused: bool
    changed: bool
    paused_until_ms: int | None = None
