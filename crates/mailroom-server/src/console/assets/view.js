// Building the page: elements from data (never HTML from data), tables, stat tiles, the
// confirmation dialog, the status line and the poller every page refreshes by.

import { count } from "./format.js";

/** `h("td", {class: "num"}, "3")`: an element with attributes and children. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A number cell: shown for people, exact in its title and data-value. */
export function num(value, field, shown = count(value)) {
  return h("td", { class: "num", title: value ?? "", dataset: { field: field || "", value: value ?? "" } }, shown);
}

/** A table with `head` (strings; a leading "#" makes a numeric column) and `rows`. */
export function table(head, rows, empty = "Nothing here yet.", attrs = {}) {
  if (rows.length === 0) return h("p", { class: "muted" }, empty);
  const ths = head.map((title) => title.startsWith("#")
    ? h("th", { class: "num", scope: "col" }, title.slice(1))
    : h("th", { scope: "col" }, title));
  return h("table", attrs, h("thead", {}, h("tr", {}, ths)), h("tbody", {}, rows));
}

/** A stat tile: a label over a number (exact in data-value). */
export function stat(label, value, field, shown = count(value), bad = false) {
  return h("div", { class: bad ? "stat bad" : "stat" },
    h("div", { class: "label" }, label),
    h("div", { class: "value", title: value ?? "", dataset: { field, value: value ?? "" } }, shown));
}

/** A titled card. */
export const card = (title, ...children) => h("section", { class: "card" }, h("h2", {}, title), ...children);

/** A notice line; `kind` is "error", "ok" or "". */
export const notice = (text, kind = "") => h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
  return el;
}

/** Says something in the header's status line. */
export function status(text, error = false) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = error ? "error" : "";
}

/** Asks `question` in the confirmation dialog; resolves true only for the confirm button. */
export function confirm(question, action = "Confirm") {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-text").textContent = question;
  document.getElementById("confirm-ok").textContent = action;
  dialog.returnValue = "cancel";
  dialog.showModal();
  document.getElementById("confirm-cancel").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

/** The refresh period: the issue allows polling at most every 2 s. */
export const REFRESH_MS = 2000;

/**
 * Calls `refresh` now and then `REFRESH_MS` after each one finishes, until `stop()`;
 * errors go to the status line and the polling goes on.
 */
export function poll(refresh) {
  let stopped = false;
  let timer = null;
  let running = false;
  let again = false;
  const round = async () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    clearTimeout(timer);
    try {
      await refresh();
      if (!stopped) status(`updated ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      if (!stopped) status(`refresh failed: ${error.message}`, true);
    }
    running = false;
    if (again) {
      again = false;
      round();
    } else if (!stopped) {
      timer = setTimeout(round, REFRESH_MS);
    }
  };
  round();
  return {
    stop() { stopped = true; clearTimeout(timer); },
    /** Refreshes at once (after an action), then on the usual period. */
    now: round,
  };
}

/** A link to a console page (hash routes, so the page URL itself never changes). */
export const link = (text, ...path) => h("a", { href: `#/${path.map(encodeURIComponent).join("/")}` }, text);

/** What `act` calls after every action, so the page shows its effect at once. */
let afterAction = () => {};

/** Sets what runs after each action on the current page. */
export function onAction(callback) {
  afterAction = callback;
}

/** Runs `action` from a button, showing its outcome in `where`; the button waits meanwhile. */
export async function act(button, where, action) {
  button.disabled = true;
  try {
    const said = await action();
    if (said) fill(where, notice(said, "ok"));
    afterAction();
  } catch (error) {
    fill(where, notice(`${error.message}${error.code ? ` (${error.code})` : ""}`, "error"));
  } finally {
    button.disabled = false;
  }
}
