/** A handle on one consumer group: the client's group calls without the names, and the consumer loop. */
import type { Client } from "./client.js";
import type { ConsumeStream, ConsumeStreamOptions } from "./consume_stream.js";
import { Consumer } from "./consumer.js";
import type { ConsumeOptions } from "./loop.js";
import type { Delivery, DeliveryRef, GroupDetail, GroupPause, GroupSeeked, PolledBatch } from "./models.js";
import type { NackOptions, PollBatchOptions } from "./options.js";
import { StreamConsumer } from "./stream_consumer.js";
/** One consumer group of a topic: its calls without the names, and the consumer loop. */
export declare class Group {
    readonly client: Client;
    readonly topic: string;
    readonly name: string;
    constructor(client: Client, topic: string, name: string);
    /** The group's full view. */
    info(): Promise<GroupDetail>;
    /** One delivery, or null. */
    poll(consumer?: string): Promise<Delivery | null>;
    /** Up to `max` deliveries (see `Client.pollBatch`). */
    pollBatch(options?: PollBatchOptions): Promise<PolledBatch>;
    /** Acks one delivery. */
    ack(delivery: DeliveryRef): Promise<string>;
    /** Nacks one delivery. */
    nack(delivery: DeliveryRef, options?: NackOptions): Promise<string>;
    /** Extends one delivery's lease. */
    touch(delivery: DeliveryRef): Promise<string>;
    /** Moves the group to offset `to`, or `"earliest"` / `"latest"` (see `Client.seek`). */
    seek(to: number | "earliest" | "latest"): Promise<GroupSeeked>;
    /** Stops new deliveries until `resume` (or until `until_ms`, Unix ms). */
    pause(until_ms?: number): Promise<GroupPause>;
    /** Ends a pause; `changed` is whether the group was paused. */
    resume(): Promise<GroupPause>;
    /** A consume stream of this group (see `Client.consumeStream`). */
    consumeStream(options?: ConsumeStreamOptions): Promise<ConsumeStream>;
    /**
     * The consumer loop: `for await (const delivery of group.consume({ batch: 64 })) ...`;
     * with `stream: true` over the consume stream (`StreamConsumer`; `window` deliveries
     * unsettled, by default the smaller of `batch` and the group's `max_in_flight`).
     */
    consume(options: ConsumeOptions & {
        stream: true;
        window?: number;
    }): StreamConsumer;
    consume(options?: ConsumeOptions & {
        stream?: false;
    }): Consumer;
}
