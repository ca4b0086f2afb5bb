/** A handle on one consumer group: the client's group calls without the names, and the consumer loop. */

import type { Client } from "./client.js";
import type { ConsumeStream, ConsumeStreamOptions } from "./consume_stream.js";
import { Consumer } from "./consumer.js";
import type { ConsumeOptions } from "./loop.js";
import type { Delivery, DeliveryRef, GroupDetail, GroupPause, GroupSeeked, PolledBatch } from "./models.js";
import type { NackOptions, PollBatchOptions } from "./options.js";
import { StreamConsumer } from "./stream_consumer.js";

/** One consumer group of a topic: its calls without the names, and the consumer loop. */
export class Group {
  constructor(readonly client: Client, readonly topic: string, readonly name: string) {}

  /** The group's full view. */
  info(): Promise<GroupDetail> {
    return this.client.groupInfo(this.topic, this.name);
  }

  /** One delivery, or null. */
  poll(consumer?: string): Promise<Delivery | null> {
    return this.client.poll(this.topic, this.name, consumer);
  }

  /** Up to `max` deliveries (see `Client.pollBatch`). */
  pollBatch(options: PollBatchOptions = {}): Promise<PolledBatch> {
    return this.client.pollBatch(this.topic, this.name, options);
  }

  /** Acks one delivery. */
  ack(delivery: DeliveryRef): Promise<string> {
    return this.client.ack(this.topic, this.name, delivery);
  }

  /** Nacks one delivery. */
  nack(delivery: DeliveryRef, options: NackOptions = {}): Promise<string> {
    return this.client.nack(this.topic, this.name, delivery, options);
  }

  /** Extends one delivery's lease. */
  touch(delivery: DeliveryRef): Promise<string> {
    return this.client.touch(this.topic, this.name, delivery);
  }

  /** Moves the group to offset `to`, or `"earliest"` / `"latest"` (see `Client.seek`). */
  seek(to: number | "earliest" | "latest"): Promise<GroupSeeked> {
    return this.client.seek(this.topic, this.name, to);
  }

  /** Stops new deliveries until `resume` (or until `until_ms`, Unix ms). */
  pause(until_ms?: number): Promise<GroupPause> {
    return this.client.pause(this.topic, this.name, until_ms);
  }

  /** Ends a pause; `changed` is whether the group was paused. */
  resume(): Promise<GroupPause> {
    return this.client.resume(this.topic, this.name);
  }

  /** A consume stream of this group (see `Client.consumeStream`). */
  consumeStream(options: ConsumeStreamOptions = {}): Promise<ConsumeStream> {
    return this.client.consumeStream(this.topic, this.name, options);
  }

  /**
   * The consumer loop: `for await (const delivery of group.consume({ batch: 64 })) ...`;
   * with `stream: true` over the consume stream (`StreamConsumer`; `window` deliveries
   * unsettled, by default the smaller of `batch` and the group's `max_in_flight`).
   */
  consume(options: ConsumeOptions & { stream: true; window?: number }): StreamConsumer;
  consume(options?: ConsumeOptions & { stream?: false }): Consumer;
  consume(options: ConsumeOptions & { stream?: boolean; window?: number } = {}): Consumer | StreamConsumer {
    const { stream, ...rest } = options;
    return stream ? new StreamConsumer(this, rest) : new Consumer(this, rest);
  }
}
