//! `interval:UNIT:N` (alias `i:`; also `interval:Nms`): a probe served by steadytrace's timer thread,
//! so that no CPU going offline can stop it; with `--interval-engine perf`, by a CPU-clock perf event on
//! one CPU, as bpftrace does (moved to another CPU when its CPU goes offline).

use super::Fields;
use super::{AttachPoint, IntervalEngine, Options, PerfEvents, Provider, Schedule};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::perf::{PerfEventSpec, Sample, SW_CPU_CLOCK, TYPE_SOFTWARE};
use bpf::ProgType;
use std::time::Duration;

const HELP: &str = "write `interval:UNIT:N` with UNIT one of s, ms, us, hz (for example `interval:ms:100`)";

#[derive(Debug)]
pub struct Interval {
    pub period: Duration,
    engine: IntervalEngine,
}

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let (period, name) = parse(rest, span)?;
    Ok(vec![AttachPoint::new(Interval { period, engine: options.interval_engine }, name, span)])
}

/// The period, and the canonical name.
fn parse(rest: &str, span: Span) -> Result<(Duration, String), Diagnostic> {
    let (unit, count) = match rest.split_once(':') {
        Some((unit, count)) => (unit, count),
        // `interval:100ms` is the same as `interval:ms:100` (and `interval:1_000ms`, `interval:1e3ms`).
        None => match ["ms", "us", "hz", "s"]
            .iter()
            .find(|u| rest.strip_suffix(**u).is_some_and(|n| !n.is_empty()))
        {
            Some(unit) => (*unit, &rest[..rest.len() - unit.len()]),
            None => {
                let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                (&rest[digits..], &rest[..digits])
            }
        },
    };
    let count = super::numbers::attach_number(count).ok_or_else(|| {
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
    Ok((period, format!("interval:{unit}:{count}")))
}

impl Provider for Interval {
    fn fires_in_steadytrace(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "interval"
    }

    fn schedule(&self) -> Schedule {
        match self.engine {
            IntervalEngine::Timer => Schedule::Every(self.period),
            IntervalEngine::Perf => Schedule::Kernel,
        }
    }

    /// Run on request from the timer thread (a raw tracepoint program never attached), or a perf event's.
    fn prog_type(&self) -> ProgType {
        match self.engine {
            IntervalEngine::Timer => ProgType::RawTracepoint,
            IntervalEngine::Perf => ProgType::PerfEvent,
        }
    }

    fn checks_exit_flag(&self) -> bool {
        true
    }

    fn perf_events(&self) -> Option<PerfEvents> {
        (self.engine == IntervalEngine::Perf).then_some(PerfEvents {
            spec: PerfEventSpec {
                type_: TYPE_SOFTWARE,
                config: SW_CPU_CLOCK,
                config1: 0,
                config2: 0,
                sample: Sample::Period(self.period.as_nanos() as u64),
                bp_type: 0,
                inherit: false,
            },
            every_cpu: false,
        })
    }

    fn describe(&self) -> String {
        match self.engine {
            IntervalEngine::Timer => "is run by steadytrace".into(),
            IntervalEngine::Perf => {
                "runs on a CPU-clock perf event on one CPU, moved when that CPU goes offline".into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(text: &str) -> Duration {
        parse(text, Span::default()).unwrap().0
    }

    #[test]
    fn reads_every_unit_and_both_spellings() {
        assert_eq!(period("s:3"), Duration::from_secs(3));
        assert_eq!(period("ms:20"), Duration::from_millis(20));
        assert_eq!(period("us:500"), Duration::from_micros(500));
        assert_eq!(period("hz:100"), Duration::from_millis(10));
        assert_eq!(period("100ms"), Duration::from_millis(100));
        assert_eq!(parse("100ms", Span::default()).unwrap().1, "interval:ms:100");
        assert_eq!(period("1_000ms"), Duration::from_secs(1));
        assert_eq!(period("1e3us"), Duration::from_millis(1));
        assert_eq!(period("ms:1_000"), Duration::from_secs(1));
        assert_eq!(period("2s"), Duration::from_secs(2));
    }

    #[test]
    fn rejects_zero_and_unknown_units() {
        assert!(parse("ms:0", Span::default()).is_err());
        assert!(parse("min:1", Span::default()).unwrap_err().message.contains("`min`"));
    }

    #[test]
    fn the_engine_decides_who_fires_it() {
        let timer = Interval { period: Duration::from_millis(10), engine: IntervalEngine::Timer };
        assert_eq!(timer.schedule(), Schedule::Every(Duration::from_millis(10)));
        assert!(timer.perf_events().is_none());
        let perf = Interval { engine: IntervalEngine::Perf, ..timer };
        assert_eq!(perf.schedule(), Schedule::Kernel);
        assert_eq!(perf.perf_events().unwrap().spec.sample, Sample::Period(10_000_000));
    }
}
