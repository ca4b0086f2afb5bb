// The consume stream against a real server: the window, settlements answered in order, a
// disconnect leaving deliveries to the same consumer, bad input, and the consumer loop
// over it (acks, nacks with the exception, lease touches, releases, and a kill -9 of the
// server mid-stream followed by a restart on the same data directory and port).

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { ConsumeStream } from "../dist/consume_stream.js";
import * as mailroom from "../dist/index.js";
import { StreamConsumer } from "../dist/stream_consumer.js";
import { Server } from "./server.mjs";

const { Client } = mailroom;

async function withServer(body) {
  const server = await Server.start();
  try {
    await body(server, new Client(server.url));
  } finally {
    await server.stop();
  }
}

async function prepare(client, { messages = 6, max_in_flight = 8, max_attempts = 2, lease_ms = 60_000 } = {}) {
  await client.createTopic("orders");
  await client.createGroup("orders", "billing", { max_attempts, max_in_flight, lease_ms });
  if (messages > 0) await client.publishBatch("orders", Array.from({ length: messages }, (_, i) => `m${i}`));
}

test("the stream keeps its window and answers in order", () =>
  withServer(async (_, client) => {
    await prepare(client);
    const stream = await client.consumeStream("orders", "billing", { window: 2, consumer: "w1" });
    assert.deepEqual([stream.consumer, stream.window], ["w1", 2]);
    const first = await stream.receive(10_000);
    const second = await stream.receive(10_000);
    assert.deepEqual([first, second].map((d) => [d.offset, d.text]), [[0, "m0"], [1, "m1"]]);
    // The window holds: a third delivery comes only once one is settled.
    await assert.rejects(stream.receive(300), mailroom.Timeout);
    assert.deepEqual([stream.touch(first), stream.ack(first), stream.ack(first)], [0, 1, 2]);
    assert.equal(stream.nack(second, { kind: "release", reason: "busy" }), 3);
    const answers = await stream.flush(10_000);
    assert.deepEqual(
      answers.map((a) => [a.seq, a.op, a.outcome ?? a.error.code]),
      [[0, "touch", "touched"], [1, "ack", "acked"], [2, "ack", "not_owned"], [3, "nack", "released"]],
    );
    const third = await stream.receive(10_000);
    assert.ok(["1:2", "2:1"].includes(`${third.offset}:${third.attempt}`));
    stream.close();
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.counters.releases, info.deliveries.length], [1, 2]);
  }));

test("a reopened stream gets its deliveries back", () =>
  withServer(async (_, client) => {
    await prepare(client);
    const stream = await client.consumeStream("orders", "billing", { window: 3 });
    const held = [await stream.receive(10_000), await stream.receive(10_000), await stream.receive(10_000)];
    stream.close();
    assert.match(stream.consumer, /^stream-/);
    const again = await client.group("orders", "billing").consumeStream({ window: 3, consumer: stream.consumer });
    const back = [];
    for await (const delivery of again) {
      back.push(delivery);
      again.ack(delivery);
      if (back.length === 3) break;
    }
    assert.deepEqual(back.map((d) => [d.offset, d.attempt]), held.map((d) => [d.offset, d.attempt]));
    assert.deepEqual((await again.flush(10_000)).map((a) => a.outcome), ["acked", "acked", "acked"]);
    again.close();
    assert.equal((await client.groupInfo("orders", "billing")).position, 3);
  }));

test("bad input is refused", () =>
  withServer(async (_, client) => {
    await prepare(client, { max_in_flight: 4 });
    await assert.rejects(client.consumeStream("orders", "billing", { window: 0 }), RangeError);
    await assert.rejects(client.consumeStream("orders", "billing", { window: 5 }), mailroom.InvalidArgument);
    await assert.rejects(client.consumeStream("orders", "nobody"), mailroom.UnknownGroup);
    await assert.rejects(client.consumeStream("orders", "billing", { consumer: "" }), mailroom.InvalidArgument);
    const stream = await client.consumeStream("orders", "billing");
    stream.nack(await stream.receive(10_000), { delay_ms: 10 ** 12 }); // past the 7 days a delay may be
    const [answer] = await stream.flush(10_000);
    assert.equal(answer.error.code, "invalid_argument");
    stream.close();
  }));

test("a deleted group closes the stream", () =>
  withServer(async (_, client) => {
    await prepare(client, { messages: 0 });
    const stream = await client.consumeStream("orders", "billing");
    await client.deleteGroup("orders", "billing");
    assert.equal(await stream.receive(10_000), null);
    assert.equal(stream.closed, "unknown_group");
    assert.throws(() => stream.ack({ offset: 0, attempt: 1 }), mailroom.StreamClosed);
  }));

test("the stream loop acks and nacks with the exception", () =>
  withServer(async (_, client) => {
    await prepare(client, { messages: 0, max_attempts: 1, max_in_flight: 4 });
    await client.publishBatch("orders", ["ok 0", "bad 1", "ok 2", "ok 3", "bad 4", "ok 5"]);
    const consumer = client.group("orders", "billing").consume({ batch: 4, stream: true });
    assert.ok(consumer instanceof mailroom.StreamConsumer);
    const seen = [];
    await consumer.run(async (delivery) => {
      seen.push(delivery.offset);
      if (seen.length === 6) consumer.stop();
      if (delivery.text.startsWith("bad")) throw new TypeError(`cannot handle ${delivery.text}`);
    });
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5]);
    assert.deepEqual([consumer.stats.acked, consumer.stats.failed], [4, 2]);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.dead_letters], [6, 2]);
    assert.deepEqual(
      info.dead_letter_notes.map((n) => n.reason),
      ["TypeError: cannot handle bad 1", "TypeError: cannot handle bad 4"],
    );
  }));

