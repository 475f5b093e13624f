//! `interval:UNIT:N` (alias `i:`; also `interval:Nms`): a probe served by steadytrace's timer thread,
//! so that no CPU going offline can stop it.

use super::{AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};
use std::time::Duration;

const HELP: &str = "write `interval:UNIT:N` with UNIT one of s, ms, us, hz (for example `interval:ms:100`)";

pub fn parse(rest: &str, span: Span) -> Result<AttachPoint, Diagnostic> {
    let (unit, count) = match rest.split_once(':') {
        Some((unit, count)) => (unit, count),
        // `interval:100ms` is the same as `interval:ms:100`.
        None => {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            (&rest[digits..], &rest[..digits])
        }
    };
    let count: u64 = count.parse().map_err(|_| {
        Diagnostic::error(span, format!("`{count}` is not a whole number of intervals")).with_help(HELP)
    })?;
    if count == 0 {
        return Err(Diagnostic::error(span, "an interval must be longer than zero").with_help(HELP));
    }
    let period = match unit {
        "s" => Duration::from_secs(count),
        "ms" => Duration::from_millis(count),
        "us" => Duration::from_micros(count),
        "hz" => Duration::from_nanos(1_000_000_000 / count),
        _ => return Err(Diagnostic::error(span, format!("unknown interval unit `{unit}`")).with_help(HELP)),
    };
    // Longer than a year is a mistake, and would overflow nanosecond deadlines.
    if period > Duration::from_secs(366 * 24 * 3600) {
        return Err(Diagnostic::error(span, "an interval can be at most a year").with_help(HELP));
    }
    if period.is_zero() {
        return Err(Diagnostic::error(span, "at most 1000000000 hz").with_help(HELP));
    }
    Ok(AttachPoint { kind: ProbeKind::Interval { period }, name: format!("interval:{unit}:{count}"), span })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(text: &str) -> Duration {
        match parse(text, Span::default()).unwrap().kind {
            ProbeKind::Interval { period, .. } => period,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_every_unit_and_both_spellings() {
        assert_eq!(period("s:3"), Duration::from_secs(3));
        assert_eq!(period("ms:20"), Duration::from_millis(20));
        assert_eq!(period("us:500"), Duration::from_micros(500));
        assert_eq!(period("hz:100"), Duration::from_millis(10));
        assert_eq!(period("100ms"), Duration::from_millis(100));
    }

    #[test]
    fn rejects_zero_and_unknown_units() {
        assert!(parse("ms:0", Span::default()).is_err());
        assert!(parse("min:1", Span::default()).unwrap_err().message.contains("`min`"));
    }
}
