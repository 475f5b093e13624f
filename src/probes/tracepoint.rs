//! `tracepoint:CATEGORY:NAME` (alias `t:`), wildcards in both parts: the kernel's static tracepoints,
//! with their record fields (`args.FIELD`) read from tracefs `format` files.

use super::{tracefs, wildcard, AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};
use std::sync::Arc;

pub fn parse(rest: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    let Some((category, name)) = rest.split_once(':') else {
        return Err(Diagnostic::error(span, "a tracepoint is named `tracepoint:CATEGORY:NAME`")
            .with_help("list them with `steadytrace -l 'tracepoint:*'`"));
    };
    let root = tracefs::root().map_err(|e| Diagnostic::error(span, e))?;
    let chosen: Vec<(String, String)> = if wildcard::has_wildcard(category) || wildcard::has_wildcard(name) {
        tracefs::tracepoints(&root)
            .into_iter()
            .filter(|(c, n)| wildcard::matches(category, c) && wildcard::matches(name, n))
            .collect()
    } else {
        vec![(category.to_string(), name.to_string())]
    };
    if chosen.is_empty() {
        return Err(Diagnostic::error(span, format!("no tracepoint matches `{category}:{name}`"))
            .with_help("list them with `steadytrace -l 'tracepoint:*'`"));
    }
    chosen
        .into_iter()
        .map(|(category, name)| {
            let format = tracefs::read_format(&root, &category, &name).map_err(|e| {
                Diagnostic::error(span, e)
                    .with_help("list the tracepoints with `steadytrace -l 'tracepoint:*'`")
            })?;
            Ok(AttachPoint {
                kind: ProbeKind::Tracepoint(Arc::new(format)),
                name: format!("tracepoint:{category}:{name}"),
                span,
            })
        })
        .collect()
}
