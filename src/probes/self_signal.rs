//! `self:signal:SIGUSR1`: run by steadytrace when it receives SIGUSR1 (`kill -USR1 PID`), as in current
//! bpftrace: a script can be asked to print or reset its maps while it traces.

use super::Fields;
use super::{AttachPoint, Options, Provider, Schedule};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::ProgType;

#[derive(Debug)]
pub struct SelfSignal;

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let rest: &str = rest;
    match rest.split_once(':') {
        Some(("signal", "SIGUSR1")) => Ok(vec![AttachPoint::new(SelfSignal, "self:signal:SIGUSR1".into(), span)]),
        Some(("signal", other)) => Err(Diagnostic::error(span, format!("`{other}` is not a signal `self` probes take"))
            .with_help("write `self:signal:SIGUSR1`: the other signals keep their meaning (SIGINT and SIGTERM stop the trace)")),
        _ => Err(Diagnostic::error(span, format!("`self:{rest}` is not an event of steadytrace's own"))
            .with_help("write `self:signal:SIGUSR1`, run when steadytrace receives SIGUSR1")),
    }
}

impl Provider for SelfSignal {
    fn fires_in_steadytrace(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "self"
    }

    fn schedule(&self) -> Schedule {
        Schedule::Signal
    }

    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn checks_exit_flag(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        "is run by steadytrace when it receives SIGUSR1".into()
    }
}
