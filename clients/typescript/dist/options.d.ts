/**
 * The client's options and the options of its calls: how to reach the server, a
 * publish's metadata, a nack's and a batch poll's options.
 */
import type { DeliveryRef, NackKind } from "./models.js";
/** Milliseconds for a whole call; a long poll's wait is added on top. */
export declare const REQUEST_TIMEOUT_MS_DEFAULT = 30000;
/** A WebSocket constructor, as browsers and Node 21+ have globally. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocket;
/** How to reach the server. */
export interface ClientOptions {
    /** A bearer token, sent on every call (on WebSockets as the `mailroom.bearer` subprotocol). */
    token?: string;
    /** The time limit of every call, in milliseconds (30 s); a long poll's wait is added. */
    requestTimeoutMs?: number;
    /** The WebSocket to use where there is no global one (Node 20 without `--experimental-websocket`). */
    WebSocket?: WebSocketConstructor;
    /** The fetch to use (the global one by default). */
    fetch?: typeof fetch;
}
/** A single publish's metadata. */
export interface PublishMeta {
    key?: string;
    headers?: Record<string, string>;
    /** Makes a retry safe: a key in the topic's window is not stored again (sent as `Idempotency-Key`). */
    idempotency_key?: string;
}
/** Options of a nack. */
export interface NackOptions {
    kind?: NackKind;
    reason?: string;
    delay_ms?: number;
}
/** Deliveries a batch poll nacks before it acks and polls, and the options they share. */
export interface PollNacks extends NackOptions {
    deliveries: DeliveryRef[];
}
/** Options of a batch poll. */
export interface PollBatchOptions {
    max?: number;
    consumer?: string;
    wait_ms?: number;
    ack?: DeliveryRef[];
    nack?: PollNacks;
}
