//! The kernel features of [`bpf::features`] as a script sees them: what steadytrace does on a kernel
//! without each one, and the error for a construct that has no way around a missing one.

use crate::lang::{Diagnostic, Span};
use bpf::features::{self, Feature};

/// The environment variable naming features to take as absent (comma-separated keys of `--info`, or
/// `all`): how the fallbacks are tested and measured on a kernel that does not need them.
pub const ASSUME_ABSENT_VAR: &str = "STEADYTRACE_KERNEL_WITHOUT";

/// Applies [`ASSUME_ABSENT_VAR`]; an unknown name is an error naming the known ones.
pub fn assume_absent_from_env() -> Result<(), String> {
    let Ok(list) = std::env::var(ASSUME_ABSENT_VAR) else { return Ok(()) };
    let mut absent = vec![];
    for key in list.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if key == "all" {
            absent.extend_from_slice(Feature::ALL);
            continue;
        }
        let feature = features::by_key(key).ok_or_else(|| {
            let known: Vec<&str> = Feature::ALL.iter().map(|f| f.key()).collect();
            format!(
                "steadytrace: {ASSUME_ABSENT_VAR}: no kernel feature `{key}` (known: {})\n",
                known.join(", ")
            )
        })?;
        absent.push(feature);
    }
    features::assume_absent(absent);
    Ok(())
}

/// What steadytrace does where the kernel lacks `feature`.
pub fn without(feature: Feature) -> &'static str {
    match feature {
        Feature::RingBuffer => "steadytrace cannot run: every probe prints through one",
        Feature::RawTracepoint => "rawtracepoint probes, and syscall tracepoints in containers, are refused",
        Feature::RunOnRequest => "BEGIN, END and interval probes run through the trigger uprobe",
        Feature::TpBtf => "rawtracepoint probes with typed args are refused",
        Feature::Fentry => "fentry/fexit probes are refused",
        Feature::KprobeMulti => "a kprobe wildcard opens one perf kprobe event per function",
        Feature::UprobeMulti => "uprobes are perf uprobe events, one per function",
        Feature::BpfLoop => "range loops run as bounded loops; strcontains() and strstr() search in a loop, for short strings",
        Feature::ForEachMapElem => "`for` over a map and len() of a map are refused",
        Feature::PercpuLookup => {
            "count/sum/avg/min/max maps read in expressions are shared maps updated atomically (min/max from 5.12)"
        }
        Feature::GetFuncIp => "only kprobe_multi links (Linux 5.18) need it, for `func`",
        Feature::AttachCookie => "only uprobe_multi and kprobe_multi links need it, for `func`",
        Feature::NsPid => "inside a pid namespace, pid and tid are the initial namespace's numbers",
        Feature::DPath => "path() is refused",
        Feature::PerCpuPtr => "percpu_kaddr() is refused",
        Feature::BootNs => "nsecs(boot) is refused",
        Feature::TaiNs => "nsecs(tai) is refused",
        Feature::BpfTimer => "the timer benchmark's bpf-timer engine reports that it cannot run",
        Feature::Cmpxchg => "a min()/max() map read in expressions without per-CPU lookups is refused",
    }
}

/// The running kernel's release, as `uname -r` prints it.
pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |r| r.trim().into())
}

/// The error for `construct` (at `span`), which needs `feature` and has no way around it here.
pub fn needs(feature: Feature, construct: &str, span: Span) -> Diagnostic {
    let assumed = if features::assumed_absent(feature) {
        format!(", taken as without it ({ASSUME_ABSENT_VAR})")
    } else {
        String::new()
    };
    Diagnostic::error(
        span,
        format!(
            "{construct} needs {} (Linux {}); this kernel is {}{assumed}",
            feature.what(),
            feature.since(),
            release()
        ),
    )
    .with_help(format!("run it on Linux {} or later", feature.since()))
}
