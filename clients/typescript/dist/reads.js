/**
 * Reading a topic's log without a group (`GET /v1/topics/{topic}/messages`): nothing on
 * the server changes, no group moves. A page starts at `from` (or at the first message
 * published at or after `from_time_ms`); below the retained start it starts at the
 * oldest retained message, and `first` says so. Read on from `next`; `next === end`
 * means the page reached the end of the log. With `wait_ms` a read at the end waits for
 * a publish.
 */
import { decodePayload } from "./models.js";
/** The most messages one read returns (`limit`). */
export const READ_PAGE_MAX = 10_000;
/** The query string of a read. */
export function readQuery(options) {
    const { from, from_time_ms, limit, wait_ms } = options;
    return { from, from_time_ms, limit, wait_ms: wait_ms ? wait_ms : undefined };
}
/** A page from its wire form: payloads as bytes, absent metadata as null. */
export function decodeLogPage(wire) {
    const messages = wire.messages.map((message) => ({
        offset: message.offset,
        payload: decodePayload(message),
        key: message.key ?? null,
        headers: message.headers ?? null,
        published_at_ms: message.published_at_ms,
    }));
    return { messages, first: wire.first, next: wire.next, end: wire.end };
}
