/**
 * Typed errors: every failure the server reports, by its stable error code.
 *
 * Each known code has its own class (`NotOwned` for `not_owned`) under a class per kind
 * of status (`Conflict` for 409) under {@link ApiError}. A code this version does not
 * know (from a newer server) still gets the class of its status, with `code` as sent.
 */

/** The root of every error this package throws. */
export class MailroomError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The server could not be reached, or the connection broke mid-call. */
export class TransportError extends MailroomError {}

/** A call ran out of its time limit. */
export class Timeout extends TransportError {
  constructor(message: string, readonly limit: "connect" | "request") {
    super(message);
  }
}

/**
 * A stream the server closed (or whose connection broke). On a publish stream the
 * `unconfirmed` frames were not published; on a consume stream `unconfirmed` settlements
 * got no answer (they may or may not have applied).
 */
export class StreamClosed extends MailroomError {
  constructor(readonly reason: string, readonly unconfirmed: number) {
    super(`stream closed (${reason}); ${unconfirmed} unconfirmed`);
  }
}

/** The server refused a call: HTTP `status`, the stable `code` and its `message`. */
export class ApiError extends MailroomError {
  constructor(readonly status: number, readonly code: string, readonly detail: string) {
    super(`${status} ${code}: ${detail}`);
  }
}

/** 400: the request was malformed or a value out of range. */
export class BadRequest extends ApiError {}
/** 401: the bearer token (or ticket) is missing or wrong. */
export class Unauthorized extends ApiError {}
/** 403: a browser request from an origin the server does not allow. */
export class Forbidden extends ApiError {}
/** 404: no such topic, group, channel or route. */
export class NotFound extends ApiError {}
/** 405: the route does not take this method. */
export class MethodNotAllowed extends ApiError {}
/** 409: the state refused the request (exists already, not owned, over a limit). */
export class Conflict extends ApiError {}
/** 413: the body or a message is over its limit. */
export class PayloadTooLarge extends ApiError {}
/** 415: the content type was refused. */
export class UnsupportedMediaType extends ApiError {}
/** 426: the route needs a protocol upgrade. */
export class UpgradeRequired extends ApiError {}
/** 429: too many long polls or tickets outstanding. */
export class TooManyRequests extends ApiError {}
/** 5xx: the server or its store failed. */
export class ServerError extends ApiError {}

/** 400 invalid_argument. */
export class InvalidArgument extends BadRequest {}
/** 400 invalid_body. */
export class InvalidBody extends BadRequest {}
/** 400 malformed_json. */
export class MalformedJson extends BadRequest {}
/** 400 invalid_name (also thrown before sending a name that breaks the rule). */
export class InvalidName extends BadRequest {}
/** 400 not_websocket. */
export class NotWebsocket extends BadRequest {}
/** 403 forbidden_origin. */
export class ForbiddenOrigin extends Forbidden {}
/** 404 unknown_topic. */
export class UnknownTopic extends NotFound {}
/** 404 unknown_group. */
export class UnknownGroup extends NotFound {}
/** 404 unknown_channel. */
export class UnknownChannel extends NotFound {}
/** 409 group_exists. */
export class GroupExists extends Conflict {}
/** 409 channel_exists. */
export class ChannelExists extends Conflict {}
/** 409 channel_limit. */
export class ChannelLimit extends Conflict {}
/** 409 subscriber_limit. */
export class SubscriberLimit extends Conflict {}
/** 409 not_owned: the delivery is not in flight. */
export class NotOwned extends Conflict {}
/** 429 too_many_long_polls. */
export class TooManyLongPolls extends TooManyRequests {}
/** 429 too_many_tickets. */
export class TooManyTickets extends TooManyRequests {}
/** 500 internal. */
export class Internal extends ServerError {}
/** 500 storage_error. */
export class StorageError extends ServerError {}
/** 503 store_failed: the store is fail-stop. */
export class StoreFailed extends ServerError {}
/** 409 topic_limit: the server holds its most topics. */
export class TopicLimit extends Conflict {}
/** 503 connection_limit. */
export class ConnectionLimit extends ServerError {}
/** 503 topic_failed: repair or recover the topic. */
export class TopicFailed extends ServerError {}
/** 503 store_unavailable. */
export class StoreUnavailable extends ServerError {}
/** 501 not_supported: the backend lacks this call. */
export class NotSupported extends ServerError {}

type ApiErrorClass = new (status: number, code: string, detail: string) => ApiError;

/** The class of each known code (`crates/mailroom-api/src/error.rs` lists them). */
export const BY_CODE: Readonly<Record<string, ApiErrorClass>> = {
  bad_request: BadRequest,
  invalid_argument: InvalidArgument,
  invalid_body: InvalidBody,
  malformed_json: MalformedJson,
  invalid_name: InvalidName,
  not_websocket: NotWebsocket,
  unauthorized: Unauthorized,
  forbidden_origin: ForbiddenOrigin,
  not_found: NotFound,
  unknown_topic: UnknownTopic,
  unknown_group: UnknownGroup,
  unknown_channel: UnknownChannel,
  method_not_allowed: MethodNotAllowed,
  group_exists: GroupExists,
  channel_exists: ChannelExists,
  channel_limit: ChannelLimit,
  subscriber_limit: SubscriberLimit,
  not_owned: NotOwned,
  conflict: Conflict,
  payload_too_large: PayloadTooLarge,
  unsupported_media_type: UnsupportedMediaType,
  upgrade_required: UpgradeRequired,
  too_many_long_polls: TooManyLongPolls,
  too_many_tickets: TooManyTickets,
  internal: Internal,
  storage_error: StorageError,
  store_failed: StoreFailed,
  topic_limit: TopicLimit,
  connection_limit: ConnectionLimit,
  topic_failed: TopicFailed,
  store_unavailable: StoreUnavailable,
  not_supported: NotSupported,
  error: ApiError,
};

const BY_STATUS: Readonly<Record<number, ApiErrorClass>> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  405: MethodNotAllowed,
  409: Conflict,
  413: PayloadTooLarge,
  415: UnsupportedMediaType,
  426: UpgradeRequired,
  429: TooManyRequests,
};

/** The typed error for an error answer; unknown codes fall back to their status. */
export function apiError(status: number, code: string, detail: string): ApiError {
  let cls = Object.prototype.hasOwnProperty.call(BY_CODE, code) ? BY_CODE[code] : undefined;
  if (cls === undefined || cls === ApiError) {
    cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  }
  return new cls(status, code, detail);
}
