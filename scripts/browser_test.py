"""The browser rules of mailroom, shown in a real browser (headless Chromium over
WebDriver).

Starts `mailroom serve` twice on free loopback ports: one with --token, one without (the
broker a cross-site page could abuse), both with --cors-origin naming the allowed page's
origin. Serves a test page from two loopback origins (the allowed one and another), and
shows, from the browser:

- the allowed origin can fetch with the token (a CORS request with a preflight);
- an EventSource opened with a ticket from POST /v1/tickets receives a published message;
- a WebSocket with a ticket, and one with the token as the `mailroom.bearer.<token>`
  subprotocol, receive a published message (the latter answered `mailroom.bearer`);
- a page on the disallowed origin that submits a text/plain form or sends a `no-cors`
  text/plain POST changes nothing (the topic's end offset, read over the API, stays),
  while the same form from the allowed origin publishes.

Usage: browser_test.py MAILROOM_BINARY
"""

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

TOKEN = "browser-test-token"
TIMEOUT_S = 20

PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><title>mailroom browser test</title></head>
<body><form id="publish" method="POST" enctype="text/plain"><input name="from" value="a-form"></form></body></html>"""


class Page(http.server.BaseHTTPRequestHandler):
    """The same blank page with a form, whatever the path."""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


def serve_page():
    """A static server on a free loopback port, running in a thread; returns it and its origin."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def start_mailroom(binary, data, token, cors_origin):
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--data", data, "--fsync", "never",
            "--cors-origin", cors_origin]
    env = dict(os.environ)
    if token:
        env["MAILROOM_TOKEN"] = token
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=env, text=True)
    line = process.stdout.readline()
    prefix = "mailroom listening on "
    if not line.startswith(prefix):
        process.kill()
        raise RuntimeError(f"mailroom did not start: {line!r}")
    return process, line[len(prefix):].strip()


