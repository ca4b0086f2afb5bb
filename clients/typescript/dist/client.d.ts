/**
 * The client: one method per endpoint over `fetch`, plus the publish stream, channel
 * subscriptions and the consumer loop.
 */
import { ConsumeStream, type ConsumeStreamOptions } from "./consume_stream.js";
import { Group } from "./group.js";
import { Transport } from "./http.js";
import { type BatchPublished, type ChannelDelivery, type ChannelInfo, type DeadLetter, type DeadLetterPage, Delivery, type DeliveryRef, type GroupDetail, type GroupPause, type GroupSeeked, type Message, type TopicRecovered, type TopicRepairReport, type GroupSettings, type Health, type ItemResult, type Payload, type PolledBatch, type Published, type IdempotencyWindow, type Retention, type Ticket, type TopicInfo, type TopicSummary } from "./models.js";
import type { NackOptions, PollBatchOptions, PublishMeta } from "./options.js";
import { type LogPage, type ReadOptions } from "./reads.js";
import { PublishStream, Subscription } from "./streams.js";
export { REQUEST_TIMEOUT_MS_DEFAULT, type ClientOptions, type NackOptions, type PollBatchOptions, type PublishMeta, type WebSocketConstructor, } from "./options.js";
export { Group } from "./group.js";
/**
 * A mailroom server at `baseUrl` (`http://HOST:PORT`). Every call is bounded in time;
 * failures throw typed errors (`ApiError` subclasses by code, `TransportError`).
 *
 * ```ts
 * const client = new Client("http://127.0.0.1:7070");
 * await client.createTopic("orders");
 * const offset = await client.publish("orders", "hello");
 * ```
 */
