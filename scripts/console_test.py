"""The web console (/ui/) in a real browser: headless Chromium over WebDriver against
fresh `mailroom serve` processes filled with data (scripts/console_fixture.py).

Shows that:
- its number formats (1.2k/s, "3 min ago") and the redrive ranges of a selection are
  right (run in the page);
- every page (overview, topic, group, dead letters, channel) loads with no console
  error and no failed request, at 1280 px and at 400 px;
- the numbers the pages show (lag, in flight, dead letters, drops) equal what the JSON
  API says, and follow it when the API's state changes;
- a redrive clicked in the console changes the group exactly as the API then reports;
  a purge asks first (cancelled: nothing changes) and does what it said once confirmed;
- group create and delete (confirmed), a test publish, and browsing messages (by offset
  and by time, as JSON and text, paging on and back; each page equal to the API's, or
  the "not available on this server" notice where the route is missing) work; so do seek,
  pause and resume where the server has them;
- the live tail shows messages published while the page is open, and the drop counter
  moves with the drops;
- with --token the console asks for the token, says clearly when it is wrong, works
  once the right one is entered (the live tail too, over a ticket), and never puts the
  token in a URL;
- the console works behind a reverse proxy under a path prefix.

Saves a screenshot of each page into SCREENSHOT_DIR (scripts/console-test.sh picks a
scratch directory, or docs/console/ with UPDATE_SCREENSHOTS=1).

Usage: console_test.py MAILROOM_BINARY SCREENSHOT_DIR
"""

import os
import sys
import tempfile
import time

from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select

from console_fixture import (Api, SlowSubscriber, browser, fill, prefix_proxy,
                             publish_burst, start_mailroom, wait_for)

TOKEN = "console-test-token"


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


class Page:
    """One browser on one server's console, with what it logged checked as it goes."""

    def __init__(self, driver, base, shots):
        self.driver = driver
        self.base = base
        self.shots = shots

    def open(self, hash_path):
        self.driver.get(f"{self.base}/ui/#/{hash_path}")

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def value(self, css):
        """The exact number an element of the page shows (its data-value)."""
        text = self.find(css).get_attribute("data-value")
        return int(text) if text not in (None, "") else None

    def text(self, css):
        return self.find(css).text

    def problems(self):
        """Console errors and failed requests since the last call."""
        logged = [entry["message"] for entry in self.driver.get_log("browser")
                  if entry["level"] == "SEVERE"]
        failed = self.driver.execute_script(
            "const seen = window.__checked || 0;"
            "const all = performance.getEntriesByType('resource');"
            "window.__checked = all.length;"
            "return all.slice(seen).filter(e => e.responseStatus >= 400)"
            ".map(e => e.name + ' ' + e.responseStatus);")
        return logged + failed

    def clean(self, what):
        problems = self.problems()
        check(not problems, f"{what}: no console errors, no failed requests {problems}")

    def shot(self, name):
        if self.shots:
            time.sleep(0.3)  # let the last refresh paint
            self.driver.save_screenshot(os.path.join(self.shots, name))

    def confirm_dialog(self, accept):
        """The confirmation's question; answers it with OK or Cancel."""
        dialog = wait_for(lambda: self.find("#confirm-dialog[open]"), "the confirmation dialog")
        question = dialog.find_element(By.ID, "confirm-text").text
        self.find("#confirm-ok" if accept else "#confirm-cancel").click()
        wait_for(lambda: not self.finds("#confirm-dialog[open]"), "the dialog to close")
        return question


UNITS = """
const done = arguments[0];
Promise.all([import('./dead_letters.js'), import('./format.js')]).then(([d, f]) => {
  const all = [0, 1, 2, 5, 6, 9].map(offset => ({offset}));
  const chosen = [0, 1, 5, 9].map(offset => ({offset}));
  done({ranges: d.ranges(all, chosen), count: f.count(1234), rate: f.rate(1234),
        big: f.count(2500000), bytes: f.bytes(1536), ago: f.ago(Date.now() - 180000),
        later: f.ago(Date.now() + 20500), small: f.count(999),
        deadline: f.deadline(Date.now() + 11500), expired: f.deadline(Date.now() - 1)});
}).catch(e => done({error: String(e)}));
"""


