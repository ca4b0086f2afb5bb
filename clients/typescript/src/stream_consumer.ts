/**
 * The consumer loop over the consume stream: `group.consume({ stream: true, window: 16 })`.
 *
 * It behaves as the polling `Consumer` does, over one WebSocket: a delivery whose loop
 * body finishes is acked on the socket at once; `run(handler)` (or `fail`) nacks with
 * the exception as the reason; the leases of every delivery received and not settled are
 * touched every third of the group's `lease_ms` while the body runs. The window is
 * `window`, or else the smaller of `batch` and the group's `max_in_flight`.
 *
 * When the connection breaks (a server killed and started again) the loop opens the
 * stream again with a doubling pause, as the same consumer (the identity the server made
 * up the first time, if none was given): the server hands it its deliveries still in
 * flight first, with the same attempts; acks and nacks that got no answer are sent again
 * (one that had applied is answered `not_owned`: `stats.ack_refused`), and a delivery they
 * settle is not handed to the body twice. `stop()` ends the loop after the current
 * delivery: the answers owed are awaited, the stream closed, and the deliveries received
 * but not handled released (so is the current one when an exception leaves the loop).
 */

import type { Group } from "./client.js";
import { type ConsumeStream, type Settled, type Settlement } from "./consume_stream.js";
import { CONSUME_STREAM_WINDOW_MAX } from "./consume_stream.js";
import { type ConsumeOptions, type ConsumerStats, LEASE_TOUCH_FRACTION, RETRY_FIRST_MS, failureReason, retryable } from "./consumer.js";
import { NotOwned, StreamClosed, Timeout } from "./errors.js";
import type { Delivery, DeliveryRef, ItemResult } from "./models.js";

/** How often settling the last answers or releasing is tried on the way out. */
const LEAVING_TRIES_MAX = 8;

class Stopped extends Error {}

const key = (d: DeliveryRef): string => `${d.offset}:${d.attempt}`;

/** An async iterator of deliveries over the consume stream (see the module doc). */
export class StreamConsumer implements AsyncIterable<Delivery> {
  readonly stats: ConsumerStats = { acked: 0, ack_refused: 0, failed: 0, released: 0, reconnects: 0 };
  /** The consumer identity (the server's, once the first stream opened, if none was given). */
  consumer: string | undefined;
  private stopped = false;
  private wakeRetry: (() => void) | null = null;
  private stream: ConsumeStream | null = null;
  private open = false;
  private readonly failed = new Set<string>();
  /** Deliveries whose settlement is being sent again after a reconnect. */
  private readonly redo = new Set<string>();

  constructor(readonly group: Group, readonly options: ConsumeOptions & { window?: number } = {}) {
    this.consumer = options.consumer;
  }

