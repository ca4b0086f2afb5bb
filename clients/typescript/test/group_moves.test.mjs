// The routes added with message metadata and group moves, against a real server: seek,
// pause, resume, topic recover and repair, keys and headers on publish, the new view fields.

import assert from "node:assert/strict";
import { test } from "node:test";

import * as mailroom from "../dist/index.js";
import { Server } from "./server.mjs";

const { Client } = mailroom;

async function withServer(body) {
  const server = await Server.start();
  try {
    await body(new Client(server.url));
  } finally {
    await server.stop();
  }
}

test("a seek moves the group and fences old deliveries", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 5 });
    await client.publishBatch("orders", ["a", "b"]);
    const first = await client.poll("orders", "billing");
    assert.equal(first.offset, 0);
    await client.ack("orders", "billing", first);
    assert.deepEqual(await client.seek("orders", "billing", 0), { topic: "orders", group: "billing", position: 0 });
    const again = await client.poll("orders", "billing");
    assert.deepEqual([again.offset, again.text], [0, "a"]);
    assert.ok(again.attempt > first.attempt);
    assert.equal((await client.seek("orders", "billing", "latest")).position, 2);
    await assert.rejects(client.ack("orders", "billing", again), mailroom.NotOwned);
    assert.equal((await client.seek("orders", "billing", "earliest")).position, 0);
    await assert.rejects(client.seek("orders", "billing", 99), mailroom.InvalidArgument);
    await assert.rejects(client.seek("orders", "nobody", 0), mailroom.UnknownGroup);
  }));

test("a pause stops deliveries until the resume", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    await client.createGroup("orders", "billing", { max_attempts: 5 });
    await client.publish("orders", "a");
    const paused = await client.pause("orders", "billing");
    assert.deepEqual([paused.paused, paused.changed, paused.paused_until_ms], [true, true, null]);
    assert.equal(await client.poll("orders", "billing"), null);
    assert.equal((await client.groupInfo("orders", "billing")).paused, true);
    assert.equal((await client.resume("orders", "billing")).changed, true);
    assert.equal((await client.resume("orders", "billing")).changed, false);
    assert.equal((await client.groupInfo("orders", "billing")).paused, false);
    assert.equal((await client.poll("orders", "billing")).text, "a");
    const until = Date.now() + 60_000;
    assert.equal((await client.pause("orders", "billing", until)).paused_until_ms, until);
    assert.equal((await client.topicInfo("orders")).groups[0].paused_until_ms, until);
    await assert.rejects(client.pause("orders", "billing", 1), mailroom.InvalidArgument);
  }));

test("recover and repair a serving topic", () =>
  withServer(async (client) => {
    await client.createTopic("orders");
    assert.deepEqual(await client.recoverTopic("orders"), { topic: "orders", recovered: false });
    const report = await client.repairTopic("orders");
    assert.deepEqual([report.topic, report.repaired], ["orders", false]);
    const info = await client.topicInfo("orders");
    assert.deepEqual([info.state, info.failure ?? null, info.failure_kind ?? null], ["ok", null, null]);
    assert.equal((await client.listTopics())[0].state, "ok");
    assert.equal((await client.health()).status, "ok");
    await assert.rejects(client.recoverTopic("nothing"), mailroom.UnknownTopic);
    await assert.rejects(client.repairTopic("nothing"), mailroom.UnknownTopic);
    await client.createChannel("live");
    assert.ok((await client.channelInfo("live")).mailbox_bytes > 0);
  }));

test("keys and headers reach every kind of poll and the dead letters", () =>
  withServer(async (client) => {
    await client.createTopic("events");
    await client.createGroup("events", "audit", { max_attempts: 1 });
    const before = Date.now();
    await client.publish("events", "signed up", { key: "customer-7", headers: { trace: "t1" } });
    const message = { payload: new Uint8Array([0, 255]), key: "k2", headers: { "Content-Type": "bin" } };
    assert.deepEqual(await client.publishBatch("events", ["plain", message]), [1, 2]);
    const first = await client.pollRaw("events", "audit");
    assert.deepEqual([first.key, first.headers, first.text], ["customer-7", { trace: "t1" }, "signed up"]);
    assert.ok(first.published_at_ms >= before - 1000);
    await client.ack("events", "audit", first);
    const plain = await client.poll("events", "audit");
    assert.deepEqual([plain.key, plain.headers], [null, null]);
    await client.nack("events", "audit", plain);
    const binary = (await client.pollBatch("events", "audit", { max: 1 })).deliveries[0];
    assert.deepEqual([[...binary.payload], binary.key, binary.headers], [[0, 255], "k2", { "Content-Type": "bin" }]);
    await client.nack("events", "audit", binary);
    const letters = (await client.deadLettersPage("events", "audit")).dead_letters;
    assert.deepEqual(letters.map((d) => [d.offset, d.key ?? null]), [[1, null], [2, "k2"]]);
    assert.deepEqual(letters[1].headers, { "Content-Type": "bin" });
    assert.ok(letters[1].published_at_ms > 0);
    await assert.rejects(client.publish("events", "x", { key: "" }), mailroom.InvalidArgument);
  }));
