// Overview: every topic (messages, bytes, publish rate and its chart), every group (lag,
// in flight, dead letters) and every live channel (subscribers, delivered and dropped
// per second), refreshed every REFRESH_MS without reloading.

import { get, call, seg } from "./api.js";
import { sparkline, Samples } from "./chart.js";
import { bytes, count, rate } from "./format.js";
import { h, card, fill, num, table, link, poll, act } from "./view.js";

/** Every topic with its groups' details: one list call, then each topic and group. */
export async function topicsWithGroups() {
  const { topics } = await get("v1/topics");
  return Promise.all(topics.map(async (summary) => {
    const details = await Promise.all(summary.groups.map((name) =>
      get(`v1/topics/${seg(summary.name)}/groups/${seg(name)}`)));
    return { ...summary, details };
  }));
}

function topicRows(topics, samples) {
  return topics.map((t) => {
    samples.add(`topic:${t.name}`, t.end);
    const rates = samples.rates(`topic:${t.name}`);
    return h("tr", { dataset: { topic: t.name } },
      h("td", {}, link(t.name, "topics", t.name)),
      num(t.end - t.start, "messages"),
      h("td", { class: "num", title: t.bytes, dataset: { field: "bytes", value: t.bytes } }, bytes(t.bytes)),
      num(samples.rate(`topic:${t.name}`), "publish_rate", rate(samples.rate(`topic:${t.name}`))),
      h("td", {}, sparkline(rates, `publish rate of ${t.name}, last ${rates.length} samples`)));
  });
}

function groupRows(topics) {
  return topics.flatMap((t) => t.details.map((g) =>
    h("tr", { dataset: { topic: t.name, group: g.name } },
      h("td", {}, link(t.name, "topics", t.name)),
      h("td", {}, link(g.name, "topics", t.name, "groups", g.name), g.paused ? h("span", { class: "badge" }, " paused") : null),
      num(g.lag, "lag"),
      num(g.deliveries.length, "in_flight"),
      h("td", { class: "num", title: g.dead_letters, dataset: { field: "dead_letters", value: g.dead_letters } },
        g.dead_letters ? link(count(g.dead_letters), "topics", t.name, "groups", g.name, "dead-letters") : "0"))));
}

function channelRows(channels, samples) {
  return channels.map((c) => {
    samples.add(`delivered:${c.name}`, c.delivered);
    samples.add(`dropped:${c.name}`, c.dropped);
    const delivered = samples.rate(`delivered:${c.name}`);
    const dropped = samples.rate(`dropped:${c.name}`);
    return h("tr", { dataset: { channel: c.name } },
      h("td", {}, link(c.name, "channels", c.name)),
      num(c.subscribers, "subscribers"),
      num(delivered, "delivered_rate", rate(delivered)),
      num(dropped, "dropped_rate", rate(dropped)),
      num(c.delivered, "delivered"),
      num(c.dropped, "dropped"));
  });
}

function createTopicForm(where) {
  const name = h("input", { name: "topic", required: true, pattern: "[A-Za-z0-9._\\-]{1,128}", "aria-label": "new topic name" });
  const button = h("button", { type: "submit" }, "Create topic");
  return h("form", {
    class: "inline",
    onsubmit: (event) => {
      event.preventDefault();
      act(button, where, async () => {
        await call("PUT", `v1/topics/${seg(name.value)}`);
        return `Topic ${name.value} is there.`;
      });
    },
  }, h("label", {}, "New topic", name), button);
}

/** Renders the overview into `main`; answers what stops its polling. */
export function render(main) {
  const samples = new Samples();
  const topicsBox = h("div", { id: "topics" });
  const groupsBox = h("div", { id: "groups" });
  const channelsBox = h("div", { id: "channels" });
  const said = h("div");
  main.append(
    h("h1", {}, "Overview"),
    card("Topics", topicsBox, createTopicForm(said), said),
    card("Consumer groups", groupsBox),
    card("Live channels", channelsBox));
  return poll(async () => {
    const [topics, { channels }] = await Promise.all([topicsWithGroups(), get("v1/channels")]);
    fill(topicsBox, table(["Topic", "#Messages", "#Bytes", "#Publish rate", "Recent rate"],
      topicRows(topics, samples), "No topics yet.", { id: "topics-table" }));
    fill(groupsBox, table(["Topic", "Group", "#Lag", "#In flight", "#Dead letters"],
      groupRows(topics), "No consumer groups yet.", { id: "groups-table" }));
    fill(channelsBox, table(["Channel", "#Subscribers", "#Delivered/s", "#Dropped/s", "#Delivered", "#Dropped"],
      channelRows(channels, samples), "No live channels.", { id: "channels-table" }));
  });
}
