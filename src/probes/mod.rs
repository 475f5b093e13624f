//! Probe providers: each module reads its own attach points (`interval:ms:10`, `BEGIN`) and knows
//! how its programs are attached. Adding a probe type means adding a module here.

pub mod btf;
pub mod elf;
pub mod events;
pub mod interval;
pub mod kprobe;
pub mod listing;
pub mod profile;
pub mod rawtracepoint;
pub mod regs;
pub mod special;
pub mod tracefs;
pub mod tracepoint;
pub mod trigger;
pub mod uprobe;
pub mod wildcard;

use crate::lang::{Diagnostic, Span};
use bpf::perf::PerfEventSpec;
use std::path::PathBuf;
use std::sync::Arc;
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
    Tracepoint(Arc<tracefs::Format>),
    RawTracepoint {
        name: String,
    },
    /// A function at `offset` in the file `path` (`function` names it, for `func` and `probe`).
    Uprobe {
        path: PathBuf,
        offset: u64,
        retprobe: bool,
        function: String,
    },
    /// Functions of the file `path` matching a wildcard, all attached through one uprobe_multi link;
    /// the link's cookie of each offset is its index in `functions`.
    UprobeMulti {
        path: PathBuf,
        functions: Arc<[String]>,
        offsets: Arc<[u64]>,
        retprobe: bool,
    },
    Kprobe {
        function: String,
        offset: u64,
        retprobe: bool,
    },
    /// Kernel functions matching a wildcard, all attached through one kprobe_multi link.
    KprobeMulti {
        functions: Arc<[String]>,
        retprobe: bool,
    },
}

impl ProbeKind {
    /// Whether the probe has function arguments (`arg0`..) in a `pt_regs` context.
    pub fn has_registers(&self) -> bool {
        matches!(
            self,
            ProbeKind::Uprobe { .. }
                | ProbeKind::UprobeMulti { .. }
                | ProbeKind::Kprobe { .. }
                | ProbeKind::KprobeMulti { .. }
        )
    }

    /// Whether `retval` is defined: return probes.
    pub fn is_return(&self) -> bool {
        matches!(
            self,
            ProbeKind::Uprobe { retprobe: true, .. }
                | ProbeKind::UprobeMulti { retprobe: true, .. }
                | ProbeKind::Kprobe { retprobe: true, .. }
                | ProbeKind::KprobeMulti { retprobe: true, .. }
        )
    }
}

/// The points with each point on many functions (a kprobe_multi or uprobe_multi link) replaced by
/// one point per function, for a probe that needs a value per function fixed at compile time:
/// `probe`, or `func` as a string.
pub fn per_function(points: Vec<AttachPoint>) -> Vec<AttachPoint> {
    uprobe::per_function(kprobe::per_function(points))
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

/// Reads one attach point; with wildcards it may stand for several.
pub fn resolve(text: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    let (provider, rest) = text.split_once(':').unwrap_or((text, ""));
    let one = |point: Result<AttachPoint, Diagnostic>| point.map(|p| vec![p]);
    match provider {
        "BEGIN" | "begin" | "END" | "end" => one(special::parse(provider, rest, span)),
        "interval" | "i" => one(interval::parse(rest, span)),
        "profile" | "p" => one(profile::parse(rest, span)),
        "software" | "s" => one(events::parse(false, rest, span)),
        "hardware" | "h" => one(events::parse(true, rest, span)),
        "tracepoint" | "t" => tracepoint::parse(rest, span),
        "rawtracepoint" | "rt" => rawtracepoint::parse(rest, span),
        "uprobe" | "u" => uprobe::parse(false, rest, span),
        "uretprobe" | "ur" => uprobe::parse(true, rest, span),
        "kprobe" | "k" => kprobe::parse(false, rest, span),
        "kretprobe" | "kr" => kprobe::parse(true, rest, span),
        "usdt" | "U" | "kfunc" | "fentry" | "kretfunc" | "fexit" | "watchpoint" | "w" | "asyncwatchpoint"
        | "iter" => Err(Diagnostic::error(span, format!("`{provider}` probes are not supported yet"))
            .with_help("steadytrace has BEGIN, END, interval, profile, software, hardware, tracepoint, rawtracepoint, uprobe, uretprobe, kprobe and kretprobe probes")),
        _ => Err(Diagnostic::error(span, format!("unknown probe type `{provider}`"))
            .with_help("probes look like `BEGIN`, `END` or `interval:s:1`")),
    }
}
