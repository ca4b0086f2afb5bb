/**
 * The bodies of the API. Field names are the wire's; payloads are `Uint8Array` (the wire
 * carries them as `payload` text or `payload_base64`, and the client hides which). Fields
 * a newer server adds are kept on the decoded objects but not typed, so an older client
 * keeps working; fields that are optional on the wire are optional here.
 */

/** A payload to send: bytes, or text (sent as UTF-8). */
export type Payload = Uint8Array | string;

/** How a nack ends a delivery: a failure, a hand-back (not a failure), or dead-letter now. */
export type NackKind = "nack" | "release" | "reject";

/** Names one delivery: the message's offset and which attempt it is (both fence it). */
export interface DeliveryRef {
  offset: number;
  attempt: number;
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/** The bytes of a payload. */
export function bytesOf(payload: Payload): Uint8Array {
  return typeof payload === "string" ? utf8.encode(payload) : payload;
}

/** Standard base64 of bytes (browsers and Node alike). */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Bytes of standard base64. */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** A message delivered to a consumer group, with the attempt that fences its ack. */
export class Delivery implements DeliveryRef {
  constructor(
    readonly offset: number,
    readonly attempt: number,
    readonly payload: Uint8Array,
    /** The message's key, if it has one. */
    readonly key: string | null = null,
    /** The message's headers, if it has any. */
    readonly headers: Record<string, string> | null = null,
    /** The broker's clock when it stored the message (Unix ms). */
    readonly published_at_ms: number | null = null,
  ) {}

  /** The payload as UTF-8 text. */
  get text(): string {
    return new TextDecoder().decode(this.payload);
  }

