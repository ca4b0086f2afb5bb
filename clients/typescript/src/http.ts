/**
 * The HTTP side of the client: the name rule and paths, one call as data (`Call`), and
 * `Transport`, which sends a call over `fetch` within its time limit and turns a refusal
 * into its typed error. `Client` adds one method per endpoint on top.
 */

import { ApiError, InvalidName, Timeout, TransportError, apiError } from "./errors.js";
import type { DeliveryRef } from "./models.js";
import { REQUEST_TIMEOUT_MS_DEFAULT, type ClientOptions, type WebSocketConstructor } from "./options.js";

const NAME = /^[A-Za-z0-9._-]{1,128}$/;

/** `value` checked against the name rule and escaped for a path (no request is made with a bad one). */
export function name(kind: string, value: string): string {
  if (!NAME.test(value) || value === "." || value === "..") {
    throw new InvalidName(400, "invalid_name", `${kind} name ${JSON.stringify(value)} breaks the name rule`);
  }
  return encodeURIComponent(value);
}

/** The path of a group, its names checked and escaped. */
export function groupPath(topic: string, group: string): string {
  return `/v1/topics/${name("topic", topic)}/groups/${name("group", group)}`;
}

/** Just the offset and attempt of each delivery, as the wire wants them. */
export function refs(deliveries: DeliveryRef[]): DeliveryRef[] {
  return deliveries.map(({ offset, attempt }) => ({ offset, attempt }));
}

/** `value` without its undefined fields. */
export function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** One HTTP request. */
export interface Call {
  method: string;
  path: string;
  json?: unknown;
  body?: Uint8Array;
  /** Request headers beyond the token and content type (the raw publish's metadata). */
  headers?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  waitMs?: number;
  /** Error statuses that are answers here (`/healthz`'s 503). */
  answers?: number[];
}

/** Sends calls to a mailroom server at `baseUrl` (see `Client`). */
export class Transport {
  readonly baseUrl: string;
  readonly token?: string;
  readonly requestTimeoutMs: number;
  private readonly fetcher: typeof fetch;
  private readonly socketClass?: WebSocketConstructor;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS_DEFAULT;
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.socketClass = options.WebSocket;
  }

  /** The headers every call carries. */
  headers(): Record<string, string> {
    return this.token === undefined ? {} : { Authorization: `Bearer ${this.token}` };
  }

  /** The WebSocket constructor: the option, or the global one. */
  webSocket(): WebSocketConstructor {
    const found = this.socketClass ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (found === undefined) {
      throw new TransportError(
        "no WebSocket: pass { WebSocket } to the Client (Node 20: or run with --experimental-websocket)",
      );
    }
    return found;
  }

  /** A streaming GET (for SSE): no time limit once the answer's head arrived. */
  async stream(path: string, signal: AbortSignal): Promise<Response> {
    // The limit covers the answer's head only: a stream may then stay idle for long.
    const limit = new AbortController();
    const timer = setTimeout(() => limit.abort(), this.requestTimeoutMs);
    signal.addEventListener("abort", () => limit.abort(), { once: true });
    let response: Response;
    try {
      response = await this.fetcher(this.baseUrl + path, { headers: this.headers(), signal: limit.signal });
    } catch (error) {
      throw this.transportError(error, limit.signal);
    } finally {
      clearTimeout(timer);
    }
    if (response.status >= 400) throw await this.refusal(response);
    return response;
  }

  /** Sends one call and returns its answer (or throws its typed error). */
  protected async send(call: Call): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers(), ...call.headers };
    let body: BodyInit | undefined;
    if (call.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.json);
    } else if (call.body !== undefined) {
      headers["Content-Type"] = "application/octet-stream";
      body = call.body as unknown as BodyInit;
    }
    let url = this.baseUrl + call.path;
    const query = Object.entries(call.query ?? {}).filter(([, v]) => v !== undefined);
    if (query.length > 0) url += "?" + new URLSearchParams(query.map(([k, v]) => [k, String(v)]));
    const timer = AbortSignal.timeout(this.requestTimeoutMs + (call.waitMs ?? 0));
    let response: Response;
    try {
      response = await this.fetcher(url, { method: call.method, headers, body, signal: timer });
    } catch (error) {
      throw this.transportError(error, timer);
    }
    if (response.status >= 400 && !(call.answers ?? []).includes(response.status)) {
      throw await this.refusal(response);
    }
    return response;
  }

  protected async json<T>(call: Call): Promise<T> {
    const response = await this.send(call);
    try {
      return (await response.json()) as T;
    } catch (error) {
      throw new TransportError(`reading the answer of ${call.path}: ${String(error)}`);
    }
  }

  private transportError(error: unknown, timer: AbortSignal): Error {
    if (error instanceof ApiError) return error;
    if (timer.aborted) return new Timeout(`timed out after ${this.requestTimeoutMs} ms (and any wait)`, "request");
    return new TransportError(String((error as Error)?.message ?? error));
  }

  private async refusal(response: Response): Promise<ApiError> {
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text) as { error?: unknown; message?: unknown };
      if (typeof body.error === "string") {
        return apiError(response.status, body.error, String(body.message ?? ""));
      }
    } catch {
      // not JSON: fall through
    }
    return apiError(response.status, "error", text);
  }
}