def units(page):
    """The console's own functions, run in the page: number formats and redrive ranges."""
    page.open("")
    got = page.driver.execute_async_script(UNITS)
    check(got.get("ranges") == [{"from": 0, "to": 2}, {"from": 5, "to": 6}, {"from": 9, "to": 10}],
          f"a selection becomes ranges that cover it and nothing else: {got}")
    check((got["count"], got["rate"], got["big"], got["bytes"], got["ago"], got["later"], got["small"])
          == ("1.2k", "1.2k/s", "2.5M", "1.5 KiB", "3 min ago", "in 20 s", "999"),
          "numbers are for people: 1.2k, 1.2k/s, 2.5M, 1.5 KiB, 3 min ago, in 20 s")
    check((got["deadline"], got["expired"]) == ("in 12 s", "expired"),
          f"lease deadlines are for people: in 12 s, expired: {got}")


def row_value(page, table, keys, field):
    selector = "".join(f'[data-{k}="{v}"]' for k, v in keys.items())
    return page.value(f"#{table} tr{selector} [data-field={field}]")


def overview(page, api):
    page.open("")
    wait_for(lambda: page.finds("#groups-table tr[data-group=billing]"), "the overview's groups")
    for topic, group in [("orders", "billing"), ("orders", "audit"), ("events", "ledger")]:
        keys = {"topic": topic, "group": group}
        wait_for(lambda: all(row_value(page, "groups-table", keys, f) == want for f, want in [
            ("lag", api.group(topic, group)["lag"]),
            ("in_flight", len(api.group(topic, group)["deliveries"])),
            ("dead_letters", api.group(topic, group)["dead_letters"])]),
            f"the overview to show {topic}/{group} as the API does")
    check(True, "the overview's lag, in flight and dead letters equal the API's")
    polled = api.call("POST", "/v1/topics/orders/groups/billing/poll/batch", {"consumer": "w1", "max": 4})
    for d in polled["deliveries"][:2]:
        api.call("POST", "/v1/topics/orders/groups/billing/ack", {"offset": d["offset"], "attempt": d["attempt"]})
    want = api.group("orders", "billing")
    keys = {"topic": "orders", "group": "billing"}
    wait_for(lambda: row_value(page, "groups-table", keys, "in_flight") == len(want["deliveries"])
             and row_value(page, "groups-table", keys, "lag") == want["lag"],
             "the overview to follow two acks without a reload")
    check(page.text('#groups-table tr[data-group=billing] [data-field=lag]') == str(want["lag"]),
          f"the lag is shown as a plain number: {want['lag']}")
    drivers = api.channel("drivers")
    wait_for(lambda: row_value(page, "channels-table", {"channel": "drivers"}, "dropped") == drivers["dropped"],
             "the overview to show the channel's drops")
    check(drivers["dropped"] > 0, f"the overview's drops equal the API's ({drivers['dropped']})")
    for size in [30, 80, 20, 50]:
        api.call("POST", "/v1/topics/events/messages/batch", {"messages": ["event"] * size})
        end = api.call("GET", "/v1/topics/events")["end"]
        wait_for(lambda: row_value(page, "topics-table", {"topic": "events"}, "messages") == end,
                 "the overview to count the new messages")
    check(page.finds("#topics-table tr[data-topic=events] polyline"), "the publish rate has its chart")
    page.shot("overview.png")
    page.clean("overview")


