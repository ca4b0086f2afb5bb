// Idempotent publish against a real server: the idempotency key on a single publish, on
// batch items and on publish stream frames, and the `duplicate` / `duplicates` answers;
// and the group handle's seek, pause and resume.

import assert from "node:assert/strict";
import { test } from "node:test";

import * as mailroom from "../dist/index.js";
import { Server } from "./server.mjs";

const { Client, offsetsOf } = mailroom;

async function withServer(body) {
  const server = await Server.start();
  try {
    await body(new Client(server.url));
  } finally {
    await server.stop();
  }
}

test("a repeated key is answered as a duplicate", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    assert.deepEqual(await client.publishOnce("orders", "invoice 7", { idempotency_key: "invoice-7" }), { offset: 0, duplicate: false });
    assert.deepEqual(await client.publishOnce("orders", "invoice 7", { idempotency_key: "invoice-7" }), { offset: 0, duplicate: true });
    assert.equal(await client.publish("orders", "again", { idempotency_key: "invoice-7" }), 0);
    assert.equal(await client.publish("orders", "plain"), 1);
    assert.deepEqual(await client.publishOnce("orders", "other", { idempotency_key: "invoice-8", key: "c1" }), { offset: 2, duplicate: false });
    assert.equal((await client.topicInfo("orders")).end, 3, "a duplicate was stored");
    await assert.rejects(client.publishOnce("orders", "x", { idempotency_key: "k".repeat(257) }), mailroom.InvalidArgument);
  }));

test("batch items carry keys and the answer names the duplicates", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    await client.publish("orders", "first", { idempotency_key: "a" });
    const answer = await client.publishBatchOnce("orders", [
      { payload: "a again", idempotency_key: "a" },
      "no key",
      { payload: "b", idempotency_key: "b" },
      { payload: "b again", idempotency_key: "b" },
    ]);
    assert.deepEqual(answer, { offsets: [0, 1, 2, 2], duplicates: [0, 3] });
    assert.deepEqual(await client.publishBatch("orders", [{ payload: "b", idempotency_key: "b" }]), [2]);
    assert.deepEqual((await client.publishBatchOnce("orders", ["c"])).duplicates, []);
    assert.equal((await client.topicInfo("orders")).end, 4);
  }));

test("the publish stream confirms duplicates", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    const stream = await client.publishStream("orders");
    await stream.send({ payload: "one", key: "k1", idempotency_key: "one" });
    await stream.send("bare");
    await stream.send({ payload: "one again", idempotency_key: "one" });
    const confirmations = await stream.flush();
    stream.close();
    const offsets = confirmations.flatMap((c) => offsetsOf(c).map((o) => [o, c.duplicate ?? false]));
    assert.deepEqual(offsets, [[0, false], [1, false], [0, true]]);
    await client.createGroup("orders", "billing", { max_attempts: 1, max_in_flight: 4 });
    const { deliveries } = await client.pollBatch("orders", "billing", { max: 4 });
    assert.deepEqual(deliveries.map((d) => [d.offset, d.text, d.key]), [[0, "one", "k1"], [1, "bare", null]]);
  }));

test("the group handle seeks, pauses and resumes", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 5 });
    await client.publishBatch("orders", ["a", "b"]);
    const group = client.group("orders", "billing");
    assert.deepEqual(await group.seek("latest"), { topic: "orders", group: "billing", position: 2 });
    assert.equal((await group.seek(1)).position, 1);
    assert.equal((await group.pause()).paused, true);
    assert.equal(await group.poll(), null);
    assert.equal((await group.resume()).changed, true);
    assert.equal((await group.poll()).text, "b");
    const untilMs = Date.now() + 60_000;
    assert.equal((await group.pause(untilMs)).paused_until_ms, untilMs);
    assert.equal((await group.seek("earliest")).position, 0);
  }));
