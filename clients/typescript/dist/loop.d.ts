/**
 * What the two consumer loops (`Consumer` over long polls, `StreamConsumer` over the
 * consume stream) share, written once: their options and counters, the retry policy
 * (a doubling pause while the server is unreachable, a few tries only on the way out),
 * the nack reason of a handler's exception, `run(handler)` (ack on return, nack on
 * throw), the counting of ack results, and the release of what a loop leaves unhandled.
 */
import type { Group } from "./group.js";
import type { Delivery, DeliveryRef, ItemResult } from "./models.js";
/** The first pause before a call is tried again after the server was unreachable. */
export declare const RETRY_FIRST_MS = 50;
/** Leases are touched every `lease_ms / LEASE_TOUCH_FRACTION` while a batch is handled. */
export declare const LEASE_TOUCH_FRACTION = 3;
/** How often a call is tried on the way out (last acks, releases) before giving up. */
export declare const LEAVING_TRIES_MAX = 8;
/** Options of the consumer loop. */
export interface ConsumeOptions {
    /** Deliveries per poll (64). */
    batch?: number;
    /** The consumer's name (its own deliveries come back to it first, after a restart too). */
    consumer?: string;
    /** How long a poll waits when nothing is ready, in milliseconds (5000). */
    wait_ms?: number;
    /** The longest pause between tries while the server is unreachable (2000). */
    retry_max_ms?: number;
    /** Sees every ack's result (`acked`, or a `not_owned` error). */
    on_result?: (result: ItemResult) => void;
}
/** What a consumer loop did so far. */
export interface ConsumerStats {
    acked: number;
    ack_refused: number;
    failed: number;
    released: number;
    reconnects: number;
}
/** Thrown inside a loop once `stop()` was called while it was retrying. */
export declare class Stopped extends Error {
}
/** Whether a call that failed this way is worth trying again after a pause. */
export declare function retryable(error: unknown): boolean;
/** The nack reason for a handler's exception. */
export declare function failureReason(error: unknown): string;
/** A delivery's `offset:attempt`, to keep it in a set. */
export declare const key: (d: DeliveryRef) => string;
/** The decisions and I/O both loops make the same way; each loop adds how it consumes. */
export declare abstract class Loop {
    readonly group: Group;
    readonly options: ConsumeOptions;
    readonly stats: ConsumerStats;
    protected stopped: boolean;
    private wake;
    constructor(group: Group, options?: ConsumeOptions);
    /** Nacks `delivery` with `error` as the reason (it is not acked later). */
    abstract fail(delivery: Delivery, error: unknown): Promise<void>;
    abstract [Symbol.asyncIterator](): AsyncGenerator<Delivery>;
    /** Ends the loop (after the current batch or delivery). */
    stop(): void;
    /** Awaits `handler` on every delivery until `stop()`: ack on return, nack on throw. */
    run(handler: (delivery: Delivery) => unknown): Promise<void>;
    /** Nacks `delivery` over HTTP with the reason for `error`, and counts the answer. */
    protected nackOver(delivery: Delivery, error: unknown, leaving: boolean): Promise<void>;
    /** Counts the results of acks (sent with a poll, in an ack batch, or on the stream). */
    protected countAcks(results: ItemResult[] | null | undefined): void;
    /** Hands `deliveries` back unhandled (not failures); given up after a few tries. */
    protected release(deliveries: Delivery[]): Promise<void>;
    /** `call`, tried again with a doubling pause while the server is unreachable. */
    protected retrying<T>(call: () => Promise<T>, leaving?: boolean): Promise<T>;
}
/** The nack reason `fail` sends: a string as it is, an exception described. */
export declare function reasonOf(error: unknown): string;
