"""The shared behaviour suite (``clients/behaviour``) against both Python clients."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Server
from scenario import run_scenario, scenarios

CASES = scenarios()


@pytest.mark.parametrize("scenario", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_sync(server: Server, scenario: dict[str, Any]) -> None:
    """The sync client."""
    run_scenario(server, scenario, asynchronous=False)


@pytest.mark.parametrize("scenario", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_async(server: Server, scenario: dict[str, Any]) -> None:
    """The asyncio client."""
    run_scenario(server, scenario, asynchronous=True)
