/**
 * The consume stream: a group's deliveries pushed over one WebSocket, settled on it.
 *
 * ```ts
 * const stream = await client.consumeStream("orders", "billing", { window: 16, consumer: "w1" });
 * for await (const delivery of stream) {
 *   await handle(delivery);
 *   await stream.ack(delivery);
 * }
 * ```
 *
 * The server pushes deliveries as they become available, never more than `window`
 * unsettled (1 to 4096, and at most the group's `max_in_flight`: 400 otherwise). `ack`,
 * `nack` and `touch` send settlements on the same socket and return their `seq`
 * (numbered from 0 on the connection); the server answers each one, in order, with a
 * `Settled` (its `outcome`, or `error` `not_owned` for a delivery no longer in flight
 * under that attempt), kept until taken with `answers()` or `flush()`. An ack or nack
 * frees a slot of the window, and the server sends the next delivery.
 *
 * When the server closes the stream (shutdown, a deleted group) or the connection
 * breaks, iteration ends and `closed` holds the reason; settling then throws
 * `StreamClosed`. A delivery received but not handed out yet is dropped once an ack or
 * nack of it (sent again after a reconnect) is answered: it is never handed out settled.
 * Deliveries not settled stay in flight as an HTTP consumer's would:
 * their leases run out, or a stream opened again with the same `consumer` gets them back
 * first, with the same attempts (the `stream: true` consumer loop does exactly that).
 */
