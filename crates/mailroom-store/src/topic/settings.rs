//! A topic's `SETTINGS` file: its own retention ([`TopicRetention`]), kept beside its
//! logs so it survives restarts.
//!
//! The file is replaced atomically, with the discipline of the `TOPIC` marker and the
//! checkpoint: write `SETTINGS.tmp`, fdatasync it, rename it over `SETTINGS`, fsync the
//! topic directory. A crash leaves the old file or the new one, whole; a left-over
//! `.tmp` is ignored (and overwritten by the next change). A topic without the file
//! follows the store-wide defaults, so stores written before it existed open unchanged.
//!
//! Layout (little-endian, 52 bytes; `docs/storage.md` has the same table):
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..8   | magic `MRTOPSET` |
//! | 8..12  | format version u32 (= 1) |
//! | 12..16 | body length u32 (= 28 in version 1) |
//! | 16..20 | CRC32C of the body |
//! | 20..24 | reserved, 0 |
//! | 24..33 | `age_ms_max`: kind u8, value u64 |
//! | 33..42 | `bytes_max`: kind u8, value u64 |
//! | 42..51 | `messages_max`: kind u8, value u64 |
//! | 51     | `keep_unconsumed` u8: 0 the default, 1 keep, 2 may delete unconsumed |
//!
//! A limit's kind is 0 (the default; value 0), 1 (unlimited; value 0) or 2 (at most
//! value). Anything else, a wrong length, magic, version or checksum, is
//! [`StoreError::Corrupt`]: settings are never guessed.

use std::path::Path;

use crate::retention::{Limit, TopicRetention};
use crate::storage::Storage;
use crate::StoreError;

/// The file's name in the topic directory.
pub(crate) const SETTINGS_FILE: &str = "SETTINGS";
const MAGIC: [u8; 8] = *b"MRTOPSET";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 24;
const BODY_BYTES: usize = 28;
const FILE_BYTES: usize = HEADER_BYTES + BODY_BYTES;
const _: () = assert!(BODY_BYTES == 3 * 9 + 1);

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
    settings: &TopicRetention,
) -> Result<(), StoreError> {
    replace_durable(storage, dir, SETTINGS_FILE, &encode(settings))
}

/// Reads the topic's `SETTINGS` file in `dir`; the defaults if there is none.
pub(crate) fn read(storage: &dyn Storage, dir: &Path) -> Result<TopicRetention, StoreError> {
    let path = dir.join(SETTINGS_FILE);
    if !storage.exists(&path).map_err(io_error("stat", &path))? {
        return Ok(TopicRetention::default());
    }
    let file = storage
        .open(&path, false)
        .map_err(io_error("open", &path))?;
    let len = file.len().map_err(io_error("stat", &path))?;
    if len != FILE_BYTES as u64 {
        return Err(corrupt(
            &path,
            0,
            format!("settings file of {len} bytes, expected {FILE_BYTES}"),
        ));
    }
    let mut bytes = [0; FILE_BYTES];
    file.read_at(&mut bytes, 0)
        .map_err(io_error("read", &path))?;
    decode(&bytes).map_err(|(position, reason)| corrupt(&path, position, reason))
}

/// The file's bytes for `settings`.
pub(crate) fn encode(settings: &TopicRetention) -> [u8; FILE_BYTES] {
    let mut body = [0; BODY_BYTES];
    let limits = [
        settings.age_ms_max,
        settings.bytes_max,
        settings.messages_max,
    ];
    for (at, limit) in limits.into_iter().enumerate() {
        let (kind, value) = match limit {
            Limit::Default => (0u8, 0u64),
            Limit::Unlimited => (1, 0),
            Limit::Max(max) => (2, max),
        };
        body[at * 9] = kind;
        body[at * 9 + 1..at * 9 + 9].copy_from_slice(&value.to_le_bytes());
    }
    body[27] = match settings.keep_unconsumed {
        None => 0,
        Some(true) => 1,
        Some(false) => 2,
    };
    let mut bytes = [0; FILE_BYTES];
    bytes[..8].copy_from_slice(&MAGIC);
    bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
    bytes[12..16].copy_from_slice(&(BODY_BYTES as u32).to_le_bytes());
    bytes[16..20].copy_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes[HEADER_BYTES..].copy_from_slice(&body);
    bytes
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Decodes the file's bytes, or says at which byte and why they are not settings.
pub(crate) fn decode(bytes: &[u8; FILE_BYTES]) -> Result<TopicRetention, (u64, String)> {
    if bytes[..8] != MAGIC {
        return Err((0, "bad magic: not a mailroom topic settings file".into()));
    }
    if u32_at(bytes, 8) != VERSION {
        return Err((
            8,
            format!("unsupported settings version {}", u32_at(bytes, 8)),
        ));
    }
    if u32_at(bytes, 12) as usize != BODY_BYTES || u32_at(bytes, 20) != 0 {
        return Err((12, "bad settings body length or reserved field".into()));
    }
    let body = &bytes[HEADER_BYTES..];
    if crc32c::crc32c(body) != u32_at(bytes, 16) {
        return Err((16, "settings checksum mismatch".into()));
    }
    let mut limits = [Limit::Default; 3];
    for (at, limit) in limits.iter_mut().enumerate() {
        let value = u64::from_le_bytes(body[at * 9 + 1..at * 9 + 9].try_into().expect("8"));
        let position = (HEADER_BYTES + at * 9) as u64;
        *limit = match (body[at * 9], value) {
            (0, 0) => Limit::Default,
            (1, 0) => Limit::Unlimited,
            (2, max) => Limit::Max(max),
            (kind, _) => return Err((position, format!("bad limit kind {kind} or value"))),
        };
    }
    let keep_unconsumed = match body[27] {
        0 => None,
        1 => Some(true),
        2 => Some(false),
        other => return Err((51, format!("bad keep_unconsumed {other}"))),
    };
    let [age_ms_max, bytes_max, messages_max] = limits;
    Ok(TopicRetention {
        age_ms_max,
        bytes_max,
        messages_max,
        keep_unconsumed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every setting round-trips, and that any single flipped bit is refused
    // rather than read as other settings.
    #[test]
    fn settings_round_trip_and_damage_is_refused() {
        let settings = TopicRetention {
            age_ms_max: Limit::Max(7 * 24 * 3_600_000),
            bytes_max: Limit::Unlimited,
            messages_max: Limit::Default,
            keep_unconsumed: Some(false),
        };
        let bytes = encode(&settings);
        assert_eq!(decode(&bytes), Ok(settings));
        assert_eq!(
            decode(&encode(&TopicRetention::default())),
            Ok(TopicRetention::default())
        );
        for bit in 0..FILE_BYTES * 8 {
            let mut damaged = bytes;
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&damaged).is_err(), "bit {bit} flipped was accepted");
        }
    }
}
