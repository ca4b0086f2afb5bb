//! The fields every body carrying a message shares (a delivery, a dead letter, a read's
//! message), written once: its payload (as text when it is valid UTF-8, else in base64),
//! its key and its headers.
//!
//! [`message_body!`](crate::message_body) declares a body struct with the fields of its
//! own first (its offset and what else it says about the message), then the shared
//! ones, then its publish time, so the JSON keeps the field order and spelling it has
//! always had, and the Rust fields stay plain fields of each body.

/// Declares a body struct: `$before` fields, then `payload`, `payload_base64`, `key`
/// (documented with `$key_doc`) and `headers`, then `$after` fields.
macro_rules! message_body {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$before_meta:meta])* pub $before:ident: $before_ty:ty,)*
        }
        key: $key_doc:literal,
        then {
            $($(#[$after_meta:meta])* pub $after:ident: $after_ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$before_meta])* pub $before: $before_ty,)*
            /// The message, when it is valid UTF-8.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub payload: Option<String>,
            /// The message in standard base64, when it is not valid UTF-8.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub payload_base64: Option<String>,
            #[doc = $key_doc]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub key: Option<String>,
            /// The message's headers by name; left out when it has none.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub headers: Option<std::collections::BTreeMap<String, String>>,
            $($(#[$after_meta])* pub $after: $after_ty,)*
        }
    };
}

pub(crate) use message_body;
