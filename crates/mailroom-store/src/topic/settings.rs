//! A topic's `SETTINGS` file: its own retention ([`TopicRetention`]) and idempotency
//! window ([`TopicIdempotency`]), kept beside its logs so they survive restarts.
//!
//! The file is replaced atomically, with the discipline of the `TOPIC` marker and the
//! checkpoint: write `SETTINGS.tmp`, fdatasync it, rename it over `SETTINGS`, fsync the
//! topic directory. A crash leaves the old file or the new one, whole; a left-over
//! `.tmp` is ignored (and overwritten by the next change). A topic without the file
//! follows the store-wide defaults, so stores written before it existed open unchanged.
//!
//! Layout (little-endian, 52 bytes in version 1, 70 in version 2; `docs/storage.md` has
//! the same table):
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..8   | magic `MRTOPSET` |
//! | 8..12  | format version u32 (1 or 2) |
//! | 12..16 | body length u32 (28 in version 1, 46 in version 2) |
//! | 16..20 | CRC32C of the body |
//! | 20..24 | reserved, 0 |
//! | 24..33 | `age_ms_max`: kind u8, value u64 |
//! | 33..42 | `bytes_max`: kind u8, value u64 |
//! | 42..51 | `messages_max`: kind u8, value u64 |
//! | 51     | `keep_unconsumed` u8: 0 the default, 1 keep, 2 may delete unconsumed |
//! | 52..61 | version 2: idempotency window `messages_max`: kind u8, value u64 |
//! | 61..70 | version 2: idempotency window `age_ms_max`: kind u8, value u64 |
//!
//! A topic whose window is the store's default is written as version 1, byte for byte
//! what releases before the window wrote; both versions are read.
//!
//! A limit's kind is 0 (the default; value 0), 1 (unlimited; value 0) or 2 (at most
//! value); a window limit is never unlimited, and its value is checked as
//! [`TopicIdempotency::check`] checks it. Anything else, a wrong length, magic, version or checksum, is
//! [`StoreError::Corrupt`]: settings are never guessed.

use std::path::Path;

use crate::idempotency::TopicIdempotency;
use crate::retention::{Limit, TopicRetention};
use crate::storage::Storage;
use crate::StoreError;

/// The file's name in the topic directory.
pub(crate) const SETTINGS_FILE: &str = "SETTINGS";
const MAGIC: [u8; 8] = *b"MRTOPSET";
const VERSION: u32 = 1;
const VERSION_WINDOW: u32 = 2;
const HEADER_BYTES: usize = 24;
const BODY_BYTES: usize = 28;
const BODY_BYTES_WINDOW: usize = BODY_BYTES + 2 * 9;
const FILE_BYTES: usize = HEADER_BYTES + BODY_BYTES;
const FILE_BYTES_WINDOW: usize = HEADER_BYTES + BODY_BYTES_WINDOW;
const _: () = assert!(BODY_BYTES == 3 * 9 + 1);
const _: () = assert!(FILE_BYTES_WINDOW == 70);

/// Everything a topic's `SETTINGS` file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TopicSettings {
    /// The topic's own retention.
    pub(crate) retention: TopicRetention,
    /// The topic's own idempotency window.
    pub(crate) idempotency: TopicIdempotency,
}

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

/// Replaces `file` in `dir` with `bytes`, atomically and durably: temp file, fdatasync,
/// rename, fsync of the directory.
pub(crate) fn replace_durable(
    storage: &dyn Storage,
    dir: &Path,
    file: &str,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let tmp = dir.join(format!("{file}.tmp"));
    let path = dir.join(file);
    let handle = storage.open(&tmp, true).map_err(io_error("create", &tmp))?;
    handle.set_len(0).map_err(io_error("truncate", &tmp))?;
    handle.write_at(bytes, 0).map_err(io_error("write", &tmp))?;
    handle.sync().map_err(io_error("fdatasync", &tmp))?;
    drop(handle);
    storage
        .rename(&tmp, &path)
        .map_err(io_error("rename", &tmp))?;
    storage
        .sync_dir(dir)
        .map_err(io_error("fsync directory", dir))
}

