/**
 * The consumer loop over the consume stream: `group.consume({ stream: true, window: 16 })`.
 *
 * It behaves as the polling `Consumer` does, over one WebSocket: a delivery whose loop
 * body finishes is acked on the socket at once; `run(handler)` (or `fail`) nacks with
 * the exception as the reason; the leases of every delivery received and not settled are
 * touched every third of the group's `lease_ms` while the body runs. The window is
 * `window`, or else the smaller of `batch` and the group's `max_in_flight`.
 *
 * When the connection breaks (a server killed and started again) the loop opens the
 * stream again with a doubling pause, as the same consumer (the identity the server made
 * up the first time, if none was given): the server hands it its deliveries still in
 * flight first, with the same attempts; acks and nacks that got no answer are sent again
 * (one that had applied is answered `not_owned`: `stats.ack_refused`), and a delivery they
 * settle is not handed to the body twice. `stop()` ends the loop after the current
 * delivery: the answers owed are awaited, the stream closed, and the deliveries received
 * but not handled released (so is the current one when an exception leaves the loop).
 */
import { CONSUME_STREAM_WINDOW_MAX } from "./consume_stream.js";
import { StreamClosed, Timeout } from "./errors.js";
import { LEASE_TOUCH_FRACTION, LEAVING_TRIES_MAX, Loop, Stopped, key, reasonOf } from "./loop.js";
/** An async iterator of deliveries over the consume stream (see the module doc). */
export class StreamConsumer extends Loop {
    options;
    /** The consumer identity (the server's, once the first stream opened, if none was given). */
    consumer;
    stream = null;
    open = false;
    failed = new Set();
    /** Deliveries whose settlement is being sent again after a reconnect. */
    redo = new Set();
    constructor(group, options = {}) {
        super(group, options);
        this.options = options;
        this.consumer = options.consumer;
    }
    /** Ends the loop after the current delivery. */
    stop() {
        super.stop();
        this.stream?.interrupt();
    }
    /** Nacks `delivery` with `error` as the reason (it is not acked later). */
    async fail(delivery, error) {
        this.failed.add(key(delivery));
        if (this.open) {
            this.send({ op: "nack", offset: delivery.offset, attempt: delivery.attempt, reason: reasonOf(error) });
            return;
        }
        await this.nackOver(delivery, error, true);
    }
    async *[Symbol.asyncIterator]() {
        let current = null;
        let window = 1;
        let toucher = null;
        try {
            const info = await this.retrying(() => this.group.info());
            const { batch = 64 } = this.options;
            window = this.options.window ?? Math.max(1, Math.min(batch, info.max_in_flight ?? 1, CONSUME_STREAM_WINDOW_MAX));
            await this.connect(window);
            const leaseMs = info.lease_ms ?? null;
            if (leaseMs)
                toucher = setInterval(() => this.touch(), leaseMs / LEASE_TOUCH_FRACTION);
            for (let delivery = await this.next(window); delivery !== null; delivery = await this.next(window)) {
                current = delivery;
                yield delivery;
                current = null;
                if (this.failed.delete(key(delivery)))
                    continue;
                this.send({ op: "ack", offset: delivery.offset, attempt: delivery.attempt });
            }
        }
        catch (error) {
            if (!(error instanceof Stopped))
                throw error;
        }
        finally {
            // A `break` or an exception in the loop body lands here with `current` unhandled.
            if (toucher !== null)
                clearInterval(toucher);
            if (this.stream !== null)
                await this.leave(window, current !== null && !this.failed.has(key(current)) ? current : null);
        }
    }
    async next(window) {
        for (;;) {
            const stream = this.current();
            this.count(stream.answers());
            if (this.stopped)
                return null;
            const delivery = await stream.receive();
            if (delivery === null) {
                if (this.stopped)
                    return null;
                await this.reconnect(window);
            }
            else if (!this.redo.has(key(delivery))) {
                return delivery;
            }
        }
    }
    current() {
        if (this.stream === null)
            throw new Error("the loop's stream is opened first");
        return this.stream;
    }
    async connect(window, leaving = false) {
        const stream = await this.retrying(() => this.group.consumeStream({ window, consumer: this.consumer }), leaving);
        this.stream = stream;
        this.consumer = stream.consumer;
        this.open = true;
        if (this.stopped)
            stream.interrupt();
    }
    /** Opens the stream again as the same consumer; sends the unanswered again. */
    async reconnect(window, leaving = false) {
        const old = this.current();
        this.open = false;
        this.count(old.answers());
        const carried = old
            .pending()
            .filter((s) => s.op !== "touch")
            .map(({ op, offset, attempt, kind, reason, delay_ms }) => ({ op, offset, attempt, kind, reason, delay_ms }));
        for (const settlement of carried)
            this.redo.add(key(settlement));
        old.close();
        this.stats.reconnects += 1;
        await this.connect(window, leaving);
        for (const settlement of carried)
            this.send(settlement);
    }
    send(settlement) {
        try {
            this.current().send(settlement);
        }
        catch (error) {
            if (!(error instanceof StreamClosed))
                throw error;
            // it stays unanswered: the next connection sends it again
        }
    }
    touch() {
        const stream = this.stream;
        if (stream === null || stream.closed !== null)
            return;
        for (const delivery of stream.unsettled()) {
            try {
                stream.touch(delivery);
            }
            catch {
                return; // the stream broke: the loop reconnects, the next round touches
            }
        }
    }
    count(answers) {
        for (const answer of answers) {
            if (answer.op === "touch")
                continue;
            this.redo.delete(key(answer));
            if (answer.op === "ack") {
                const result = { offset: answer.offset, attempt: answer.attempt, outcome: answer.outcome, error: answer.error };
                this.countAcks([result]);
            }
            else if (answer.error)
                this.stats.ack_refused += 1;
            else if (answer.outcome === "released")
                this.stats.released += 1;
            else
                this.stats.failed += 1;
        }
    }
    /** Awaits the answers owed, closes, and releases what was not handled. */
    async leave(window, current) {
        this.stopped = true;
        const { requestTimeoutMs } = this.group.client;
        for (let tries = 0; tries < LEAVING_TRIES_MAX; tries++) {
            try {
                this.count(await this.current().flush(requestTimeoutMs));
                break;
            }
            catch (error) {
                if (error instanceof Timeout)
                    break;
                if (!(error instanceof StreamClosed))
                    throw error;
                try {
                    await this.reconnect(window, true);
                }
                catch {
                    break; // unreachable: their leases hand them out again
                }
            }
        }
        const stream = this.current();
        this.open = false;
        const left = [...(current === null ? [] : [current]), ...stream.buffered().filter((d) => !this.redo.has(key(d)))];
        stream.close();
        await this.release(left);
    }
}
