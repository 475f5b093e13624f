//! `kprobe:FUNCTION[+OFFSET]` and `kretprobe:FUNCTION` (aliases `k:`, `kr:`): kernel functions, through
//! the perf kprobe event source.

use super::{AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};

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
    if function.is_empty() || function.contains('*') {
        return Err(Diagnostic::error(
            span,
            format!("`{provider}` needs one kernel function, without wildcards"),
        )
        .with_help(format!("for example `{provider}:do_nanosleep`")));
    }
    Ok(vec![AttachPoint {
        kind: ProbeKind::Kprobe { function: function.to_string(), offset, retprobe },
        name: format!("{provider}:{function}"),
        span,
    }])
}