/// Writes `settings` as the topic's `SETTINGS` file in `dir`, durably.
pub(crate) fn write(
    storage: &dyn Storage,
    dir: &Path,
    settings: &TopicSettings,
) -> Result<(), StoreError> {
    replace_durable(storage, dir, SETTINGS_FILE, &encode(settings))
}

/// Reads the topic's `SETTINGS` file in `dir`; the defaults if there is none.
pub(crate) fn read(storage: &dyn Storage, dir: &Path) -> Result<TopicSettings, StoreError> {
    let path = dir.join(SETTINGS_FILE);
    if !storage.exists(&path).map_err(io_error("stat", &path))? {
        return Ok(TopicSettings::default());
    }
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let len = file.len().map_err(io_error("stat", &path))?;
    if len != FILE_BYTES as u64 && len != FILE_BYTES_WINDOW as u64 {
        return Err(corrupt(
            &path,
            0,
            format!("settings file of {len} bytes, expected {FILE_BYTES} or {FILE_BYTES_WINDOW}"),
        ));
    }
    let mut bytes = vec![0; len as usize];
    file.read_at(&mut bytes, 0)
        .map_err(io_error("read", &path))?;
    decode(&bytes).map_err(|(position, reason)| corrupt(&path, position, reason))
}

/// A window limit as a settings limit: set or the default (never unlimited).
fn window_limit(value: Option<u64>) -> Limit {
    value.map_or(Limit::Default, Limit::Max)
}

/// Encodes `limit` at `at` in `body`.
fn put_limit(body: &mut [u8], at: usize, limit: Limit) {
    let (kind, value) = match limit {
        Limit::Default => (0u8, 0u64),
        Limit::Unlimited => (1, 0),
        Limit::Max(max) => (2, max),
    };
    body[at] = kind;
    body[at + 1..at + 9].copy_from_slice(&value.to_le_bytes());
}

/// Decodes the limit at `at` of `body`, or says at which file byte it is bad.
fn get_limit(body: &[u8], at: usize) -> Result<Limit, (u64, String)> {
    let value = u64::from_le_bytes(body[at + 1..at + 9].try_into().expect("8"));
    let position = (HEADER_BYTES + at) as u64;
    match (body[at], value) {
        (0, 0) => Ok(Limit::Default),
        (1, 0) => Ok(Limit::Unlimited),
        (2, max) => Ok(Limit::Max(max)),
        (kind, _) => Err((position, format!("bad limit kind {kind} or value"))),
    }
}

