//! `BEGIN` and `END`: run once by steadytrace itself, when tracing starts and when it stops.

use super::Fields;
use super::{AttachPoint, Options, Provider, Schedule};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::ProgType;

#[derive(Debug)]
pub struct Special {
    begin: bool,
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    if !rest.is_empty() {
        return Err(Diagnostic::error(span, format!("`{written}` takes no arguments"))
            .with_help(format!("write just `{written}`")));
    }
    let begin = written.eq_ignore_ascii_case("begin");
    let name = if begin { "BEGIN" } else { "END" };
    Ok(vec![AttachPoint::new(Special { begin }, name.to_string(), span)])
}

impl Provider for Special {
    fn fires_in_steadytrace(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        if self.begin {
            "BEGIN"
        } else {
            "END"
        }
    }

    fn schedule(&self) -> Schedule {
        if self.begin {
            Schedule::Begin
        } else {
            Schedule::End
        }
    }

    /// Run on request (`BPF_PROG_TEST_RUN`), or loaded as a uprobe program behind the trigger.
    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn checks_exit_flag(&self) -> bool {
        self.begin
    }

    fn describe(&self) -> String {
        "is run by steadytrace".into()
    }
}
