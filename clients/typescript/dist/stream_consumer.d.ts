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
import type { Group } from "./group.js";
import { type ConsumeOptions, Loop } from "./loop.js";
import type { Delivery } from "./models.js";
/** An async iterator of deliveries over the consume stream (see the module doc). */
export declare class StreamConsumer extends Loop implements AsyncIterable<Delivery> {
    readonly options: ConsumeOptions & {
        window?: number;
    };
    /** The consumer identity (the server's, once the first stream opened, if none was given). */
    consumer: string | undefined;
    private stream;
    private open;
    private readonly failed;
    /** Deliveries whose settlement is being sent again after a reconnect. */
    private readonly redo;
    constructor(group: Group, options?: ConsumeOptions & {
        window?: number;
    });
    /** Ends the loop after the current delivery. */
    stop(): void;
    /** Nacks `delivery` with `error` as the reason (it is not acked later). */
    fail(delivery: Delivery, error: unknown): Promise<void>;
    [Symbol.asyncIterator](): AsyncGenerator<Delivery>;
    private next;
    private current;
    private connect;
    /** Opens the stream again as the same consumer; sends the unanswered again. */
    private reconnect;
    private send;
    private touch;
    private count;
    /** Awaits the answers owed, closes, and releases what was not handled. */
    private leave;
}