def api(base, method, path, body=None, token=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        text = response.read()
        return json.loads(text) if text else None


def end_offset(base, token=None):
    return api(base, "GET", "/v1/topics/t", token=token)["end"]


def refused_publishes(base):
    """How many publishes the server answered 403, from its request-latency histogram."""
    request = urllib.request.Request(base + "/metrics", headers={"Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if "_count{" in line and 'status="403"' in line and 'method="POST"' in line
               and '/v1/topics/{topic}/messages"' in line)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--no-first-run"]:
        options.add_argument(argument)
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(TIMEOUT_S)
    driver.set_page_load_timeout(TIMEOUT_S)
    return driver


# Each script gets the server's URL and the token as arguments[0] and [1] and calls
# arguments[arguments.length - 1] with its result.
FETCH_WITH_TOKEN = """
const [server, token, done] = arguments;
fetch(server + '/v1/topics/t/messages', {method: 'POST', body: 'from-fetch',
      headers: {'Authorization': 'Bearer ' + token, 'Content-Type': 'text/plain'}})
  .then(async r => done({status: r.status, body: await r.json()}))
  .catch(e => done({error: String(e)}));
"""

TICKET = """
async function ticket(server, token, path) {
  const r = await fetch(server + '/v1/tickets', {method: 'POST',
      headers: {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'},
      body: JSON.stringify({path})});
  return (await r.json()).ticket;
}
function publish(server, token, text) {
  return fetch(server + '/v1/channels/c/messages', {method: 'POST', body: text,
      headers: {'Authorization': 'Bearer ' + token}});
}
"""

SSE_WITH_TICKET = TICKET + """
const [server, token, done] = arguments;
ticket(server, token, '/v1/channels/c/events').then(t => {
  const source = new EventSource(server + '/v1/channels/c/events?ticket=' + t);
  source.onopen = () => publish(server, token, 'over-sse');
  source.onmessage = event => { source.close(); done({data: event.data}); };
  source.onerror = () => { source.close(); done({error: 'EventSource failed'}); };
}).catch(e => done({error: String(e)}));
"""

WS = TICKET + """
const [server, token, how, done] = arguments;
const ws_base = server.replace('http://', 'ws://') + '/v1/channels/c/ws';
const open = how === 'ticket'
  ? ticket(server, token, '/v1/channels/c/ws').then(t => new WebSocket(ws_base + '?ticket=' + t))
  : Promise.resolve(new WebSocket(ws_base, ['mailroom.bearer', 'mailroom.bearer.' + token]));
open.then(socket => {
  socket.onopen = () => publish(server, token, 'over-ws-' + how);
  socket.onmessage = async event => {
    const data = typeof event.data === 'string' ? event.data : await event.data.text();
    socket.close();
    done({data, protocol: socket.protocol});
  };
  socket.onerror = () => done({error: 'WebSocket failed'});
}).catch(e => done({error: String(e)}));
"""

NO_CORS_POST = """
const [server, done] = arguments;
fetch(server + '/v1/topics/t/messages', {method: 'POST', mode: 'no-cors', body: 'from-no-cors',
      headers: {'Content-Type': 'text/plain'}})
  .then(r => done({type: r.type})).catch(e => done({error: String(e)}));
"""


def submit_form(driver, page, server):
    """Opens `page`, submits its text/plain form to the topic, and returns the answer's text."""
    driver.get(page + "/form.html")
    driver.execute_script(
        "const f = document.getElementById('publish');"
        "f.action = arguments[0] + '/v1/topics/t/messages'; f.submit();", server)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if driver.current_url.startswith(server):
            text = driver.execute_script("return document.body ? document.body.innerText : ''")
            if text:
                return text
        time.sleep(0.05)
    raise AssertionError("the form's answer did not load")


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def run(binary, work):
    allowed_page, allowed = serve_page()
    foreign_page, foreign = serve_page()
    guarded, guarded_url = start_mailroom(binary, os.path.join(work, "guarded"), TOKEN, allowed)
    open_, open_url = start_mailroom(binary, os.path.join(work, "open"), None, allowed)
    driver = None
    try:
        for base, token in [(guarded_url, TOKEN), (open_url, None)]:
            api(base, "PUT", "/v1/topics/t", token=token)
        for base, token in [(guarded_url, TOKEN), (open_url, None)]:
            api(base, "PUT", "/v1/channels/c", body={}, token=token)
        driver = browser()

        driver.get(allowed + "/page.html")
        answer = driver.execute_async_script(FETCH_WITH_TOKEN, guarded_url, TOKEN)
        check(answer.get("status") == 201 and answer["body"] == {"offset": 0},
              f"an allowed-origin fetch with the token publishes: {answer}")
        answer = driver.execute_async_script(SSE_WITH_TICKET, guarded_url, TOKEN)
        check(answer.get("data") == "over-sse",
              f"an EventSource with a ticket receives a published message: {answer}")
        answer = driver.execute_async_script(WS, guarded_url, TOKEN, "ticket")
        check(answer.get("data") == "over-ws-ticket",
              f"a WebSocket with a ticket receives a published message: {answer}")
        answer = driver.execute_async_script(WS, guarded_url, TOKEN, "subprotocol")
        check(answer.get("data") == "over-ws-subprotocol" and answer["protocol"] == "mailroom.bearer",
              f"a WebSocket with the token subprotocol receives a message: {answer}")

        answer = driver.execute_async_script(WS, open_url, TOKEN, "subprotocol")
        check(answer.get("data") == "over-ws-subprotocol" and answer["protocol"] == "mailroom.bearer",
              f"the subprotocol is named back by a server without a token too: {answer}")

        before = end_offset(open_url)
        text = submit_form(driver, allowed, open_url)
        check(end_offset(open_url) == before + 1,
              f"the allowed origin's text/plain form publishes (control): {text}")

        before = end_offset(open_url)
        text = submit_form(driver, foreign, open_url)
        check("forbidden_origin" in text, f"a disallowed origin's form is refused: {text}")
        driver.get(foreign + "/page.html")
        answer = driver.execute_async_script(NO_CORS_POST, open_url)
        check(answer.get("type") == "opaque", f"the no-cors POST was sent: {answer}")
        check(end_offset(open_url) == before,
              f"nothing was published from the disallowed origin (end offset {before})")
        check(refused_publishes(open_url) == 2,
              "the server got both and answered them 403 (its metrics say)")
        check(end_offset(guarded_url, TOKEN) == 1, "the guarded topic holds the one fetch")
    finally:
        if driver is not None:
            driver.quit()
        for process in (guarded, open_):
            process.terminate()
            process.wait(timeout=TIMEOUT_S)
        for page in (allowed_page, foreign_page):
            page.shutdown()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mailroom-browser-") as work:
        run(os.path.abspath(sys.argv[1]), work)
    print(f"browser test: passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