  /** Ends the loop after the current delivery. */
  stop(): void {
    this.stopped = true;
    this.wakeRetry?.();
    this.stream?.interrupt();
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

  /** Nacks `delivery` with `error` as the reason (it is not acked later). */
  async fail(delivery: Delivery, error: unknown): Promise<void> {
    const reason = typeof error === "string" ? error : failureReason(error);
    this.failed.add(key(delivery));
    if (this.open) {
      this.send({ op: "nack", offset: delivery.offset, attempt: delivery.attempt, reason });
      return;
    }
    try {
      await this.retrying(() => this.group.nack(delivery, { reason }), true);
      this.stats.failed += 1;
    } catch (refused) {
      if (!(refused instanceof NotOwned)) throw refused;
      this.stats.ack_refused += 1;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Delivery> {
    let current: Delivery | null = null;
    let window = 1;
    let toucher: ReturnType<typeof setInterval> | null = null;
    try {
      const info = await this.retrying(() => this.group.info());
      const { batch = 64 } = this.options;
      window = this.options.window ?? Math.max(1, Math.min(batch, info.max_in_flight ?? 1, CONSUME_STREAM_WINDOW_MAX));
      await this.connect(window);
      const leaseMs = info.lease_ms ?? null;
      if (leaseMs) toucher = setInterval(() => this.touch(), leaseMs / LEASE_TOUCH_FRACTION);
      for (let delivery = await this.next(window); delivery !== null; delivery = await this.next(window)) {
        current = delivery;
        yield delivery;
        current = null;
        if (this.failed.delete(key(delivery))) continue;
        this.send({ op: "ack", offset: delivery.offset, attempt: delivery.attempt });
      }
    } catch (error) {
      if (!(error instanceof Stopped)) throw error;
    } finally {
      // A `break` or an exception in the loop body lands here with `current` unhandled.
      if (toucher !== null) clearInterval(toucher);
      if (this.stream !== null) await this.leave(window, current !== null && !this.failed.has(key(current)) ? current : null);
    }
  }

  private async next(window: number): Promise<Delivery | null> {
    for (;;) {
      const stream = this.current();
      this.count(stream.answers());
      if (this.stopped) return null;
      const delivery = await stream.receive();
      if (delivery === null) {
        if (this.stopped) return null;
        await this.reconnect(window);
      } else if (!this.redo.has(key(delivery))) {
        return delivery;
      }
    }
  }

  private current(): ConsumeStream {
    if (this.stream === null) throw new Error("the loop's stream is opened first");
    return this.stream;
  }

  private async connect(window: number, leaving = false): Promise<void> {
    const stream = await this.retrying(() => this.group.consumeStream({ window, consumer: this.consumer }), leaving);
    this.stream = stream;
    this.consumer = stream.consumer;
    this.open = true;
    if (this.stopped) stream.interrupt();
  }

  /** Opens the stream again as the same consumer; sends the unanswered again. */
  private async reconnect(window: number, leaving = false): Promise<void> {
    const old = this.current();
    this.open = false;
    this.count(old.answers());
    const carried = old
      .pending()
      .filter((s) => s.op !== "touch")
      .map(({ op, offset, attempt, kind, reason, delay_ms }) => ({ op, offset, attempt, kind, reason, delay_ms }));
    for (const settlement of carried) this.redo.add(key(settlement));
    old.close();
    this.stats.reconnects += 1;
    await this.connect(window, leaving);
    for (const settlement of carried) this.send(settlement);
  }

  private send(settlement: Settlement): void {
    try {
      this.current().send(settlement);
    } catch (error) {
      if (!(error instanceof StreamClosed)) throw error;
      // it stays unanswered: the next connection sends it again
    }
  }

  private touch(): void {
    const stream = this.stream;
    if (stream === null || stream.closed !== null) return;
    for (const delivery of stream.unsettled()) {
      try {
        stream.touch(delivery);
      } catch {
        return; // the stream broke: the loop reconnects, the next round touches
      }
    }
  }

  private count(answers: Settled[]): void {
    for (const answer of answers) {
      if (answer.op === "touch") continue;
      this.redo.delete(key(answer));
      if (answer.op === "ack") {
        if (answer.outcome === "acked") this.stats.acked += 1;
        else this.stats.ack_refused += 1;
        const result: ItemResult = { offset: answer.offset, attempt: answer.attempt, outcome: answer.outcome, error: answer.error };
        this.options.on_result?.(result);
      } else if (answer.error) this.stats.ack_refused += 1;
      else if (answer.outcome === "released") this.stats.released += 1;
      else this.stats.failed += 1;
    }
  }

  /** Awaits the answers owed, closes, and releases what was not handled. */
  private async leave(window: number, current: Delivery | null): Promise<void> {
    this.stopped = true;
    const { requestTimeoutMs } = this.group.client;
    for (let tries = 0; tries < LEAVING_TRIES_MAX; tries++) {
      try {
        this.count(await this.current().flush(requestTimeoutMs));
        break;
      } catch (error) {
        if (error instanceof Timeout) break;
        if (!(error instanceof StreamClosed)) throw error;
        try {
          await this.reconnect(window, true);
        } catch {
          break; // unreachable: their leases hand them out again
        }
      }
    }
    const stream = this.current();
    this.open = false;
    const left = [...(current === null ? [] : [current]), ...stream.buffered().filter((d) => !this.redo.has(key(d)))];
    stream.close();
    if (left.length === 0) return;
    const { client, topic, name } = this.group;
    try {
      await this.retrying(() => client.nackBatch(topic, name, left, { kind: "release" }), true);
      this.stats.released += left.length;
    } catch {
      // given up: their leases (or this consumer's next stream) hand them out again
    }
  }

  private async retrying<T>(call: () => Promise<T>, leaving = false): Promise<T> {
    let pause = RETRY_FIRST_MS;
    for (let tries = 1; ; tries++) {
      try {
        return await call();
      } catch (error) {
        if (!retryable(error) || (leaving && tries > LEAVING_TRIES_MAX)) throw error;
        this.stats.reconnects += 1;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pause);
          this.wakeRetry = () => (clearTimeout(timer), resolve());
        });
        this.wakeRetry = null;
        if (this.stopped && !leaving) throw new Stopped();
        pause = Math.min(pause * 2, this.options.retry_max_ms ?? 2000);
      }
    }
  }
}