import { StreamClosed, Timeout, TransportError } from "./errors.js";
import { Delivery } from "./models.js";
import { openSocket } from "./streams.js";
/** The largest window the server takes. */
export const CONSUME_STREAM_WINDOW_MAX = 4096;
const key = (d) => `${d.offset}:${d.attempt}`;
function settlementFrame(s) {
    const body = { op: s.op, offset: s.offset, attempt: s.attempt };
    if (s.op === "nack") {
        for (const option of ["kind", "reason", "delay_ms"])
            if (s[option] !== undefined)
                body[option] = s[option];
    }
    return JSON.stringify(body);
}
/** A group's deliveries over one WebSocket, settled on it (see the module doc). */
export class ConsumeStream {
    socket;
    consumer;
    window;
    deliveries = [];
    answerQueue = [];
    pendingQueue = [];
    unsettledMap = new Map();
    waiters = new Set();
    nextSeq = 0;
    interrupted = false;
    failure = null;
    /** Why the stream ended, once it did. */
    closed = null;
    constructor(socket, 
    /** The consumer identity the deliveries are owned by. */
    consumer, 
    /** The most deliveries unsettled at once. */
    window, early, earlyListener) {
        this.socket = socket;
        this.consumer = consumer;
        this.window = window;
        // Frames that came with the opened one (one read may hold several) were kept.
        socket.removeEventListener("message", earlyListener);
        for (const text of early)
            this.take(text);
        socket.addEventListener("message", (event) => {
            try {
                this.take(String(event.data));
            }
            catch (error) {
                this.failure = error;
                this.end("bad frame");
                socket.close();
            }
            this.wake();
        });
        socket.addEventListener("close", (event) => this.end(event.reason || (event.code === 1006 ? "connection lost" : `closed (${event.code})`)));
    }
    /** Opens the stream at `path` (404 `unknown_group`, 400 for a window the group cannot fill). */
    static async open(client, path, options) {
        const { window = 1, consumer } = options;
        if (!(Number.isInteger(window) && window >= 1 && window <= CONSUME_STREAM_WINDOW_MAX)) {
            throw new RangeError(`window must be 1..=${CONSUME_STREAM_WINDOW_MAX}`);
        }
        const query = new URLSearchParams({ window: String(window) });
        if (consumer !== undefined)
            query.set("consumer", consumer);
        const socket = await openSocket(client, `${path}?${query}`);
        const early = [];
        let arrived = () => { };
        const keep = (event) => (early.push(String(event.data)), arrived());
        socket.addEventListener("message", keep);
        await new Promise((resolve) => {
            const timer = setTimeout(resolve, client.requestTimeoutMs);
            arrived = () => (clearTimeout(timer), resolve());
            socket.addEventListener("close", arrived, { once: true });
        });
        const first = early.shift();
        const opened = first === undefined ? null : JSON.parse(first);
        if (opened?.type !== "opened" || opened.consumer === undefined || opened.window === undefined) {
            socket.close();
            throw new TransportError(`consume stream ${path} did not open: ${first}`);
        }
        return new ConsumeStream(socket, opened.consumer, opened.window, early, keep);
    }
    /** Settlements sent and not answered yet. */
    get unanswered() {
        return this.pendingQueue.length;
    }
    /** Deliveries received and not acked or nacked (their leases are running). */
    unsettled() {
        return [...this.unsettledMap.values()];
    }
    /** Settlements sent (or tried) and not answered, in order. */
    pending() {
        return [...this.pendingQueue];
    }
    /** Deliveries received and not handed out yet. */
    buffered() {
        return [...this.deliveries];
    }
    /** The next delivery; null once the stream closed (or after `interrupt()`); `Timeout` after `timeoutMs`. */
    async receive(timeoutMs) {
        const ready = await this.until(() => this.deliveries.length > 0 || this.closed !== null || this.interrupted, timeoutMs);
        if (this.failure !== null)
            throw this.failure;
        const next = this.deliveries.shift();
        if (next !== undefined)
            return next;
        if (!ready)
            throw new Timeout(`no delivery within ${timeoutMs} ms`, "request");
        this.interrupted = false;
        return null;
    }
    async *[Symbol.asyncIterator]() {
        for (let delivery = await this.receive(); delivery !== null; delivery = await this.receive())
            yield delivery;
    }
    /** Makes the waiting (or the next) `receive` return null without closing the stream. */
    interrupt() {
        this.interrupted = true;
        this.wake();
    }
    /** Acks `delivery`; the settlement's `seq`. */
    ack(delivery) {
        return this.send({ op: "ack", offset: delivery.offset, attempt: delivery.attempt });
    }
    /** Nacks, releases or rejects `delivery`; the `seq`. */
    nack(delivery, options = {}) {
        return this.send({ op: "nack", offset: delivery.offset, attempt: delivery.attempt, ...options });
    }
    /** Extends the lease of `delivery`; the `seq`. */
    touch(delivery) {
        return this.send({ op: "touch", offset: delivery.offset, attempt: delivery.attempt });
    }
    /**
     * Sends one settlement; its `seq`. It counts as unanswered from here on, even when
     * the stream has closed (`StreamClosed`), so a reconnecting loop can send it again.
     */
    send(settlement) {
        if (this.closed !== null || this.socket.readyState !== 1) {
            this.pendingQueue.push(settlement);
            throw new StreamClosed(this.closed ?? "closed", this.pendingQueue.length);
        }
        settlement.seq = this.nextSeq++;
        this.pendingQueue.push(settlement);
        if (settlement.op !== "touch")
            this.unsettledMap.delete(key(settlement));
        this.socket.send(settlementFrame(settlement));
        return settlement.seq;
    }
    /** The answers that arrived and were not taken yet, in `seq` order. */
    answers() {
        return this.answerQueue.splice(0);
    }
    /** Waits until every settlement sent is answered; the answers not taken yet (`StreamClosed` if it closes first). */
    async flush(timeoutMs) {
        const done = await this.until(() => this.pendingQueue.length === 0 || this.closed !== null, timeoutMs);
        if (this.pendingQueue.length > 0) {
            if (!done)
                throw new Timeout(`${this.pendingQueue.length} settlements unanswered`, "request");
            throw new StreamClosed(this.closed ?? "closed", this.pendingQueue.length);
        }
        return this.answers();
    }
    /** Closes the connection; deliveries not settled stay in flight. */
    close() {
        if (this.socket.readyState <= 1)
            this.socket.close(1000);
        this.end("closed by the client");
    }
    take(text) {
        const body = JSON.parse(text);
        if (body.type === "delivery") {
            const delivery = Delivery.decode(body);
            this.deliveries.push(delivery);
            // One a settlement sent again after a reconnect settles is not unsettled.
            const settling = this.pendingQueue.some((s) => s.op !== "touch" && key(s) === key(delivery));
            if (!settling)
                this.unsettledMap.set(key(delivery), delivery);
        }
        else if (body.type === "settled" || body.type === "error") {
            const settlement = this.pendingQueue[0];
            if (settlement === undefined || settlement.seq !== body.seq) {
                throw new TransportError(`answer to settlement ${body.seq}, expected ${settlement?.seq}`);
            }
            this.pendingQueue.shift();
            if (settlement.op === "touch") {
                if (body.error)
                    this.unsettledMap.delete(key(settlement));
            }
            else {
                this.dropSettled(key(settlement));
            }
            const { offset, attempt, op } = settlement;
            this.answerQueue.push({ seq: body.seq, offset, attempt, op, outcome: body.outcome ?? null, error: body.error ?? null });
        }
        else {
            throw new TransportError(`unexpected consume stream frame: ${text.slice(0, 200)}`);
        }
    }
    /**
     * Drops the buffered copy of a delivery an ack or nack was just answered for. After a
     * reconnect the server sends a delivery still in flight before it answers the ack sent
     * again for it; when both arrive in one read, the copy must not be handed out: it is
     * settled (answered `acked`), or no longer ours (answered `not_owned`).
     */
    dropSettled(settled) {
        for (let i = this.deliveries.length - 1; i >= 0; i--) {
            if (key(this.deliveries[i]) === settled)
                this.deliveries.splice(i, 1);
        }
    }
    end(reason) {
        if (this.closed === null)
            this.closed = reason;
        this.wake();
    }
    wake() {
        for (const waiter of [...this.waiters])
            waiter();
    }
    /** Waits until `ready()` holds; false on timeout. */
    until(ready, timeoutMs) {
        if (ready())
            return Promise.resolve(true);
        return new Promise((resolve) => {
            const timer = timeoutMs === undefined ? null : setTimeout(() => finish(false), timeoutMs);
            const check = () => {
                if (ready())
                    finish(true);
            };
            const finish = (value) => {
                if (timer !== null)
                    clearTimeout(timer);
                this.waiters.delete(check);
                resolve(value);
            };
            this.waiters.add(check);
        });
    }
}
