//! Times for people: Unix milliseconds as RFC 3339 in UTC, `2026-12-01T12:14:41.123Z`,
//! printed, and read back from the command line (`--from-time`, `--time`).
//!
//! A few lines of calendar arithmetic instead of a date crate: the CLI only prints and
//! reads UTC instants (the `Z` form, or Unix milliseconds), never a time zone.

/// Reads an instant given on the command line: Unix milliseconds (`1764591281123`) or
/// RFC 3339 in UTC with an optional fraction (`2025-12-01T12:14:41Z`,
/// `2025-12-01T12:14:41.123Z`).
///
/// # Errors
/// A message naming the forms accepted, for anything else (other offsets than `Z`
/// included: say the instant in UTC).
pub fn parse_instant_ms(text: &str) -> Result<u64, String> {
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    rfc3339_utc(text).ok_or_else(|| {
        format!(
            "expected Unix milliseconds or a UTC time like 2025-12-01T12:14:41.123Z, got {text:?}"
        )
    })
}

/// `YYYY-MM-DDTHH:MM:SS[.f+]Z` (from 1970 on) as Unix milliseconds.
fn rfc3339_utc(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix('z'))?;
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let number = |part: &str, digits: usize| -> Option<u64> {
        (part.len() == digits && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let mut date = date.split('-');
    let (year, month, day) = (date.next()?, date.next()?, date.next()?);
    let (year, month, day) = (number(year, 4)?, number(month, 2)?, number(day, 2)?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clock = clock.split(':');
    let (hour, minute, second) = (clock.next()?, clock.next()?, clock.next()?);
    let (hour, minute, second) = (number(hour, 2)?, number(minute, 2)?, number(second, 2)?);
    if date.next().is_some() || clock.next().is_some() || year < 1970 {
        return None;
    }
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    let millis = match fraction {
        "" => 0,
        digits if digits.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{digits:0<3}")[..3].parse().ok()?
        }
        _ => return None,
    };
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1_000 + millis)
}

/// The days from 1970-01-01 to a date on or after it (the inverse of
/// [`civil_from_days`]); `None` for a day its month does not have.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let shifted = if month <= 2 { year - 1 } else { year };
    let era = shifted / 400;
    let year_of_era = shifted % 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = (era * 146_097 + day_of_era).checked_sub(719_468)?;
    (day >= 1 && civil_from_days(days) == (year, month, day)).then_some(days)
}

/// `ms` Unix milliseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_ms(ms: u64) -> String {
    let days = ms / 86_400_000;
    let in_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1_000 % 60,
        in_day % 1_000
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch: eras of 400 years, each
/// 146,097 days, with the year starting in March so the leap day comes last).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the conversion at the epoch, around leap days (2000 was a leap year, 1900
    // and 2100 are not), at a year's last millisecond, and against a known instant.
    #[test]
    fn instants_print_as_rfc3339_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(9), "1970-01-01T00:00:00.009Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_868_800_000), "2000-03-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(rfc3339_ms(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_ms(1_764_591_281_123), "2025-12-01T12:14:41.123Z");
    }

    // Proves instants read back as they print, Unix milliseconds pass through, and
    // malformed or impossible times (and other zones than Z) are refused.
    #[test]
    fn instants_parse_from_the_command_line() {
        for ms in [0, 9, 951_782_400_000, 4_107_542_399_999, 1_764_591_281_123] {
            assert_eq!(parse_instant_ms(&rfc3339_ms(ms)), Ok(ms));
        }
        assert_eq!(parse_instant_ms("1764591281123"), Ok(1_764_591_281_123));
        assert_eq!(
            parse_instant_ms("2025-12-01T12:14:41Z"),
            Ok(1_764_591_281_000)
        );
        assert_eq!(
            parse_instant_ms("2025-12-01T12:14:41.1Z"),
            Ok(1_764_591_281_100)
        );
        for bad in [
            "",
            "soon",
            "2025-12-01T12:14:41",
            "2025-12-01T12:14:41+01:00",
            "2025-02-30T00:00:00Z",
            "2025-13-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2025-12-01T24:00:00Z",
            "-5",
        ] {
            assert!(parse_instant_ms(bad).is_err(), "{bad}");
        }
    }

    // Proves every day for 600 years steps the date by exactly one calendar day.
    #[test]
    fn consecutive_days_are_consecutive_dates() {
        let mut previous = civil_from_days(0);
        for days in 1..(600 * 366) {
            let (year, month, day) = civil_from_days(days);
            let next_day = (previous.0, previous.1, previous.2 + 1);
            let next_month = (previous.0, previous.1 + 1, 1);
            let next_year = (previous.0 + 1, 1, 1);
            assert!(
                [next_day, next_month, next_year].contains(&(year, month, day)),
                "{previous:?} then {year}-{month}-{day}"
            );
            assert!(day <= days_in_month(year, month), "{year}-{month}-{day}");
            previous = (year, month, day);
        }
    }

    fn days_in_month(year: u64, month: u64) -> u64 {
        let leap =
            year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
        match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }
}
