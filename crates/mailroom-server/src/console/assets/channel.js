// Channel: its counters (drops moving as they happen) and a live tail over SSE. With a
// token the stream opens with a single-use ticket, so the token never goes in a URL.

import { get, call, seg, token, ticket } from "./api.js";
import { Samples } from "./chart.js";
import { bytes, rate } from "./format.js";
import { h, card, fill, stat, act, poll, notice } from "./view.js";

/** The most tail lines kept on the page; older ones scroll away. */
const TAIL_LINES_MAX = 200;
/** The most characters of one message the tail shows; the rest is cut off. */
const TAIL_CHARS_MAX = 240;
/** How long the tail waits before reopening a stream that ended. */
const REOPEN_MS = 2000;

function tail(name, list, state) {
  let source = null;
  let stopped = false;
  let timer = null;
  const add = (text, base64) => {
    const shown = text.length > TAIL_CHARS_MAX ? `${text.slice(0, TAIL_CHARS_MAX)}… (${bytes(text.length)})` : text;
    const line = h("li", {}, h("time", {}, new Date().toLocaleTimeString()), base64 ? `(base64) ${shown}` : shown);
    list.prepend(line);
    while (list.children.length > TAIL_LINES_MAX) list.lastChild.remove();
    state.received += 1;
  };
  const open = async () => {
    if (stopped) return;
    const path = `/v1/channels/${seg(name)}/events`;
    let url = `..${path}`;
    try {
      // A ticket opens one GET; a reopened stream needs a new one, so the browser's own
      // reconnect (which would reuse it) is never left to run.
      if (token()) url += `?ticket=${encodeURIComponent(await ticket(path))}`;
    } catch (error) {
      state.problem = `could not get a stream ticket: ${error.message}`;
      timer = setTimeout(open, REOPEN_MS);
      return;
    }
    source = new EventSource(url);
    source.onopen = () => { state.open = true; state.problem = null; };
    source.onmessage = (event) => add(event.data, false);
    source.addEventListener("base64", (event) => add(event.data, true));
    source.onerror = () => {
      source.close();
      state.open = false;
      state.problem = "the stream ended; reopening";
      if (!stopped) timer = setTimeout(open, REOPEN_MS);
    };
  };
  open();
  return () => { stopped = true; clearTimeout(timer); if (source) source.close(); };
}

function publishForm(name) {
  const text = h("input", { name: "payload", value: "hello from the console", "aria-label": "message to publish" });
  const said = h("div");
  const button = h("button", { type: "submit" }, "Publish");
  return h("form", {
    class: "inline",
    onsubmit: (event) => {
      event.preventDefault();
      act(button, said, async () => {
        const { delivered, dropped } = await call("POST", `v1/channels/${seg(name)}/messages`, text.value);
        return `Delivered to ${delivered}, dropped for ${dropped}.`;
      });
    },
  }, h("label", {}, "Message", text), button, said);
}

/** Renders channel `params.channel` into `main`. */
export function render(main, params) {
  const name = params.channel;
  const samples = new Samples();
  const stats = h("div", { class: "stats", id: "channel-stats" });
  const state = { received: 0, open: false, problem: null };
  const streamState = h("p", { class: "muted", id: "tail-state" });
  const list = h("ul", { class: "tail", id: "tail", "aria-live": "off" });
  main.append(h("h1", {}, `Channel ${name}`), card("Counters", stats),
    card("Live tail", streamState, list), card("Publish a test message", publishForm(name)));
  const stopTail = tail(name, list, state);
  const polling = poll(async () => {
    const { channels } = await get("v1/channels");
    const c = channels.find((x) => x.name === name);
    if (!c) {
      fill(stats, notice(`There is no channel ${name} (channels live in memory; a restart ends them).`, "error"));
      return;
    }
    samples.add("delivered", c.delivered);
    samples.add("dropped", c.dropped);
    samples.add("published", c.published);
    fill(stats, stat("Subscribers", c.subscribers, "subscribers", String(c.subscribers)),
      stat("Published", c.published, "published"), stat("Delivered", c.delivered, "delivered"),
      stat("Dropped", c.dropped, "dropped", undefined, c.dropped > 0),
      stat("Published/s", samples.rate("published"), "published_rate", rate(samples.rate("published"))),
      stat("Delivered/s", samples.rate("delivered"), "delivered_rate", rate(samples.rate("delivered"))),
      stat("Dropped/s", samples.rate("dropped"), "dropped_rate", rate(samples.rate("dropped"))),
      stat("Mailbox", c.mailbox_capacity, "mailbox_capacity", String(c.mailbox_capacity)));
    fill(streamState, state.open
      ? `Subscribed: ${state.received} received on this page (the console is one of the subscribers).`
      : (state.problem || "Opening the stream…"));
  });
  return { stop() { stopTail(); polling.stop(); }, now: polling.now };
}
