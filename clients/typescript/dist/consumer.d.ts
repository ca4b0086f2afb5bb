/**
 * The consumer loop: `for await (const delivery of group.consume({ batch: 64 })) ...`.
 *
 * Deliveries come in batches (one long poll each). A delivery whose loop body finishes is
 * acked, a batch's acks riding on the poll for the next batch (one request, one sync).
 * While a batch is handled, its leases are touched every third of the group's `lease_ms`.
 * `consumer.run(handler)` nacks with the handler's exception as the reason and goes on
 * (so does `consumer.fail(delivery, error)` in your own `catch`); leaving the loop early
 * (`break`, or an exception escaping the body) releases the batch's unhandled deliveries
 * (handed back, not counted as failures). When the server is unreachable (restarting),
 * every call is tried again with a doubling pause, so the loop resumes where it was: its
 * deliveries in flight come back to the same consumer with the same attempt, and an ack
 * whose answer was lost is answered `not_owned` when repeated (`stats.ack_refused`).
 */
import type { Group } from "./client.js";
import type { Delivery, ItemResult } from "./models.js";
/** The first pause before a call is tried again after the server was unreachable. */
export declare const RETRY_FIRST_MS = 50;
/** Leases are touched every `lease_ms / LEASE_TOUCH_FRACTION` while a batch is handled. */
export declare const LEASE_TOUCH_FRACTION = 3;
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
/** Whether a call that failed this way is worth trying again after a pause. */
export declare function retryable(error: unknown): boolean;
/** The nack reason for a handler's exception. */
export declare function failureReason(error: unknown): string;
/** An async iterator of deliveries that acks, nacks and keeps leases (see the module doc). */
export declare class Consumer implements AsyncIterable<Delivery> {
    readonly group: Group;
    readonly options: ConsumeOptions;
    readonly stats: ConsumerStats;
    private stopped;
    private wake;
    private settled;
    private open;
    constructor(group: Group, options?: ConsumeOptions);
    /** Ends the loop after the current batch; its acks are still sent. */
    stop(): void;
    /** Awaits `handler` on every delivery until `stop()`: ack on return, nack on throw. */
    run(handler: (delivery: Delivery) => unknown): Promise<void>;
    /** Nacks `delivery` now with `error` as the reason (it is not acked later). */
    fail(delivery: Delivery, error: unknown): Promise<void>;
    [Symbol.asyncIterator](): AsyncGenerator<Delivery>;
    private touch;
    private count;
    private leave;
    private retrying;
}
