/**
 * The client: one method per endpoint over `fetch`, plus the publish stream, channel
 * subscriptions and the consumer loop.
 */
import { ConsumeStream } from "./consume_stream.js";
import { Group } from "./group.js";
import { defined, groupPath, name, refs, Transport } from "./http.js";
import { Delivery, batchMessage, bytesOf, decodePayload, } from "./models.js";
import { decodeLogPage, readQuery } from "./reads.js";
import { PublishStream, sseSubscription, wsSubscription } from "./streams.js";
export { REQUEST_TIMEOUT_MS_DEFAULT, } from "./options.js";
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
export class Client extends Transport {
    // Operations.
    /** `/healthz`: `ok`, or `unhealthy` with the reason. */
    health() {
        return this.json({ method: "GET", path: "/healthz", answers: [503] });
    }
    /** `/metrics` as Prometheus text. */
    async metrics() {
        return (await this.send({ method: "GET", path: "/metrics" })).text();
    }
    /** The server's OpenAPI document. */
    openapi() {
        return this.json({ method: "GET", path: "/openapi.json" });
    }
    /** A one-use ticket for a stream under `path` (for browsers' `EventSource`). */
    issueTicket(path) {
        return this.json({ method: "POST", path: "/v1/tickets", json: { path } });
    }
    // Topics.
    /**
     * Creates a topic (idempotent): true if this call created it. `idempotency` gives it an
     * idempotency window of its own (set at creation only).
     */
    async createTopic(topic, retention, idempotency) {
        const json = {};
        if (retention !== undefined)
            json.retention = retention;
        if (idempotency !== undefined)
            json.idempotency = idempotency;
        const answer = await this.json({ method: "PUT", path: `/v1/topics/${name("topic", topic)}`, json });
        return answer.created;
    }
    /** Changes the limits `retention` sets; the others stay. */
    changeRetention(topic, retention) {
        return this.json({ method: "PATCH", path: `/v1/topics/${name("topic", topic)}`, json: { retention } });
    }
    /** Every topic, by name. */
    async listTopics() {
        return (await this.json({ method: "GET", path: "/v1/topics" })).topics;
    }
    /** A topic's view. */
    topicInfo(topic) {
        return this.json({ method: "GET", path: `/v1/topics/${name("topic", topic)}` });
    }
    /** Deletes a topic with its groups. */
    async deleteTopic(topic) {
        await this.send({ method: "DELETE", path: `/v1/topics/${name("topic", topic)}` });
    }
    /**
     * Publishes one message, with an optional key, headers and idempotency key; its offset
     * once durable (a duplicate's is the first publish's: `publishOnce` says which it was).
     */
    async publish(topic, payload, meta = {}) {
        return (await this.publishOnce(topic, payload, meta)).offset;
    }
    /** As `publish`, with the whole answer: the offset and whether it was a `duplicate`. */
    async publishOnce(topic, payload, meta = {}) {
        const path = `/v1/topics/${name("topic", topic)}/messages`;
        const headers = {};
        if (meta.key !== undefined)
            headers["mailroom-key"] = meta.key;
        for (const [header, value] of Object.entries(meta.headers ?? {}))
            headers[`mailroom-header-${header}`] = value;
        if (meta.idempotency_key !== undefined)
            headers["Idempotency-Key"] = meta.idempotency_key;
        const answer = await this.json({ method: "POST", path, body: bytesOf(payload), headers });
        return { offset: answer.offset, duplicate: answer.duplicate ?? false };
    }
    /** Reopens a failed (unreadable or stopped) topic now. */
    recoverTopic(topic) {
        return this.json({ method: "POST", path: `/v1/topics/${name("topic", topic)}/recover` });
    }
    /** Moves a damaged topic's bad files aside and reopens it. */
    repairTopic(topic) {
        return this.json({ method: "POST", path: `/v1/topics/${name("topic", topic)}/repair` });
    }
    /** Publishes 1 to 10,000 messages (payloads, or `Message`s with metadata) in one write; their offsets. */
    async publishBatch(topic, payloads) {
        return (await this.publishBatchOnce(topic, payloads)).offsets;
    }
    /** As `publishBatch`, with the whole answer: the offsets and the indices of the `duplicates`. */
    async publishBatchOnce(topic, messages) {
        const path = `/v1/topics/${name("topic", topic)}/messages/batch`;
        const json = { messages: messages.map(batchMessage) };
        const answer = await this.json({ method: "POST", path, json });
        return { offsets: answer.offsets, duplicates: answer.duplicates ?? [] };
    }
    /** A pipelined publish stream: up to `window` messages awaiting confirmation. */
    publishStream(topic, window = 256) {
        return PublishStream.open(this, `/v1/topics/${name("topic", topic)}/publish/ws?text=json`, window);
    }
    // Groups.
    /** A handle on one consumer group (no request is made). */
    group(topic, group) {
        return new Group(this, topic, group);
    }
    /** Creates a group (409 `group_exists` if it exists). */
    async createGroup(topic, group, settings) {
        await this.send({ method: "PUT", path: groupPath(topic, group), json: defined(settings) });
    }
    /** A group's full view. */
    groupInfo(topic, group) {
        return this.json({ method: "GET", path: groupPath(topic, group) });
    }
    /** Deletes a group. */
    async deleteGroup(topic, group) {
        await this.send({ method: "DELETE", path: groupPath(topic, group) });
    }
    /**
     * Moves a group to offset `to`, or `"earliest"` / `"latest"`. Deliveries in flight end
     * (their acks become 409 `not_owned`); a message seen before comes again with a higher attempt.
     */
    seek(topic, group, to) {
        const json = typeof to === "number" ? { offset: to } : { to };
        return this.json({ method: "POST", path: `${groupPath(topic, group)}/seek`, json });
    }
    /** Moves a group to the first message published at or after `time_ms` (Unix ms). */
    seekToTime(topic, group, time_ms) {
        return this.json({ method: "POST", path: `${groupPath(topic, group)}/seek`, json: { time_ms } });
    }
    /** One page of the topic's log without a group (nothing moves); see `reads.ts`. */
    async read(topic, options = {}) {
        const path = `/v1/topics/${name("topic", topic)}/messages`;
        const call = { method: "GET", path, query: readQuery(options), waitMs: options.wait_ms ?? 0 };
        return decodeLogPage(await this.json(call));
    }
    /** Stops new deliveries until `resume` (or until `until_ms`, Unix ms). */
    pause(topic, group, until_ms) {
        const json = until_ms === undefined ? {} : { until_ms };
        return this.json({ method: "POST", path: `${groupPath(topic, group)}/pause`, json });
    }
    /** Ends a pause; `changed` is whether the group was paused. */
    resume(topic, group) {
        return this.json({ method: "POST", path: `${groupPath(topic, group)}/resume` });
    }
    /** One delivery, or null; a consumer's repeated poll returns the same attempt. */
    async poll(topic, group, consumer) {
        const json = consumer === undefined ? {} : { consumer };
        const response = await this.send({ method: "POST", path: `${groupPath(topic, group)}/poll`, json });
        if (response.status === 204)
            return null;
        return Delivery.decode((await response.json()));
    }
    /** As `poll`, with the payload sent raw (no base64 on the wire). */
    async pollRaw(topic, group, consumer) {
        const json = consumer === undefined ? {} : { consumer };
        const response = await this.send({ method: "POST", path: `${groupPath(topic, group)}/poll/raw`, json });
        if (response.status === 204)
            return null;
        const sent = response.headers;
        const offset = Number(sent.get("mailroom-offset"));
        const attempt = Number(sent.get("mailroom-attempt"));
        const headers = {};
        for (const [header, value] of sent) {
            if (header.startsWith("mailroom-header-"))
                headers[header.slice("mailroom-header-".length)] = value;
        }
        const published = sent.get("mailroom-published-at-ms");
        const payload = new Uint8Array(await response.arrayBuffer());
        const meta = Object.keys(headers).length > 0 ? headers : null;
        return new Delivery(offset, attempt, payload, sent.get("mailroom-key"), meta, published === null ? null : Number(published));
    }
    /**
     * Up to `max` (64) deliveries, waiting up to `wait_ms`; first nacks `nack.deliveries`
     * (with its options), then acks `ack`, in the same request and transaction. An empty
     * `nack.deliveries` nacks nothing and is left out of the body, as the Rust client does.
     */
    async pollBatch(topic, group, options = {}) {
        const { max = 64, consumer, wait_ms = 0, ack, nack } = options;
        const nacks = nack === undefined || nack.deliveries.length === 0
            ? undefined
            : { ...defined(nack), deliveries: refs(nack.deliveries) };
        const json = defined({ max, consumer, wait_ms, ack: ack === undefined ? undefined : refs(ack), nack: nacks });
        const path = `${groupPath(topic, group)}/poll/batch`;
        const answer = await this.json({ method: "POST", path, json, waitMs: wait_ms });
        return {
            deliveries: answer.deliveries.map(Delivery.decode),
            acked: answer.acked ?? null,
            nacked: answer.nacked ?? null,
        };
    }
    /**
     * A consume stream: deliveries pushed over one WebSocket, at most `window` unsettled,
     * settled on the same socket (see `ConsumeStream`).
     */
    consumeStream(topic, group, options = {}) {
        return ConsumeStream.open(this, `${groupPath(topic, group)}/consume/ws`, options);
    }
    /** Acks a delivery: `"acked"`, or throws `NotOwned`. */
    async ack(topic, group, delivery) {
        const json = { offset: delivery.offset, attempt: delivery.attempt };
        return (await this.json({ method: "POST", path: `${groupPath(topic, group)}/ack`, json })).outcome;
    }
    /** Nacks a delivery: `"retry"`, `"released"` or `"dead_lettered"`. */
    async nack(topic, group, delivery, options = {}) {
        const json = { offset: delivery.offset, attempt: delivery.attempt, ...defined(options) };
        return (await this.json({ method: "POST", path: `${groupPath(topic, group)}/nack`, json })).outcome;
    }
    /** Extends a delivery's lease: `"touched"`. */
    async touch(topic, group, delivery) {
        const json = { offset: delivery.offset, attempt: delivery.attempt };
        return (await this.json({ method: "POST", path: `${groupPath(topic, group)}/touch`, json })).outcome;
    }
    /** Acks many in order; each item succeeds or fails alone. */
    async ackBatch(topic, group, deliveries) {
        const json = { deliveries: refs(deliveries) };
        const path = `${groupPath(topic, group)}/ack/batch`;
        return (await this.json({ method: "POST", path, json })).results;
    }
    /** Nacks many in order with the same options; each item succeeds or fails alone. */
    async nackBatch(topic, group, deliveries, options = {}) {
        const json = { deliveries: refs(deliveries), ...defined(options) };
        const path = `${groupPath(topic, group)}/nack/batch`;
        return (await this.json({ method: "POST", path, json })).results;
    }
    /** One page of dead letters from offset `from`. */
    async deadLettersPage(topic, group, from = 0, limit) {
        const path = `${groupPath(topic, group)}/dead-letters`;
        const page = await this.json({
            method: "GET",
            path,
            query: { from, limit },
        });
        const letters = page.dead_letters.map((letter) => ({ ...letter, payload: decodePayload(letter) }));
        for (const letter of letters)
            delete letter.payload_base64;
        return { dead_letters: letters, next: page.next ?? null };
    }
    /** Every dead letter, page after page. */
    async *deadLetters(topic, group) {
        let from = 0;
        while (from != null) {
            const page = await this.deadLettersPage(topic, group, from);
            yield* page.dead_letters;
            from = page.next;
        }
    }
    /** Puts dead letters in `[from, to)` back to this group; how many. */
    async redrive(topic, group, from, to) {
        const path = `${groupPath(topic, group)}/dead-letters/redrive`;
        return (await this.json({ method: "POST", path, json: defined({ from, to }) })).count;
    }
    /** Deletes dead letters in `[from, to)`; how many. */
    async purge(topic, group, from, to) {
        const path = `${groupPath(topic, group)}/dead-letters/purge`;
        return (await this.json({ method: "POST", path, json: defined({ from, to }) })).count;
    }
    // Live channels.
    /** Creates a channel (idempotent with the same settings): true if created. */
    async createChannel(channel, settings = {}) {
        const path = `/v1/channels/${name("channel", channel)}`;
        return (await this.send({ method: "PUT", path, json: defined(settings) })).status === 201;
    }
    /** Every live channel. */
    async listChannels() {
        return (await this.json({ method: "GET", path: "/v1/channels" })).channels;
    }
    /** A channel's settings and counters. */
    channelInfo(channel) {
        return this.json({ method: "GET", path: `/v1/channels/${name("channel", channel)}` });
    }
    /** Closes a channel; its subscribers' streams end once drained. */
    async closeChannel(channel) {
        await this.send({ method: "DELETE", path: `/v1/channels/${name("channel", channel)}` });
    }
    /** Publishes to every subscriber's mailbox. */
    publishChannel(channel, payload) {
        const path = `/v1/channels/${name("channel", channel)}/messages`;
        return this.json({ method: "POST", path, body: bytesOf(payload) });
    }
    /** Subscribes to a channel over `"ws"` or `"sse"`: an async iterator of payloads. */
    subscribe(channel, transport = "ws") {
        const base = `/v1/channels/${name("channel", channel)}`;
        return transport === "sse" ? sseSubscription(this, `${base}/events`) : wsSubscription(this, `${base}/ws`);
    }
}
