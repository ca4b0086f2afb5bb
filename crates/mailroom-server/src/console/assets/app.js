// The console's entry: hash routes to pages, the breadcrumb, and stopping the last
// page's polling before the next one starts.

import { consoleSettings, askToken, token } from "./api.js";
import { h, fill, status, onAction } from "./view.js";
import * as overview from "./overview.js";
import * as topic from "./topic.js";
import * as group from "./group.js";
import * as deadLetters from "./dead_letters.js";
import * as channel from "./channel.js";

// #/, #/topics/T, #/topics/T/groups/G, #/topics/T/groups/G/dead-letters, #/channels/C
function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "topics" && parts.length === 2) return [topic, { topic: parts[1] }];
  if (parts[0] === "topics" && parts[2] === "groups" && parts.length === 4) {
    return [group, { topic: parts[1], group: parts[3] }];
  }
  if (parts[0] === "topics" && parts[2] === "groups" && parts[4] === "dead-letters") {
    return [deadLetters, { topic: parts[1], group: parts[3] }];
  }
  if (parts[0] === "channels" && parts.length === 2) return [channel, { channel: parts[1] }];
  return [overview, {}];
}

function crumbs(params) {
  const items = [];
  const add = (text, href) => {
    if (items.length) items.push(h("span", { class: "sep", "aria-hidden": "true" }, "/"));
    items.push(h("a", { href }, text));
  };
  if (params.topic) add(`topic ${params.topic}`, `#/topics/${encodeURIComponent(params.topic)}`);
  if (params.group) add(`group ${params.group}`, `#/topics/${encodeURIComponent(params.topic)}/groups/${encodeURIComponent(params.group)}`);
  if (params.channel) add(`channel ${params.channel}`, `#/channels/${encodeURIComponent(params.channel)}`);
  fill(document.getElementById("crumbs"), items);
}

let current = null;

function show() {
  if (current) current.stop();
  const [page, params] = route(location.hash);
  crumbs(params);
  const main = document.getElementById("main");
  fill(main);
  status("");
  current = page.render(main, params) || { stop() {} };
  onAction(() => current.now && current.now());
  main.focus({ preventScroll: true });
}

async function start() {
  const settings = await consoleSettings();
  if (settings.token_required && !token()) await askToken("This server needs its bearer token.");
  window.addEventListener("hashchange", show);
  show();
}

start();
