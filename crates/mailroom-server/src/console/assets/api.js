// The JSON API as the console calls it: relative URLs (so a path prefix in front of the
// broker works), the token from sessionStorage as Authorization: Bearer, and one token
// prompt shared by every call that the server answered 401.

const TOKEN_KEY = "mailroom.console.token";

/** An answer other than 2xx, with the server's stable error code. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

/** The stored token, or null. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

let settings = null;

/** The console's settings from the server (whether it needs a token). */
export async function consoleSettings() {
  if (!settings) {
    const answer = await fetch("console.json", { cache: "no-store" });
    settings = await answer.json();
  }
  return settings;
}

let prompt = null;

/** Asks for the token once for every caller waiting on it; `reason` says why. */
export function askToken(reason) {
  if (prompt) return prompt;
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  const message = document.getElementById("token-message");
  message.textContent = reason;
  message.className = reason.startsWith("The server refused") ? "notice error" : "";
  input.value = "";
  prompt = new Promise((resolve) => {
    const submitted = (event) => {
      event.preventDefault();
      if (!input.value) return;
      sessionStorage.setItem(TOKEN_KEY, input.value);
      input.value = "";
      dialog.removeEventListener("submit", submitted);
      dialog.close();
      prompt = null;
      resolve();
    };
    dialog.addEventListener("submit", submitted);
    // Escape must not leave the console without a way back to the prompt.
    dialog.addEventListener("cancel", (event) => event.preventDefault(), { once: true });
  });
  dialog.showModal();
  input.focus();
  return prompt;
}

function headers(extra) {
  const all = { ...extra };
  const stored = token();
  if (stored) all.Authorization = `Bearer ${stored}`;
  return all;
}

/** `fetch` of `path` (under the server's root, without a leading slash) with the token. */
async function send(method, path, body, extra) {
  const init = { method, headers: headers(extra), cache: "no-store" };
  if (typeof body === "string") {
    init.body = body;
    init.headers["Content-Type"] = "text/plain; charset=utf-8";
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const sentToken = token();
  const answer = await fetch(`../${path}`, init);
  if (answer.status === 401) {
    const problem = await answer.json().catch(() => ({}));
    if (token() === sentToken) {
      await askToken(sentToken
        ? `The server refused this token (${problem.message || "401 unauthorized"}). Enter the right one.`
        : "This server needs its bearer token.");
    }
    return send(method, path, body, extra);
  }
  return answer;
}

/** Calls the API and answers its JSON (null for an empty answer). */
export async function call(method, path, body, extra) {
  const answer = await send(method, path, body, extra);
  const text = await answer.text();
  const json = text ? JSON.parse(text) : null;
  if (!answer.ok) {
    throw new ApiError(answer.status, json && json.error, json && json.message);
  }
  return json;
}

/** `GET` of `path`. */
export const get = (path) => call("GET", path);

/** A path segment for a name (names are [A-Za-z0-9._-], but encode all the same). */
export const seg = (name) => encodeURIComponent(name);

let document_ = null;

/**
 * Whether the server has the route `template` (as in /openapi.json) for `method`. Asked
 * of the document, so the console never calls a route this server lacks; without the
 * document (a proxy that hides it) the answer is "maybe" (true) and the caller handles
 * 404 and 405.
 */
export async function hasRoute(method, template) {
  if (document_ === null) {
    try {
      const answer = await fetch("../openapi.json", { cache: "no-store" });
      document_ = answer.ok ? await answer.json() : {};
    } catch {
      document_ = {};
    }
  }
  if (!document_.paths) return true;
  const item = document_.paths[template];
  return Boolean(item && item[method.toLowerCase()]);
}

/** Whether an error means the route is not on this server. */
export const missing = (error) =>
  error instanceof ApiError && (error.status === 405 || (error.status === 404 && error.code === "not_found"));

/** A ticket for one `GET` under `path` (a server path like /v1/channels/c/events). */
export async function ticket(path) {
  const answer = await call("POST", "v1/tickets", { path });
  return answer.ticket;
}
