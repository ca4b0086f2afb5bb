//! Human-friendly units for the CLI's retention flags: ages like `90s`, `12h`, `7d`,
//! sizes like `512KiB`, `1GiB`, `10MB`, and `none` (or `unlimited`) for no limit.
//!
//! ```text
//! 250ms  30s  15m  12h  7d  2w        ages (a bare number is milliseconds)
//! 4096  64KiB  1MiB  1GiB  10MB  2TB  sizes (a bare number is bytes)
//! ```

/// A limit as typed: a value, or `none` for unlimited.
pub type Limit = Option<u64>;

fn split(text: &str) -> (&str, &str) {
    let at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    (&text[..at], text[at..].trim())
}

fn scaled(text: &str, units: &[(&str, u64)], what: &str) -> Result<Limit, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    let (number, unit) = split(text);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a {what} (say e.g. {})", units[1].0))?;
    let factor = units
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .map(|(_, factor)| *factor)
        .ok_or_else(|| {
            let known: Vec<&str> = units
                .iter()
                .map(|(name, _)| *name)
                .filter(|n| !n.is_empty())
                .collect();
            format!(
                "unknown unit {unit:?} in {text:?} (one of {})",
                known.join(", ")
            )
        })?;
    number
        .checked_mul(factor)
        .map(Some)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Parses an age into milliseconds: `ms`, `s`, `m`, `h`, `d`, `w`, or `none`.
///
/// # Errors
/// A message saying what is wrong, for clap to print.
pub fn age_ms(text: &str) -> Result<Limit, String> {
    const UNITS: [(&str, u64); 7] = [
        ("", 1),
        ("ms", 1),
        ("s", 1_000),
        ("m", 60_000),
        ("h", 3_600_000),
        ("d", 86_400_000),
        ("w", 604_800_000),
    ];
    scaled(text, &UNITS, "duration")
}

/// Parses a size into bytes: `B`, `KB`/`KiB`, `MB`/`MiB`, `GB`/`GiB`, `TB`/`TiB`, or
/// `none`.
///
/// # Errors
/// A message saying what is wrong, for clap to print.
pub fn bytes(text: &str) -> Result<Limit, String> {
    const UNITS: [(&str, u64); 10] = [
        ("", 1),
        ("B", 1),
        ("KB", 1_000),
        ("KiB", 1 << 10),
        ("MB", 1_000_000),
        ("MiB", 1 << 20),
        ("GB", 1_000_000_000),
        ("GiB", 1 << 30),
        ("TB", 1_000_000_000_000),
        ("TiB", 1 << 40),
    ];
    scaled(text, &UNITS, "size")
}

/// Parses a message count, or `none`.
///
/// # Errors
/// A message saying what is wrong, for clap to print.
pub fn count(text: &str) -> Result<Limit, String> {
    scaled(text, &[("", 1), ("1000", 1)], "count")
}

/// An age for people: `7d`, `90s`, `250ms`, or `unlimited`.
pub fn show_age(ms: Option<u64>) -> String {
    let Some(ms) = ms else {
        return "unlimited".into();
    };
    let units = [
        ("w", 604_800_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ];
    units
        .iter()
        .find(|(_, factor)| ms >= *factor && ms % factor == 0)
        .map_or_else(
            || format!("{ms}ms"),
            |(unit, factor)| format!("{}{unit}", ms / factor),
        )
}

/// A size for people: `1GiB`, `64KiB`, `1500B`, or `unlimited`.
pub fn show_bytes(bytes: Option<u64>) -> String {
    let Some(bytes) = bytes else {
        return "unlimited".into();
    };
    let units = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    units
        .iter()
        .find(|(_, factor)| bytes >= *factor && bytes % factor == 0)
        .map_or_else(
            || format!("{bytes}B"),
            |(unit, factor)| format!("{}{unit}", bytes / factor),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every unit scales as documented, `none` is unlimited, and junk is refused.
    #[test]
    fn units_parse_and_show() {
        assert_eq!(age_ms("7d"), Ok(Some(604_800_000)));
        assert_eq!(age_ms("90s"), Ok(Some(90_000)));
        assert_eq!(age_ms("250"), Ok(Some(250)));
        assert_eq!(age_ms("none"), Ok(None));
        assert_eq!(bytes("1GiB"), Ok(Some(1 << 30)));
        assert_eq!(bytes("10MB"), Ok(Some(10_000_000)));
        assert_eq!(bytes("64kib"), Ok(Some(65_536)));
        assert_eq!(count("1000"), Ok(Some(1000)));
        for bad in ["", "7 years", "-1d", "1.5GiB", "99999999999999999999w"] {
            assert!(age_ms(bad).is_err() || bytes(bad).is_err(), "{bad:?}");
        }
        assert!(bytes("1Gb!").is_err());
        assert_eq!(show_age(Some(604_800_000)), "1w");
        assert_eq!(show_age(Some(1_500)), "1500ms");
        assert_eq!(show_bytes(Some(1 << 30)), "1GiB");
        assert_eq!(show_bytes(None), "unlimited");
    }
}