def topic(page, api):
    page.open("topics/orders")
    wait_for(lambda: page.value("#topic-stats [data-field=end]") == 40, "the topic's end offset")
    page.find("input[name=group]").send_keys("scratch")
    page.find("form.inline button[type=submit]")
    page.driver.execute_script("document.querySelector('input[name=group]').form.requestSubmit()")
    wait_for(lambda: api.call("GET", "/v1/topics/orders")["groups"] and any(
        g["name"] == "scratch" for g in api.call("GET", "/v1/topics/orders")["groups"]), "the group to be created")
    remove = wait_for(lambda: page.find("#groups-table tr[data-group=scratch] button"), "its delete button")
    remove.click()
    question = page.confirm_dialog(accept=True)
    check("Delete group scratch" in question, f"deleting a group asks first: {question!r}")
    wait_for(lambda: not any(g["name"] == "scratch" for g in api.call("GET", "/v1/topics/orders")["groups"]),
             "the group to be deleted")
    wait_for(lambda: not page.finds("#groups-table tr[data-group=scratch]"), "the page to drop the group")
    check(True, "a group created and deleted from the topic page")
    page.find("textarea[name=payload]").clear()
    page.find("textarea[name=payload]").send_keys('{"from": "the console"}')
    page.driver.execute_script("document.querySelector('textarea[name=payload]').form.requestSubmit()")
    wait_for(lambda: "Published at offset 40" in page.driver.page_source, "the publish's answer")
    check(api.call("GET", "/v1/topics/orders")["end"] == 41, "the test publish reached the topic")
    page.find("select[name=as]").send_keys("json")
    page.driver.execute_script("document.querySelector('#browse-form').requestSubmit()")
    if ("GET", "/v1/topics/{topic}/messages") in api.routes():
        browse(page, api)
    else:
        wait_for(lambda: "not available on this server" in page.text("#browse"), "the browse notice")
        check(True, "browsing says it is not available on a server without the route")
    page.shot("topic.png")
    page.clean("topic page")


def shown_in_flight(page):
    """The deliveries in flight the group page lists, as the API would."""
    shown = []
    for row in page.finds("#in-flight-table tbody tr"):
        cell = lambda field: row.find_element(By.CSS_SELECTOR, f"[data-field={field}]")  # noqa: E731, B023
        deadline = cell("lease_deadline").get_attribute("data-value")
        shown.append({"offset": int(row.get_attribute("data-offset")),
                      "attempt": int(cell("attempt").get_attribute("data-value")),
                      "consumer": cell("consumer").get_attribute("data-value") or None,
                      "lease_deadline_ms": int(deadline) if deadline else None,
                      "deadline_shown": cell("lease_deadline").text})
    return shown


def in_flight(page, api, consumers):
    """Every delivery in flight is listed with the API's attempt, consumer and lease
    deadline, the deadline shown for people; `consumers` own them."""
    want = api.group("orders", "billing")["deliveries"]
    as_api = lambda: [{k: v for k, v in d.items() if k != "deadline_shown"} for d in shown_in_flight(page)]  # noqa: E731
    wait_for(lambda: as_api() == want, "the deliveries in flight as the API lists them")
    check(True, f"every delivery in flight is listed as the API says: {want}")
    check({d["consumer"] for d in want} == consumers, f"owned by {consumers}")
    texts = [d["deadline_shown"] for d in shown_in_flight(page)]
    check(all(t.startswith("in ") and t.endswith(" min") for t in texts),
          f"lease deadlines are shown for people: {texts}")


def browsed(page):
    """The messages the topic page's browser shows, as the API would list them."""
    return [{"offset": int(row.get_attribute("data-offset")), "key": row.get_attribute("data-key") or None,
             "published_at_ms": int(row.get_attribute("data-published")),
             "payload": row.find_element(By.CSS_SELECTOR, "pre").text}
            for row in page.finds("#browse tbody tr")]


def api_page(api, query):
    """The API's page of `orders` for `query`, in the same form."""
    answer = api.call("GET", f"/v1/topics/orders/messages?{query}")
    return [{"offset": m["offset"], "key": m.get("key"), "published_at_ms": m["published_at_ms"],
             "payload": m["payload"]} for m in answer["messages"]]