test("the stream loop keeps slow leases and releases what it left", () =>
  withServer(async (_, client) => {
    await prepare(client, { messages: 0, max_attempts: 1, max_in_flight: 2, lease_ms: 300 });
    await client.publishBatch("orders", ["slow", "waiting"]);
    const consumer = client.group("orders", "billing").consume({ stream: true, window: 2 });
    for await (const _delivery of consumer) {
      await sleep(1200); // four leases long: only the touches keep both
      consumer.stop();
    }
    assert.deepEqual([consumer.stats.acked, consumer.stats.released], [1, 1]);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.counters.expired_leases, info.counters.releases], [1, 0, 1]);
  }));

/** A WebSocket stand-in whose frames the test hands over, as many as it likes in one go. */
class FrameSocket {
  readyState = 1;
  sent = [];
  listeners = { message: new Set(), close: new Set() };
  addEventListener(type, listener) {
    this.listeners[type].add(listener);
  }
  removeEventListener(type, listener) {
    this.listeners[type].delete(listener);
  }
  send(text) {
    this.sent.push(JSON.parse(text));
  }
  close() {
    this.readyState = 3;
  }
  /** Takes `frames` one after the other, as from a single read: no await in between. */
  arrive(frames) {
    for (const frame of frames) for (const listener of [...this.listeners.message]) listener({ data: JSON.stringify(frame) });
  }
}

// The frames a server restarted under a kill -9 sends a loop that carried acks 96..111
// over: their deliveries (still in flight) first, then the acks' answers.
test("the stream loop never hands out a delivery its carried ack settled in the same read", async () => {
  const offsets = Array.from({ length: 16 }, (_, i) => 96 + i);
  const socket = new FrameSocket();
  const stream = new ConsumeStream(socket, "w1", 16, [], () => {});
  const consumer = new StreamConsumer(null, { window: 16 });
  Object.assign(consumer, { stream, open: true });
  // What `reconnect` does: the unanswered acks marked as sent again, and sent.
  for (const offset of offsets) consumer.redo.add(`${offset}:1`);
  for (const offset of offsets) consumer.send({ op: "ack", offset, attempt: 1 });
  assert.deepEqual(socket.sent.map((s) => s.offset), offsets);
  // Once the frames taken are used up, the loop ends instead of waiting for more.
  const receive = stream.receive.bind(stream);
  stream.receive = async () => (await receive()) ?? ((consumer.stopped = true), null);
  // The loop waits for a delivery while all 32 frames are taken.
  const first = consumer.next(16);
  socket.arrive([
    ...offsets.map((offset) => ({ type: "delivery", offset, attempt: 1, payload: `m${offset}` })),
    ...offsets.map((_, seq) => ({ type: "settled", seq, outcome: "acked" })),
  ]);
  stream.interrupt();
  const handed = [];
  for (let delivery = await first; delivery !== null; delivery = await consumer.next(16)) handed.push(delivery.offset);
  assert.deepEqual(handed, [], "a delivery settled by its carried ack was handed to the body");
  assert.deepEqual(stream.answers().map((a) => [a.offset, a.outcome]), offsets.map((o) => [o, "acked"]));
  assert.deepEqual([stream.buffered(), stream.unsettled(), stream.unanswered], [[], [], 0]);
});

const MESSAGES = 300;

test("the stream loop rides out a kill -9 and a restart", () =>
  withServer(async (server, client) => {
    await prepare(client, { messages: MESSAGES, max_attempts: 5, max_in_flight: 16 });
    const handled = new Map();
    const results = [];
    const consumer = client
      .group("orders", "billing")
      .consume({ stream: true, window: 16, on_result: (r) => results.push(r) });
    let restarted = null;
    await consumer.run(async (delivery) => {
      handled.set(delivery.offset, (handled.get(delivery.offset) ?? 0) + 1);
      await sleep(2);
      if (handled.size === MESSAGES / 3 && restarted === null) restarted = server.restart();
      if (handled.size === MESSAGES) consumer.stop();
    });
    await restarted;
    assert.ok(consumer.stats.reconnects > 0, "the kill was not noticed");
    assert.equal(handled.size, MESSAGES);
    assert.ok([...handled.values()].every((n) => n === 1), "a delivery was handed to the body twice");
    const acked = new Map();
    for (const r of results.filter((r) => r.outcome === "acked")) acked.set(r.offset, (acked.get(r.offset) ?? 0) + 1);
    assert.ok([...acked.values()].every((n) => n === 1), "an offset was acked twice");
    const settled = new Set([...acked.keys(), ...results.filter((r) => r.error).map((r) => r.offset)]);
    assert.equal(settled.size, MESSAGES);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.lag, info.dead_letters, info.deliveries], [MESSAGES, 0, 0, []]);
  }));
