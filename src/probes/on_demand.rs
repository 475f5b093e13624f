//! `test:NAME` and `bench:NAME`: probes that run only when steadytrace is asked to run them (`--test`,
//! `--bench`), each on its own, through `BPF_PROG_TEST_RUN`. A test passes when its program returns 0;
//! a benchmark is timed over many runs.

use super::Fields;
use super::{AttachPoint, Options, Provider, Schedule};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::ProgType;

#[derive(Debug)]
pub struct OnDemand {
    bench: bool,
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let rest: &str = rest;
    let bench = written == "bench";
    if rest.is_empty() {
        return Err(Diagnostic::error(span, format!("{written} probes must have a name"))
            .with_help(format!("write `{written}:NAME`, e.g. `{written}:lookup`")));
    }
    if !rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Diagnostic::error(span, format!("`{rest}` is not a name for a {written} probe"))
            .with_help("a name is made of letters, digits and `_`"));
    }
    Ok(vec![AttachPoint::new(OnDemand { bench }, format!("{written}:{rest}"), span)])
}

impl Provider for OnDemand {
    fn fires_in_steadytrace(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        if self.bench {
            "bench"
        } else {
            "test"
        }
    }

    fn schedule(&self) -> Schedule {
        if self.bench {
            Schedule::Bench
        } else {
            Schedule::Test
        }
    }

    /// Run on request (`BPF_PROG_TEST_RUN`), which hands back the program's return value.
    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn describe(&self) -> String {
        if self.bench {
            "is run by --bench".into()
        } else {
            "is run by --test".into()
        }
    }
}
