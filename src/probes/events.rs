//! `software:EVENT[:PERIOD]` (alias `s:`) and `hardware:EVENT[:PERIOD]` (alias `h:`): perf counters
//! sampled every PERIOD events, on every CPU.

use super::Fields;
use super::{AttachPoint, Options, PerfEvents, Provider};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::perf::{PerfEventSpec, Sample, TYPE_HARDWARE, TYPE_SOFTWARE};
use bpf::ProgType;

/// A perf event sampling on every online CPU (profile, software and hardware probes): opened on each,
/// and reopened on a CPU that comes back from offline or appears later.
#[derive(Debug)]
pub struct OnEveryCpu {
    pub spec: PerfEventSpec,
    /// What a refused perf_event_open adds: another way to the probe, where this machine lacks it.
    pub when_denied: &'static str,
}

impl Provider for OnEveryCpu {
    fn kind(&self) -> &'static str {
        "perf"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::PerfEvent
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn perf_events(&self) -> Option<PerfEvents> {
        Some(PerfEvents { spec: self.spec.clone(), every_cpu: true })
    }

    fn when_perf_denied(&self) -> &'static str {
        self.when_denied
    }

    fn describe(&self) -> String {
        "runs on perf events on every online CPU, revived after hotplug".into()
    }
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let hardware = matches!(written, "hardware" | "h");
    let (spec, name) = parse(hardware, rest, span)?;
    Ok(vec![AttachPoint::new(OnEveryCpu { spec, when_denied: "" }, name, span)])
}

/// (names, perf config, default period), as bpftrace defines them.
pub(crate) const SOFTWARE: &[(&[&str], u64, u64)] = &[
    (&["cpu-clock", "cpu"], 0, 1_000_000),
    (&["task-clock"], 1, 1_000_000),
    (&["page-faults", "faults"], 2, 100),
    (&["context-switches", "cs"], 3, 1_000),
    (&["cpu-migrations"], 4, 1),
    (&["minor-faults"], 5, 100),
    (&["major-faults"], 6, 1),
    (&["alignment-faults"], 7, 1),
    (&["emulation-faults"], 8, 1),
    (&["dummy"], 9, 1),
];

pub(crate) const HARDWARE: &[(&[&str], u64, u64)] = &[
    (&["cpu-cycles", "cycles"], 0, 1_000_000),
    (&["instructions"], 1, 1_000_000),
    (&["cache-references"], 2, 1_000_000),
    (&["cache-misses"], 3, 1_000_000),
    (&["branch-instructions", "branches"], 4, 100_000),
    (&["branch-misses"], 5, 100_000),
    (&["bus-cycles"], 6, 100_000),
    (&["ref-cycles"], 9, 1_000_000),
];

/// The event, and the canonical name.
fn parse(hardware: bool, rest: &str, span: Span) -> Result<(PerfEventSpec, String), Diagnostic> {
    let (provider, table, type_) =
        if hardware { ("hardware", HARDWARE, TYPE_HARDWARE) } else { ("software", SOFTWARE, TYPE_SOFTWARE) };
    let (event, period) = rest.split_once(':').map_or((rest, None), |(e, p)| (e, Some(p)));
    let Some(&(names, config, default_period)) = table.iter().find(|(names, ..)| names.contains(&event))
    else {
        let known: Vec<&str> = table.iter().map(|(names, ..)| names[0]).collect();
        return Err(Diagnostic::error(span, format!("unknown {provider} event `{event}`"))
            .with_help(format!("{provider} events are {}", known.join(", "))));
    };
    let period = match period {
        None => default_period,
        Some(text) => super::numbers::attach_number(text).filter(|&p| p > 0).ok_or_else(|| {
            Diagnostic::error(span, format!("`{text}` is not a positive whole number of events"))
                .with_help(format!("for example `{provider}:{}:{default_period}`", names[0]))
        })?,
    };
    let spec = PerfEventSpec {
        type_,
        config,
        config1: 0,
        config2: 0,
        sample: Sample::Period(period),
        bp_type: 0,
        inherit: false,
    };
    Ok((spec, format!("{provider}:{}:{period}", names[0])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_aliases_and_default_periods() {
        let faults = parse(false, "faults", Span::default()).unwrap();
        assert_eq!(faults.1, "software:page-faults:100");
        let cycles = parse(true, "cycles:5000", Span::default()).unwrap();
        assert!(matches!(
            cycles.0,
            PerfEventSpec { type_: TYPE_HARDWARE, config: 0, sample: Sample::Period(5000), .. }
        ));
        assert!(parse(false, "nothing", Span::default()).unwrap_err().message.contains("`nothing`"));
    }
}