  /** From the wire's `{offset, attempt, payload | payload_base64}`. */
  static decode(body: WireDelivery): Delivery {
    const { key = null, headers = null, published_at_ms = null } = body;
    return new Delivery(body.offset, body.attempt, decodePayload(body), key, headers, published_at_ms);
  }
}

/** A payload as the wire carries it. */
export interface WirePayload {
  payload?: string | null;
  payload_base64?: string | null;
}

/** A delivery as the wire carries it. */
export interface WireDelivery extends WirePayload, MessageMeta {
  offset: number;
  attempt: number;
}

/** A message's metadata as deliveries and dead letters carry it (absent when it has none). */
export interface MessageMeta {
  key?: string | null;
  headers?: Record<string, string> | null;
  published_at_ms?: number | null;
}

/** A message to publish with its metadata: a `key` and `headers` (both optional). */
export interface Message {
  payload: Payload;
  key?: string;
  headers?: Record<string, string>;
  /** 1 to 256 bytes: a message repeating a key in the topic's window is not stored again. */
  idempotency_key?: string;
}

/** The wire form of a batch message with metadata. */
export type WireMessage = {
  payload?: string;
  payload_base64?: string;
  key?: string;
  headers?: Record<string, string>;
  idempotency_key?: string;
};

/** The answer to a single publish: a duplicate (its idempotency key was in the topic's window) was not stored, and `offset` is the first publish's. */
export interface Published {
  offset: number;
  duplicate: boolean;
}

/** The answer to a batch publish: offsets in request order, and the indices of the duplicates. */
export interface BatchPublished {
  offsets: number[];
  duplicates: number[];
}

/** The payload of a delivery or dead letter, whichever way the wire carried it. */
export function decodePayload(body: WirePayload): Uint8Array {
  if (body.payload != null) return utf8.encode(body.payload);
  if (body.payload_base64 != null) return fromBase64(body.payload_base64);
  return new Uint8Array();
}

/** One message of a batch publish: text when it is UTF-8, `{base64}` otherwise. */
export function batchMessage(payload: Payload | Message): string | { base64: string } | WireMessage {
  if (typeof payload !== "string" && !(payload instanceof Uint8Array)) {
    const body = plainMessage(payload.payload);
    const wire: WireMessage = typeof body === "string" ? { payload: body } : { payload_base64: body.base64 };
    if (payload.key !== undefined) wire.key = payload.key;
    if (payload.headers !== undefined) wire.headers = payload.headers;
    if (payload.idempotency_key !== undefined) wire.idempotency_key = payload.idempotency_key;
    return wire;
  }
  return plainMessage(payload);
}

function plainMessage(payload: Payload): string | { base64: string } {
  if (typeof payload === "string") return payload;
  try {
    return utf8Strict.decode(payload);
  } catch {
    return { base64: toBase64(payload) };
  }
}

/** Why one item of a batch failed (`code` as the single call's error would be). */
export interface ItemError {
  code: string;
  message: string;
}

/** One item of an ack or nack batch: exactly one of `outcome` and `error`. */
export interface ItemResult {
  offset: number;
  attempt: number;
  outcome?: string | null;
  error?: ItemError | null;
}

/** The answer to a batch poll: deliveries, and the results of acks sent with it. */
export interface PolledBatch {
  deliveries: Delivery[];
  acked?: ItemResult[] | null;
  nacked?: ItemResult[] | null;
}

/** The same delay after every failure, or one doubling from `base_ms` to `cap_ms`. */
export type Backoff =
  | { kind: "fixed"; delay_ms: number }
  | { kind: "exponential"; base_ms: number; cap_ms: number };

/** A group's event counters. */
export interface GroupCounters {
  redeliveries: number;
  releases: number;
  expired_leases: number;
  redrives: number;
  purged: number;
}

/** A dead letter without its payload: why and when it was given up on. */
export interface DeadLetterNote {
  offset: number;
  attempts: number;
  at_ms: number;
  reason?: string | null;
}

/** A message a group gave up on, with its payload and metadata. */
export interface DeadLetter extends MessageMeta {
  offset: number;
  attempts: number;
  at_ms: number;
  payload: Uint8Array;
  reason?: string | null;
}

/** One page of dead letters; `next` is the following page's `from` (or null). */
export interface DeadLetterPage {
  dead_letters: DeadLetter[];
  next?: number | null;
}

/** A group's state in short (as a topic's view lists it). */
export interface GroupInfo {
  name: string;
  position: number;
  attempt: number;
  in_flight?: DeliveryRef | null;
  max_attempts: number;
  lag: number;
  dead_letters: number;
  /** Whether the group is paused (no new deliveries). */
  paused?: boolean;
  /** When a timed pause ends (Unix ms), or null. */
  paused_until_ms?: number | null;
}

/** A delivery in flight as a group's view lists it: who polled it, until when. */
export interface InFlightDelivery extends DeliveryRef {
  /** The consumer that polled it, or null for the anonymous consumer. */
  consumer: string | null;
  /** When its lease runs out (Unix ms; may be past), or null without a lease. */
  lease_deadline_ms: number | null;
}

/** A group's full view: state, settings, counters, deliveries in flight, dead letters. */
export interface GroupDetail extends GroupInfo {
  lease_ms?: number | null;
  backoff?: Backoff | null;
  max_in_flight: number;
  counters: GroupCounters;
  deliveries: InFlightDelivery[];
  dead_letter_notes: DeadLetterNote[];
}

/** Settings of a new group (`start`: "earliest", "latest" or an offset). */
export interface GroupSettings {
  max_attempts: number;
  start?: "earliest" | "latest" | number;
  lease_ms?: number;
  backoff?: Backoff;
  max_in_flight?: number;
}

/** A topic's own retention limits as sent: absent (unchanged), null (unlimited) or a number. */
export interface Retention {
  max_age_ms?: number | null;
  max_bytes?: number | null;
  max_messages?: number | null;
  keep_unconsumed?: boolean | null;
}

/** The retention in force for a topic: null is unlimited. */
export interface RetentionInForce {
  keep_unconsumed: boolean;
  max_age_ms?: number | null;
  max_bytes?: number | null;
  max_messages?: number | null;
}

/** What retention removed from a topic since the server started. */
export interface RetentionRemoved {
  messages: number;
  bytes: number;
  segments: number;
}

/** One topic in the topic list. */
export interface TopicSummary {
  name: string;
  start: number;
  end: number;
  groups: string[];
  bytes?: number;
  retention?: RetentionInForce;
  removed?: RetentionRemoved;
  /** `ok` while the topic serves, `failed` while it cannot (see `failure`). */
  state?: "ok" | "failed";
  failure?: string | null;
  /** `damaged` (repair it), `unreadable` or `stopped` (recover it). */
  failure_kind?: string | null;
}

/**
 * A topic's idempotency window: a repeated key among the last `window_messages` messages
 * published within `window_ms` answers the first offset. Sent at creation, an absent limit
 * follows the server's default; in a topic's view both are in force.
 */
export interface IdempotencyWindow {
  window_messages?: number;
  window_ms?: number;
}

/** A topic's view: its offsets, groups, retention and disk use. */
export interface TopicInfo {
  name: string;
  start: number;
  end: number;
  groups: GroupInfo[];
  bytes?: number;
  retention?: RetentionInForce;
  removed?: RetentionRemoved;
  /** The idempotency window in force (the topic's own over the server's defaults). */
  idempotency?: IdempotencyWindow;
  /** `ok` while the topic serves, `failed` while it cannot (see `failure`). */
  state?: "ok" | "failed";
  failure?: string | null;
  /** `damaged` (repair it), `unreadable` or `stopped` (recover it). */
  failure_kind?: string | null;
}

/** A live channel's settings and counters. */
export interface ChannelInfo {
  name: string;
  max_subscribers: number;
  mailbox_capacity: number;
  subscribers: number;
  published: number;
  delivered: number;
  dropped: number;
  /** The most payload bytes buffered per subscriber. */
  mailbox_bytes?: number;
}

/** What one channel publish did. */
export interface ChannelDelivery {
  delivered: number;
  dropped: number;
}

/** A one-use ticket that opens one stream under `path` (for browsers' streams). */
export interface Ticket {
  ticket: string;
  path: string;
  expires_in_ms: number;
}

/** `/healthz`: `ok`; `degraded` with the failed topics; `unhealthy` with a reason. */
export interface Health {
  status: string;
  reason?: string | null;
  failed_topics?: FailedTopic[];
}

/** One failed topic in a degraded `/healthz`. */
export interface FailedTopic {
  topic: string;
  kind: string;
  reason: string;
}

/** The answer to a seek: the group's new position (the next message it delivers). */
export interface GroupSeeked {
  topic: string;
  group: string;
  position: number;
}

/** The answer to a pause or resume; `changed` is whether a resume ended a pause. */
export interface GroupPause {
  topic: string;
  group: string;
  paused: boolean;
  changed: boolean;
  paused_until_ms?: number | null;
}

/** The answer to a recover: `recovered` is whether the topic was failed. */
export interface TopicRecovered {
  topic: string;
  recovered: boolean;
}

/** The answer to a repair: whether it was damaged, the damage, and what was moved. */
export interface TopicRepairReport {
  topic: string;
  repaired: boolean;
  damage?: string[];
  actions?: string[];
}

/** A publish stream's answer for frames `seq .. seq + count`: offsets, or an error. */
export interface Confirmation {
  seq: number;
  count: number;
  offset?: number | null;
  error?: ItemError | null;
  /** The one frame covered carried an idempotency key in the topic's window: not stored. */
  duplicate?: boolean;
}

/** The offsets the frames of a confirmation got (empty when they were refused). */
export function offsetsOf(confirmation: Confirmation): number[] {
  const { offset, count } = confirmation;
  if (offset == null) return [];
  return Array.from({ length: count }, (_, i) => offset + i);
}
