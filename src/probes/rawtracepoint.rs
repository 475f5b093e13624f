//! `rawtracepoint:NAME` (alias `rt:`): a tracepoint's raw arguments (`arg0`..), without the record
//! the classic tracepoint builds; attached by name, with no perf event.

use super::{AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};

pub fn parse(rest: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    // `rawtracepoint:sched:sched_switch` and `rawtracepoint:sched_switch` name the same one.
    let name = rest.rsplit(':').next().unwrap_or(rest);
    if name.is_empty() || name.contains('*') {
        return Err(Diagnostic::error(
            span,
            "a raw tracepoint is named `rawtracepoint:NAME`, without wildcards",
        )
        .with_help("for example `rawtracepoint:sched_switch`"));
    }
    Ok(vec![AttachPoint {
        kind: ProbeKind::RawTracepoint { name: name.to_string() },
        name: format!("rawtracepoint:{name}"),
        span,
    }])
}
