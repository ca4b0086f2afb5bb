// What the behaviour suite does not show: every server error code has its class, unknown
// codes still get the class of their status, time limits (a long poll's wait added), the
// publish stream's window, the token on every kind of call, bad names refused unsent.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { test } from "node:test";

import * as mailroom from "../dist/index.js";
import { REPO, Server } from "./server.mjs";

const { ApiError, BY_CODE, Client, apiError, offsetsOf } = mailroom;

test("every server code has its class", () => {
  const source = readFileSync(join(REPO, "crates", "mailroom-api", "src", "error.rs"), "utf8");
  const codes = [...source.slice(source.indexOf("error_codes! {")).matchAll(/=> "([a-z_]+)"/g)].map((m) => m[1]);
  assert.ok(codes.includes("not_owned") && codes.length > 20);
  assert.deepEqual([...codes].sort(), Object.keys(BY_CODE).sort());
  assert.ok(apiError(409, "not_owned", "x") instanceof mailroom.NotOwned);
  assert.ok(apiError(409, "not_owned", "x") instanceof mailroom.Conflict);
});

test("an unknown code gets the class of its status", () => {
  const error = apiError(404, "brand_new_code", "from a newer server");
  assert.equal(error.constructor, mailroom.NotFound);
  assert.deepEqual([error.status, error.code, error.detail], [404, "brand_new_code", "from a newer server"]);
  assert.equal(apiError(503, "whatever", "").constructor, mailroom.ServerError);
  assert.equal(apiError(418, "teapot", "").constructor, ApiError);
});

test("bad names are refused before sending", async () => {
  const client = new Client("http://127.0.0.1:9");
  for (const bad of ["..", "a/b", "", "x".repeat(129)]) {
    await assert.rejects(client.publish(bad, "x"), mailroom.InvalidName);
  }
});

test("a silent server times out and a long poll gets its wait", async () => {
  const held = [];
  const silent = createServer((socket) => held.push(socket));
  await new Promise((ready) => silent.listen(0, "127.0.0.1", ready));
  const client = new Client(`http://127.0.0.1:${silent.address().port}`, { requestTimeoutMs: 300 });
  try {
    let started = performance.now();
    await assert.rejects(client.createTopic("orders"), mailroom.Timeout);
    const plain = performance.now() - started;
    assert.ok(plain >= 290 && plain < 3000, `${plain}`);
    started = performance.now();
    await assert.rejects(client.pollBatch("orders", "billing", { max: 1, wait_ms: 700 }), mailroom.Timeout);
    const waited = performance.now() - started;
    assert.ok(waited >= 990 && waited < 4000, `${waited}`);
  } finally {
    for (const socket of held) socket.destroy();
    silent.close();
  }
});

test("an unreachable server is a transport error", async () => {
  const probe = createServer();
  await new Promise((ready) => probe.listen(0, "127.0.0.1", ready));
  const { port } = probe.address();
  await new Promise((closed) => probe.close(closed));
  await assert.rejects(new Client(`http://127.0.0.1:${port}`).health(), mailroom.TransportError);
});

test("the publish stream keeps its window", async () => {
  const server = await Server.start();
  try {
    const client = new Client(server.url);
    await client.createTopic("orders");
    const stream = await client.publishStream("orders", 8);
    const seqs = [];
    for (let i = 0; i < 500; i++) {
      seqs.push(await stream.send(`m${i}`));
      assert.ok(stream.inFlight <= 8);
    }
    const offsets = [];
    for (let c = await stream.confirmed(); c !== null; c = await stream.confirmed()) offsets.push(...offsetsOf(c));
    stream.close();
    assert.deepEqual(seqs, [...Array(500).keys()]);
    assert.deepEqual(offsets, [...Array(500).keys()]);
    assert.equal((await client.topicInfo("orders")).end, 500);
  } finally {
    await server.stop();
  }
});

test("the token goes on every call, streams included", async () => {
  const server = await Server.start(["--token", "secret"]);
  try {
    await assert.rejects(new Client(server.url).listTopics(), mailroom.Unauthorized);
    await assert.rejects(new Client(server.url).subscribe("drivers"), mailroom.Unauthorized);
    const client = new Client(server.url, { token: "secret", WebSocket: globalThis.WebSocket });
    await client.createTopic("orders");
    await client.createChannel("drivers");
    const stream = await client.publishStream("orders");
    await stream.send("m");
    assert.equal((await stream.flush())[0].offset, 0);
    stream.close();
    for (const transport of ["ws", "sse"]) {
      const subscription = await client.subscribe("drivers", transport);
      while ((await client.channelInfo("drivers")).subscribers === 0);
      await client.publishChannel("drivers", transport);
      assert.equal(new TextDecoder().decode(await subscription.next()), transport);
      subscription.close();
      while ((await client.channelInfo("drivers")).subscribers !== 0);
    }
    assert.equal((await client.health()).status, "ok");
    assert.match(await client.metrics(), /mailroom_publishes_total/);
  } finally {
    await server.stop();
  }
});

