//! Code of current bpftrace's stdlib functions on strings and bytes: `strstr`, `str_concat`, `memcmp`; and
//! `has_cpid`.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use bpf::{Alu, Cond, Helper, Reg, Size};

impl Gen<'_> {
    /// Whether steadytrace started a child (`-c`), so that `cpid` has a value.
    pub(crate) fn has_child(&self) -> bool {
        self.options.cpid.is_some()
    }

    /// `str_concat(a, b)` written at `fp + offset`, a string of `size` bytes: `a`, then `b` from `a`'s NUL on.
    pub(crate) fn concat_into(
        &mut self,
        first: &Expr,
        second: &Expr,
        offset: i16,
        size: usize,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let string_size = |ty: Type| match ty {
            Type::Str { size } => size,
            ty => ty.slot_size(),
        };
        let first_size = string_size(self.ty(first)?).min(size);
        let second_size = string_size(self.ty(second)?);
        let mark = self.frame.mark();
        // A variable is read where it is; anything else is written out first.
        let second_place = self.string_place(second, second_size.div_ceil(8) * 8, span)?;
        // Joined in a buffer of its own, with room for both whole: the destination may be `a` itself
        // (`$p = str_concat($p, "/")`), and the copy of `b` can start anywhere `a` may end.
        let joined_size = (first_size + second_size).div_ceil(8) * 8;
        let joined = self.frame.alloc(joined_size, span)?;
        self.zero(joined, joined_size);
        self.string_into(first, joined, first_size)?;
        // r0: the length of `a`, counted unrolled (each path then copies to a known place).
        let counted = self.asm.new_label();
        self.asm.mov64_imm(Reg::R0, 0);
        for at in 0..first_size.saturating_sub(1) {
            self.asm.load(Size::B, Reg::R1, Reg::FP, joined + at as i16);
            self.asm.jump_imm(Cond::Eq, Reg::R1, 0, counted);
            self.asm.alu64_imm(Alu::Add, Reg::R0, 1);
        }
        self.asm.bind(counted);
        if second_size > 1 {
            self.asm.mov64_reg(Reg::R1, Reg::FP);
            self.asm.alu64_imm(Alu::Add, Reg::R1, joined as i32);
            self.asm.alu64_reg(Alu::Add, Reg::R1, Reg::R0);
            self.asm.mov64_imm(Reg::R2, second_size as i32);
            self.asm.mov64_reg(Reg::R3, second_place.0);
            self.asm.alu64_imm(Alu::Add, Reg::R3, second_place.1 as i32);
            self.asm.call(Helper::ProbeReadKernelStr.id());
        }
        // The result's size: longer joins are cut, their last byte the NUL.
        let slot = size.div_ceil(8) * 8;
        self.copy_between(Reg::FP, joined, Reg::FP, offset, slot.min(joined_size));
        self.zero(offset + joined_size.min(slot) as i16, slot.saturating_sub(joined_size));
        self.asm.store_imm(Size::B, Reg::FP, offset + size as i16 - 1, 0);
        self.frame.release_to(mark);
        Ok(())
    }

    /// `memcmp(left, right, count)`: the difference of the first differing bytes (as signed chars) of the
    /// two values, 0 when their first `count` bytes are the same.
    pub(crate) fn compare_bytes(
        &mut self,
        left: &Expr,
        right: &Expr,
        count: usize,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let (left_ty, right_ty) = (self.ty(left)?, self.ty(right)?);
        let (left_size, right_size) =
            (left_ty.slot_size().div_ceil(8) * 8, right_ty.slot_size().div_ceil(8) * 8);
        let mark = self.frame.mark();
        let buffer = self.frame.alloc(left_size + right_size, span)?;
        self.zero(buffer, left_size + right_size);
        self.value_into(left, buffer, &left_ty)?;
        self.value_into(right, buffer + left_size as i16, &right_ty)?;
        let (differ, done) = (self.asm.new_label(), self.asm.new_label());
        for at in 0..count as i16 {
            self.asm.load(Size::B, Reg::R1, Reg::FP, buffer + at);
            self.asm.load(Size::B, Reg::R2, Reg::FP, buffer + left_size as i16 + at);
            self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
        }
        self.asm.mov64_imm(Reg::R0, 0);
        self.asm.jump(done);
        self.asm.bind(differ);
        // Sign-extend both bytes, as C's `char` is signed here.
        for reg in [Reg::R1, Reg::R2] {
            self.asm.alu64_imm(Alu::Lsh, reg, 56);
            self.asm.alu64_imm(Alu::Arsh, reg, 56);
        }
        self.asm.mov64_reg(Reg::R0, Reg::R1);
        self.asm.alu64_reg(Alu::Sub, Reg::R0, Reg::R2);
        self.asm.bind(done);
        self.frame.release_to(mark);
        self.take_r0(span)
    }
}
