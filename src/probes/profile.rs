//! `profile:{hz,s,ms,us}:N` (alias `p:`): a CPU-clock timer sampling on every CPU: a perf event, or where
//! perf events are refused, a BPF timer (`profile_timer.rs`).

use super::events::OnEveryCpu;
use super::profile_timer::{self, Engine};
use super::Fields;
use super::{AttachPoint, Options};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::perf::{PerfEventSpec, Sample, SW_CPU_CLOCK, TYPE_SOFTWARE};

const HELP: &str = "write `profile:UNIT:N` with UNIT one of hz, s, ms, us (for example `profile:hz:99`)";

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let (spec, name) = parse(rest, span)?;
    match profile_timer::chosen(&kernel.features) {
        (Engine::Timer, reason) => {
            Ok(vec![profile_timer::point(period_ns(spec.sample), reason, name, span, kernel)?])
        }
        (Engine::Perf, _) => {
            let when_denied = profile_timer::when_perf_denied(&kernel.features);
            Ok(vec![AttachPoint::new(OnEveryCpu { spec, when_denied }, name, span)])
        }
    }
}

/// The period between samples.
fn period_ns(sample: Sample) -> u64 {
    match sample {
        Sample::Frequency(hz) => 1_000_000_000 / hz.max(1),
        Sample::Period(ns) => ns,
    }
}

/// The event, and the canonical name.
fn parse(rest: &str, span: Span) -> Result<(PerfEventSpec, String), Diagnostic> {
    let (unit, count) = rest.split_once(':').unwrap_or((rest, ""));
    let count = super::numbers::attach_number(count).filter(|&n| n > 0).ok_or_else(|| {
        Diagnostic::error(span, format!("`{count}` is not a positive whole number")).with_help(HELP)
    })?;
    let too_long = || Diagnostic::error(span, format!("`{count}` is too long a period")).with_help(HELP);
    let sample = match unit {
        "hz" => Sample::Frequency(count),
        "s" => Sample::Period(count.checked_mul(1_000_000_000).ok_or_else(too_long)?),
        "ms" => Sample::Period(count.checked_mul(1_000_000).ok_or_else(too_long)?),
        "us" => Sample::Period(count.checked_mul(1_000).ok_or_else(too_long)?),
        _ => return Err(Diagnostic::error(span, format!("unknown profile unit `{unit}`")).with_help(HELP)),
    };
    let spec = PerfEventSpec {
        type_: TYPE_SOFTWARE,
        config: SW_CPU_CLOCK,
        config1: 0,
        config2: 0,
        sample,
        bp_type: 0,
        inherit: false,
    };
    Ok((spec, format!("profile:{unit}:{count}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_frequencies_and_periods() {
        let hz = parse("hz:99", Span::default()).unwrap();
        assert_eq!(hz.0.sample, Sample::Frequency(99));
        assert_eq!(hz.1, "profile:hz:99");
        let ms = parse("ms:10", Span::default()).unwrap();
        assert_eq!(ms.0.sample, Sample::Period(10_000_000));
        assert!(parse("min:1", Span::default()).is_err());
        assert!(parse("hz:0", Span::default()).is_err());
    }

    #[test]
    fn frequencies_are_periods_for_timers() {
        assert_eq!(period_ns(Sample::Frequency(99)), 10_101_010);
        assert_eq!(period_ns(Sample::Period(1_000_000)), 1_000_000);
    }
}