def browse(page, api):
    """Browsing by offset (pretty JSON, then text), paging on and back, and by time."""
    wait_for(lambda: page.finds("#browse tr[data-offset='0']"), "the browsed messages")
    check('"order": 0' in page.text("#browse"), "browsing shows messages as pretty JSON")
    Select(page.find("select[name=as]")).select_by_value("text")
    for query, move in [("from=0&limit=20", None), ("from=20&limit=20", "#browse-later"),
                        ("from=40&limit=20", "#browse-later"), ("from=20&limit=20", "#browse-earlier")]:
        if move:
            page.find(move).click()
        want = api_page(api, query)
        wait_for(lambda: browsed(page) == want, f"the page {query} as the API lists it")
        check(True, f"the browsed page {query} equals the API's ({len(want)} messages)")
    page.find("#browse-later").click()
    wait_for(lambda: page.find("#browse-later").get_attribute("disabled") is not None, "the last page")
    check(True, "paging stops at the log's end")
    at_ms = api_page(api, "from=40&limit=1")[0]["published_at_ms"]
    Select(page.find("#browse-form select[name=start]")).select_by_value("time")
    page.driver.execute_script(
        "const [ms] = arguments; import('./messages.js').then(m => {"
        "document.querySelector('input[name=from_time]').value = m.localInput(ms);"
        "document.querySelector('#browse-form').requestSubmit(); });", at_ms)
    want = api_page(api, f"from_time_ms={at_ms}&limit=20")
    wait_for(lambda: browsed(page) == want, "the page from a time as the API lists it")
    check(want[0]["offset"] == 40, f"browsing from the test publish's time starts at it: {want[0]['offset']}")
    Select(page.find("#browse-form select[name=start]")).select_by_value("offset")
    Select(page.find("select[name=as]")).select_by_value("json")
    page.driver.execute_script("document.querySelector('#browse-form').requestSubmit()")
    wait_for(lambda: page.finds("#browse tr[data-offset='0']"), "the first page again, for the screenshot")


def group(page, api):
    page.open("topics/orders/groups/billing")
    want = api.group("orders", "billing")
    wait_for(lambda: page.value("#group-stats [data-field=lag]") == want["lag"], "the group's lag")
    check(page.value("#group-stats [data-field=in_flight]") == len(want["deliveries"])
          and page.value("#group-stats [data-field=dead_letters]") == want["dead_letters"],
          "the group page's in flight and dead letters equal the API's")
    # The overview acked w1's two; w2's and the anonymous consumer's are still out.
    in_flight(page, api, {"w2", None})
    routes = api.routes()
    base = "/v1/topics/{topic}/groups/{group}"
    if ("POST", base + "/pause") in routes:
        wait_for(lambda: page.finds("#group-controls button"), "the pause button")
        next(b for b in page.finds("#group-controls button") if b.text == "Pause").click()
        wait_for(lambda: api.group("orders", "billing").get("paused"), "the group to pause")
        next(b for b in page.finds("#group-controls button") if b.text == "Resume").click()
        wait_for(lambda: not api.group("orders", "billing").get("paused"), "the group to resume")
        page.find("#group-controls select[name=to]").send_keys("latest")
        page.find("#group-controls button[type=submit]").click()
        question = page.confirm_dialog(accept=True)
        end = api.call("GET", "/v1/topics/orders")["end"]
        wait_for(lambda: api.group("orders", "billing")["position"] == end, "the seek to the end")
        check("Move group billing" in question, f"pause, resume and a confirmed seek work: {question!r}")
    else:
        wait_for(lambda: "not available on this server" in page.text("#group-controls"), "the controls notice")
        check(True, "seek, pause and resume say they are not available on this server")
    for n in range(4):
        if n % 2:
            api.call("POST", "/v1/topics/orders/messages/batch", {"messages": ["more"] * 10})
        else:
            delivered = api.call("POST", "/v1/topics/orders/groups/billing/poll/batch",
                                 {"consumer": "w2", "max": 4})["deliveries"]
            if delivered:
                api.call("POST", "/v1/topics/orders/groups/billing/ack/batch",
                         {"deliveries": [{"offset": d["offset"], "attempt": d["attempt"]} for d in delivered]})
        lag = api.group("orders", "billing")["lag"]
        wait_for(lambda: page.value("#group-stats [data-field=lag]") == lag, "the lag to follow the API")
    check(True, "the group page's lag follows the API")
    api.call("POST", "/v1/topics/orders/groups/billing/poll/batch", {"consumer": "w3", "max": 2})
    api.call("POST", "/v1/topics/orders/groups/billing/poll")
    in_flight(page, api, {"w3", None})
    page.shot("group.png")
    page.clean("group page")


