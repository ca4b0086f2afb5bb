// Dead letters: the list (offset, attempts, reason, time), filtered by reason and offset
// range; one inspected with its payload; the selection redriven or purged after a
// confirmation that says how many.

import { get, call, seg } from "./api.js";
import { ago, exact, payload } from "./format.js";
import { h, card, fill, num, table, act, confirm, notice } from "./view.js";

/** The most dead letters the page reads (ten pages of the API's largest). */
const DEAD_LETTERS_SHOWN_MAX = 10000;

async function readAll(path) {
  const all = [];
  let from = 0;
  while (from !== null && all.length < DEAD_LETTERS_SHOWN_MAX) {
    const page = await get(`${path}/dead-letters?from=${from}&limit=1000`);
    all.push(...page.dead_letters);
    from = page.next;
  }
  return all;
}

/**
 * The half-open offset ranges that cover exactly `chosen` among `all` (both sorted by
 * offset): runs of neighbours in the list, so no dead letter outside the selection is
 * inside a range. The API redrives and purges by range.
 */
export function ranges(all, chosen) {
  const picked = new Set(chosen.map((d) => d.offset));
  const out = [];
  let run = null;
  for (const d of all) {
    if (picked.has(d.offset)) {
      if (run) run.to = d.offset + 1;
      else run = { from: d.offset, to: d.offset + 1 };
    } else if (run) {
      out.push(run);
      run = null;
    }
  }
  if (run) out.push(run);
  return out;
}

function filters(reasons, state, redraw) {
  const reason = h("select", { name: "reason", "aria-label": "reason" },
    h("option", { value: "" }, "any reason"),
    reasons.map((r) => h("option", { value: r, selected: r === state.reason }, r || "(none given)")));
  const from = h("input", { type: "number", min: 0, name: "from", value: state.from ?? "", placeholder: "first" });
  const to = h("input", { type: "number", min: 0, name: "to", value: state.to ?? "", placeholder: "end" });
  return h("form", {
    class: "inline",
    id: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      state.reason = reason.value;
      state.from = from.value === "" ? null : Number(from.value);
      state.to = to.value === "" ? null : Number(to.value);
      redraw();
    },
  }, h("label", {}, "Reason", reason), h("label", {}, "From offset", from), h("label", {}, "To offset (excluded)", to),
  h("button", { type: "submit", class: "secondary" }, "Filter"));
}

function matches(d, state) {
  return (state.reason === "" || (d.reason ?? "") === state.reason)
    && (state.from === null || d.offset >= state.from)
    && (state.to === null || d.offset < state.to);
}

function inspect(d, box) {
  const how = h("select", { "aria-label": "show payload as" }, ["text", "json", "hex"].map((v) => h("option", { value: v }, v)));
  const pre = h("pre", { class: "payload", id: "inspected-payload" }, payload(d.payload, d.payload_base64, "text"));
  how.addEventListener("change", () => { pre.textContent = payload(d.payload, d.payload_base64, how.value); });
  const facts = [["Offset", d.offset], ["Attempts", d.attempts], ["Reason", d.reason ?? "(none given)"],
    ["Dead-lettered", `${ago(d.at_ms)} (${exact(d.at_ms)})`]];
  if (d.key !== undefined) facts.push(["Key", d.key]);
  if (d.published_at_ms) facts.push(["Published", `${ago(d.published_at_ms)} (${exact(d.published_at_ms)})`]);
  if (d.headers) Object.entries(d.headers).forEach(([k, v]) => facts.push([`Header ${k}`, v]));
  fill(box, card(`Dead letter at offset ${d.offset}`,
    table(["", ""], facts.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, String(v))))),
    h("label", {}, "Payload as", how), pre));
  box.querySelector("h2").scrollIntoView({ block: "nearest" });
}

