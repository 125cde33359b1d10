//! UTC timestamps: the one formatter and parser of the workspace (`built.created_at` in the
//! wire manifest, the Hub's `lastModified`, the engine's `Created`). Calendar arithmetic is
//! Howard Hinnant's days-from-civil and civil-from-days, exact for the proleptic Gregorian
//! calendar.

/// `(year, month, day)` of a day counted from 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days from 1970-01-01 of a civil date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`; with `millis`, `…:SS.000Z` (the Hub's
/// form; the fraction is always zero, the seconds are whole).
pub fn rfc3339(secs: u64, millis: bool) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        if millis { ".000" } else { "" }
    )
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs, false)
}

/// Seconds since the epoch of an RFC 3339 time as the engine writes it
/// (`2026-11-30T06:05:01.123456789Z`, or with a `+01:00` offset); the fraction is dropped.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let time = time.trim_end_matches('Z');
    let (time, offset) = match time.find(['+', '-']) {
        Some(i) => {
            let (t, o) = time.split_at(i);
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (oh, om) = o[1..].split_once(':')?;
            let (oh, om) = (oh.parse::<i64>().ok()?, om.parse::<i64>().ok()?);
            (t, sign * (oh * 3600 + om * 60))
        }
        None => (time, 0),
    };
    let mut t = time.split(':');
    let hh = t.next()?.parse::<i64>().ok()?;
    let mm = t.next()?.parse::<i64>().ok()?;
    let ss = t.next()?.split('.').next()?.parse::<i64>().ok()?;
    Some(days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_back() {
        assert_eq!(rfc3339(0, false), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_764_547_200, true), "2025-12-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, false), "2000-02-29T00:00:00Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-11-30T06:05:01.123456789Z"),
            Some(1_796_018_701)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T07:05:01+01:00"),
            Some(1_796_018_701)
        );
        for secs in [0, 59, 951_782_400, 1_796_018_701, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(secs, false)), Some(secs as i64));
        }
        assert_eq!(parse_rfc3339("not a time"), None);
    }
}
