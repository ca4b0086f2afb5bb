/**
 * The consume stream: a group's deliveries pushed over one WebSocket, settled on it.
 *
 * ```ts
 * const stream = await client.consumeStream("orders", "billing", { window: 16, consumer: "w1" });
 * for await (const delivery of stream) {
 *   await handle(delivery);
 *   await stream.ack(delivery);
 * }
 * ```
 *
 * The server pushes deliveries as they become available, never more than `window`
 * unsettled (1 to 4096, and at most the group's `max_in_flight`: 400 otherwise). `ack`,
 * `nack` and `touch` send settlements on the same socket and return their `seq`
 * (numbered from 0 on the connection); the server answers each one, in order, with a
 * `Settled` (its `outcome`, or `error` `not_owned` for a delivery no longer in flight
 * under that attempt), kept until taken with `answers()` or `flush()`. An ack or nack
 * frees a slot of the window, and the server sends the next delivery.
 *
 * When the server closes the stream (shutdown, a deleted group) or the connection
 * breaks, iteration ends and `closed` holds the reason; settling then throws
 * `StreamClosed`. A delivery received but not handed out yet is dropped once an ack or
 * nack of it (sent again after a reconnect) is answered: it is never handed out settled.
 * Deliveries not settled stay in flight as an HTTP consumer's would:
 * their leases run out, or a stream opened again with the same `consumer` gets them back
 * first, with the same attempts (the `stream: true` consumer loop does exactly that).
 */
import type { Client } from "./client.js";
import { Delivery, type DeliveryRef, type ItemError, type NackKind } from "./models.js";
/** The largest window the server takes. */
export declare const CONSUME_STREAM_WINDOW_MAX = 4096;
/** What a settlement does. */
export type SettlementOp = "ack" | "nack" | "touch";
/** One settlement as the client sent it. */
export interface Settlement extends DeliveryRef {
    op: SettlementOp;
    kind?: NackKind;
    reason?: string;
    delay_ms?: number;
    /** Its number on the connection it was last sent on. */
    seq?: number;
}
/** The server's answer to settlement `seq`: exactly one of `outcome` and `error`. */
export interface Settled extends DeliveryRef {
    seq: number;
    /** The settlement answered (the client's own record). */
    op: SettlementOp;
    /** `acked`, `retry`, `released`, `dead_lettered` or `touched`. */
    outcome?: string | null;
    /** `not_owned` (not in flight under that attempt), or `invalid_argument`. */
    error?: ItemError | null;
}
/** Options of a consume stream. */
export interface ConsumeStreamOptions {
    /** The most deliveries unsettled at once (1). */
    window?: number;
    /** The consumer identity (the server makes one up if none is given). */
    consumer?: string;
}
/** A group's deliveries over one WebSocket, settled on it (see the module doc). */
export declare class ConsumeStream implements AsyncIterable<Delivery> {
    private readonly socket;
    /** The consumer identity the deliveries are owned by. */
    readonly consumer: string;
    /** The most deliveries unsettled at once. */
    readonly window: number;
    private readonly deliveries;
    private readonly answerQueue;
    private readonly pendingQueue;
    private readonly unsettledMap;
    private readonly waiters;
    private nextSeq;
    private interrupted;
    private failure;
    /** Why the stream ended, once it did. */
    closed: string | null;
    private constructor();
    /** Opens the stream at `path` (404 `unknown_group`, 400 for a window the group cannot fill). */
    static open(client: Client, path: string, options: ConsumeStreamOptions): Promise<ConsumeStream>;
    /** Settlements sent and not answered yet. */
    get unanswered(): number;
    /** Deliveries received and not acked or nacked (their leases are running). */
    unsettled(): Delivery[];
    /** Settlements sent (or tried) and not answered, in order. */
    pending(): Settlement[];
    /** Deliveries received and not handed out yet. */
    buffered(): Delivery[];
    /** The next delivery; null once the stream closed (or after `interrupt()`); `Timeout` after `timeoutMs`. */
    receive(timeoutMs?: number): Promise<Delivery | null>;
    [Symbol.asyncIterator](): AsyncIterator<Delivery>;
    /** Makes the waiting (or the next) `receive` return null without closing the stream. */
    interrupt(): void;
    /** Acks `delivery`; the settlement's `seq`. */
    ack(delivery: DeliveryRef): number;
    /** Nacks, releases or rejects `delivery`; the `seq`. */
    nack(delivery: DeliveryRef, options?: {
        kind?: NackKind;
        reason?: string;
        delay_ms?: number;
    }): number;
    /** Extends the lease of `delivery`; the `seq`. */
    touch(delivery: DeliveryRef): number;
    /**
     * Sends one settlement; its `seq`. It counts as unanswered from here on, even when
     * the stream has closed (`StreamClosed`), so a reconnecting loop can send it again.
     */
    send(settlement: Settlement): number;
    /** The answers that arrived and were not taken yet, in `seq` order. */
    answers(): Settled[];
    /** Waits until every settlement sent is answered; the answers not taken yet (`StreamClosed` if it closes first). */
    flush(timeoutMs?: number): Promise<Settled[]>;
    /** Closes the connection; deliveries not settled stay in flight. */
    close(): void;
    private take;
    /**
     * Drops the buffered copy of a delivery an ack or nack was just answered for. After a
     * reconnect the server sends a delivery still in flight before it answers the ack sent
     * again for it; when both arrive in one read, the copy must not be handed out: it is
     * settled (answered `acked`), or no longer ours (answered `not_owned`).
     */
    private dropSettled;
    private end;
    private wake;
    /** Waits until `ready()` holds; false on timeout. */
    private until;
}
