//! How a WebSocket read error ends the connection: a client's protocol violation gets
//! the close code RFC 6455 §7.4.1 has for it, not 1011 (internal error), which would
//! blame the server.
//!
//! | what the client sent | code | reason |
//! |---|---|---|
//! | a frame breaking the protocol (unmasked, reserved bits, a bad opcode, a fragmented or oversized control frame) | 1002 | `protocol_error` |
//! | a text frame that is not UTF-8 | 1007 | `invalid_utf8` |
//! | a frame or message over the endpoint's size limit | 1009 | `message_too_big` |
//!
//! Any other read error (the connection broke) gets no close frame: nobody would read it.

use axum::extract::ws::{close_code, CloseFrame};
use tungstenite::error::Error as WsError;

/// The close frame for a read that failed with `error`, or `None` when the connection
/// itself is gone.
pub fn close_for(error: axum::Error) -> Option<CloseFrame> {
    let inner = error.into_inner();
    let (code, reason) = match inner.downcast_ref::<WsError>()? {
        WsError::Capacity(_) => (close_code::SIZE, "message_too_big"),
        WsError::Utf8(_) => (close_code::INVALID, "invalid_utf8"),
        WsError::Protocol(_) => (close_code::PROTOCOL, "protocol_error"),
        _ => return None,
    };
    Some(CloseFrame {
        code,
        reason: reason.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tungstenite::error::{CapacityError, ProtocolError};

    // Proves each protocol violation gets its own code and an I/O failure none.
    #[test]
    fn violations_get_their_codes() {
        let code = |error: WsError| close_for(axum::Error::new(error)).map(|frame| frame.code);
        let too_big = CapacityError::MessageTooLong {
            size: 2,
            max_size: 1,
        };
        assert_eq!(code(WsError::Capacity(too_big)), Some(1009));
        assert_eq!(code(WsError::Utf8("bad".into())), Some(1007));
        let unmasked = ProtocolError::UnmaskedFrameFromClient;
        assert_eq!(code(WsError::Protocol(unmasked)), Some(1002));
        let broken = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(code(WsError::Io(broken)), None);
    }
}
