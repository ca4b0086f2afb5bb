/**
 * The HTTP side of the client: the name rule and paths, one call as data (`Call`), and
 * `Transport`, which sends a call over `fetch` within its time limit and turns a refusal
 * into its typed error. `Client` adds one method per endpoint on top.
 */
import { ApiError, InvalidName, Timeout, TransportError, apiError } from "./errors.js";
import { REQUEST_TIMEOUT_MS_DEFAULT } from "./options.js";
const NAME = /^[A-Za-z0-9._-]{1,128}$/;
/** `value` checked against the name rule and escaped for a path (no request is made with a bad one). */
export function name(kind, value) {
    if (!NAME.test(value) || value === "." || value === "..") {
        throw new InvalidName(400, "invalid_name", `${kind} name ${JSON.stringify(value)} breaks the name rule`);
    }
    return encodeURIComponent(value);
}
/** The path of a group, its names checked and escaped. */
export function groupPath(topic, group) {
    return `/v1/topics/${name("topic", topic)}/groups/${name("group", group)}`;
}
/** Just the offset and attempt of each delivery, as the wire wants them. */
export function refs(deliveries) {
    return deliveries.map(({ offset, attempt }) => ({ offset, attempt }));
}
/** `value` without its undefined fields. */
export function defined(value) {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}
/** Sends calls to a mailroom server at `baseUrl` (see `Client`). */
export class Transport {
    baseUrl;
    token;
    requestTimeoutMs;
    fetcher;
    socketClass;
    constructor(baseUrl, options = {}) {
        this.baseUrl = baseUrl.replace(/\/+$/, "");
        this.token = options.token;
        this.requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS_DEFAULT;
        this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
        this.socketClass = options.WebSocket;
    }
    /** The headers every call carries. */
    headers() {
        return this.token === undefined ? {} : { Authorization: `Bearer ${this.token}` };
    }
    /** The WebSocket constructor: the option, or the global one. */
    webSocket() {
        const found = this.socketClass ?? globalThis.WebSocket;
        if (found === undefined) {
            throw new TransportError("no WebSocket: pass { WebSocket } to the Client (Node 20: or run with --experimental-websocket)");
        }
        return found;
    }
    /** A streaming GET (for SSE): no time limit once the answer's head arrived. */
    async stream(path, signal) {
        // The limit covers the answer's head only: a stream may then stay idle for long.
        const limit = new AbortController();
        const timer = setTimeout(() => limit.abort(), this.requestTimeoutMs);
        signal.addEventListener("abort", () => limit.abort(), { once: true });
        let response;
        try {
            response = await this.fetcher(this.baseUrl + path, { headers: this.headers(), signal: limit.signal });
        }
        catch (error) {
            throw this.transportError(error, limit.signal);
        }
        finally {
            clearTimeout(timer);
        }
        if (response.status >= 400)
            throw await this.refusal(response);
        return response;
    }
    /** Sends one call and returns its answer (or throws its typed error). */
    async send(call) {
        const headers = { ...this.headers(), ...call.headers };
        let body;
        if (call.json !== undefined) {
            headers["Content-Type"] = "application/json";
            body = JSON.stringify(call.json);
        }
        else if (call.body !== undefined) {
            headers["Content-Type"] = "application/octet-stream";
            body = call.body;
        }
        let url = this.baseUrl + call.path;
        const query = Object.entries(call.query ?? {}).filter(([, v]) => v !== undefined);
        if (query.length > 0)
            url += "?" + new URLSearchParams(query.map(([k, v]) => [k, String(v)]));
        const timer = AbortSignal.timeout(this.requestTimeoutMs + (call.waitMs ?? 0));
        let response;
        try {
            response = await this.fetcher(url, { method: call.method, headers, body, signal: timer });
        }
        catch (error) {
            throw this.transportError(error, timer);
        }
        if (response.status >= 400 && !(call.answers ?? []).includes(response.status)) {
            throw await this.refusal(response);
        }
        return response;
    }
    async json(call) {
        const response = await this.send(call);
        try {
            return (await response.json());
        }
        catch (error) {
            throw new TransportError(`reading the answer of ${call.path}: ${String(error)}`);
        }
    }
    transportError(error, timer) {
        if (error instanceof ApiError)
            return error;
        if (timer.aborted)
            return new Timeout(`timed out after ${this.requestTimeoutMs} ms (and any wait)`, "request");
        return new TransportError(String(error?.message ?? error));
    }
    async refusal(response) {
        const text = await response.text().catch(() => "");
        try {
            const body = JSON.parse(text);
            if (typeof body.error === "string") {
                return apiError(response.status, body.error, String(body.message ?? ""));
            }
        }
        catch {
            // not JSON: fall through
        }
        return apiError(response.status, "error", text);
    }
}