def dead_letters(page, api):
    page.open("topics/orders/groups/audit/dead-letters")
    before = api.group("orders", "audit")
    wait_for(lambda: page.value("#dead-letter-count") == before["dead_letters"], "the dead letter count")
    check(before["dead_letters"] == 5, "the dead letters page lists the API's five")
    page.find("#filters select[name=reason]").send_keys("timeout")
    page.find("#filters button").click()
    wait_for(lambda: len(page.finds("#dead-letters-table tbody tr")) == 2, "the filter by reason")
    page.find("#dead-letters-table tbody tr button").click()
    wait_for(lambda: "timeout" in page.text("#inspected"), "the inspected dead letter")
    page.shot("dead-letters.png")
    page.find("#redrive").click()
    question = page.confirm_dialog(accept=True)
    check("Redrive 2 dead letters" in question, f"the redrive says how many: {question!r}")
    wait_for(lambda: "Redrove 2" in page.text("#outcome"), "the redrive's outcome")
    after = api.group("orders", "audit")
    check(after["dead_letters"] == before["dead_letters"] - 2
          and after["counters"]["redrives"] == before["counters"]["redrives"] + 2
          and all(n["reason"] != "timeout" for n in after["dead_letter_notes"]),
          "the redrive changed the group exactly as the API reports")
    wait_for(lambda: page.value("#dead-letter-count") == after["dead_letters"], "the page to show the API's count")
    page.find("#filters select[name=reason]").send_keys("any reason")
    page.find("#filters button").click()
    wait_for(lambda: len(page.finds("#dead-letters-table tbody tr")) == 3, "all three again")
    page.find("#purge").click()
    question = page.confirm_dialog(accept=False)
    check("Purge 3 dead letters" in question and api.group("orders", "audit")["dead_letters"] == 3,
          f"a purge asks first, and cancelled changes nothing: {question!r}")
    page.find("#dead-letters-table tbody tr input[type=checkbox]").click()
    page.find("#purge").click()
    question = page.confirm_dialog(accept=True)
    wait_for(lambda: "Purged 2" in page.text("#outcome"), "the purge's outcome")
    after = api.group("orders", "audit")
    check("Purge 2 dead letters" in question and after["dead_letters"] == 1
          and after["counters"]["purged"] == 2, "a confirmed purge of the selection did what it said")
    page.clean("dead letters page")


def channel(page, api, shoot=True, drops=True):
    subscribers = api.channel("drivers")["subscribers"]
    page.open("channels/drivers")
    wait_for(lambda: api.channel("drivers")["subscribers"] == subscribers + 1, "the tail to subscribe")
    for n in range(3):
        api.call("POST", "/v1/channels/drivers/messages", raw=f"tail-{n}".encode())
    wait_for(lambda: all(f"tail-{n}" in page.text("#tail") for n in range(3)), "the published messages in the tail")
    check(True, "the live tail shows messages published while the page is open")
    if not drops:
        page.clean("channel page")
        return
    before = page.value("#channel-stats [data-field=dropped]")
    publish_burst(api, "drivers", 200)
    after = api.channel("drivers")["dropped"]
    wait_for(lambda: page.value("#channel-stats [data-field=dropped]") == after, "the drop counter to move")
    check(after > before, f"the drop counter moved with the drops ({before} → {after})")
    if shoot:
        page.shot("channel.png")
    page.clean("channel page")


