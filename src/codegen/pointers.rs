//! Pointers and arrays: `&$x`, `*p` of a typed pointer, `p + n` moving by whole pointees, arrays made
//! by casts, and elements `$t[i]`, `$a[i]`, `$s[i]`, `$p[i]`. A pointer's pointee is read with a
//! probe-read helper (a process's memory in uprobes, the kernel's elsewhere; a variable's address is
//! the BPF stack's, which is kernel memory), so a bad pointer reads as zero instead of faulting.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use bpf::{Alu, Cond, Reg, Size};

/// Bytes a pointer of type `ty` moves by per step: its pointee's size; `None` for what is no pointer.
fn step(ty: &Type) -> Option<u64> {
    match ty {
        Type::Pointer { to, .. } => Some(to.c_size().unwrap_or(8) as u64),
        Type::Ptr { to, .. } => Some(to.size.unwrap_or(1) as u64),
        _ => None,
    }
}

impl Gen<'_> {
    /// `n` as the byte distance of `n` steps of a pointer of type `pointer` (unchanged for a non-pointer).
    pub(crate) fn scaled(&mut self, pointer: &Type, n: Val, span: Span) -> Result<Val, Diagnostic> {
        let Some(bytes) = step(pointer).filter(|&b| b != 1) else { return Ok(n) };
        if let Val::Imm(v) = n {
            return Ok(Val::Imm(v.wrapping_mul(bytes)));
        }
        let home = self.writable(n, span)?;
        let reg = self.reg_of(home, Reg::R0);
        self.asm.alu64_imm(Alu::Mul, reg, bytes as i32);
        self.put(home, reg);
        Ok(home)
    }

    /// What `++`/`--` adds to a value of type `ty`: 1, or one pointee's size.
    pub(crate) fn increment_step(ty: &Type) -> i32 {
        step(ty).unwrap_or(1) as i32
    }

    /// `&$x`: the address of the variable's slot.
    pub(crate) fn address_of(&mut self, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let ExprKind::Var(name) = &operand.kind else {
            return Err(Diagnostic::error(span, "internal error: `&` of no variable"));
        };
        let home = self.frame.fresh(span)?;
        let reg = if let Val::Reg(reg) = home { reg } else { Reg::R0 };
        let (base, at) = self.var(name);
        self.asm.mov64_reg(reg, base);
        self.asm.alu64_imm(Alu::Add, reg, at as i32);
        self.put(home, reg);
        Ok(home)
    }

    /// The integer `address` (released) points to, of type `ty` (`c_size` bytes, sign-extended).
    pub(crate) fn read_int(
        &mut self,
        address: Val,
        ty: &Type,
        user: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let bytes = ty.c_size().unwrap_or(8).min(8);
        let buffer = self.frame.alloc(8, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buffer, 0);
        self.read_memory(address, buffer, bytes, user, span)?;
        let size = Size::for_bytes(bytes).unwrap_or(Size::DW);
        self.load_into_fresh(Reg::FP, buffer, size, ty.is_signed(), span)
    }

    /// `*p` of a typed pointer whose pointee is an integer or a pointer.
    pub(crate) fn pointee_int(&mut self, pointer: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let ty = self.ty(pointer)?;
        let Type::Pointer { to, user } = &ty else {
            return Err(Diagnostic::error(span, "internal error: `*` of no typed pointer"));
        };
        let address = self.int(pointer)?;
        self.read_int(address, to, *user, span)
    }

    /// `*p` (at `span`) of a pointer to a string or tuple, into `slot` bytes at `fp + offset`.
    pub(crate) fn pointee_into(
        &mut self,
        pointer: &Expr,
        offset: i16,
        slot: usize,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let ty = self.ty(pointer)?;
        let Type::Pointer { to, user } = &ty else {
            return Err(Diagnostic::error(pointer.span, "internal error: `*` of no typed pointer"));
        };
        let len = to.slot_size().min(slot);
        self.zero(offset, slot);
        let address = self.int(pointer)?;
        self.read_memory(address, offset, len, *user, span)?;
        Ok(())
    }

    /// `(elem[N])value`: the operand's bytes, or a copy of an array value, at `fp + offset`.
    pub(crate) fn array_into(&mut self, e: &Expr, offset: i16, ty: &Type) -> Result<(), Diagnostic> {
        let slot = ty.slot_size();
        match &e.kind {
            ExprKind::Cast { operand, .. } => match self.ty(operand)? {
                Type::Str { size } => {
                    self.zero(offset, slot);
                    self.string_into(operand, offset, size)
                }
                Type::Array { .. } => self.array_into(operand, offset, ty),
                // A tracepoint's byte array (`args.daddr_v6`), copied whole.
                Type::Bytes { .. } => self.copy_value_into(operand, offset, slot),
                // An integer's own bytes, the rest of a larger array zero (`(int8[4])-2` is `[-2,0,0,0]`).
                from => {
                    self.zero(offset, slot);
                    let size = from.c_size().and_then(Size::for_bytes).unwrap_or(Size::DW);
                    let val = self.int(operand)?;
                    self.store_low_bytes(val, size, Reg::FP, offset);
                    Ok(())
                }
            },
            _ => self.copy_value_into(e, offset, slot),
        }
    }

    /// Where the value of `e` (a tuple, array or string) is in memory: a variable's own slot, or a
    /// stack buffer it is first written to.
    pub(crate) fn in_memory(&mut self, e: &Expr, ty: &Type) -> Result<(Reg, i16), Diagnostic> {
        if let ExprKind::Var(name) = &e.kind {
            return Ok(self.var(name));
        }
        let buffer = self.frame.alloc(ty.slot_size(), e.span)?;
        self.value_into(e, buffer, ty)?;
        Ok((Reg::FP, buffer))
    }

    /// Where the element `base[index]` of a tuple is (the index is known), and its type.
    pub(crate) fn tuple_element(&mut self, base: &Expr, at: usize) -> Result<(Reg, i16, Type), Diagnostic> {
        let ty = self.ty(base)?;
        let Type::Tuple(fields) = &ty else {
            return Err(Diagnostic::error(base.span, "internal error: element of a non-tuple"));
        };
        let (reg, start) = self.in_memory(base, &ty)?;
        Ok((reg, start + Type::field_offsets(fields)[at] as i16, fields[at].clone()))
    }

    /// `base[index]` as an integer: an element of an array, string or tuple, or a pointee.
    pub(crate) fn element_int(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        let ExprKind::Index { base, index } = &e.kind else {
            return Err(Diagnostic::error(e.span, "internal error: not an element"));
        };
        let ty = self.ty(base)?;
        let elem = self.ty(e)?;
        let known = crate::sema::constant_index(index);
        let (stride, len) = match &ty {
            Type::Tuple(_) => {
                let (reg, at, _) = self.tuple_element(base, known.unwrap_or(0))?;
                self.asm.load(Size::DW, Reg::R0, reg, at);
                return self.take_r0(e.span);
            }
            Type::Pointer { user, .. } => {
                let user = *user;
                let address = self.int(base)?;
                let n = self.int(index)?;
                let n = self.scaled(&ty, n, e.span)?;
                let address = self.writable(address, e.span)?;
                let reg = self.reg_of(address, Reg::R0);
                let rn = self.reg_of(n, Reg::R1);
                self.asm.alu64_reg(Alu::Add, reg, rn);
                self.put(address, reg);
                self.frame.release(n);
                return self.read_int(address, &elem, user, e.span);
            }
            Type::Array { len, .. } if self.is_member(base) => {
                return self.member_element_int(base, index, &elem, *len, e.span)
            }
            Type::Array { len, .. } => (elem.c_size().unwrap_or(8), *len),
            Type::Str { size } | Type::Bytes { size } => (1, *size),
            _ => return Err(Diagnostic::error(e.span, "internal error: element of this type")),
        };
        let (reg, start) = self.in_memory(base, &ty)?;
        let size = Size::for_bytes(stride).unwrap_or(Size::DW);
        if let Some(at) = known {
            return self.load_into_fresh(reg, start + (at * stride) as i16, size, elem.is_signed(), e.span);
        }
        // An index known only when the program runs: checked against the length, then read through
        // the element's address (the verifier takes no variable offsets into the stack).
        let n = self.int(index)?;
        let address = self.frame.fresh(e.span)?;
        let (inside, done) = (self.asm.new_label(), self.asm.new_label());
        let rn = self.reg_of(n, Reg::R1);
        self.asm.mov64_reg(Reg::R2, rn);
        self.frame.release(n);
        self.asm.jump_imm(Cond::ULt, Reg::R2, len as i32, inside);
        let zero = self.frame.fresh(e.span)?;
        self.asm.mov64_imm(Reg::R0, 0);
        self.put(zero, Reg::R0);
        self.asm.jump(done);
        self.asm.bind(inside);
        self.asm.alu64_imm(Alu::Mul, Reg::R2, stride as i32);
        self.asm.mov64_reg(Reg::R0, reg);
        self.asm.alu64_imm(Alu::Add, Reg::R0, start as i32);
        self.asm.alu64_reg(Alu::Add, Reg::R0, Reg::R2);
        self.put(address, Reg::R0);
        let value = self.read_int(address, &elem, false, e.span)?;
        let reg = self.reg_of(value, Reg::R0);
        self.put(zero, reg);
        self.frame.release(value);
        self.asm.bind(done);
        Ok(zero)
    }

    /// A value read from memory into `slot` bytes at `fp + offset`: `*p`, `$t[i]`.
    pub(crate) fn memory_into(&mut self, e: &Expr, offset: i16, slot: usize) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Unary { operand, .. } => self.pointee_into(operand, offset, slot, e.span),
            ExprKind::Index { base, index } => {
                let at = crate::sema::constant_index(index).unwrap_or(0);
                let (reg, from, ty) = self.tuple_element(base, at)?;
                let len = ty.slot_size().min(slot);
                self.copy_between(reg, from, Reg::FP, offset, len);
                self.zero(offset + len as i16, slot - len);
                Ok(())
            }
            _ => Err(Diagnostic::error(e.span, "internal error: no code for this value")),
        }
    }
}
