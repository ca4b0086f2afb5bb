/**
 * Reading a topic's log without a group (`GET /v1/topics/{topic}/messages`): nothing on
 * the server changes, no group moves. A page starts at `from` (or at the first message
 * published at or after `from_time_ms`); below the retained start it starts at the
 * oldest retained message, and `first` says so. Read on from `next`; `next === end`
 * means the page reached the end of the log. With `wait_ms` a read at the end waits for
 * a publish.
 */

import { decodePayload, type WirePayload } from "./models.js";

/** The most messages one read returns (`limit`). */
export const READ_PAGE_MAX = 10_000;

/** Where a read starts and how much it takes (all optional). */
export interface ReadOptions {
  /** The first offset (default: the oldest retained message). */
  from?: number;
  /** Start at the first message published at or after this time, Unix ms. */
  from_time_ms?: number;
  /** At most this many messages, 1 to 10,000 (the server's default 100). */
  limit?: number;
  /** At the end of the log, wait up to this long for a publish, 0 to 30,000 ms. */
  wait_ms?: number;
}

/** One message of the log, with its metadata and publish time (Unix ms). */
export interface LogMessage {
  offset: number;
  payload: Uint8Array;
  key: string | null;
  headers: Record<string, string> | null;
  published_at_ms: number;
}

/** One page of the log. */
export interface LogPage {
  messages: LogMessage[];
  /** Where the page started: `from`, or the oldest retained offset when `from` was below it. */
  first: number;
  /** The `from` of the next page. */
  next: number;
  /** The log's end when the page was read. */
  end: number;
}

/** A page as the wire carries it. */
export interface WireLogPage {
  messages: (WirePayload & {
    offset: number;
    key?: string | null;
    headers?: Record<string, string> | null;
    published_at_ms: number;
  })[];
  first: number;
  next: number;
  end: number;
}

/** The query string of a read. */
export function readQuery(options: ReadOptions): Record<string, number | undefined> {
  const { from, from_time_ms, limit, wait_ms } = options;
  return { from, from_time_ms, limit, wait_ms: wait_ms ? wait_ms : undefined };
}

/** A page from its wire form: payloads as bytes, absent metadata as null. */
export function decodeLogPage(wire: WireLogPage): LogPage {
  const messages = wire.messages.map((message) => ({
    offset: message.offset,
    payload: decodePayload(message),
    key: message.key ?? null,
    headers: message.headers ?? null,
    published_at_ms: message.published_at_ms,
  }));
  return { messages, first: wire.first, next: wire.next, end: wire.end };
}
