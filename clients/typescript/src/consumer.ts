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
import { NotOwned, ServerError, TooManyRequests, TransportError } from "./errors.js";
import type { Delivery, DeliveryRef, ItemResult } from "./models.js";

/** The first pause before a call is tried again after the server was unreachable. */
export const RETRY_FIRST_MS = 50;

/** Leases are touched every `lease_ms / LEASE_TOUCH_FRACTION` while a batch is handled. */
export const LEASE_TOUCH_FRACTION = 3;

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

class Stopped extends Error {}

/** Whether a call that failed this way is worth trying again after a pause. */
export function retryable(error: unknown): boolean {
  return error instanceof TransportError || error instanceof ServerError || error instanceof TooManyRequests;
}

/** The nack reason for a handler's exception. */
export function failureReason(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.slice(0, 1024);
}

const key = (d: DeliveryRef): string => `${d.offset}:${d.attempt}`;

/** An async iterator of deliveries that acks, nacks and keeps leases (see the module doc). */
export class Consumer implements AsyncIterable<Delivery> {
  readonly stats: ConsumerStats = { acked: 0, ack_refused: 0, failed: 0, released: 0, reconnects: 0 };
  private stopped = false;
  private wake: (() => void) | null = null;
  private settled = new Set<string>();
  private open = new Map<string, Delivery>();

  constructor(readonly group: Group, readonly options: ConsumeOptions = {}) {}

  /** Ends the loop after the current batch; its acks are still sent. */
  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  /** Awaits `handler` on every delivery until `stop()`: ack on return, nack on throw. */
  async run(handler: (delivery: Delivery) => unknown): Promise<void> {
    for await (const delivery of this) {
      try {
        await handler(delivery);
      } catch (error) {
        await this.fail(delivery, error);
      }
    }
  }

  /** Nacks `delivery` now with `error` as the reason (it is not acked later). */
  async fail(delivery: Delivery, error: unknown): Promise<void> {
    const reason = typeof error === "string" ? error : failureReason(error);
    this.settled.add(key(delivery));
    this.open.delete(key(delivery));
    try {
      await this.retrying(() => this.group.nack(delivery, { reason }));
      this.stats.failed += 1;
    } catch (refused) {
      if (!(refused instanceof NotOwned)) throw refused;
      this.stats.ack_refused += 1;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Delivery> {
    const { batch = 64, consumer, wait_ms = 5000 } = this.options;
    let acks: DeliveryRef[] = [];
    let unhandled: Delivery[] = [];
    try {
      const leaseMs = (await this.retrying(() => this.group.info())).lease_ms ?? null;
      while (!this.stopped) {
        const sent = acks;
        const polled = await this.retrying(() =>
          this.group.pollBatch({ max: batch, consumer, wait_ms, ack: sent.length > 0 ? sent : undefined }),
        );
        this.count(polled.acked);
        acks = [];
        this.open = new Map(polled.deliveries.map((d) => [key(d), d]));
        const toucher = leaseMs ? setInterval(() => void this.touch(), leaseMs / LEASE_TOUCH_FRACTION) : null;
        try {
          for (let i = 0; i < polled.deliveries.length; i++) {
            const delivery = polled.deliveries[i];
            unhandled = polled.deliveries.slice(i);
            yield delivery;
            unhandled = [];
            if (!this.settled.has(key(delivery))) acks.push(delivery);
          }
        } finally {
          if (toucher !== null) clearInterval(toucher);
        }
        this.settled.clear();
      }
    } catch (error) {
      if (!(error instanceof Stopped)) throw error;
    } finally {
      // A `break` or an exception in the loop body lands here with deliveries unhandled.
      await this.leave(acks, unhandled.filter((d) => !this.settled.has(key(d))));
    }
  }

  private async touch(): Promise<void> {
    for (const [id, delivery] of [...this.open]) {
      try {
        await this.group.touch(delivery);
      } catch (error) {
        if (error instanceof NotOwned) this.open.delete(id);
        // otherwise unreachable for now: the next round tries again
      }
    }
  }

  private count(results: ItemResult[] | null | undefined): void {
    for (const result of results ?? []) {
      if (result.outcome === "acked") this.stats.acked += 1;
      else this.stats.ack_refused += 1;
      this.options.on_result?.(result);
    }
  }

  private async leave(acks: DeliveryRef[], unhandled: Delivery[]): Promise<void> {
    this.stopped = true;
    const { client, topic, name } = this.group;
    if (acks.length > 0) {
      try {
        this.count(await this.retrying(() => client.ackBatch(topic, name, acks), true));
      } catch {
        // given up: their leases hand them out again
      }
    }
    if (unhandled.length > 0) {
      try {
        await this.retrying(() => client.nackBatch(topic, name, unhandled, { kind: "release" }), true);
        this.stats.released += unhandled.length;
      } catch {
        // given up: their leases (or a later poll by this consumer) hand them out again
      }
    }
  }

  private async retrying<T>(call: () => Promise<T>, leaving = false): Promise<T> {
    let pause = RETRY_FIRST_MS;
    for (let tries = 1; ; tries++) {
      try {
        return await call();
      } catch (error) {
        if (!retryable(error) || (leaving && tries > 8)) throw error;
        this.stats.reconnects += 1;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pause);
          this.wake = () => (clearTimeout(timer), resolve());
        });
        this.wake = null;
        if (this.stopped && !leaving) throw new Stopped();
        pause = Math.min(pause * 2, this.options.retry_max_ms ?? 2000);
      }
    }
  }
}

