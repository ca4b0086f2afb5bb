/**
 * Streams: the pipelined publish stream and live channel subscriptions (WebSocket, SSE).
 * They use only `WebSocket` and `fetch`, so they run in browsers and in Node alike.
 */

import type { Client } from "./client.js";
import { StreamClosed, SubscriberLimit, TransportError } from "./errors.js";
import { type Confirmation, type Message, type Payload, batchMessage, bytesOf, fromBase64 } from "./models.js";

/** The most frames the server reads ahead of its confirmations. */
export const PUBLISH_WINDOW_MAX = 4096;

/** A queue that hands items to waiting readers, and ends (or fails) once. */
class Mailbox<T> {
  private readonly items: T[] = [];
  private readonly waiters: ((value: T | null) => void)[] = [];
  private ended = false;
  failure: Error | null = null;

  push(item: T): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(item);
    else this.items.push(item);
  }

  end(failure: Error | null = null): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = failure;
    for (const waiter of this.waiters.splice(0)) waiter(null);
  }

  get length(): number {
    return this.items.length;
  }

  /** The next item; null once ended and empty (then `failure` says why, if it failed). */
  next(): Promise<T | null> {
    if (this.items.length > 0) return Promise.resolve(this.items.shift() as T);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

function wsUrl(client: Client, path: string): string {
  return client.baseUrl.replace(/^http/, "ws") + path;
}

/** Why a handshake failed: browsers' WebSocket hides the status, so ask the route over HTTP. */
async function handshakeError(client: Client, path: string): Promise<Error> {
  try {
    const probe = await client.stream(path, new AbortController().signal);
    await probe.body?.cancel();
  } catch (error) {
    const refusal = error as { code?: string };
    if (refusal.code !== undefined && refusal.code !== "not_websocket") return error as Error;
  }
  const channel = /^\/v1\/channels\/([^/]+)\/ws$/.exec(path);
  if (channel) {
    const info = await client.channelInfo(decodeURIComponent(channel[1])).catch(() => null);
    if (info && info.subscribers >= info.max_subscribers) {
      return new SubscriberLimit(409, "subscriber_limit", `channel ${info.name} has ${info.subscribers} subscribers`);
    }
  }
  return new TransportError(`WebSocket handshake to ${path} failed`);
}

/** Opens a WebSocket, the token as the `mailroom.bearer` subprotocol (browsers cannot send headers). */
export async function openSocket(client: Client, path: string): Promise<WebSocket> {
  const Socket = client.webSocket();
  const protocols = client.token === undefined ? [] : ["mailroom.bearer", `mailroom.bearer.${client.token}`];
  const socket = new Socket(wsUrl(client, path), protocols);
  socket.binaryType = "arraybuffer";
  const opened = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), client.requestTimeoutMs);
    socket.addEventListener("open", () => (clearTimeout(timer), resolve(true)), { once: true });
    socket.addEventListener("error", () => (clearTimeout(timer), resolve(false)), { once: true });
    socket.addEventListener("close", () => (clearTimeout(timer), resolve(false)), { once: true });
  });
  if (!opened) {
    socket.close();
    throw await handshakeError(client, path);
  }
  return socket;
}

function frameBytes(data: unknown): Uint8Array {
  if (typeof data === "string") return new TextEncoder().encode(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data as ArrayBufferLike);
}

/**
 * Many messages in flight on one WebSocket, each confirmed once durable.
 *
 * `send` resolves to the message's `seq` (from 0), first waiting while `window`
 * messages await confirmation. `confirmed()` yields confirmations in order; `flush()`
 * waits for all. If the server closes the stream (shutdown, a deleted topic), they
 * hand out what arrived and then throw `StreamClosed` with the close reason.
 */
export class PublishStream {
  private sent = 0;
  private confirmedUpTo = 0;
  private readonly ready = new Mailbox<Confirmation>();
  private readonly wakers: (() => void)[] = [];

  private constructor(private readonly socket: WebSocket, readonly window: number) {
    socket.addEventListener("message", (event) => {
      const confirmation = JSON.parse(String(event.data)) as Confirmation;
      this.confirmedUpTo = confirmation.seq + confirmation.count;
      this.ready.push(confirmation);
      for (const wake of this.wakers.splice(0)) wake();
    });
    socket.addEventListener("close", (event) => {
      this.ready.end(new StreamClosed(event.reason || "closed", this.inFlight));
      for (const wake of this.wakers.splice(0)) wake();
    });
  }