// The method of each operation in the server's OpenAPI document.
const METHODS = {
  healthz: "health",
  metrics: "metrics",
  openapi: "openapi",
  issue_ticket: "issueTicket",
  list_topics: "listTopics",
  topic_info: "topicInfo",
  create_topic: "createTopic",
  update_topic: "changeRetention",
  delete_topic: "deleteTopic",
  publish: "publish",
  publish_batch: "publishBatch",
  read_messages: "read",
  publish_stream: "publishStream",
  group_info: "groupInfo",
  create_group: "createGroup",
  delete_group: "deleteGroup",
  seek: "seek",
  pause: "pause",
  resume: "resume",
  recover_topic: "recoverTopic",
  repair_topic: "repairTopic",
  poll: "poll",
  poll_raw: "pollRaw",
  poll_batch: "pollBatch",
  consume_stream: "consumeStream",
  ack: "ack",
  ack_batch: "ackBatch",
  nack: "nack",
  nack_batch: "nackBatch",
  touch: "touch",
  dead_letters: "deadLettersPage",
  redrive: "redrive",
  purge: "purge",
  list_channels: "listChannels",
  channel_info_route: "channelInfo",
  create_channel: "createChannel",
  close_channel: "closeChannel",
  publish_channel: "publishChannel",
  subscribe_events: "subscribe",
  subscribe_ws: "subscribe",
};

test("every endpoint has a method, and the ones the suite does not use work", async () => {
  const server = await Server.start();
  try {
    const client = new Client(server.url);
    const document = await client.openapi();
    const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods).map((o) => o.operationId));
    assert.deepEqual([...new Set(operations)].sort(), Object.keys(METHODS).sort(), "a new endpoint needs its method");
    for (const method of Object.values(METHODS)) assert.equal(typeof Client.prototype[method], "function", method);

    assert.equal(await client.createTopic("logs", { max_messages: 1000 }), true);
    const info = await client.changeRetention("logs", { max_messages: null, max_bytes: 2 ** 30 });
    assert.deepEqual(info.retention, { keep_unconsumed: true, max_age_ms: null, max_bytes: 2 ** 30, max_messages: null });
    assert.deepEqual((await client.listTopics()).map((t) => t.name), ["logs"]);
    const window = { window_messages: 50, window_ms: 60_000 };
    assert.equal(await client.createTopic("payments", undefined, window), true);
    assert.deepEqual((await client.topicInfo("payments")).idempotency, window);
    assert.deepEqual((await client.topicInfo("logs")).idempotency, { window_messages: 10_000, window_ms: 120_000 });
    await assert.rejects(client.createTopic("refused", undefined, { window_messages: 0 }), mailroom.InvalidArgument);
    await client.deleteTopic("payments");
    await client.createGroup("logs", "raw", { max_attempts: 1 });
    assert.equal(await client.pollRaw("logs", "raw"), null);
    await client.publish("logs", new Uint8Array([0, 255]));
    const delivery = await client.pollRaw("logs", "raw", "r1");
    assert.deepEqual([delivery.offset, delivery.attempt, [...delivery.payload]], [0, 1, [0, 255]]);
    const page = await client.read("logs", { from: 0, limit: 10 });
    assert.deepEqual(page.messages.map((m) => [m.offset, [...m.payload]]), [[0, [0, 255]]]);
    assert.deepEqual([page.first, page.next, page.end], [0, 1, 1]);
    assert.ok(page.messages[0].published_at_ms > 0);
    assert.deepEqual((await client.read("logs", { from: 1, wait_ms: 50 })).messages, []);
    const later = await client.read("logs", { from_time_ms: page.messages[0].published_at_ms + 1 });
    assert.deepEqual([later.first, later.messages], [1, []]);
    assert.equal((await client.seekToTime("logs", "raw", 0)).position, 0);
    await client.createChannel("drivers", { max_subscribers: 2 });
    assert.deepEqual((await client.listChannels()).map((c) => [c.name, c.max_subscribers]), [["drivers", 2]]);
    const ticket = await client.issueTicket("/v1/channels/drivers/events");
    assert.ok(ticket.path === "/v1/channels/drivers/events" && ticket.expires_in_ms > 0);
  } finally {
    await server.stop();
  }
});
