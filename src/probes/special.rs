//! `BEGIN` and `END`: run once, through their trigger functions, when tracing starts and stops.

use super::{AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};

pub fn parse(provider: &str, rest: &str, span: Span) -> Result<AttachPoint, Diagnostic> {
    let begin = provider.eq_ignore_ascii_case("begin");
    if !rest.is_empty() {
        return Err(Diagnostic::error(span, format!("`{provider}` takes no arguments"))
            .with_help(format!("write just `{provider}`")));
    }
    let (kind, name) = if begin { (ProbeKind::Begin, "BEGIN") } else { (ProbeKind::End, "END") };
    Ok(AttachPoint { kind, name: name.to_string(), span })
}
