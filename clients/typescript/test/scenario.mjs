// Runs one scenario of clients/behaviour/*.json against the TypeScript client: the same
// files the Python and Rust clients run, so the three cannot drift.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { ApiError, Client, Timeout, fromBase64, offsetsOf } from "../dist/index.js";
import { REPO } from "./server.mjs";

const BEHAVIOUR = join(REPO, "clients", "behaviour");

/** Every scenario as [`file: name`, scenario]. */
export function scenarios() {
  const found = [];
  for (const file of readdirSync(BEHAVIOUR).filter((f) => f.endsWith(".json")).sort()) {
    for (const scenario of JSON.parse(readFileSync(join(BEHAVIOUR, file), "utf8")).scenarios) {
      found.push([`${file.replace(/\.json$/, "")}: ${scenario.name}`, scenario]);
    }
  }
  return found;
}

/** A scenario's payload: text, or {"base64": ...}. */
function payload(spec) {
  return typeof spec === "object" && spec !== null ? fromBase64(spec.base64) : new TextEncoder().encode(String(spec));
}

/** Asserts `actual` matches `expected` as the suite's README defines a match. */
function check(expected, actual, where) {
  if (actual instanceof Uint8Array) {
    assert.deepEqual([...actual], [...payload(expected)], where);
  } else if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${where}: expected a list, got ${JSON.stringify(actual)}`);
    assert.equal(actual.length, expected.length, `${where}: ${JSON.stringify(expected)} vs ${JSON.stringify(actual)}`);
    expected.forEach((item, i) => check(item, actual[i], `${where}[${i}]`));
  } else if (typeof expected === "object" && expected !== null) {
    assert.ok(typeof actual === "object" && actual !== null, `${where}: expected an object, got ${actual}`);
    for (const [key, item] of Object.entries(expected)) {
      assert.ok(key in actual, `${where}: no ${key} in ${JSON.stringify(actual)}`);
      check(item, actual[key], `${where}.${key}`);
    }
  } else {
    assert.equal(actual ?? null, expected, where);
  }
}

const refs = (pairs) => pairs.map(([offset, attempt]) => ({ offset, attempt }));
const results = (items) => (items ?? []).map((r) => (r.error ? { error: r.error.code } : { outcome: r.outcome }));
const messages = (items) => items.map((item) => ({ payload: payload(item.payload), idempotency_key: item.idempotency_key }));
const answer = (a) => (a.error ? { seq: a.seq, error: a.error.code } : { seq: a.seq, outcome: a.outcome });
const pick = (step, keys) => Object.fromEntries(keys.filter((k) => k in step).map((k) => [k, step[k]]));

export class Runner {
  constructor(server) {
    this.server = server;
    this.client = new Client(server.url);
    this.subscriptions = new Map();
    this.streams = new Map();
    this.lastAcked = [];
  }

  close() {
    for (const stream of this.streams.values()) stream.close();
    for (const subscription of this.subscriptions.values()) subscription.close();
  }

  async run(scenario) {
    for (const [index, step] of scenario.steps.entries()) {
      const s = { ...pick(scenario, ["topic", "group", "channel"]), ...step };
      const where = `step ${index} (${step.op})`;
      let answer;
      try {
        answer = await this.step(s);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        assert.ok("error" in step, `${where}: unexpected ${error}`);
        assert.equal(error.code, step.error, where);
        continue;
      }
      assert.ok(!("error" in step), `${where}: expected ${step.error}, got ${JSON.stringify(answer)}`);
      if ("expect" in step) check(step.expect, answer, where);
      if ("acked" in step) check(step.acked, this.lastAcked, `${where}.acked`);
      if ("nacked" in step) check(step.nacked, this.lastNacked, `${where}.nacked`);
    }
  }

  async step(s) {
    const c = this.client;
    const { topic, group, channel } = s;
    const nackOptions = pick(s, ["kind", "reason", "delay_ms"]);
    switch (s.op) {
      case "create_topic": return c.createTopic(topic);
      case "delete_topic": return c.deleteTopic(topic);
      case "create_group":
        return c.createGroup(topic, group, pick(s, ["max_attempts", "start", "lease_ms", "max_in_flight"]));
      case "delete_group": return c.deleteGroup(topic, group);
      case "publish": return c.publish(topic, payload(s.payload), pick(s, ["idempotency_key"]));
      case "publish_once": return c.publishOnce(topic, payload(s.payload), pick(s, ["idempotency_key"]));
      case "publish_batch": return c.publishBatch(topic, s.payloads.map(payload));
      case "publish_batch_once": return c.publishBatchOnce(topic, messages(s.messages));
      case "publish_stream": return this.publishStream(topic, s.messages ? messages(s.messages) : s.payloads.map(payload));
      case "poll": return c.poll(topic, group, s.consumer);
      case "poll_batch": return this.pollBatch(s);
      case "ack": return c.ack(topic, group, s);
      case "touch": return c.touch(topic, group, s);
      case "nack": return c.nack(topic, group, s, nackOptions);
      case "ack_batch": return results(await c.ackBatch(topic, group, refs(s.deliveries)));
      case "nack_batch": return results(await c.nackBatch(topic, group, refs(s.deliveries), nackOptions));
      case "group": return c.groupInfo(topic, group);
      case "topic": return c.topicInfo(topic);
      case "dead_letters": {
        const letters = [];
        for await (const letter of c.deadLetters(topic, group)) letters.push(letter);
        return letters;
      }
      case "seek": return c.seek(topic, group, s.to);
      case "pause": return c.pause(topic, group);
      case "resume": return c.resume(topic, group);
      case "redrive": return c.redrive(topic, group, s.from, s.to);
      case "purge": return c.purge(topic, group, s.from, s.to);
      case "create_channel": return c.createChannel(channel, pick(s, ["max_subscribers", "mailbox_capacity"]));
      case "close_channel": return c.closeChannel(channel);
      case "channel": {
        const info = await c.channelInfo(channel);
        return { ...info, dropped_some: info.dropped > 0 };
      }
      case "publish_channel": return c.publishChannel(channel, payload(s.payload));
      case "subscribe":
        this.subscriptions.set(s.as, await c.subscribe(channel, s.transport));
        return null;
      case "receive": return this.subscriptions.get(s.sub).next();
      case "flood": return this.flood(channel, s.payload_bytes, s.publishes_max);
      case "consume_stream": {
        const stream = await c.consumeStream(topic, group, pick(s, ["window", "consumer"]));
        this.streams.set(s.as, stream);
        return { consumer: stream.consumer, window: stream.window };
      }
      case "stream_receive": return this.streamReceive(this.streams.get(s.stream), s.wait_ms);
      case "stream_ack": return this.streams.get(s.stream).ack(s);
      case "stream_touch": return this.streams.get(s.stream).touch(s);
      case "stream_nack": return this.streams.get(s.stream).nack(s, nackOptions);
      case "stream_answers": return (await this.streams.get(s.stream).flush(30_000)).map(answer);
      case "stream_close":
        this.streams.get(s.stream).close();
        this.streams.delete(s.stream);
        return null;
      case "restart":
        await this.server.restart();
        this.client = new Client(this.server.url);
        return null;
      default: throw new Error(`unknown op ${s.op}`);
    }
  }

  async streamReceive(stream, waitMs) {
    try {
      return await stream.receive(waitMs);
    } catch (error) {
      if (error instanceof Timeout) return null;
      throw error;
    }
  }

  async pollBatch(s) {
    const nack = s.nack ? { ...pick(s.nack, ["kind", "reason", "delay_ms"]), deliveries: refs(s.nack.deliveries) } : undefined;
    const options = { max: s.max, consumer: s.consumer, wait_ms: s.wait_ms ?? 0, ack: s.ack ? refs(s.ack) : undefined, nack };
    const polled = this.client.pollBatch(s.topic, s.group, options);
    // The long poll is held until a delivery exists, so the order is not raced.
    if ("publish_meanwhile" in s) await this.client.publish(s.topic, payload(s.publish_meanwhile));
    const batch = await polled;
    this.lastAcked = results(batch.acked);
    this.lastNacked = results(batch.nacked);
    return batch.deliveries;
  }

  async publishStream(topic, payloads) {
    const stream = await this.client.publishStream(topic);
    try {
      for (const item of payloads) await stream.send(item);
      return (await stream.flush()).flatMap(offsetsOf);
    } finally {
      stream.close();
    }
  }

  async flood(channel, bytes, max) {
    const message = new Uint8Array(bytes).fill(120);
    for (let i = 0; i < max; i++) {
      if ((await this.client.publishChannel(channel, message)).dropped > 0) return { dropped_some: true };
    }
    return { dropped_some: false };
  }
}
