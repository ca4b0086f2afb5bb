//! How commands print: a human line, or one JSON document per result with `--json`.

use std::io::Write as _;

use bytes::Bytes;
use serde_json::{json, Value};

/// Where results go, and in which form.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Print JSON instead of human text.
    pub json: bool,
}

impl Output {
    /// Prints one result: `value` with `--json`, else the text `human` builds.
    pub fn emit(&self, value: Value, human: impl FnOnce() -> String) {
        let line = if self.json {
            value.to_string()
        } else {
            human()
        };
        let mut stdout = std::io::stdout().lock();
        // A closed pipe (`| head`) is the reader's choice, not an error worth a panic.
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

impl Output {
    /// Prints a failure as one JSON object on stdout, where `--json` results go, so a
    /// script reading them sees why they stopped:
    /// `{"error":{"code":"unknown_topic","status":404,"message":"..."}}`. `code` is the
    /// server's error code when the server answered, else one of the CLI's own
    /// (`usage`, `unreachable`, `timeout`, ...); `status` the HTTP status, if any.
    pub fn emit_error(&self, code: &str, status: Option<u16>, message: &str) {
        let mut error = json!({ "code": code, "message": message });
        if let Some(status) = status {
            error["status"] = json!(status);
        }
        self.emit(json!({ "error": error }), || message.to_owned());
    }
}

/// `count` and the noun for it: `1 message`, `0 messages`, `2 dead letters` (`plural` is
/// the noun's plural, so irregular ones need no rule).
pub fn counted(count: u64, singular: &str, plural: &str) -> String {
    if count == 1 {
        format!("1 {singular}")
    } else {
        format!("{count} {plural}")
    }
}

/// A payload as JSON fields: `payload` when UTF-8, `payload_base64` otherwise.
pub fn payload_fields(payload: &Bytes) -> Value {
    use base64::Engine as _;
    match std::str::from_utf8(payload) {
        Ok(text) => json!({ "payload": text }),
        Err(_) => {
            json!({ "payload_base64": base64::engine::general_purpose::STANDARD.encode(payload) })
        }
    }
}

/// A payload for humans: the text, or a note about binary bytes.
pub fn payload_text(payload: &Bytes) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("<{} bytes of binary>", payload.len()),
    }
}

/// `base` with the extra fields of `more` merged in.
pub fn merged(mut base: Value, more: Value) -> Value {
    if let (Some(base), Value::Object(more)) = (base.as_object_mut(), more) {
        base.extend(more);
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves one takes the singular and every other count the plural.
    #[test]
    fn counts_take_the_right_noun() {
        assert_eq!(counted(1, "message", "messages"), "1 message");
        assert_eq!(counted(0, "message", "messages"), "0 messages");
        assert_eq!(counted(2, "dead letter", "dead letters"), "2 dead letters");
    }
}
