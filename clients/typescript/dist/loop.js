/**
 * What the two consumer loops (`Consumer` over long polls, `StreamConsumer` over the
 * consume stream) share, written once: their options and counters, the retry policy
 * (a doubling pause while the server is unreachable, a few tries only on the way out),
 * the nack reason of a handler's exception, `run(handler)` (ack on return, nack on
 * throw), the counting of ack results, and the release of what a loop leaves unhandled.
 */
import { NotOwned, ServerError, TooManyRequests, TransportError } from "./errors.js";
/** The first pause before a call is tried again after the server was unreachable. */
export const RETRY_FIRST_MS = 50;
/** Leases are touched every `lease_ms / LEASE_TOUCH_FRACTION` while a batch is handled. */
export const LEASE_TOUCH_FRACTION = 3;
/** How often a call is tried on the way out (last acks, releases) before giving up. */
export const LEAVING_TRIES_MAX = 8;
/** Thrown inside a loop once `stop()` was called while it was retrying. */
export class Stopped extends Error {
}
/** Whether a call that failed this way is worth trying again after a pause. */
export function retryable(error) {
    return error instanceof TransportError || error instanceof ServerError || error instanceof TooManyRequests;
}
/** The nack reason for a handler's exception. */
export function failureReason(error) {
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return text.slice(0, 1024);
}
/** A delivery's `offset:attempt`, to keep it in a set. */
export const key = (d) => `${d.offset}:${d.attempt}`;
/** The decisions and I/O both loops make the same way; each loop adds how it consumes. */
export class Loop {
    group;
    options;
    stats = { acked: 0, ack_refused: 0, failed: 0, released: 0, reconnects: 0 };
    stopped = false;
    wake = null;
    constructor(group, options = {}) {
        this.group = group;
        this.options = options;
    }
    /** Ends the loop (after the current batch or delivery). */
    stop() {
        this.stopped = true;
        this.wake?.();
    }
    /** Awaits `handler` on every delivery until `stop()`: ack on return, nack on throw. */
    async run(handler) {
        for await (const delivery of this) {
            try {
                await handler(delivery);
            }
            catch (error) {
                await this.fail(delivery, error);
            }
        }
    }
    /** Nacks `delivery` over HTTP with the reason for `error`, and counts the answer. */
    async nackOver(delivery, error, leaving) {
        const reason = reasonOf(error);
        try {
            await this.retrying(() => this.group.nack(delivery, { reason }), leaving);
            this.stats.failed += 1;
        }
        catch (refused) {
            if (!(refused instanceof NotOwned))
                throw refused;
            this.stats.ack_refused += 1;
        }
    }
    /** Counts the results of acks (sent with a poll, in an ack batch, or on the stream). */
    countAcks(results) {
        for (const result of results ?? []) {
            if (result.outcome === "acked")
                this.stats.acked += 1;
            else
                this.stats.ack_refused += 1;
            this.options.on_result?.(result);
        }
    }
    /** Hands `deliveries` back unhandled (not failures); given up after a few tries. */
    async release(deliveries) {
        if (deliveries.length === 0)
            return;
        const { client, topic, name } = this.group;
        try {
            await this.retrying(() => client.nackBatch(topic, name, deliveries, { kind: "release" }), true);
            this.stats.released += deliveries.length;
        }
        catch {
            // given up: their leases (or this consumer's next poll or stream) hand them out again
        }
    }
    /** `call`, tried again with a doubling pause while the server is unreachable. */
    async retrying(call, leaving = false) {
        let pause = RETRY_FIRST_MS;
        for (let tries = 1;; tries++) {
            try {
                return await call();
            }
            catch (error) {
                if (!retryable(error) || (leaving && tries > LEAVING_TRIES_MAX))
                    throw error;
                this.stats.reconnects += 1;
                await new Promise((resolve) => {
                    const timer = setTimeout(resolve, pause);
                    this.wake = () => (clearTimeout(timer), resolve());
                });
                this.wake = null;
                if (this.stopped && !leaving)
                    throw new Stopped();
                pause = Math.min(pause * 2, this.options.retry_max_ms ?? 2000);
            }
        }
    }
}
/** The nack reason `fail` sends: a string as it is, an exception described. */
export function reasonOf(error) {
    return typeof error === "string" ? error : failureReason(error);
}
