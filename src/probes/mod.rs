//! Probe providers: each module reads its own attach points (`interval:ms:10`, `BEGIN`) and knows
//! how its programs are attached. Adding a probe type means adding a module here.

pub mod events;
pub mod interval;
pub mod profile;
pub mod special;
pub mod trigger;

use crate::lang::{Diagnostic, Span};
use bpf::perf::PerfEventSpec;
use std::time::Duration;

/// A resolved attach point: what fires the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachPoint {
    pub kind: ProbeKind,
    /// The canonical name, as the `probe` builtin gives it (`interval:ms:10` for `i:ms:10`).
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    Begin,
    End,
    /// Served by the timer thread (or, with `--interval-engine perf`, by a perf event on one CPU).
    Interval {
        period: Duration,
    },
    /// A perf event opened on every online CPU: profile, software and hardware probes.
    PerCpu(PerfEventSpec),
}

/// What fires interval probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IntervalEngine {
    /// steadytrace's timer thread (the default): no CPU to lose, no perf_event_open.
    #[default]
    Timer,
    /// A CPU-clock perf event on one CPU, as bpftrace does, moved to another CPU when its CPU goes away.
    Perf,
}

/// Reads one attach point.
pub fn resolve(text: &str, span: Span) -> Result<AttachPoint, Diagnostic> {
    let (provider, rest) = text.split_once(':').unwrap_or((text, ""));
    match provider {
        "BEGIN" | "begin" | "END" | "end" => special::parse(provider, rest, span),
        "interval" | "i" => interval::parse(rest, span),
        "profile" | "p" => profile::parse(rest, span),
        "software" | "s" => events::parse(false, rest, span),
        "hardware" | "h" => events::parse(true, rest, span),
        "tracepoint" | "t" | "rawtracepoint" | "rt" | "uprobe" | "u" | "uretprobe" | "ur" | "kprobe"
        | "k" | "kretprobe" | "kr" | "usdt" | "U" | "kfunc" | "fentry" | "kretfunc" | "fexit"
        | "watchpoint" | "w" | "asyncwatchpoint" | "iter" => {
            Err(Diagnostic::error(span, format!("`{provider}` probes are not supported yet")).with_help(
                "this version supports BEGIN, END, interval, profile, software and hardware probes",
            ))
        }
        _ => Err(Diagnostic::error(span, format!("unknown probe type `{provider}`"))
            .with_help("probes look like `BEGIN`, `END` or `interval:s:1`")),
    }
}
