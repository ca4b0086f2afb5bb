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
import { Loop } from "./loop.js";
import type { Delivery } from "./models.js";
export { LEASE_TOUCH_FRACTION, RETRY_FIRST_MS, failureReason, retryable, type ConsumeOptions, type ConsumerStats, } from "./loop.js";
/** An async iterator of deliveries that acks, nacks and keeps leases (see the module doc). */
export declare class Consumer extends Loop implements AsyncIterable<Delivery> {
    private settled;
    private open;
    /** Ends the loop after the current batch; its acks are still sent. */
    stop(): void;
    /** Nacks `delivery` now with `error` as the reason (it is not acked later). */
    fail(delivery: Delivery, error: unknown): Promise<void>;
    [Symbol.asyncIterator](): AsyncGenerator<Delivery>;
    private touch;
    private leave;
}
