/** A handle on one consumer group: the client's group calls without the names, and the consumer loop. */
import { Consumer } from "./consumer.js";
import { StreamConsumer } from "./stream_consumer.js";
/** One consumer group of a topic: its calls without the names, and the consumer loop. */
export class Group {
    client;
    topic;
    name;
    constructor(client, topic, name) {
        this.client = client;
        this.topic = topic;
        this.name = name;
    }
    /** The group's full view. */
    info() {
        return this.client.groupInfo(this.topic, this.name);
    }
    /** One delivery, or null. */
    poll(consumer) {
        return this.client.poll(this.topic, this.name, consumer);
    }
    /** Up to `max` deliveries (see `Client.pollBatch`). */
    pollBatch(options = {}) {
        return this.client.pollBatch(this.topic, this.name, options);
    }
    /** Acks one delivery. */
    ack(delivery) {
        return this.client.ack(this.topic, this.name, delivery);
    }
    /** Nacks one delivery. */
    nack(delivery, options = {}) {
        return this.client.nack(this.topic, this.name, delivery, options);
    }
    /** Extends one delivery's lease. */
    touch(delivery) {
        return this.client.touch(this.topic, this.name, delivery);
    }
    /** Moves the group to offset `to`, or `"earliest"` / `"latest"` (see `Client.seek`). */
    seek(to) {
        return this.client.seek(this.topic, this.name, to);
    }
    /** Stops new deliveries until `resume` (or until `until_ms`, Unix ms). */
    pause(until_ms) {
        return this.client.pause(this.topic, this.name, until_ms);
    }
    /** Ends a pause; `changed` is whether the group was paused. */
    resume() {
        return this.client.resume(this.topic, this.name);
    }
    /** A consume stream of this group (see `Client.consumeStream`). */
    consumeStream(options = {}) {
        return this.client.consumeStream(this.topic, this.name, options);
    }
    consume(options = {}) {
        const { stream, ...rest } = options;
        return stream ? new StreamConsumer(this, rest) : new Consumer(this, rest);
    }
}
