/**
 * A client for the mailroom broker over `fetch` and `WebSocket`, for browsers and Node 20+:
 * every endpoint of the HTTP API, the pipelined publish stream, the consume stream, live
 * channel subscriptions (WebSocket and SSE) and a consumer loop (over long polls or the
 * consume stream) that acks, nacks, keeps leases and rides out server restarts.
 *
 * ```ts
 * import { Client } from "mailroom";
 * const client = new Client("http://127.0.0.1:7070");
 * await client.createTopic("orders");
 * await client.createGroup("orders", "billing", { max_attempts: 3 });
 * await client.publish("orders", "hello");
 * for await (const delivery of client.group("orders", "billing").consume({ batch: 64 })) {
 *   console.log(delivery.offset, delivery.text); // acked once the body finishes
 * }
 * ```
 */

export * from "./client.js";
export * from "./consume_stream.js";
export * from "./consumer.js";
export * from "./errors.js";
export * from "./models.js";
export * from "./reads.js";
export * from "./stream_consumer.js";
export * from "./streams.js";
