//! `dw_ustack`: the user stack is not walked in the kernel. The program copies the user registers an unwinder
//! starts from and the top of the user stack (up to [`COPY_BYTES`]) into a ring buffer record, and keeps in
//! the stack's slot a handle naming that record; userspace unwinds the copy from the binaries' DWARF call
//! frame information (`crate::symbols::unwind`) and puts the unwound stack where the handle is.
//!
//! Record: `[id][handle][tgid][ip][sp][fp][lr][bytes copied][the stack's bytes, COPY_BYTES reserved]`.
//!
//! The registers are the ones the process had when it entered the kernel (`bpf_task_pt_regs`, Linux 5.15; before
//! it, read where the kernel saves them, at the top of the task's kernel stack), or the context's own in a uprobe
//! (which is user code). The copy stops where the stack's mapping
//! ends: one byte is read at each page boundary within reach, and the copy is cut at the first that fails
//! (`bpf_probe_read_user` of a range that crosses the end fails whole).

use super::FixedMap;
use super::Gen;
use crate::codegen::record::Record;
use crate::kernel;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::StackType;
use crate::symbols::unwind::NO_COPY;
use bpf::features::Feature;
use bpf::{Alu, Cond, Helper, Reg, Size};

/// Bytes of user stack copied at most: as deep as about 100 frames of typical C and C++ code, and twice
/// `perf record --call-graph dwarf`'s default.
pub const COPY_BYTES: usize = 16 << 10;
/// Where the stack's bytes start in the record.
pub const HEADER_BYTES: usize = 64;
const PAGE: i32 = 4096;

