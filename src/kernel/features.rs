//! The kernel features of [`bpf::features`] as a script sees them: what steadytrace does on a kernel
//! without each one, and the error for a construct that has no way around a missing one.

use crate::lang::{Diagnostic, Span};
use bpf::features::{self, Feature, Features};

/// The environment variable naming features to take as absent (comma-separated keys of `--info`, or
/// `all`): how the fallbacks are tested and measured on a kernel that does not need them.
pub const ASSUME_ABSENT_VAR: &str = "STEADYTRACE_KERNEL_WITHOUT";

/// The environment variable giving the whole feature table instead of probing the kernel: the features
/// present (comma-separated keys of `--info`, `all`, or `none`), every other one absent. The golden corpus
/// of emitted programs compiles with it, so that its programs do not depend on the machine nor on privilege.
pub const GIVEN_VAR: &str = "STEADYTRACE_KERNEL_FEATURES";

/// The run's features: the running kernel's, less [`ASSUME_ABSENT_VAR`]'s and `absent` (`--no-feature`), or
/// [`GIVEN_VAR`]'s table (less the features taken as absent); an unknown name is an error naming the known ones.
pub fn from_env(absent: &[Feature]) -> Result<Features, String> {
    let mut absent = absent.to_vec();
    if let Ok(list) = std::env::var(ASSUME_ABSENT_VAR) {
        absent.extend(feature_list(ASSUME_ABSENT_VAR, &list)?);
    }
    let mut features = Features::assuming_absent(absent);
    if let Ok(list) = std::env::var(GIVEN_VAR) {
        features = features.given(&feature_list(GIVEN_VAR, &list)?);
    }
    Ok(features)
}

/// The features a variable lists: keys, `all`, or `none`.
fn feature_list(variable: &str, list: &str) -> Result<Vec<Feature>, String> {
    let mut named = vec![];
    for key in list.split(',').map(str::trim).filter(|k| !k.is_empty() && *k != "none") {
        if key == "all" {
            named.extend_from_slice(Feature::ALL);
            continue;
        }
        let feature = features::by_key(key).ok_or_else(|| {
            let known: Vec<&str> = Feature::ALL.iter().map(|f| f.key()).collect();
            format!("steadytrace: {variable}: no kernel feature `{key}` (known: {})\n", known.join(", "))
        })?;
        named.push(feature);
    }
    Ok(named)
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
        Feature::KprobeSession => "a kprobe and a kretprobe of one function are two programs, attached apart",
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
        Feature::TimerCpuPin => {
            "where perf_event_open is refused (rootless containers), profile probes are refused instead of running on BPF timers"
        }
        Feature::Cmpxchg => "a min()/max() map read in expressions without per-CPU lookups is refused",
        Feature::TaskPtRegs => "dw_ustack finds the user registers at the top of the task's kernel stack",
        Feature::WriteUser => "write_user() is refused",
        Feature::OverrideReturn => "override() is refused",
    }
}

/// The running kernel's release, as `uname -r` prints it.
pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |r| r.trim().into())
}

/// The error for `construct` (at `span`), which needs `feature` and has no way around it here.
pub fn needs(features: &Features, feature: Feature, construct: &str, span: Span) -> Diagnostic {
    let assumed = if features.assumed_absent(feature) {
        format!(", taken as without it (--no-feature or {ASSUME_ABSENT_VAR})")
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
