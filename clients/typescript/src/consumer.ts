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

import { NotOwned } from "./errors.js";
import { Loop, LEASE_TOUCH_FRACTION, Stopped, key } from "./loop.js";
import type { Delivery, DeliveryRef } from "./models.js";

export {
  LEASE_TOUCH_FRACTION,
  RETRY_FIRST_MS,
  failureReason,
  retryable,
  type ConsumeOptions,
  type ConsumerStats,
} from "./loop.js";

/** An async iterator of deliveries that acks, nacks and keeps leases (see the module doc). */
export class Consumer extends Loop implements AsyncIterable<Delivery> {
  private settled = new Set<string>();
  private open = new Map<string, Delivery>();

  /** Ends the loop after the current batch; its acks are still sent. */
  override stop(): void {
    super.stop();
  }

  /** Nacks `delivery` now with `error` as the reason (it is not acked later). */
  async fail(delivery: Delivery, error: unknown): Promise<void> {
    this.settled.add(key(delivery));
    this.open.delete(key(delivery));
    await this.nackOver(delivery, error, false);
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
        this.countAcks(polled.acked);
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

  private async leave(acks: DeliveryRef[], unhandled: Delivery[]): Promise<void> {
    this.stopped = true;
    const { client, topic, name } = this.group;
    if (acks.length > 0) {
      try {
        this.countAcks(await this.retrying(() => client.ackBatch(topic, name, acks), true));
      } catch {
        // given up: their leases hand them out again
      }
    }
    await this.release(unhandled);
  }
}
