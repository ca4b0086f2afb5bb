/**
 * The client's options and the options of its calls: how to reach the server, a
 * publish's metadata, a nack's and a batch poll's options.
 */
/** Milliseconds for a whole call; a long poll's wait is added on top. */
export const REQUEST_TIMEOUT_MS_DEFAULT = 30_000;