/// The file's bytes for `settings`: version 1 when the window is the default.
pub(crate) fn encode(settings: &TopicSettings) -> Vec<u8> {
    let window = settings.idempotency != TopicIdempotency::default();
    let (version, body_bytes) = match window {
        false => (VERSION, BODY_BYTES),
        true => (VERSION_WINDOW, BODY_BYTES_WINDOW),
    };
    let mut body = vec![0; body_bytes];
    let retention = &settings.retention;
    let limits = [
        retention.age_ms_max,
        retention.bytes_max,
        retention.messages_max,
    ];
    for (n, limit) in limits.into_iter().enumerate() {
        put_limit(&mut body, n * 9, limit);
    }
    body[27] = match retention.keep_unconsumed {
        None => 0,
        Some(true) => 1,
        Some(false) => 2,
    };
    if window {
        let idempotency = &settings.idempotency;
        put_limit(&mut body, 28, window_limit(idempotency.messages_max));
        put_limit(&mut body, 37, window_limit(idempotency.age_ms_max));
    }
    let mut bytes = Vec::with_capacity(HEADER_BYTES + body_bytes);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&version.to_le_bytes());
    bytes.extend_from_slice(&(body_bytes as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&body);
    bytes
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Decodes the file's bytes (either version), or says at which byte and why they are
/// not settings.
pub(crate) fn decode(bytes: &[u8]) -> Result<TopicSettings, (u64, String)> {
    if bytes.len() < HEADER_BYTES || bytes[..8] != MAGIC {
        return Err((0, "bad magic: not a mailroom topic settings file".into()));
    }
    let body_bytes = match u32_at(bytes, 8) {
        VERSION => BODY_BYTES,
        VERSION_WINDOW => BODY_BYTES_WINDOW,
        other => return Err((8, format!("unsupported settings version {other}"))),
    };
    if u32_at(bytes, 12) as usize != body_bytes
        || bytes.len() != HEADER_BYTES + body_bytes
        || u32_at(bytes, 20) != 0
    {
        return Err((12, "bad settings body length or reserved field".into()));
    }
    let body = &bytes[HEADER_BYTES..];
    if crc32c::crc32c(body) != u32_at(bytes, 16) {
        return Err((16, "settings checksum mismatch".into()));
    }
    let keep_unconsumed = match body[27] {
        0 => None,
        1 => Some(true),
        2 => Some(false),
        other => return Err((51, format!("bad keep_unconsumed {other}"))),
    };
    let retention = TopicRetention {
        age_ms_max: get_limit(body, 0)?,
        bytes_max: get_limit(body, 9)?,
        messages_max: get_limit(body, 18)?,
        keep_unconsumed,
    };
    let mut idempotency = TopicIdempotency::default();
    if body_bytes == BODY_BYTES_WINDOW {
        let mut window = [None; 2];
        for (n, slot) in window.iter_mut().enumerate() {
            let at = 28 + n * 9;
            *slot = match get_limit(body, at)? {
                Limit::Default => None,
                Limit::Max(max) => Some(max),
                Limit::Unlimited => {
                    return Err(((HEADER_BYTES + at) as u64, "an unlimited window".into()))
                }
            };
        }
        idempotency = TopicIdempotency {
            messages_max: window[0],
            age_ms_max: window[1],
        };
        idempotency
            .check()
            .map_err(|error| ((HEADER_BYTES + 28) as u64, error.to_string()))?;
    }
    Ok(TopicSettings {
        retention,
        idempotency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every setting round-trips, and that any single flipped bit is refused
    // rather than read as other settings.
    #[test]
    fn settings_round_trip_and_damage_is_refused() {
        let retention = TopicRetention {
            age_ms_max: Limit::Max(7 * 24 * 3_600_000),
            bytes_max: Limit::Unlimited,
            messages_max: Limit::Default,
            keep_unconsumed: Some(false),
        };
        let windowed = TopicIdempotency {
            messages_max: Some(50),
            age_ms_max: None,
        };
        for idempotency in [TopicIdempotency::default(), windowed] {
            let settings = TopicSettings {
                retention,
                idempotency,
            };
            let bytes = encode(&settings);
            assert_eq!(decode(&bytes), Ok(settings));
            for bit in 0..bytes.len() * 8 {
                let mut damaged = bytes.clone();
                damaged[bit / 8] ^= 1 << (bit % 8);
                assert!(decode(&damaged).is_err(), "bit {bit} flipped was accepted");
            }
        }
        assert_eq!(
            decode(&encode(&TopicSettings::default())),
            Ok(TopicSettings::default())
        );
    }

    // Proves settings with the default window are written as version 1 (52 bytes, as
    // before the window), and a window as version 2 (70 bytes).
    #[test]
    fn the_default_window_keeps_version_1() {
        let plain = encode(&TopicSettings::default());
        assert_eq!((plain.len(), u32_at(&plain, 8)), (FILE_BYTES, VERSION));
        let windowed = encode(&TopicSettings {
            idempotency: TopicIdempotency {
                messages_max: None,
                age_ms_max: Some(5_000),
            },
            ..TopicSettings::default()
        });
        assert_eq!(
            (windowed.len(), u32_at(&windowed, 8)),
            (FILE_BYTES_WINDOW, VERSION_WINDOW)
        );
    }
}
