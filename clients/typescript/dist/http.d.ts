/**
 * The HTTP side of the client: the name rule and paths, one call as data (`Call`), and
 * `Transport`, which sends a call over `fetch` within its time limit and turns a refusal
 * into its typed error. `Client` adds one method per endpoint on top.
 */
import type { DeliveryRef } from "./models.js";
import { type ClientOptions, type WebSocketConstructor } from "./options.js";
/** `value` checked against the name rule and escaped for a path (no request is made with a bad one). */
export declare function name(kind: string, value: string): string;
/** The path of a group, its names checked and escaped. */
export declare function groupPath(topic: string, group: string): string;
/** Just the offset and attempt of each delivery, as the wire wants them. */
export declare function refs(deliveries: DeliveryRef[]): DeliveryRef[];
/** `value` without its undefined fields. */
export declare function defined<T extends object>(value: T): Partial<T>;
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
export declare class Transport {
    readonly baseUrl: string;
    readonly token?: string;
    readonly requestTimeoutMs: number;
    private readonly fetcher;
    private readonly socketClass?;
    constructor(baseUrl: string, options?: ClientOptions);
    /** The headers every call carries. */
    headers(): Record<string, string>;
    /** The WebSocket constructor: the option, or the global one. */
    webSocket(): WebSocketConstructor;
    /** A streaming GET (for SSE): no time limit once the answer's head arrived. */
    stream(path: string, signal: AbortSignal): Promise<Response>;
    /** Sends one call and returns its answer (or throws its typed error). */
    protected send(call: Call): Promise<Response>;
    protected json<T>(call: Call): Promise<T>;
    private transportError;
    private refusal;
}
