"""What scripts/console_test.py drives the console against: fresh `mailroom serve`
processes, data in them (topics, groups with deliveries in flight and dead letters, a
live channel with a subscriber too slow to keep up), a reverse proxy that serves a server
under a path prefix, and headless Chromium."""

import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

TIMEOUT_S = 20


def start_mailroom(binary, data, token=None):
    """A server on a free loopback port; returns the process and its base URL."""
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--data", data, "--fsync", "never"]
    env = dict(os.environ)
    env.pop("MAILROOM_TOKEN", None)
    if token:
        env["MAILROOM_TOKEN"] = token
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=env, text=True)
    line = process.stdout.readline()
    prefix = "mailroom listening on "
    if not line.startswith(prefix):
        process.kill()
        raise RuntimeError(f"mailroom did not start: {line!r}")
    return process, "http://" + line[len(prefix):].strip().removeprefix("http://")


class Api:
    """The JSON API of one server, as the test reads it to compare with the page."""

    def __init__(self, base, token=None):
        self.base = base
        self.token = token

    def call(self, method, path, body=None, raw=None):
        headers = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif raw is not None:
            data = raw
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            text = response.read()
            return json.loads(text) if text else None

    def group(self, topic, group):
        return self.call("GET", f"/v1/topics/{topic}/groups/{group}")

    def channel(self, name):
        return next(c for c in self.call("GET", "/v1/channels")["channels"] if c["name"] == name)

    def routes(self):
        """The (method, path template) pairs of /openapi.json."""
        with urllib.request.urlopen(self.base + "/openapi.json", timeout=TIMEOUT_S) as response:
            paths = json.loads(response.read())["paths"]
        return {(method.upper(), path) for path, item in paths.items() for method in item}


def fill(api):
    """Topics `orders` (group `billing`: four in flight, two to w1, one to w2, one to the
    anonymous consumer, with leases; group `audit`: five dead letters,
    three "schema mismatch", two "timeout") and `events` (group `ledger`, caught up), and
    channel `drivers` with a small mailbox."""
    api.call("PUT", "/v1/topics/orders")
    api.call("POST", "/v1/topics/orders/messages/batch",
             {"messages": [json.dumps({"order": n, "total": n * 3}) for n in range(40)]})
    api.call("PUT", "/v1/topics/orders/groups/billing",
             {"max_attempts": 3, "lease_ms": 600000, "max_in_flight": 4})
    # Two named consumers and the anonymous one, so the group page has each kind of owner.
    polled = api.call("POST", "/v1/topics/orders/groups/billing/poll/batch",
                      {"consumer": "w1", "max": 2})["deliveries"]
    polled += api.call("POST", "/v1/topics/orders/groups/billing/poll/batch",
                       {"consumer": "w2", "max": 1})["deliveries"]
    polled.append(api.call("POST", "/v1/topics/orders/groups/billing/poll"))
    assert len(polled) == 4, polled
    api.call("PUT", "/v1/topics/orders/groups/audit", {"max_attempts": 1})
    for reason in ["schema mismatch"] * 3 + ["timeout"] * 2:
        delivery = api.call("POST", "/v1/topics/orders/groups/audit/poll")
        api.call("POST", "/v1/topics/orders/groups/audit/nack",
                 {"offset": delivery["offset"], "attempt": delivery["attempt"],
                  "kind": "reject", "reason": reason})
    api.call("PUT", "/v1/topics/events")
    api.call("POST", "/v1/topics/events/messages/batch", {"messages": ["signed up", "paid"]})
    api.call("PUT", "/v1/topics/events/groups/ledger", {"max_attempts": 5, "start": "latest"})
    api.call("PUT", "/v1/channels/drivers", {"mailbox_capacity": 4})


class SlowSubscriber:
    """An SSE subscriber of a channel that never reads: once the socket's buffers fill,
    its mailbox does, and the channel drops for it."""

    def __init__(self, base, channel):
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket.connect((host, int(port)))
        self.socket.sendall(f"GET /v1/channels/{channel}/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())

    def close(self):
        self.socket.close()


def publish_burst(api, channel, count, size=16384):
    """Publishes `count` messages of `size` bytes to `channel`; answers the drops."""
    dropped = 0
    for n in range(count):
        answer = api.call("POST", f"/v1/channels/{channel}/messages", raw=(f"{n}:" + "x" * size).encode())
        dropped += answer["dropped"]
    return dropped


def prefix_proxy(upstream, prefix):
    """A reverse proxy on a free loopback port serving `upstream` under `prefix` (which
    it strips), passing the Host header on, as nginx with `proxy_set_header Host` does;
    streams answers as they come (SSE). Returns the server and its base URL."""
    target = upstream.removeprefix("http://")

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            if not self.path.startswith(prefix + "/"):
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            connection = http.client.HTTPConnection(target, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
            connection.request(self.command, self.path[len(prefix):], body=body, headers=headers)
            answer = connection.getresponse()
            self.send_response_only(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            while True:
                chunk = answer.read1(65536)
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except OSError:
                    break
            connection.close()

        do_GET = do_POST = do_PUT = do_DELETE = forward

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{prefix}"


def browser(width=1280, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--no-first-run", f"--window-size={width},{height}"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(TIMEOUT_S)
    driver.set_page_load_timeout(TIMEOUT_S)
    return driver


def wait_for(condition, what, timeout_s=TIMEOUT_S):
    """Polls `condition` until it answers something truthy; fails naming `what`."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = condition()
            if last:
                return last
        except Exception as error:  # noqa: BLE001 - an element not there yet, a stale one
            last = error
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
