//! `tracepoint:CATEGORY:NAME` (alias `t:`), wildcards in both parts: the kernel's static tracepoints,
//! with their record fields (`args.FIELD`) read from tracefs `format` files.

use super::{tracefs, wildcard, AttachError, AttachPoint, AttachTarget, Attachment, Options, Provider};
use crate::lang::{Diagnostic, Span};
use bpf::perf::{attach_trace_event, TraceEvent};
use bpf::ProgType;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

pub fn resolve(_: &str, rest: &str, span: Span, _: &Options) -> Result<Vec<AttachPoint>, Diagnostic> {
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
            let point = Tracepoint { format: Arc::new(format) };
            Ok(AttachPoint::new(point, format!("tracepoint:{category}:{name}"), span))
        })
        .collect()
}

#[derive(Debug)]
pub struct Tracepoint {
    format: Arc<tracefs::Format>,
}

impl Provider for Tracepoint {
    fn kind(&self) -> &'static str {
        "tracepoint"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Tracepoint
    }

    fn fields(&self) -> Option<Result<Vec<tracefs::Field>, String>> {
        Some(Ok(self.format.fields.clone()))
    }

    fn fields_point_to_user(&self) -> bool {
        self.format.category == "syscalls"
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    /// On one perf event: the kernel runs a trace event's programs on whatever CPU it fires.
    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let event = TraceEvent::Tracepoint { id: self.format.id.into() };
        let perf = attach_trace_event(program, event, target.cpu).map_err(|error| AttachError::Os {
            what: format!("cannot attach `tracepoint:{}:{}`", self.format.category, self.format.name),
            error,
        })?;
        Ok(Some(Attachment::new(perf)))
    }

    fn describe(&self) -> String {
        "runs on a tracepoint perf event".into()
    }
}
