/**
 * Streams: the pipelined publish stream and live channel subscriptions (WebSocket, SSE).
 * They use only `WebSocket` and `fetch`, so they run in browsers and in Node alike.
 */
import type { Client } from "./client.js";
import { type Confirmation, type Message, type Payload } from "./models.js";
/** The most frames the server reads ahead of its confirmations. */
export declare const PUBLISH_WINDOW_MAX = 4096;
/** A queue that hands items to waiting readers, and ends (or fails) once. */
declare class Mailbox<T> {
    private readonly items;
    private readonly waiters;
    private ended;
    failure: Error | null;
    push(item: T): void;
    end(failure?: Error | null): void;
    get length(): number;
    /** The next item; null once ended and empty (then `failure` says why, if it failed). */
    next(): Promise<T | null>;
}
/** Opens a WebSocket, the token as the `mailroom.bearer` subprotocol (browsers cannot send headers). */
export declare function openSocket(client: Client, path: string): Promise<WebSocket>;
/**
 * Many messages in flight on one WebSocket, each confirmed once durable.
 *
 * `send` resolves to the message's `seq` (from 0), first waiting while `window`
 * messages await confirmation. `confirmed()` yields confirmations in order; `flush()`
 * waits for all. If the server closes the stream (shutdown, a deleted topic), they
 * hand out what arrived and then throw `StreamClosed` with the close reason.
 */
export declare class PublishStream {
    private readonly socket;
    readonly window: number;
    private sent;
    private confirmedUpTo;
    private readonly ready;
    private readonly wakers;
    private constructor();
    /** Opens the stream at `path` (404 `unknown_topic` if the topic does not exist). */
    static open(client: Client, path: string, window: number): Promise<PublishStream>;
    /** Messages sent and not yet confirmed. */
    get inFlight(): number;
    private closedError;
    /**
     * Sends one message; its `seq`. A `Message` goes as a JSON text frame with its key,
     * headers and idempotency key (its confirmation's `duplicate` says whether the key was
     * in the topic's window); a bare payload as a binary frame.
     */
    send(payload: Payload | Message): Promise<number>;
    /** The next confirmation (waiting for it), or null when nothing is in flight. */
    confirmed(): Promise<Confirmation | null>;
    /** Waits until every message sent is confirmed; the confirmations not yet taken. */
    flush(): Promise<Confirmation[]>;
    /** Closes the stream (confirmations still owed are not sent: flush first). */
    close(): void;
}
/** A live channel subscription: `for await` payloads; ends when the channel closes. */
export declare class Subscription implements AsyncIterable<Uint8Array> {
    private readonly messages;
    private readonly stop;
    constructor(messages: Mailbox<Uint8Array>, stop: () => void);
    /** The next message, or null once the stream ended. */
    next(): Promise<Uint8Array | null>;
    /** Ends the subscription. */
    close(): void;
    [Symbol.asyncIterator](): AsyncIterator<Uint8Array>;
}
/** Subscribes over the channel's WebSocket (at `path`): one frame per message. */
export declare function wsSubscription(client: Client, path: string): Promise<Subscription>;
/** Payloads from Server-Sent Event text (`event: base64` carries bytes); the rest left over. */
export declare function sseEvents(buffer: string, emit: (payload: Uint8Array) => void): string;
/** Subscribes over the channel's Server-Sent Events (at `path`), read with `fetch`. */
export declare function sseSubscription(client: Client, path: string): Promise<Subscription>;
export {};
