// The consumer loop: acks, nacks with the exception, lease touches, and a kill -9 of the
// server mid-consume followed by a restart on the same data directory and port.

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { Client } from "../dist/index.js";
import { Server } from "./server.mjs";

async function withServer(body) {
  const server = await Server.start();
  try {
    await body(server, new Client(server.url));
  } finally {
    await server.stop();
  }
}

test("run acks and nacks with the exception", () =>
  withServer(async (_, client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 1 });
    await client.publishBatch("orders", ["ok 0", "bad 1", "ok 2", "ok 3", "bad 4", "ok 5"]);
    const consumer = client.group("orders", "billing").consume({ batch: 4, wait_ms: 100 });
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

test("leaving the loop early releases the unhandled deliveries", () =>
  withServer(async (_, client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 1, max_in_flight: 8 });
    await client.publishBatch("orders", ["a", "b", "c", "d"]);
    const consumer = client.group("orders", "billing").consume({ batch: 4 });
    await assert.rejects(async () => {
      for await (const delivery of consumer) {
        if (delivery.text === "b") throw new Error("stop at b");
      }
    }, /stop at b/);
    assert.deepEqual([consumer.stats.acked, consumer.stats.released], [1, 3]);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.dead_letters, info.counters.releases], [1, 0, 3]);
  }));

test("a slow handler keeps its lease", () =>
  withServer(async (_, client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 1, lease_ms: 300 });
    await client.publish("orders", "slow");
    const consumer = client.group("orders", "billing").consume({ batch: 1, wait_ms: 50 });
    for await (const _delivery of consumer) {
      await sleep(1200); // four leases long: only the touches keep it
      consumer.stop();
    }
    assert.equal(consumer.stats.acked, 1);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.dead_letters, info.counters.expired_leases], [1, 0, 0]);
  }));

const MESSAGES = 300;

test("the loop rides out a kill -9 and a restart", () =>
  withServer(async (server, client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 5, lease_ms: 60_000 });
    await client.publishBatch("orders", Array.from({ length: MESSAGES }, (_, i) => `m${i}`));
    const handled = new Map();
    const results = [];
    const consumer = client
      .group("orders", "billing")
      .consume({ batch: 16, consumer: "c1", wait_ms: 200, on_result: (r) => results.push(r) });
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
    const acked = new Map();
    for (const r of results.filter((r) => r.outcome === "acked")) acked.set(r.offset, (acked.get(r.offset) ?? 0) + 1);
    assert.ok([...acked.values()].every((n) => n === 1), "an offset was acked twice");
    const settled = new Set([...acked.keys(), ...results.filter((r) => r.error).map((r) => r.offset)]);
    assert.equal(settled.size, MESSAGES);
    const info = await client.groupInfo("orders", "billing");
    assert.deepEqual([info.position, info.lag, info.dead_letters, info.deliveries], [MESSAGES, 0, 0, []]);
  }));
