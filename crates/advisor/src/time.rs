//! Instants as users and the aws CLI write them.

use jiff::{Timestamp, civil::Date, tz::TimeZone};

/// RFC 3339 with an offset (`2026-12-01T11:30:00+00:00`, what the aws CLI prints) or a
/// bare date, read as 00:00 UTC.
pub fn parse_instant(text: &str) -> Result<Timestamp, String> {
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts);
    }
    text.parse::<Date>()
        .ok()
        .and_then(|d| d.to_zoned(TimeZone::UTC).ok())
        .map(|z| z.timestamp())
        .ok_or_else(|| {
            format!(
                "{text:?} is not an RFC 3339 time (2026-12-01T11:30:00Z) or a date (2026-12-01)"
            )
        })
}

pub fn hours_between(start: Timestamp, end: Timestamp) -> f64 {
    (end.as_second() - start.as_second()) as f64 / 3600.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_times_and_dates() {
        let a = parse_instant("2026-12-01T11:30:00+00:00").unwrap();
        let b = parse_instant("2026-12-01T11:30:00Z").unwrap();
        assert_eq!(a, b);
        let d = parse_instant("2026-12-01").unwrap();
        assert_eq!(hours_between(d, a), 11.5);
        assert!(parse_instant("tomorrow").is_err());
    }
}
