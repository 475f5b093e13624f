//! `join(array[, delim])`: the strings an array of string pointers points to (`args.argv` of
//! `sys_enter_execve`), printed on one line. The record (up to [`JOIN_ARGS`] strings of [`JOIN_ARG_SIZE`]
//! bytes, over 1 KiB) does not fit the 512-byte stack: it is reserved in the ring buffer and filled in
//! place. Pointers and strings are read from user memory, then kernel memory if that fails.

use super::{FixedMap, Gen};
use crate::codegen::record::Record;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use bpf::{Alu, Cond, Helper, Reg, Size};

/// Strings a `join()` prints at most (bpftrace's default).
pub const JOIN_ARGS: usize = 16;
/// Bytes of each string, with its NUL (bpftrace's default string size).
pub const JOIN_ARG_SIZE: usize = 64;

impl Gen<'_> {
    pub(crate) fn join(&mut self, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
        let delim = match args.get(1).map(|a| &a.kind) {
            Some(crate::lang::ast::ExprKind::Str(delim)) => delim.clone(),
            _ => " ".to_string(),
        };
        let id = self.records.add(Record::Join { delim });
        // The array's address, then each element and the address being read.
        let (array, pointer, address) =
            (self.frame.alloc(8, span)?, self.frame.alloc(8, span)?, self.frame.alloc(8, span)?);
        let base = self.int(&args[0])?;
        self.store_val(base, array);
        let size = 8 + JOIN_ARGS * JOIN_ARG_SIZE;
        let (record, done) = (self.frame.fresh(span)?, self.asm.new_label());
        self.refuse_when_pinned(span)?;
        self.asm.ld_map(Reg::R1, FixedMap::Events.index());
        self.asm.mov64_imm(Reg::R2, size as i32);
        self.asm.mov64_imm(Reg::R3, 0);
        self.asm.call(Helper::RingbufReserve.id());
        // A full ring buffer: nothing to print.
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, done);
        self.asm.store_imm(Size::DW, Reg::R0, 0, id as i32);
        for i in 0..JOIN_ARGS {
            self.asm.store_imm(Size::B, Reg::R0, (8 + i * JOIN_ARG_SIZE) as i16, 0);
        }
        self.put(record, Reg::R0);
        let submit = self.asm.new_label();
        for i in 0..JOIN_ARGS {
            // pointer = array[i]; a NULL pointer ends the array.
            self.asm.load(Size::DW, Reg::R1, Reg::FP, array);
            self.asm.alu64_imm(Alu::Add, Reg::R1, (8 * i) as i32);
            self.asm.store(Size::DW, Reg::FP, address, Reg::R1);
            self.read_either(Into::Stack(pointer), 8, address, false);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, pointer);
            self.asm.jump_imm(Cond::Eq, Reg::R1, 0, submit);
            self.asm.store(Size::DW, Reg::FP, address, Reg::R1);
            self.read_either(
                Into::Record(record, (8 + i * JOIN_ARG_SIZE) as i32),
                JOIN_ARG_SIZE,
                address,
                true,
            );
        }
        self.asm.bind(submit);
        let reg = self.reg_of(record, Reg::R1);
        self.asm.mov64_reg(Reg::R1, reg);
        self.asm.mov64_imm(Reg::R2, super::RINGBUF_NO_WAKEUP);
        self.asm.call(Helper::RingbufSubmit.id());
        self.asm.bind(done);
        self.frame.release(record);
        Ok(())
    }

    /// Reads `size` bytes (a string when `string`) from the address stored at `fp + address` into `to`:
    /// user memory first, kernel memory when that fails.
    fn read_either(&mut self, to: Into, size: usize, address: i16, string: bool) {
        let helpers = if string {
            [Helper::ProbeReadUserStr, Helper::ProbeReadKernelStr]
        } else {
            [Helper::ProbeReadUser, Helper::ProbeReadKernel]
        };
        let done = self.asm.new_label();
        for helper in helpers {
            match to {
                Into::Stack(offset) => {
                    self.asm.mov64_reg(Reg::R1, Reg::FP);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                }
                Into::Record(record, offset) => {
                    let reg = self.reg_of(record, Reg::R1);
                    self.asm.mov64_reg(Reg::R1, reg);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, offset);
                }
            }
            self.asm.mov64_imm(Reg::R2, size as i32);
            self.asm.load(Size::DW, Reg::R3, Reg::FP, address);
            self.asm.call(helper.id());
            self.asm.jump_imm(Cond::SGe, Reg::R0, 0, done);
        }
        self.asm.bind(done);
    }
}

/// Where `read_either` writes.
#[derive(Clone, Copy)]
enum Into {
    Stack(i16),
    /// Into the reserved record (its pointer's home) at an offset.
    Record(super::frame::Val, i32),
}
