/**
 * The bodies of the API. Field names are the wire's; payloads are `Uint8Array` (the wire
 * carries them as `payload` text or `payload_base64`, and the client hides which). Fields
 * a newer server adds are kept on the decoded objects but not typed, so an older client
 * keeps working; fields that are optional on the wire are optional here.
 */
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });
/** The bytes of a payload. */
export function bytesOf(payload) {
    return typeof payload === "string" ? utf8.encode(payload) : payload;
}
/** Standard base64 of bytes (browsers and Node alike). */
export function toBase64(bytes) {
    let binary = "";
    for (const byte of bytes)
        binary += String.fromCharCode(byte);
    return btoa(binary);
}
/** Bytes of standard base64. */
export function fromBase64(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++)
        bytes[i] = binary.charCodeAt(i);
    return bytes;
}
/** A message delivered to a consumer group, with the attempt that fences its ack. */
export class Delivery {
    offset;
    attempt;
    payload;
    key;
    headers;
    published_at_ms;
    constructor(offset, attempt, payload, 
    /** The message's key, if it has one. */
    key = null, 
    /** The message's headers, if it has any. */
    headers = null, 
    /** The broker's clock when it stored the message (Unix ms). */
    published_at_ms = null) {
        this.offset = offset;
        this.attempt = attempt;
        this.payload = payload;
        this.key = key;
        this.headers = headers;
        this.published_at_ms = published_at_ms;
    }
    /** The payload as UTF-8 text. */
    get text() {
        return new TextDecoder().decode(this.payload);
    }
    /** From the wire's `{offset, attempt, payload | payload_base64}`. */
    static decode(body) {
        const { key = null, headers = null, published_at_ms = null } = body;
        return new Delivery(body.offset, body.attempt, decodePayload(body), key, headers, published_at_ms);
    }
}
/** The payload of a delivery or dead letter, whichever way the wire carried it. */
export function decodePayload(body) {
    if (body.payload != null)
        return utf8.encode(body.payload);
    if (body.payload_base64 != null)
        return fromBase64(body.payload_base64);
    return new Uint8Array();
}
/** One message of a batch publish: text when it is UTF-8, `{base64}` otherwise. */
export function batchMessage(payload) {
    if (typeof payload !== "string" && !(payload instanceof Uint8Array)) {
        const body = plainMessage(payload.payload);
        const wire = typeof body === "string" ? { payload: body } : { payload_base64: body.base64 };
        if (payload.key !== undefined)
            wire.key = payload.key;
        if (payload.headers !== undefined)
            wire.headers = payload.headers;
        if (payload.idempotency_key !== undefined)
            wire.idempotency_key = payload.idempotency_key;
        return wire;
    }
    return plainMessage(payload);
}
function plainMessage(payload) {
    if (typeof payload === "string")
        return payload;
    try {
        return utf8Strict.decode(payload);
    }
    catch {
        return { base64: toBase64(payload) };
    }
}
/** The offsets the frames of a confirmation got (empty when they were refused). */
export function offsetsOf(confirmation) {
    const { offset, count } = confirmation;
    if (offset == null)
        return [];
    return Array.from({ length: count }, (_, i) => offset + i);
}
