// Browsing a topic's messages without a group (GET /v1/topics/{topic}/messages): from
// an offset or from a time, a page at a time (earlier and later), each payload as
// text, pretty JSON or hex, with its key, headers and publish time. A read moves no
// group, so browsing is safe while consumers run.

import { get, seg, hasRoute, missing } from "./api.js";
import { ago, exact, payload } from "./format.js";
import { h, fill, num, table, act, notice } from "./view.js";

const BROWSE_ROUTE = "/v1/topics/{topic}/messages";
const UNAVAILABLE = "Reading messages without a group is not available on this server.";

/** `ms` as a `datetime-local` value in the browser's time zone, to the millisecond. */
export function localInput(ms) {
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:`
    + `${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

function messageRow(message, how) {
  const meta = [];
  if (message.key !== undefined && message.key !== null) meta.push(`key ${message.key}`);
  if (message.published_at_ms) {
    meta.push(h("span", { title: exact(message.published_at_ms) }, `published ${ago(message.published_at_ms)}`));
  }
  const headers = message.headers && Object.keys(message.headers).length
    ? h("div", { class: "muted headers" }, Object.entries(message.headers).map(([k, v]) => `${k}: ${v}`).join(" · ")) : null;
  return h("tr", { dataset: { offset: message.offset, key: message.key ?? "", published: message.published_at_ms ?? "" } },
    num(message.offset, "offset", String(message.offset)),
    h("td", {}, h("div", { class: "muted" }, meta.flatMap((m, i) => (i ? [" · ", m] : [m]))), headers,
      h("pre", { class: "payload" }, payload(message.payload, message.payload_base64, how))));
}

/** What the page holds, in words: its offsets, the log's end, and what retention removed. */
function summary(page, asked) {
  const last = page.messages.length ? page.messages[page.messages.length - 1].offset : null;
  const words = [last === null ? `No messages from offset ${page.first}.` : `Offsets ${page.first} to ${last}`,
    `of a log that ends at ${page.end}`];
  if (asked !== null && page.first > asked) words.push(`(offsets ${asked} to ${page.first - 1} were removed by retention)`);
  return h("p", { class: "muted", id: "browse-summary", dataset: { first: page.first, next: page.next, end: page.end } },
    words.join(" "));
}

function form(fields, onShow) {
  const start = h("select", { name: "start", "aria-label": "start at" },
    h("option", { value: "offset" }, "offset"), h("option", { value: "time" }, "time"));
  const pick = () => {
    fields.from.closest("label").hidden = start.value !== "offset";
    fields.time.closest("label").hidden = start.value !== "time";
  };
  start.addEventListener("change", pick);
  const button = h("button", { type: "submit" }, "Show");
  const el = h("form", {
    class: "inline",
    id: "browse-form",
    onsubmit: (event) => {
      event.preventDefault();
      onShow(button, start.value === "time"
        ? { from_time_ms: new Date(fields.time.value).getTime() } : { from: Number(fields.from.value) });
    },
  }, h("label", {}, "Start at", start), h("label", {}, "From offset", fields.from),
  h("label", { hidden: true }, "From time", fields.time), h("label", {}, "Limit", fields.limit),
  h("label", {}, "Show as", fields.how), button);
  return el;
}

/** The browser of topic `name`'s messages: its form and where the pages appear. */
export function browser(name) {
  const fields = {
    from: h("input", { name: "from", type: "number", min: 0, value: 0 }),
    time: h("input", { name: "from_time", type: "datetime-local", step: "0.001", value: localInput(Date.now() - 3600e3) }),
    limit: h("input", { name: "limit", type: "number", min: 1, max: 1000, value: 20 }),
    how: h("select", { name: "as" }, ["text", "json", "hex"].map((v) => h("option", { value: v }, v))),
  };
  const out = h("div", { id: "browse" });
  const earlier = h("button", { type: "button", class: "secondary", id: "browse-earlier" }, "← Earlier");
  const later = h("button", { type: "button", class: "secondary", id: "browse-later" }, "Later →");
  const pager = h("div", { class: "actions", hidden: true }, earlier, later);
  // The starts of the pages shown before this one, so "Earlier" goes back exactly.
  const view = { page: null, asked: null, back: [] };
  const draw = () => {
    const { page } = view;
    fill(out, summary(page, view.asked), table(["#Offset", "Message"],
      page.messages.map((m) => messageRow(m, fields.how.value)), "No messages here."));
  };
  // After `act`, which enables its button again when it is done.
  const pagerState = () => {
    pager.hidden = view.page === null;
    earlier.disabled = view.back.length === 0;
    later.disabled = view.page === null || view.page.next >= view.page.end;
  };
  const show = (button, where, back) => act(button, out, async () => {
    if (!(await hasRoute("GET", BROWSE_ROUTE))) {
      fill(out, notice(UNAVAILABLE, "error"));
      return null;
    }
    const query = new URLSearchParams({ ...where, limit: Number(fields.limit.value) });
    try {
      view.page = await get(`v1/topics/${seg(name)}/messages?${query}`);
    } catch (error) {
      if (!missing(error)) throw error;
      fill(out, notice(UNAVAILABLE, "error"));
      return null;
    }
    view.asked = where.from ?? null;
    view.back = back;
    draw();
    return null;
  }).then(pagerState);
  fields.how.addEventListener("change", () => view.page && draw());
  later.addEventListener("click", () => show(later, { from: view.page.next }, [...view.back, view.page.first]));
  earlier.addEventListener("click", () => show(earlier, { from: view.back[view.back.length - 1] }, view.back.slice(0, -1)));
  return [form(fields, (button, where) => show(button, where, [])), out, pager];
}
