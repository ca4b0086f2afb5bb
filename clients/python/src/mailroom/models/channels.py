"""Live channels: their views, a publish's answer, and stream tickets.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ChannelInfo:
    """A live channel's settings and counters."""

    name: str
    max_subscribers: int
    mailbox_capacity: int
    subscribers: int = 0
    published: int = 0
    delivered: int = 0
    dropped: int = 0
    mailbox_bytes: int = 0


@dataclass
class ChannelDelivery:
    """What one channel publish did: mailboxes that took it and ones that were full."""

    delivered: int
    dropped: int


@dataclass
class Ticket:
    """A one-use ticket that opens one stream under ``path`` (for browsers' streams)."""

    ticket: str
    path: str
    expires_in_ms: int
