//! Live channels: best-effort fan-out to bounded per-subscriber mailboxes.
