//! Times for people: Unix milliseconds as RFC 3339 in UTC, `2026-12-01T12:14:41.123Z`.
//!
//! A few lines of calendar arithmetic instead of a date crate: the CLI only ever prints
//! a UTC instant the server sent, never parses one or needs a time zone.

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
