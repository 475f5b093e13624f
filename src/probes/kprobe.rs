//! `kprobe:FUNCTION[+OFFSET]` and `kretprobe:FUNCTION` (aliases `k:`, `kr:`): kernel functions, through
//! the perf kprobe event source. A wildcard (`kprobe:vfs_*`) is one probe on all matching functions
//! through a kprobe_multi link where the kernel has them, else one probe per matching function.

use super::{tracefs, wildcard, AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};
use std::sync::OnceLock;

/// Where the kernel announces its kprobe event source; absent without CONFIG_KPROBES.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

pub fn parse(retprobe: bool, rest: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    let provider = if retprobe { "kretprobe" } else { "kprobe" };
    if !std::path::Path::new(KPROBE_PMU).exists() {
        return Err(Diagnostic::error(
            span,
            "kprobes are not available on this kernel (CONFIG_KPROBES is not set)",
        )
        .with_help(
            "use a tracepoint or a raw tracepoint instead: `steadytrace -l 'tracepoint:*'` lists them",
        ));
    }
    let (function, offset) = match rest.split_once('+') {
        Some((function, offset)) => {
            let offset = offset
                .parse()
                .map_err(|_| Diagnostic::error(span, format!("`{offset}` is not an offset")))?;
            (function, offset)
        }
        None => (rest, 0),
    };
    if function.is_empty() {
        return Err(Diagnostic::error(span, format!("`{provider}` needs a kernel function"))
            .with_help(format!("for example `{provider}:do_nanosleep`")));
    }
    let functions = if wildcard::has_wildcard(function) {
        if offset != 0 {
            return Err(Diagnostic::error(span, "an offset goes with one function, not a wildcard"));
        }
        let found: Vec<String> =
            probeable_functions().into_iter().filter(|f| wildcard::matches(function, f)).collect();
        if found.is_empty() {
            return Err(Diagnostic::error(span, format!("no kernel function matches `{function}`")));
        }
        if multi_link() {
            return Ok(vec![AttachPoint {
                name: format!("{provider}:{function}"),
                kind: ProbeKind::KprobeMulti { functions: found.into(), retprobe },
                span,
            }]);
        }
        found
    } else {
        vec![function.to_string()]
    };
    // One probe (and one perf kprobe event) per function.
    Ok(functions
        .into_iter()
        .map(|function| AttachPoint {
            name: format!("{provider}:{function}"),
            kind: ProbeKind::Kprobe { function, offset, retprobe },
            span,
        })
        .collect())
}

/// The points with each kprobe_multi point replaced by one probe per function, for a probe that needs a
/// value per function fixed at compile time: `probe`, or `func` as a string.
pub fn per_function(points: Vec<AttachPoint>) -> Vec<AttachPoint> {
    points
        .into_iter()
        .flat_map(|point| match &point.kind {
            ProbeKind::KprobeMulti { functions, retprobe } => {
                let provider = if *retprobe { "kretprobe" } else { "kprobe" };
                functions
                    .iter()
                    .map(|function| AttachPoint {
                        name: format!("{provider}:{function}"),
                        kind: ProbeKind::Kprobe {
                            function: function.clone(),
                            offset: 0,
                            retprobe: *retprobe,
                        },
                        span: point.span,
                    })
                    .collect()
            }
            _ => vec![point],
        })
        .collect()
}

/// Whether wildcards attach through kprobe_multi links: where the kernel has them (asked once).
/// `STEADYTRACE_KPROBE_ATTACH=perf` takes the perf kprobe path on any kernel, so that tests cover it.
fn multi_link() -> bool {
    static MULTI: OnceLock<bool> = OnceLock::new();
    *MULTI.get_or_init(|| {
        let forced_perf = std::env::var("STEADYTRACE_KPROBE_ATTACH").is_ok_and(|v| v == "perf");
        !forced_perf && bpf::kprobe::multi_supported()
    })
}

/// The kernel functions kprobes can be put on: tracefs's `available_filter_functions` where it can be
/// read, else the text symbols of `/proc/kallsyms` (some of which the kernel may refuse at attach).
fn probeable_functions() -> Vec<String> {
    let listed = tracefs::root()
        .ok()
        .and_then(|root| std::fs::read_to_string(root.join("available_filter_functions")).ok());
    let mut functions: Vec<String> = match listed {
        Some(text) => text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect(),
        None => std::fs::read_to_string("/proc/kallsyms")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                let (_address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
                // Module symbols carry a `[module]` field; both are fine.
                matches!(kind, "t" | "T").then(|| name.to_string())
            })
            .collect(),
    };
    functions.sort();
    functions.dedup();
    functions
}
