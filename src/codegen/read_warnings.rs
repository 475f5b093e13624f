//! `-k`: a probe read helper that fails sends a warning naming the read's expression, the helper and its
//! error, which userspace prints as bpftrace 0.27.1 does (`stdin:1:77-80: WARNING: Bad address`, `Additional
//! Info - helper: probe_read_kernel, retcode: -14`, the line and `~` under the expression). Without `-k`
//! nothing is emitted: the code is the same instruction for instruction.
//!
//! Checked: the reads of the script's expressions (`*p`, `p->member`, `p[i]`, a struct copied whole,
//! `str(p)`, `buf(p, n)`, `macaddr(p)`, USDT arguments in memory). Not checked: steadytrace's own reads,
//! which cannot fail or whose failure is expected (the tracepoint's record, the saved registers of a
//! system call, the stack copies of `dw_ustack`, a loop's variables copied onto themselves, `join()`'s
//! reads, which try the process's memory and then the kernel's).

use super::record::{Location, ReadFailure, Record};
use super::Gen;
use crate::lang::{Diagnostic, Span};
use bpf::{Cond, Helper, Reg, Size};

impl Gen<'_> {
    /// Follows the call of the probe read `helper` (its return value in r0), for the expression at `span`:
    /// with `-k`, a negative value sends a [`Record::ReadFailed`] with it. r0 is kept; r1-r5 are clobbered
    /// (as by the call itself).
    pub(crate) fn check_read(&mut self, helper: Helper, span: Span) -> Result<(), Diagnostic> {
        if !self.options.read_warnings {
            return Ok(());
        }
        let read = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, Reg::R0, 0, read);
        let failure = ReadFailure {
            helper: Helper::name_of(helper.id() as i32).unwrap_or("probe_read"),
            span,
            location: Location::default(),
            marked: String::new(),
        };
        let id = self.records.add(Record::ReadFailed(failure));
        let mark = self.frame.mark();
        let record = self.frame.alloc(16, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, record, id as i32);
        self.asm.store(Size::DW, Reg::FP, record + 8, Reg::R0);
        self.output_warning(record, 16, span)?;
        self.asm.load(Size::DW, Reg::R0, Reg::FP, record + 8);
        self.frame.release_to(mark);
        self.asm.bind(read);
        Ok(())
    }
}
