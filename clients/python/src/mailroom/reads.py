"""Reading a topic's log without a group, and seeking a group by publish time.

``GET /v1/topics/{topic}/messages`` changes nothing on the server: no group moves. A page
starts at ``from_offset`` (or at the first message published at or after
``from_time_ms``); below the retained start it starts at the oldest retained message,
and ``first`` says so. Read on from ``next``; ``next == end`` means the page reached the
end of the log. With ``wait_ms`` a read at the end waits for a publish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import models
from ._calls import Call, _as, _group, name

#: The most messages one read returns (``limit``).
READ_PAGE_MAX = 10_000


@dataclass
class LogMessage:
    """One message of the log, with its metadata and publish time (Unix ms)."""

    offset: int
    payload: bytes = b""
    key: str | None = None
    headers: dict[str, str] | None = None
    published_at_ms: int = 0


@dataclass
class LogPage:
    """One page of the log: ``first`` is where it started, ``next`` where to go on."""

    messages: list[LogMessage] = field(default_factory=list)
    first: int = 0
    next: int = 0
    end: int = 0


def read_messages(
    topic: str,
    *,
    from_offset: int | None = None,
    from_time_ms: int | None = None,
    limit: int | None = None,
    wait_ms: int = 0,
) -> Call[LogPage]:
    """One page of the topic's log without a group (nothing moves); see
    :mod:`mailroom.reads` (a long poll when ``wait_ms`` > 0)."""
    params: dict[str, Any] = {}
    for key, value in [
        ("from", from_offset),
        ("from_time_ms", from_time_ms),
        ("limit", limit),
        ("wait_ms", wait_ms or None),
    ]:
        if value is not None:
            params[key] = value
    path = f"/v1/topics/{name('topic', topic)}/messages"
    return Call("GET", path, _as(LogPage), params=params, wait_ms=wait_ms)


def seek_to_time(topic: str, group: str, time_ms: int) -> Call[models.GroupSeeked]:
    """Moves a group to the first message published at or after ``time_ms`` (Unix ms)."""
    body = {"time_ms": time_ms}
    return Call("POST", f"{_group(topic, group)}/seek", _as(models.GroupSeeked), json=body)
