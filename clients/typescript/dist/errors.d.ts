/**
 * Typed errors: every failure the server reports, by its stable error code.
 *
 * Each known code has its own class (`NotOwned` for `not_owned`) under a class per kind
 * of status (`Conflict` for 409) under {@link ApiError}. A code this version does not
 * know (from a newer server) still gets the class of its status, with `code` as sent.
 */
/** The root of every error this package throws. */
export declare class MailroomError extends Error {
    constructor(message: string);
}
/** The server could not be reached, or the connection broke mid-call. */
export declare class TransportError extends MailroomError {
}
/** A call ran out of its time limit. */
export declare class Timeout extends TransportError {
    readonly limit: "connect" | "request";
    constructor(message: string, limit: "connect" | "request");
}
/**
 * A stream the server closed (or whose connection broke). On a publish stream the
 * `unconfirmed` frames were not published; on a consume stream `unconfirmed` settlements
 * got no answer (they may or may not have applied).
 */
export declare class StreamClosed extends MailroomError {
    readonly reason: string;
    readonly unconfirmed: number;
    constructor(reason: string, unconfirmed: number);
}
/** The server refused a call: HTTP `status`, the stable `code` and its `message`. */
export declare class ApiError extends MailroomError {
    readonly status: number;
    readonly code: string;
    readonly detail: string;
    constructor(status: number, code: string, detail: string);
}
/** 400: the request was malformed or a value out of range. */
export declare class BadRequest extends ApiError {
}
/** 401: the bearer token (or ticket) is missing or wrong. */
export declare class Unauthorized extends ApiError {
}
/** 403: a browser request from an origin the server does not allow. */
export declare class Forbidden extends ApiError {
}
/** 404: no such topic, group, channel or route. */
export declare class NotFound extends ApiError {
}
/** 405: the route does not take this method. */
export declare class MethodNotAllowed extends ApiError {
}
/** 409: the state refused the request (exists already, not owned, over a limit). */
export declare class Conflict extends ApiError {
}
/** 413: the body or a message is over its limit. */
export declare class PayloadTooLarge extends ApiError {
}
/** 415: the content type was refused. */
export declare class UnsupportedMediaType extends ApiError {
}
/** 426: the route needs a protocol upgrade. */
export declare class UpgradeRequired extends ApiError {
}
/** 429: too many long polls or tickets outstanding. */
export declare class TooManyRequests extends ApiError {
}
/** 5xx: the server or its store failed. */
export declare class ServerError extends ApiError {
}
/** 400 invalid_argument. */
export declare class InvalidArgument extends BadRequest {
}
/** 400 invalid_body. */
export declare class InvalidBody extends BadRequest {
}
/** 400 malformed_json. */
export declare class MalformedJson extends BadRequest {
}
/** 400 invalid_name (also thrown before sending a name that breaks the rule). */
export declare class InvalidName extends BadRequest {
}
/** 400 not_websocket. */
export declare class NotWebsocket extends BadRequest {
}
/** 403 forbidden_origin. */
export declare class ForbiddenOrigin extends Forbidden {
}
/** 404 unknown_topic. */
export declare class UnknownTopic extends NotFound {
}
/** 404 unknown_group. */
export declare class UnknownGroup extends NotFound {
}
/** 404 unknown_channel. */
export declare class UnknownChannel extends NotFound {
}
/** 409 group_exists. */
export declare class GroupExists extends Conflict {
}
/** 409 channel_exists. */
export declare class ChannelExists extends Conflict {
}
/** 409 channel_limit. */
export declare class ChannelLimit extends Conflict {
}
/** 409 subscriber_limit. */
export declare class SubscriberLimit extends Conflict {
}
/** 409 not_owned: the delivery is not in flight. */
export declare class NotOwned extends Conflict {
}
/** 429 too_many_long_polls. */
export declare class TooManyLongPolls extends TooManyRequests {
}
/** 429 too_many_tickets. */
export declare class TooManyTickets extends TooManyRequests {
}
/** 500 internal. */
export declare class Internal extends ServerError {
}
/** 500 storage_error. */
export declare class StorageError extends ServerError {
}
/** 503 store_failed: the store is fail-stop. */
export declare class StoreFailed extends ServerError {
}
/** 409 topic_limit: the server holds its most topics. */
export declare class TopicLimit extends Conflict {
}
/** 503 connection_limit. */
export declare class ConnectionLimit extends ServerError {
}
/** 503 topic_failed: repair or recover the topic. */
export declare class TopicFailed extends ServerError {
}
/** 503 store_unavailable. */
export declare class StoreUnavailable extends ServerError {
}
/** 501 not_supported: the backend lacks this call. */
export declare class NotSupported extends ServerError {
}
type ApiErrorClass = new (status: number, code: string, detail: string) => ApiError;
/** The class of each known code (`crates/mailroom-api/src/error.rs` lists them). */
export declare const BY_CODE: Readonly<Record<string, ApiErrorClass>>;
/** The typed error for an error answer; unknown codes fall back to their status. */
export declare function apiError(status: number, code: string, detail: string): ApiError;
export {};
