//! `rawtracepoint:NAME` (alias `rt:`): a tracepoint's raw arguments (`arg0`.., or `args.NAME` as the
//! kernel's BTF names them), without the record the classic tracepoint builds; attached by name, with
//! no perf event.

use super::Fields;
use super::{Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context, Options, Provider};
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::perf::attach_raw_tracepoint;
use bpf::ProgType;
use std::os::fd::BorrowedFd;

#[derive(Debug)]
pub struct RawTracepoint {
    name: String,
    /// Written as `tracepoint:CATEGORY:NAME` where tracefs cannot be read (a rootless container).
    for_tracepoint: bool,
}

impl RawTracepoint {
    /// The raw tracepoint serving `tracepoint:CATEGORY:NAME` without tracefs: the same event, its `args`
    /// the arguments of the tracepoint rather than the fields of the record tracefs would describe.
    pub fn for_tracepoint(name: &str) -> RawTracepoint {
        RawTracepoint { name: name.to_string(), for_tracepoint: true }
    }
}

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    _: &Options,
    _: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    // `rawtracepoint:sched:sched_switch` and `rawtracepoint:sched_switch` name the same one.
    let name = rest.rsplit(':').next().unwrap_or(rest);
    if name.is_empty() || name.contains('*') {
        return Err(Diagnostic::error(
            span,
            "a raw tracepoint is named `rawtracepoint:NAME`, without wildcards",
        )
        .with_help("for example `rawtracepoint:sched_switch`"));
    }
    let point = RawTracepoint { name: name.to_string(), for_tracepoint: false };
    Ok(vec![AttachPoint::new(point, format!("rawtracepoint:{name}"), span)])
}

impl Provider for RawTracepoint {
    fn kind(&self) -> &'static str {
        "rawtracepoint"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(&self.name))
    }

    fn context(&self) -> Context {
        Context { arguments: Some(Arguments::RawArray), ..Context::default() }
    }

    fn fields(&self, kernel: &Vmlinux) -> Option<Result<Vec<crate::kernel::tracefs::Field>, String>> {
        Some(kernel.raw_tracepoint_args(&self.name))
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let name = &self.name;
        let link = attach_raw_tracepoint(program, name).map_err(|error| match error.raw_os_error() {
            Some(libc::ENOENT) => AttachError::Explained(format!(
                "there is no raw tracepoint `{name}` (`steadytrace -l 'tracepoint:*'` lists the tracepoints)"
            )),
            Some(libc::EINVAL) => AttachError::Explained(format!(
                "cannot attach `rawtracepoint:{name}`: the probe reads an argument (argN) the tracepoint does not have"
            )),
            _ => AttachError::Os { what: format!("cannot attach `rawtracepoint:{name}`"), error },
        })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        match self.for_tracepoint {
            true => format!("runs on raw tracepoint `{}`: tracefs cannot be read here", self.name),
            false => "runs on a raw tracepoint".into(),
        }
    }

    fn missing_field_help(&self) -> Option<String> {
        self.for_tracepoint.then(|| {
            "without tracefs (a rootless container) a tracepoint's `args` are the arguments its raw tracepoint \
             passes, not the fields of the record tracefs describes"
                .to_string()
        })
    }
}
