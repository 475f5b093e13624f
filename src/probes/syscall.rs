//! `tracepoint:syscalls:sys_enter_NAME` and `sys_exit_NAME` served without `perf_event_open`: the
//! program hangs on the raw tracepoint `raw_syscalls:sys_enter` (or `sys_exit`), which fires for every
//! system call, and does nothing unless the call is NAME. Its record fields (`args.NAME`) are read
//! where the classic tracepoint takes them from: the arguments from the saved registers (the raw
//! tracepoint's first argument points at them), `ret` from its second argument, so a script sees the
//! same values either way.
//!
//! Chosen at resolve time when perf_event_open is not allowed (a container's seccomp profile,
//! `kernel.perf_event_paranoid` without CAP_PERFMON), or when `STEADYTRACE_SYSCALL_ATTACH=raw`.

use super::{tracefs, AttachError, AttachTarget, Attachment, Place, Provider};
use crate::kernel::Vmlinux;
use bpf::perf::attach_raw_tracepoint;
use bpf::ProgType;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// The raw tracepoint's arguments: the saved registers, then the call's number (entry) or result (exit).
const REGS: i16 = 0;
const SECOND: i16 = 8;

#[derive(Debug)]
pub struct RawSyscall {
    format: Arc<tracefs::Format>,
    exit: bool,
    number: i64,
    /// Why the classic tracepoint is not used, for `-v`.
    reason: String,
}

/// How a syscall tracepoint is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// The classic tracepoint, on a perf event.
    Perf,
    /// The `raw_syscalls` raw tracepoint, filtered on the call's number.
    Raw,
}

/// Whether the raw path serves syscall tracepoints in this run, and why: `STEADYTRACE_SYSCALL_ATTACH`
/// (`perf` or `raw`) decides, else whether perf_event_open is allowed (found out once).
pub fn chosen() -> (Attach, String) {
    match std::env::var("STEADYTRACE_SYSCALL_ATTACH").as_deref() {
        Ok("raw") => (Attach::Raw, "STEADYTRACE_SYSCALL_ATTACH=raw".into()),
        Ok("perf") => (Attach::Perf, "STEADYTRACE_SYSCALL_ATTACH=perf".into()),
        _ => match crate::privilege::perf_event_open_denied() {
            Some(error) => (Attach::Raw, format!("perf_event_open is not allowed: {error}")),
            None => (Attach::Perf, "perf_event_open is allowed".into()),
        },
    }
}

impl RawSyscall {
    /// The raw path for a `syscalls` tracepoint, when it can serve it: `None` for a name that is no
    /// system call this build knows the number of, or on an architecture it does not know the registers of.
    pub fn new(format: Arc<tracefs::Format>, reason: String) -> Option<RawSyscall> {
        let (exit, call) = match format.name.split_once('_')? {
            ("sys", rest) if rest.starts_with("enter_") => (false, &rest["enter_".len()..]),
            ("sys", rest) if rest.starts_with("exit_") => (true, &rest["exit_".len()..]),
            _ => return None,
        };
        let number = bpf::arch::HOST.syscall_number(call)?;
        Some(RawSyscall { format, exit, number, reason })
    }

    fn raw_name(&self) -> &'static str {
        if self.exit {
            "sys_exit"
        } else {
            "sys_enter"
        }
    }
}

impl Provider for RawSyscall {
    fn kind(&self) -> &'static str {
        "tracepoint"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::RawTracepoint
    }

    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(self.raw_name()))
    }

    fn fields(&self, _: &Vmlinux) -> Option<Result<Vec<tracefs::Field>, String>> {
        Some(Ok(self.format.fields.clone()))
    }

    /// The record's `__syscall_nr` is followed by the arguments, 8 bytes each (entry), or by `ret` (exit).
    fn field_place(&self, field: &tracefs::Field) -> Place {
        match (field.name.as_str(), self.exit) {
            ("__syscall_nr", false) | ("ret", true) => Place::Context(SECOND),
            ("__syscall_nr", true) => Place::Behind { pointer: REGS, offset: bpf::arch::HOST.syscall_number },
            _ => {
                let first =
                    self.format.fields.iter().find(|f| f.name == "__syscall_nr").map_or(16, |f| f.offset + 8);
                let index = (field.offset.saturating_sub(first) / 8) as usize;
                Place::Behind { pointer: REGS, offset: bpf::arch::HOST.syscall_args[index.min(5)] }
            }
        }
    }

    fn only_when(&self) -> Option<(Place, i32)> {
        let place = if self.exit {
            Place::Behind { pointer: REGS, offset: bpf::arch::HOST.syscall_number }
        } else {
            Place::Context(SECOND)
        };
        Some((place, self.number as i32))
    }

    fn native_calls_only(&self) -> Option<Place> {
        Some(Place::Behind { pointer: REGS, offset: bpf::arch::HOST.compat_mode.register })
    }

    fn fields_point_to_user(&self) -> bool {
        true
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let link = attach_raw_tracepoint(program, self.raw_name()).map_err(|error| AttachError::Os {
            what: format!(
                "cannot attach `tracepoint:syscalls:{}` (as the raw tracepoint raw_syscalls:{})",
                self.format.name,
                self.raw_name()
            ),
            error,
        })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        format!(
            "runs on the raw tracepoint raw_syscalls:{}, for system call {} only ({})",
            self.raw_name(),
            self.number,
            self.reason
        )
    }
}