impl Gen<'_> {
    /// Copies the user stack into a record and stores its handle (and the process id, as `ustack` does) at
    /// `fp + offset`.
    pub(crate) fn user_stack_copy_into(
        &mut self,
        stack: StackType,
        offset: i16,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let in_user_code = self.point.provider.user_binary().is_some();
        // Before bpf_task_pt_regs: where the registers are is computed from the task's kernel stack.
        let saved_regs_at = match (in_user_code, self.features.has(Feature::TaskPtRegs)) {
            (false, false) => Some(self.probe.types.saved_user_registers.ok_or_else(|| {
                kernel::needs(
                    self.features,
                    Feature::TaskPtRegs,
                    "`dw_ustack` outside uprobes and USDT probes",
                    span,
                )
            })?),
            _ => None,
        };
        let id = self.records.add(Record::UserStackCopy { depth: stack.depth });
        // The handle: the time in nanoseconds, its top byte replaced by the CPU: no two copies share one.
        self.asm.call(Helper::KtimeGetNs.id());
        self.asm.alu64_imm(Alu::Lsh, Reg::R0, 8);
        self.asm.alu64_imm(Alu::Rsh, Reg::R0, 8);
        self.asm.store(Size::DW, Reg::FP, offset, Reg::R0);
        self.asm.call(Helper::GetSmpProcessorId.id());
        self.asm.alu64_imm(Alu::Lsh, Reg::R0, 56);
        self.asm.load(Size::DW, Reg::R1, Reg::FP, offset);
        self.asm.alu64_reg(Alu::Or, Reg::R0, Reg::R1);
        self.asm.store(Size::DW, Reg::FP, offset, Reg::R0);
        self.pid_tgid(span)?;
        self.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
        self.asm.store(Size::DW, Reg::FP, offset + 8, Reg::R0);

        let (record, reserved, done) = (self.frame.fresh(span)?, self.asm.new_label(), self.asm.new_label());
        self.refuse_when_pinned(span)?;
        self.asm.ld_map(Reg::R1, FixedMap::Events.index());
        self.asm.mov64_imm(Reg::R2, (HEADER_BYTES + COPY_BYTES) as i32);
        self.asm.mov64_imm(Reg::R3, 0);
        self.asm.call(Helper::RingbufReserve.id());
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, reserved);
        // A full ring buffer: a lost record, and the stack is the one no copy stands for (it prints empty, and
        // all such stacks of a process are one key).
        self.asm.store_imm(Size::DW, Reg::FP, offset, NO_COPY as i32);
        self.count_lost_record(span)?;
        self.asm.jump(done);
        self.asm.bind(reserved);
        self.put(record, Reg::R0);
        self.asm.store_imm(Size::DW, Reg::R0, 0, id as i32);
        for word in [0, 8] {
            self.asm.load(Size::DW, Reg::R1, Reg::FP, offset + word);
            self.asm.store(Size::DW, Reg::R0, 8 + word, Reg::R1);
        }
        self.asm.store_imm(Size::DW, Reg::R0, 56, 0);

        let regs = bpf::arch::HOST.unwind_registers;
        let wanted = [Some(regs.ip), Some(regs.sp), Some(regs.fp), regs.lr];
        if in_user_code {
            let record_reg = self.reg_of(record, Reg::R2);
            for (i, register) in wanted.iter().enumerate() {
                match register {
                    Some(at) => self.asm.load(Size::DW, Reg::R1, Reg::R9, *at),
                    None => self.asm.mov64_imm(Reg::R1, 0),
                }
                self.asm.store(Size::DW, record_reg, 24 + 8 * i as i16, Reg::R1);
            }
        } else {
            let saved = self.frame.alloc(8, span)?;
            match saved_regs_at {
                None => {
                    self.asm.call(Helper::GetCurrentTaskBtf.id());
                    self.asm.mov64_reg(Reg::R1, Reg::R0);
                    self.asm.call(Helper::TaskPtRegs.id());
                    self.asm.store(Size::DW, Reg::FP, saved, Reg::R0);
                }
                Some((stack_member, from_stack)) => {
                    // saved = task->stack + THREAD_SIZE - sizeof(struct pt_regs)
                    self.asm.call(Helper::GetCurrentTask.id());
                    self.asm.mov64_reg(Reg::R3, Reg::R0);
                    self.asm.alu64_imm(Alu::Add, Reg::R3, stack_member);
                    self.asm.mov64_reg(Reg::R1, Reg::FP);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, saved as i32);
                    self.asm.mov64_imm(Reg::R2, 8);
                    self.asm.call(Helper::ProbeReadKernel.id());
                    self.asm.load(Size::DW, Reg::R0, Reg::FP, saved);
                    self.asm.alu64_imm(Alu::Add, Reg::R0, from_stack);
                    self.asm.store(Size::DW, Reg::FP, saved, Reg::R0);
                }
            }
            for (i, register) in wanted.iter().enumerate() {
                let record_reg = self.reg_of(record, Reg::R1);
                self.asm.mov64_reg(Reg::R1, record_reg);
                self.asm.alu64_imm(Alu::Add, Reg::R1, 24 + 8 * i as i32);
                match register {
                    Some(at) => {
                        self.asm.mov64_imm(Reg::R2, 8);
                        self.asm.load(Size::DW, Reg::R3, Reg::FP, saved);
                        self.asm.alu64_imm(Alu::Add, Reg::R3, i32::from(*at));
                        self.asm.call(Helper::ProbeReadKernel.id());
                    }
                    None => self.asm.store_imm(Size::DW, Reg::R1, 0, 0),
                }
            }
        }
        self.copy_user_stack(record, span)?;
        let record_reg = self.reg_of(record, Reg::R1);
        self.asm.mov64_reg(Reg::R1, record_reg);
        self.asm.mov64_imm(Reg::R2, super::RINGBUF_NO_WAKEUP);
        self.asm.call(Helper::RingbufSubmit.id());
        self.asm.bind(done);
        self.frame.release(record);
        Ok(())
    }

    /// Copies the stack from the saved stack pointer up to [`COPY_BYTES`] or the end of its mapping, whichever
    /// comes first, and writes how many bytes it copied.
    fn copy_user_stack(&mut self, record: super::frame::Val, span: Span) -> Result<(), Diagnostic> {
        let (sp, page, len, probe) = (
            self.frame.alloc(8, span)?,
            self.frame.alloc(8, span)?,
            self.frame.alloc(8, span)?,
            self.frame.alloc(8, span)?,
        );
        let (copy, skip) = (self.asm.new_label(), self.asm.new_label());
        let record_reg = self.reg_of(record, Reg::R1);
        self.asm.load(Size::DW, Reg::R1, record_reg, 32);
        self.asm.store(Size::DW, Reg::FP, sp, Reg::R1);
        self.asm.mov64_imm(Reg::R2, COPY_BYTES as i32);
        self.asm.store(Size::DW, Reg::FP, len, Reg::R2);
        // The first page boundary above the stack pointer.
        self.asm.alu64_imm(Alu::And, Reg::R1, -PAGE);
        self.asm.alu64_imm(Alu::Add, Reg::R1, PAGE);
        self.asm.store(Size::DW, Reg::FP, page, Reg::R1);
        for _ in 0..=COPY_BYTES / PAGE as usize {
            // Beyond reach: the whole COPY_BYTES are readable.
            self.asm.load(Size::DW, Reg::R1, Reg::FP, page);
            self.asm.load(Size::DW, Reg::R2, Reg::FP, sp);
            self.asm.alu64_reg(Alu::Sub, Reg::R1, Reg::R2);
            self.asm.jump_imm(Cond::UGe, Reg::R1, COPY_BYTES as i32, copy);
            self.asm.mov64_reg(Reg::R1, Reg::FP);
            self.asm.alu64_imm(Alu::Add, Reg::R1, probe as i32);
            self.asm.mov64_imm(Reg::R2, 1);
            self.asm.load(Size::DW, Reg::R3, Reg::FP, page);
            self.asm.call(Helper::ProbeReadUser.id());
            let next = self.asm.new_label();
            self.asm.jump_imm(Cond::SGe, Reg::R0, 0, next);
            // The mapping ends at this page: copy up to it.
            self.asm.load(Size::DW, Reg::R1, Reg::FP, page);
            self.asm.load(Size::DW, Reg::R2, Reg::FP, sp);
            self.asm.alu64_reg(Alu::Sub, Reg::R1, Reg::R2);
            self.asm.store(Size::DW, Reg::FP, len, Reg::R1);
            self.asm.jump(copy);
            self.asm.bind(next);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, page);
            self.asm.alu64_imm(Alu::Add, Reg::R1, PAGE);
            self.asm.store(Size::DW, Reg::FP, page, Reg::R1);
        }
        self.asm.bind(copy);
        self.asm.load(Size::DW, Reg::R2, Reg::FP, len);
        self.asm.jump_imm(Cond::Eq, Reg::R2, 0, skip);
        self.asm.jump_imm(Cond::UGt, Reg::R2, COPY_BYTES as i32, skip);
        let record_reg = self.reg_of(record, Reg::R1);
        self.asm.mov64_reg(Reg::R1, record_reg);
        self.asm.alu64_imm(Alu::Add, Reg::R1, HEADER_BYTES as i32);
        self.asm.load(Size::DW, Reg::R3, Reg::FP, sp);
        self.asm.call(Helper::ProbeReadUser.id());
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, skip);
        self.asm.load(Size::DW, Reg::R2, Reg::FP, len);
        let record_reg = self.reg_of(record, Reg::R1);
        self.asm.store(Size::DW, record_reg, 56, Reg::R2);
        self.asm.bind(skip);
        Ok(())
    }
}
