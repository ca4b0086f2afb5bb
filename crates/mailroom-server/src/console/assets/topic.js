// Topic: its numbers, its groups (create, delete), a test publish, and browsing its
// messages without a group (messages.js) where the server has that route.

import { get, call, seg } from "./api.js";
import { bytes } from "./format.js";
import { browser } from "./messages.js";
import { h, card, fill, num, stat, table, link, poll, act, confirm } from "./view.js";

function groupRows(name, groups, said) {
  return groups.map((g) => {
    const remove = h("button", { type: "button", class: "danger", "aria-label": `delete group ${g.name}` }, "Delete");
    remove.addEventListener("click", async () => {
      if (!(await confirm(`Delete group ${g.name} of ${name}? Its position and its ${g.dead_letters} dead letters go with it.`, "Delete group"))) return;
      act(remove, said, async () => {
        await call("DELETE", `v1/topics/${seg(name)}/groups/${seg(g.name)}`);
        return `Group ${g.name} deleted.`;
      });
    });
    return h("tr", { dataset: { group: g.name } },
      h("td", {}, link(g.name, "topics", name, "groups", g.name)),
      num(g.position, "position", String(g.position)), num(g.lag, "lag"), num(g.dead_letters, "dead_letters"),
      h("td", {}, remove));
  });
}

function createGroupForm(name, said) {
  const group = h("input", { name: "group", required: true, pattern: "[A-Za-z0-9._\\-]{1,128}" });
  const attempts = h("input", { name: "max_attempts", type: "number", min: 1, value: 5, required: true });
  const start = h("select", { name: "start" }, h("option", { value: "earliest" }, "earliest"), h("option", { value: "latest" }, "latest"));
  const lease = h("input", { name: "lease_ms", type: "number", min: 1, placeholder: "none" });
  const window = h("input", { name: "max_in_flight", type: "number", min: 1, placeholder: "1" });
  const button = h("button", { type: "submit" }, "Create group");
  return h("form", {
    class: "inline",
    onsubmit: (event) => {
      event.preventDefault();
      const body = { max_attempts: Number(attempts.value), start: start.value };
      if (lease.value) body.lease_ms = Number(lease.value);
      if (window.value) body.max_in_flight = Number(window.value);
      act(button, said, async () => {
        await call("PUT", `v1/topics/${seg(name)}/groups/${seg(group.value)}`, body);
        return `Group ${group.value} created.`;
      });
    },
  }, h("label", {}, "Group", group), h("label", {}, "Max attempts", attempts), h("label", {}, "Start", start),
  h("label", {}, "Lease ms", lease), h("label", {}, "Max in flight", window), button);
}

function publishForm(name) {
  const text = h("textarea", { name: "payload", "aria-label": "message to publish" }, "hello from the console");
  const key = h("input", { name: "key", placeholder: "optional" });
  const said = h("div");
  const button = h("button", { type: "submit" }, "Publish");
  return h("form", {
    onsubmit: (event) => {
      event.preventDefault();
      const headers = key.value ? { "Mailroom-Key": key.value } : {};
      act(button, said, async () => {
        const { offset } = await call("POST", `v1/topics/${seg(name)}/messages`, text.value, headers);
        return `Published at offset ${offset}.`;
      });
    },
  }, h("label", { class: "wide" }, "Payload", text), h("div", { class: "inline" }, h("label", {}, "Key", key), button), said);
}

/** Renders topic `params.topic` into `main`. */
export function render(main, params) {
  const name = params.topic;
  const stats = h("div", { class: "stats", id: "topic-stats" });
  const groups = h("div", { id: "groups" });
  const said = h("div");
  main.append(h("h1", {}, `Topic ${name}`), card("Numbers", stats),
    card("Consumer groups", groups, createGroupForm(name, said), said),
    card("Publish a test message", publishForm(name)),
    card("Messages", ...browser(name)));
  return poll(async () => {
    const t = await get(`v1/topics/${seg(name)}`);
    fill(stats, stat("Messages", t.end - t.start, "messages"), stat("First offset", t.start, "start", String(t.start)),
      stat("End offset", t.end, "end", String(t.end)), stat("On disk", t.bytes, "bytes", bytes(t.bytes)),
      stat("Removed by retention", t.removed.messages, "removed"));
    fill(groups, table(["Group", "#Position", "#Lag", "#Dead letters", ""],
      groupRows(name, t.groups, said), "No groups yet.", { id: "groups-table" }));
  });
}
