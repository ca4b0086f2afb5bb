//! Names of topics, groups and channels, checked when the arguments are parsed.
//!
//! The rule is the wire format's (`mailroom_api::names`), which the server and the
//! client apply too, so the CLI refuses exactly what the server would, in its words. Checking first matters for more than an early
//! answer: the client turns each name into one URL path segment, and `.`, `..` or an
//! empty name would change the path the request goes to, so the server would answer a
//! different request (a listing, a 404 for a route, a 405) instead of `invalid_name`.

use mailroom_client::NameKind;

/// A topic name, for clap's `value_parser`.
///
/// # Errors
/// What is wrong with the name, in the server's words.
pub fn topic(text: &str) -> Result<String, String> {
    checked(NameKind::Topic, text)
}

/// A consumer group name, for clap's `value_parser`.
///
/// # Errors
/// What is wrong with the name, in the server's words.
pub fn group(text: &str) -> Result<String, String> {
    checked(NameKind::Group, text)
}

/// A live channel name, for clap's `value_parser`.
///
/// # Errors
/// What is wrong with the name, in the server's words.
pub fn channel(text: &str) -> Result<String, String> {
    checked(NameKind::Channel, text)
}

fn checked(kind: NameKind, text: &str) -> Result<String, String> {
    mailroom_client::api::names::check(kind, text)
        .map(|()| text.to_owned())
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the parsers accept the server's alphabet and refuse what the server refuses,
    // naming the kind of name in the message.
    #[test]
    fn names_follow_the_servers_rule() {
        assert_eq!(
            topic("orders.v2_eu-west"),
            Ok("orders.v2_eu-west".to_owned())
        );
        for bad in ["", ".", "..", "a/b", "a b", "é", &"x".repeat(129)] {
            let error = group(bad).unwrap_err();
            assert!(error.starts_with("group name"), "{bad:?}: {error}");
        }
        assert!(channel("..").unwrap_err().contains("reserved"));
    }
}