export declare class Client extends Transport {
    /** `/healthz`: `ok`, or `unhealthy` with the reason. */
    health(): Promise<Health>;
    /** `/metrics` as Prometheus text. */
    metrics(): Promise<string>;
    /** The server's OpenAPI document. */
    openapi(): Promise<Record<string, unknown>>;
    /** A one-use ticket for a stream under `path` (for browsers' `EventSource`). */
    issueTicket(path: string): Promise<Ticket>;
    /**
     * Creates a topic (idempotent): true if this call created it. `idempotency` gives it an
     * idempotency window of its own (set at creation only).
     */
    createTopic(topic: string, retention?: Retention, idempotency?: IdempotencyWindow): Promise<boolean>;
    /** Changes the limits `retention` sets; the others stay. */
    changeRetention(topic: string, retention: Retention): Promise<TopicInfo>;
    /** Every topic, by name. */
    listTopics(): Promise<TopicSummary[]>;
    /** A topic's view. */
    topicInfo(topic: string): Promise<TopicInfo>;
    /** Deletes a topic with its groups. */
    deleteTopic(topic: string): Promise<void>;
    /**
     * Publishes one message, with an optional key, headers and idempotency key; its offset
     * once durable (a duplicate's is the first publish's: `publishOnce` says which it was).
     */
    publish(topic: string, payload: Payload, meta?: PublishMeta): Promise<number>;
    /** As `publish`, with the whole answer: the offset and whether it was a `duplicate`. */
    publishOnce(topic: string, payload: Payload, meta?: PublishMeta): Promise<Published>;
    /** Reopens a failed (unreadable or stopped) topic now. */
    recoverTopic(topic: string): Promise<TopicRecovered>;
    /** Moves a damaged topic's bad files aside and reopens it. */
    repairTopic(topic: string): Promise<TopicRepairReport>;
    /** Publishes 1 to 10,000 messages (payloads, or `Message`s with metadata) in one write; their offsets. */
    publishBatch(topic: string, payloads: (Payload | Message)[]): Promise<number[]>;
    /** As `publishBatch`, with the whole answer: the offsets and the indices of the `duplicates`. */
    publishBatchOnce(topic: string, messages: (Payload | Message)[]): Promise<BatchPublished>;
    /** A pipelined publish stream: up to `window` messages awaiting confirmation. */
    publishStream(topic: string, window?: number): Promise<PublishStream>;
    /** A handle on one consumer group (no request is made). */
    group(topic: string, group: string): Group;
    /** Creates a group (409 `group_exists` if it exists). */
    createGroup(topic: string, group: string, settings: GroupSettings): Promise<void>;
    /** A group's full view. */
    groupInfo(topic: string, group: string): Promise<GroupDetail>;
    /** Deletes a group. */
    deleteGroup(topic: string, group: string): Promise<void>;
    /**
     * Moves a group to offset `to`, or `"earliest"` / `"latest"`. Deliveries in flight end
     * (their acks become 409 `not_owned`); a message seen before comes again with a higher attempt.
     */
    seek(topic: string, group: string, to: number | "earliest" | "latest"): Promise<GroupSeeked>;
    /** Moves a group to the first message published at or after `time_ms` (Unix ms). */
    seekToTime(topic: string, group: string, time_ms: number): Promise<GroupSeeked>;
    /** One page of the topic's log without a group (nothing moves); see `reads.ts`. */
    read(topic: string, options?: ReadOptions): Promise<LogPage>;
    /** Stops new deliveries until `resume` (or until `until_ms`, Unix ms). */
    pause(topic: string, group: string, until_ms?: number): Promise<GroupPause>;
    /** Ends a pause; `changed` is whether the group was paused. */
    resume(topic: string, group: string): Promise<GroupPause>;
    /** One delivery, or null; a consumer's repeated poll returns the same attempt. */
    poll(topic: string, group: string, consumer?: string): Promise<Delivery | null>;
    /** As `poll`, with the payload sent raw (no base64 on the wire). */
    pollRaw(topic: string, group: string, consumer?: string): Promise<Delivery | null>;
    /**
     * Up to `max` (64) deliveries, waiting up to `wait_ms`; first nacks `nack.deliveries`
     * (with its options), then acks `ack`, in the same request and transaction. An empty
     * `nack.deliveries` nacks nothing and is left out of the body, as the Rust client does.
     */
    pollBatch(topic: string, group: string, options?: PollBatchOptions): Promise<PolledBatch>;
    /**
     * A consume stream: deliveries pushed over one WebSocket, at most `window` unsettled,
     * settled on the same socket (see `ConsumeStream`).
     */
    consumeStream(topic: string, group: string, options?: ConsumeStreamOptions): Promise<ConsumeStream>;
    /** Acks a delivery: `"acked"`, or throws `NotOwned`. */
    ack(topic: string, group: string, delivery: DeliveryRef): Promise<string>;
    /** Nacks a delivery: `"retry"`, `"released"` or `"dead_lettered"`. */
    nack(topic: string, group: string, delivery: DeliveryRef, options?: NackOptions): Promise<string>;
    /** Extends a delivery's lease: `"touched"`. */
    touch(topic: string, group: string, delivery: DeliveryRef): Promise<string>;
    /** Acks many in order; each item succeeds or fails alone. */
    ackBatch(topic: string, group: string, deliveries: DeliveryRef[]): Promise<ItemResult[]>;
    /** Nacks many in order with the same options; each item succeeds or fails alone. */
    nackBatch(topic: string, group: string, deliveries: DeliveryRef[], options?: NackOptions): Promise<ItemResult[]>;
    /** One page of dead letters from offset `from`. */
    deadLettersPage(topic: string, group: string, from?: number, limit?: number): Promise<DeadLetterPage>;
    /** Every dead letter, page after page. */
    deadLetters(topic: string, group: string): AsyncGenerator<DeadLetter>;
    /** Puts dead letters in `[from, to)` back to this group; how many. */
    redrive(topic: string, group: string, from?: number, to?: number): Promise<number>;
    /** Deletes dead letters in `[from, to)`; how many. */
    purge(topic: string, group: string, from?: number, to?: number): Promise<number>;
    /** Creates a channel (idempotent with the same settings): true if created. */
    createChannel(channel: string, settings?: {
        max_subscribers?: number;
        mailbox_capacity?: number;
    }): Promise<boolean>;
    /** Every live channel. */
    listChannels(): Promise<ChannelInfo[]>;
    /** A channel's settings and counters. */
    channelInfo(channel: string): Promise<ChannelInfo>;
    /** Closes a channel; its subscribers' streams end once drained. */
    closeChannel(channel: string): Promise<void>;
    /** Publishes to every subscriber's mailbox. */
    publishChannel(channel: string, payload: Payload): Promise<ChannelDelivery>;
    /** Subscribes to a channel over `"ws"` or `"sse"`: an async iterator of payloads. */
    subscribe(channel: string, transport?: "ws" | "sse"): Promise<Subscription>;
}
