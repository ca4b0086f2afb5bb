"""What the sync and asyncio clients share: the base URL, the token and the time limits."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

CONNECT_TIMEOUT_DEFAULT = 5.0
"""Seconds to open a connection."""

REQUEST_TIMEOUT_DEFAULT = 30.0
"""Seconds for a whole call; a long poll's wait is added on top."""


@dataclass(frozen=True)
class Timeouts:
    """Every call's time limits, in seconds: nothing this client does can hang."""

    connect: float = CONNECT_TIMEOUT_DEFAULT
    request: float = REQUEST_TIMEOUT_DEFAULT

    def for_wait(self, wait_ms: int) -> httpx.Timeout:
        """The limits of a call that may wait ``wait_ms`` on the server (a long poll)."""
        total = self.request + wait_ms / 1000.0
        return httpx.Timeout(total, connect=self.connect)


def headers(token: str | None) -> dict[str, str]:
    """The headers every call carries."""
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def ws_url(base_url: str, path: str) -> str:
    """The ``ws://`` URL of ``path`` on the server at ``base_url``."""
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + path
    if base.startswith("http://"):
        return "ws://" + base[len("http://") :] + path
    raise ValueError(f"not an http(s) URL: {base_url}")