function row(d, state, inspected, counts) {
  const box = h("input", { type: "checkbox", checked: !state.unchecked.has(d.offset), "aria-label": `select offset ${d.offset}` });
  box.addEventListener("change", () => { (box.checked ? state.unchecked.delete(d.offset) : state.unchecked.add(d.offset)); counts(); });
  const open = h("button", { type: "button", class: "secondary", "aria-label": `inspect offset ${d.offset}` }, String(d.offset));
  open.addEventListener("click", () => inspect(d, inspected));
  return h("tr", { dataset: { offset: d.offset } }, h("td", {}, box), h("td", {}, open),
    num(d.attempts, "attempts", String(d.attempts)), h("td", {}, d.reason ?? h("span", { class: "muted" }, "none given")),
    h("td", { title: exact(d.at_ms) }, ago(d.at_ms)));
}

/** Draws the dead letters that pass the filter, with how many there are and are shown. */
function drawList(els, state, counts) {
  const shown = state.all.filter((d) => matches(d, state));
  const rows = shown.map((d) => row(d, state, els.inspected, counts));
  const capped = state.all.length >= DEAD_LETTERS_SHOWN_MAX ? " (the first 10,000)" : "";
  fill(els.list, h("p", { class: "muted", id: "dead-letter-count", dataset: { value: state.all.length, shown: shown.length } },
    `${state.all.length} dead letters${capped}, ${shown.length} shown`),
  table(["Select", "Offset", "#Attempts", "Reason", "Dead-lettered"], rows, "No dead letters match.", { id: "dead-letters-table" }));
  counts();
}

function question(verb, n, group) {
  return verb === "redrive"
    ? `Redrive ${n} dead letters back to group ${group}? Each is delivered again, with a fresh failure budget.`
    : `Purge ${n} dead letters of group ${group}? They are deleted for good.`;
}

/** Redrives or purges `chosen`, range by range; answers how many the server did. */
async function settle(path, verb, all, chosen) {
  let total = 0;
  for (const range of ranges(all, chosen)) {
    total += (await call("POST", `${path}/dead-letters/${verb}`, range)).count;
  }
  return total;
}

function layout(main, params) {
  const els = {
    filterBox: h("div"),
    list: h("div", { id: "dead-letters" }),
    inspected: h("div", { id: "inspected" }),
    said: h("div", { id: "outcome" }),
    redrive: h("button", { type: "button", id: "redrive" }, "Redrive selected"),
    purge: h("button", { type: "button", id: "purge", class: "danger" }, "Purge selected"),
    reload: h("button", { type: "button", class: "secondary" }, "Reload"),
  };
  main.append(h("h1", {}, `Dead letters of ${params.group} (${params.topic})`), card("Filter", els.filterBox),
    card("Dead letters", els.list, h("div", { class: "actions" }, els.reload, els.redrive, els.purge), els.said),
    els.inspected);
  return els;
}

/** Renders the dead letters of group `params.group` of `params.topic` into `main`. */
export function render(main, params) {
  const path = `v1/topics/${seg(params.topic)}/groups/${seg(params.group)}`;
  const state = { reason: "", from: null, to: null, all: [], unchecked: new Set() };
  const els = layout(main, params);
  const selected = () => state.all.filter((d) => matches(d, state) && !state.unchecked.has(d.offset));
  const counts = () => {
    const n = selected().length;
    els.redrive.textContent = `Redrive selected (${n})`;
    els.purge.textContent = `Purge selected (${n})`;
    els.redrive.disabled = els.purge.disabled = n === 0;
  };
  const redraw = () => drawList(els, state, counts);
  const load = async () => {
    state.all = await readAll(path);
    const reasons = [...new Set(state.all.map((d) => d.reason ?? ""))].sort();
    fill(els.filterBox, filters(reasons, state, redraw));
    redraw();
  };
  const take = (verb, button) => async () => {
    const chosen = selected();
    if (!(await confirm(question(verb, chosen.length, params.group), verb === "redrive" ? "Redrive" : "Purge"))) return;
    await act(button, els.said, async () => {
      const total = await settle(path, verb, state.all, chosen);
      state.unchecked.clear();
      await load();
      return `${verb === "redrive" ? "Redrove" : "Purged"} ${total} dead letters.`;
    });
  };
  els.redrive.addEventListener("click", take("redrive", els.redrive));
  els.purge.addEventListener("click", take("purge", els.purge));
  els.reload.addEventListener("click", () => act(els.reload, els.said, async () => { await load(); return null; }));
  load().catch((error) => fill(els.list, notice(error.message, "error")));
  return { stop() {} };
}