def token_flow(driver, base, shots):
    page = Page(driver, base, shots)
    api = Api(base, TOKEN)
    api.call("PUT", "/v1/topics/guarded")
    api.call("PUT", "/v1/channels/drivers", {})
    page.open("")
    wait_for(lambda: page.find("#token-dialog[open]"), "the token prompt")
    page.find("#token-input").send_keys("not-the-token")
    page.shot("token.png")
    page.find("#token-submit").click()
    wait_for(lambda: "refused" in page.text("#token-message"), "the wrong-token message")
    check("wrong bearer token" in page.text("#token-message"),
          f"a wrong token gets a clear message: {page.text('#token-message')!r}")
    page.problems()  # the one 401 the wrong token earned is expected
    page.find("#token-input").send_keys(TOKEN)
    page.find("#token-submit").click()
    wait_for(lambda: page.finds("#topics-table tr[data-topic=guarded]"), "the overview with the token")
    check(True, "with the right token the console works")
    channel(page, api, shoot=False, drops=False)
    urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    check(all(TOKEN not in url for url in urls) and TOKEN not in driver.current_url,
          "the token is in no URL the page used")


def run(binary, work, shots):
    open_, open_url = start_mailroom(binary, os.path.join(work, "open"))
    guarded, guarded_url = start_mailroom(binary, os.path.join(work, "guarded"), TOKEN)
    api = Api(open_url)
    fill(api)
    slow = SlowSubscriber(open_url, "drivers")
    wait_for(lambda: api.channel("drivers")["subscribers"] == 1, "the slow subscriber")
    publish_burst(api, "drivers", 200)
    proxy, proxy_url = prefix_proxy(open_url, "/broker")
    driver = None
    try:
        driver = browser()
        page = Page(driver, open_url, shots)
        units(page)
        overview(page, api)
        topic(page, api)
        group(page, api)
        dead_letters(page, api)
        channel(page, api)
        driver.set_window_size(400, 860)
        page.shots = None
        for path in ["", "topics/orders", "topics/orders/groups/billing", "channels/drivers"]:
            page.open(path)
            wait_for(lambda: page.finds("main section"), f"the page {path!r} at 400 px")
            time.sleep(0.5)
            width = driver.execute_script("return document.documentElement.scrollWidth")
            check(width <= 400, f"the page {path!r} fits 400 px (scroll width {width})")
        page.shots = shots
        page.open("")
        wait_for(lambda: page.finds("#groups-table tr[data-group=billing]"), "the overview at 400 px")
        page.shot("overview-400px.png")
        page.clean("every page at 400 px")
        driver.set_window_size(1280, 1000)
        behind = Page(driver, proxy_url, None)
        behind.open("")
        wait_for(lambda: behind.finds("#groups-table tr[data-group=billing]"), "the overview behind the proxy")
        behind.open("topics/orders/groups/audit/dead-letters")
        wait_for(lambda: behind.value("#dead-letter-count") == 1, "the dead letters behind the proxy")
        behind.clean("the console under the path prefix /broker/")
        driver.delete_all_cookies()
        driver.quit()
        driver = browser()
        token_flow(driver, guarded_url, shots)
    finally:
        if driver is not None:
            driver.quit()
        slow.close()
        proxy.shutdown()
        for process in (open_, guarded):
            process.terminate()
            process.wait(timeout=20)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    started = time.monotonic()
    shots = os.path.abspath(sys.argv[2])
    os.makedirs(shots, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mailroom-console-") as work:
        run(os.path.abspath(sys.argv[1]), work, shots)
    print(f"console test: passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
