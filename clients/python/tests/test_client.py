"""What the behaviour suite does not show: every server error code has its typed
exception, unknown codes still raise by status, time limits (a long poll's wait added),
the publish stream's window, and the bearer token on every kind of call."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO, Server

from mailroom import AsyncClient, Client, Timeouts, errors, models

ERROR_RS = REPO / "crates" / "mailroom-api" / "src" / "error.rs"


def server_codes() -> list[str]:
    """The codes the server declares, read from the wire-format crate."""
    source = ERROR_RS.read_text()
    block = source[source.index("error_codes! {") :]
    return re.findall(r'=> "([a-z_]+)"', block)


def test_every_server_code_has_its_class() -> None:
    codes = server_codes()
    assert "not_owned" in codes and len(codes) > 20
    assert sorted(codes) == sorted(errors.BY_CODE)
    assert isinstance(errors.api_error(409, "not_owned", "x"), errors.NotOwned)
    assert isinstance(errors.api_error(409, "not_owned", "x"), errors.Conflict)
    assert isinstance(errors.api_error(404, "unknown_topic", "x"), errors.NotFound)


def test_an_unknown_code_raises_by_its_status() -> None:
    error = errors.api_error(404, "brand_new_code", "from a newer server")
    assert type(error) is errors.NotFound
    assert (error.status, error.code, error.message) == (404, "brand_new_code", "from a newer server")
    assert type(errors.api_error(503, "whatever", "")) is errors.ServerError
    assert type(errors.api_error(418, "teapot", "")) is errors.ApiError


def test_bad_names_are_refused_before_sending() -> None:
    client = Client("http://127.0.0.1:9")  # nothing listens: a request would fail otherwise
    for bad in ("..", "a/b", "", "x" * 129):
        with pytest.raises(errors.InvalidName):
            client.publish(bad, "x")


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def test_a_silent_server_times_out_and_a_long_poll_gets_its_wait(silent: str) -> None:
    client = Client(silent, timeouts=Timeouts(connect=5, request=0.3))
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        client.create_topic("orders")
    plain = time.monotonic() - started
    assert 0.3 <= plain < 3
    started = time.monotonic()
    with pytest.raises(errors.Timeout):
        client.poll_batch("orders", "billing", 1, wait_ms=700)
    assert 1.0 <= time.monotonic() - started < 4


def test_the_async_client_times_out_too(silent: str) -> None:
    async def main() -> None:
        client = AsyncClient(silent, timeouts=Timeouts(connect=5, request=0.3))
        with pytest.raises(errors.Timeout):
            await client.poll_batch("orders", "billing", 1, wait_ms=300)
        await client.close()

    asyncio.run(main())


def test_an_unreachable_server_is_a_transport_error(tmp_path: Path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(errors.TransportError):
        Client(f"http://127.0.0.1:{port}").health()


def test_the_publish_stream_keeps_its_window(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    with client.publish_stream("orders", window=8) as stream:
        seqs = [stream.send(f"m{i}".encode()) for i in range(500)]
        assert stream.in_flight <= 8
        confirmations = []
        while (confirmation := stream.confirmed()) is not None:
            confirmations.append(confirmation)
    assert seqs == list(range(500))
    offsets = [o for c in confirmations for o in c.offsets()]
    assert offsets == list(range(500))
    assert client.topic_info("orders").end == 500


def test_the_token_goes_on_every_call(tmp_path: Path) -> None:
    server = Server.__new__(Server)
    server.data, server.listen, server.process = tmp_path / "store", "127.0.0.1:0", None
    Server.start(server, ["--token", "secret"])
    try:
        with pytest.raises(errors.Unauthorized):
            Client(server.url).list_topics()
        client = Client(server.url, token="secret")
        client.create_topic("orders")
        client.create_channel("drivers")
        with client.publish_stream("orders") as stream:
            stream.send("m")
            assert stream.flush()[0].offset == 0
        for transport in ("ws", "sse"):
            with client.subscribe("drivers", transport) as subscription:
                wait = time.monotonic() + 10
                while client.channel_info("drivers").subscribers == 0:
                    assert time.monotonic() < wait
                client.publish_channel("drivers", transport)
                assert subscription.next() == transport.encode()
        assert client.health().status == "ok"
        assert "mailroom_publishes_total" in client.metrics()
        assert httpx.get(f"{server.url}/v1/topics").status_code == 401
    finally:
        server.kill()


#: The method of each operation in the server's OpenAPI document (both Python clients).
METHODS = {
    "healthz": "health",
    "metrics": "metrics",
    "openapi": "openapi",
    "issue_ticket": "issue_ticket",
    "list_topics": "list_topics",
    "topic_info": "topic_info",
    "create_topic": "create_topic",
    "update_topic": "change_retention",
    "delete_topic": "delete_topic",
    "publish": "publish",
    "publish_batch": "publish_batch",
    "read_messages": "read",
    "publish_stream": "publish_stream",
    "group_info": "group_info",
    "create_group": "create_group",
    "delete_group": "delete_group",
    "seek": "seek",
    "pause": "pause",
    "resume": "resume",
    "recover_topic": "recover_topic",
    "repair_topic": "repair_topic",
    "poll": "poll",
    "poll_raw": "poll_raw",
    "poll_batch": "poll_batch",
    "consume_stream": "consume_stream",
    "ack": "ack",
    "ack_batch": "ack_batch",
    "nack": "nack",
    "nack_batch": "nack_batch",
    "touch": "touch",
    "dead_letters": "dead_letters_page",
    "redrive": "redrive",
    "purge": "purge",
    "list_channels": "list_channels",
    "channel_info_route": "channel_info",
    "create_channel": "create_channel",
    "close_channel": "close_channel",
    "publish_channel": "publish_channel",
    "subscribe_events": "subscribe",
    "subscribe_ws": "subscribe",
}


def test_every_endpoint_has_a_method(server: Server) -> None:
    document = Client(server.url).openapi()
    operations = {
        operation["operationId"]
        for methods in document["paths"].values()
        for operation in methods.values()
    }
    assert operations == set(METHODS), "a new endpoint needs its method in both clients"
    for method in METHODS.values():
        assert callable(getattr(Client, method)) and callable(getattr(AsyncClient, method))


def test_the_endpoints_the_suite_does_not_use(server: Server) -> None:
    client = Client(server.url)
    assert client.create_topic("logs", models.Retention(max_messages=1000)) is True
    info = client.change_retention("logs", models.Retention(max_messages=None, max_bytes=1 << 30))
    assert info.retention == models.RetentionInForce(True, None, 1 << 30, None)
    assert [topic.name for topic in client.list_topics()] == ["logs"]
    window = models.IdempotencyWindow(window_messages=50, window_ms=60_000)
    assert client.create_topic("payments", idempotency=window) is True
    assert client.topic_info("payments").idempotency == window
    assert client.topic_info("logs").idempotency == models.IdempotencyWindow(10_000, 120_000)
    with pytest.raises(errors.InvalidArgument):
        client.create_topic("refused", idempotency=models.IdempotencyWindow(window_messages=0))
    client.delete_topic("payments")
    client.create_group("logs", "raw", 1)
    assert client.poll_raw("logs", "raw") is None
    client.publish("logs", bytes([0, 255]))
    delivery = client.poll_raw("logs", "raw", consumer="r1")
    assert delivery == models.Delivery(0, 1, bytes([0, 255]))
    page = client.read("logs", from_offset=0, limit=10)
    assert [(m.offset, m.payload) for m in page.messages] == [(0, bytes([0, 255]))]
    assert (page.first, page.next, page.end) == (0, 1, 1)
    assert page.messages[0].published_at_ms > 0
    assert client.read("logs", from_offset=1, wait_ms=50).messages == []
    later = client.read("logs", from_time_ms=page.messages[0].published_at_ms + 1)
    assert (later.first, later.messages) == (1, [])
    assert client.seek_to_time("logs", "raw", 0).position == 0
    client.create_channel("drivers", max_subscribers=2)
    assert [(c.name, c.max_subscribers) for c in client.list_channels()] == [("drivers", 2)]
    ticket = client.issue_ticket("/v1/channels/drivers/events")
    assert ticket.path == "/v1/channels/drivers/events" and ticket.expires_in_ms > 0
