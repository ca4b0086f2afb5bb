"""A fresh ``mailroom serve`` per test, which a test may kill -9 and start again.

The binary is ``$MAILROOM_BIN``, or ``$CARGO_TARGET_DIR/debug/mailroom`` (default
``target/``) of the repository this package sits in.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def binary() -> str:
    """The server binary under test."""
    if os.environ.get("MAILROOM_BIN"):
        return os.environ["MAILROOM_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return str(target / "debug" / "mailroom")


class Server:
    """One server process on a data directory; restarts keep the directory and the port."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.listen = "127.0.0.1:0"
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self.start()

    def start(self, extra: list[str] | None = None) -> None:
        """Starts the server and waits for its ``mailroom listening on`` line."""
        command = [binary(), "serve", "--listen", self.listen, "--data", str(self.data)]
        command += ["--fsync", "never", *(extra or [])]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MAILROOM_")}
        environment["RUST_LOG"] = "warn"
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=environment
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("mailroom listening on "):
                self.url = line.split()[-1]
                self.listen = self.url.removeprefix("http://")
                return
        raise RuntimeError(f"server exited before listening: {self.process.wait()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def restart(self) -> None:
        """SIGKILL, then a start on the same data directory and port."""
        self.kill()
        self.start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh server for one test."""
    running = Server(tmp_path / "store")
    yield running
    running.kill()