  /** Opens the stream at `path` (404 `unknown_topic` if the topic does not exist). */
  static async open(client: Client, path: string, window: number): Promise<PublishStream> {
    if (!(window >= 1 && window <= PUBLISH_WINDOW_MAX)) throw new RangeError(`window must be 1..=${PUBLISH_WINDOW_MAX}`);
    return new PublishStream(await openSocket(client, path), window);
  }

  /** Messages sent and not yet confirmed. */
  get inFlight(): number {
    return this.sent - this.confirmedUpTo;
  }

  private closedError(): StreamClosed | null {
    return this.ready.failure as StreamClosed | null;
  }

  /**
   * Sends one message; its `seq`. A `Message` goes as a JSON text frame with its key,
   * headers and idempotency key (its confirmation's `duplicate` says whether the key was
   * in the topic's window); a bare payload as a binary frame.
   */
  async send(payload: Payload | Message): Promise<number> {
    const frame = typeof payload === "string" || payload instanceof Uint8Array ? bytesOf(payload) : JSON.stringify(batchMessage(payload));
    while (this.inFlight >= this.window && this.closedError() === null) {
      await new Promise<void>((wake) => this.wakers.push(wake));
    }
    const closed = this.closedError();
    if (closed !== null || this.socket.readyState !== 1) throw closed ?? new StreamClosed("closed", this.inFlight);
    this.socket.send(frame);
    this.sent += 1;
    return this.sent - 1;
  }

  /** The next confirmation (waiting for it), or null when nothing is in flight. */
  async confirmed(): Promise<Confirmation | null> {
    if (this.ready.length === 0 && this.inFlight === 0) return null;
    const next = await this.ready.next();
    if (next === null) throw this.closedError() ?? new StreamClosed("closed", this.inFlight);
    return next;
  }

  /** Waits until every message sent is confirmed; the confirmations not yet taken. */
  async flush(): Promise<Confirmation[]> {
    const taken: Confirmation[] = [];
    while (this.inFlight > 0 || this.ready.length > 0) {
      const next = await this.confirmed();
      if (next === null) break;
      taken.push(next);
    }
    return taken;
  }

  /** Closes the stream (confirmations still owed are not sent: flush first). */
  close(): void {
    this.socket.close(1000);
  }
}

/** A live channel subscription: `for await` payloads; ends when the channel closes. */
export class Subscription implements AsyncIterable<Uint8Array> {
  constructor(
    private readonly messages: Mailbox<Uint8Array>,
    private readonly stop: () => void,
  ) {}

  /** The next message, or null once the stream ended. */
  async next(): Promise<Uint8Array | null> {
    const message = await this.messages.next();
    if (message === null && this.messages.failure !== null) throw this.messages.failure;
    return message;
  }

  /** Ends the subscription. */
  close(): void {
    this.stop();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    try {
      for (let message = await this.next(); message !== null; message = await this.next()) yield message;
    } finally {
      this.close();
    }
  }
}

/** Subscribes over the channel's WebSocket (at `path`): one frame per message. */
export async function wsSubscription(client: Client, path: string): Promise<Subscription> {
  const socket = await openSocket(client, path);
  const messages = new Mailbox<Uint8Array>();
  socket.addEventListener("message", (event) => messages.push(frameBytes(event.data)));
  socket.addEventListener("close", () => messages.end());
  return new Subscription(messages, () => {
    socket.close(1000);
    messages.end();
  });
}

/** Payloads from Server-Sent Event text (`event: base64` carries bytes); the rest left over. */
export function sseEvents(buffer: string, emit: (payload: Uint8Array) => void): string {
  let start = 0;
  for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n", start)) {
    let event = "message";
    const data: string[] = [];
    for (const line of buffer.slice(start, end).split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const key = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (key === "event") event = value;
      else if (key === "data") data.push(value);
    }
    if (data.length > 0) {
      const text = data.join("\n");
      emit(event === "base64" ? fromBase64(text) : new TextEncoder().encode(text));
    }
    start = end + 2;
  }
  return buffer.slice(start);
}

/** Subscribes over the channel's Server-Sent Events (at `path`), read with `fetch`. */
export async function sseSubscription(client: Client, path: string): Promise<Subscription> {
  const abort = new AbortController();
  const response = await client.stream(path, abort.signal);
  const messages = new Mailbox<Uint8Array>();
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  void (async () => {
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = sseEvents((buffer + value).replace(/\r\n/g, "\n"), (payload) => messages.push(payload));
      }
      messages.end();
    } catch (error) {
      messages.end(abort.signal.aborted ? null : new TransportError(String(error)));
    }
  })();
  return new Subscription(messages, () => {
    abort.abort();
    messages.end();
  });
}
