// Group: settings, counters, lag over time, every delivery in flight, and seek, pause
// and resume where the server has those routes.

import { get, call, seg, hasRoute, missing } from "./api.js";
import { sparkline, Samples } from "./chart.js";
import { ago, deadline, duration, exact } from "./format.js";
import { h, card, fill, num, stat, table, link, poll, act, confirm, notice } from "./view.js";

const BASE = "/v1/topics/{topic}/groups/{group}";

function backoff(b) {
  if (!b) return "none";
  if (b.kind === "fixed") return `fixed ${duration(b.delay_ms)}`;
  return `exponential ${duration(b.base_ms)} doubling to ${duration(b.cap_ms)}`;
}

function settings(g) {
  const pause = g.paused
    ? (g.paused_until_ms ? `paused until ${exact(g.paused_until_ms)} (${ago(g.paused_until_ms)})` : "paused until resumed")
    : "running";
  return table(["Setting", "Value"], [
    ["Max attempts", g.max_attempts], ["Lease", g.lease_ms ? duration(g.lease_ms) : "none (no expiry)"],
    ["Backoff", backoff(g.backoff)], ["Max in flight", g.max_in_flight],
    ["State", g.paused === undefined ? "running (this server has no pause)" : pause],
  ].map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, String(v)))));
}

function counters(g) {
  const c = g.counters;
  return [stat("Position", g.position, "position", String(g.position)), stat("Lag", g.lag, "lag"),
    stat("In flight", g.deliveries.length, "in_flight"), stat("Dead letters", g.dead_letters, "dead_letters", undefined, g.dead_letters > 0),
    stat("Redeliveries", c.redeliveries, "redeliveries"), stat("Releases", c.releases, "releases"),
    stat("Expired leases", c.expired_leases, "expired_leases"), stat("Redriven", c.redrives, "redrives"),
    stat("Purged", c.purged, "purged")];
}

function leaseCell(d, g) {
  if (d.lease_deadline_ms === null || d.lease_deadline_ms === undefined) {
    return h("td", { dataset: { field: "lease_deadline", value: "" } }, g.lease_ms ? "—" : "no lease");
  }
  const shown = deadline(d.lease_deadline_ms);
  return h("td", {
    class: shown === "expired" ? "expired" : null,
    title: exact(d.lease_deadline_ms),
    dataset: { field: "lease_deadline", value: d.lease_deadline_ms },
  }, shown);
}

function inFlight(g) {
  const rows = g.deliveries.map((d) => h("tr", { dataset: { offset: d.offset } },
    num(d.offset, "offset", String(d.offset)), num(d.attempt, "attempt", String(d.attempt)),
    h("td", { dataset: { field: "consumer", value: d.consumer ?? "" } },
      d.consumer ?? h("span", { class: "muted" }, "anonymous")),
    leaseCell(d, g)));
  const note = g.deliveries.length && g.deliveries[0].consumer === undefined
    ? h("p", { class: "muted" }, "This server does not report each delivery's consumer and lease deadline.") : null;
  return [table(["#Offset", "#Attempt", "Consumer", "Lease ends"], rows, "Nothing in flight.", { id: "in-flight-table" }), note];
}

function controls(names, said) {
  const path = `v1/topics/${seg(names.topic)}/groups/${seg(names.group)}`;
  const box = h("div", { id: "group-controls" });
  (async () => {
    const [seek, pause, resume] = await Promise.all(["seek", "pause", "resume"].map((r) => hasRoute("POST", `${BASE}/${r}`)));
    if (!seek && !pause && !resume) {
      fill(box, notice("Seek, pause and resume are not available on this server."));
      return;
    }
    const offset = h("input", { type: "number", min: 0, name: "offset", placeholder: "offset" });
    const where = h("select", { name: "to" }, ["offset", "earliest", "latest"].map((v) => h("option", { value: v }, v)));
    const seekButton = h("button", { type: "submit", class: "danger" }, "Seek");
    const seekForm = h("form", {
      class: "inline",
      onsubmit: async (event) => {
        event.preventDefault();
        const body = where.value === "offset" ? { offset: Number(offset.value) } : { to: where.value };
        const target = where.value === "offset" ? `offset ${offset.value}` : `the ${where.value} message`;
        if (!(await confirm(`Move group ${names.group} to ${target}? Messages it skips are not delivered; messages it goes back over are delivered again.`, "Seek"))) return;
        act(seekButton, said, async () => post(`${path}/seek`, body, (a) => `Group moved to position ${a.position}.`));
      },
    }, h("label", {}, "Seek to", where), h("label", {}, "Offset", offset), seekButton);
    const pauseButton = h("button", { type: "button", class: "secondary" }, "Pause");
    pauseButton.addEventListener("click", () => act(pauseButton, said, () => post(`${path}/pause`, {}, () => "Group paused.")));
    const resumeButton = h("button", { type: "button", class: "secondary" }, "Resume");
    resumeButton.addEventListener("click", () => act(resumeButton, said, () => post(`${path}/resume`, undefined, (a) => (a.changed ? "Group resumed." : "The group was not paused."))));
    fill(box, seek ? seekForm : null, h("div", { class: "inline" }, pause ? pauseButton : null, resume ? resumeButton : null));
  })();
  return box;
}

async function post(path, body, say) {
  try {
    return say(await call("POST", path, body));
  } catch (error) {
    if (missing(error)) return "Not available on this server.";
    throw error;
  }
}

/** Renders group `params.group` of `params.topic` into `main`. */
export function render(main, params) {
  const samples = new Samples(60);
  const stats = h("div", { class: "stats", id: "group-stats" });
  const chart = h("div", { id: "lag-chart" });
  const flight = h("div", { id: "in-flight" });
  const settingsBox = h("div", { id: "settings" });
  const said = h("div");
  main.append(h("h1", {}, `Group ${params.group} of ${params.topic}`),
    card("Counters", stats, h("p", {}, link("Dead letters →", "topics", params.topic, "groups", params.group, "dead-letters"))),
    card("Lag over time", chart), card("Deliveries in flight", flight),
    card("Position and pause", controls(params, said), said), card("Settings", settingsBox));
  return poll(async () => {
    const g = await get(`v1/topics/${seg(params.topic)}/groups/${seg(params.group)}`);
    samples.add("lag", g.lag);
    const lags = samples.values("lag");
    fill(stats, counters(g));
    fill(chart, sparkline(lags, `lag over the last ${lags.length} samples`, 480, 60),
      h("p", { class: "muted" }, `last ${lags.length} samples, one every 2 s; now ${g.lag}`));
    fill(flight, inFlight(g));
    fill(settingsBox, settings(g));
  });
}
