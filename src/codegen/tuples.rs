//! Tuples and records in memory, laid out as two different types: one converted into the other (a value
//! stored where its strings are longer, or its record's fields in another order), and the two compared
//! (`==`, `!=`) field by field: a record's fields matched by name, so `(a=1, b=2) == (b=2, a=1)`; integers
//! by value whatever their width; strings up to their NUL, whatever their lengths; arrays (of one element
//! type and length, which sema checked) byte for byte.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use bpf::{Alu, Cond, Label, Reg, Size};

/// Where a value lies: a base register and an offset from it.
type Place = (Reg, i16);

impl Gen<'_> {
    /// 1 when the tuples or arrays are equal, 0 when not; the other way round with `negate`.
    pub(crate) fn compare_in_memory_values(
        &mut self,
        a: &Expr,
        b: &Expr,
        negate: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let (left_ty, right_ty) = (self.ty(a)?, self.ty(b)?);
        let left = self.written_out(a, &left_ty, span)?;
        let right = self.written_out(b, &right_ty, span)?;
        let differ = self.asm.new_label();
        self.compare_in_memory(left, &left_ty, right, &right_ty, differ, span)?;
        self.verdict(differ, negate, span)
    }

    /// Writes tuple `e` at `fp + offset` laid out as `ty`, a type of the same shape whose strings may be
    /// longer or whose record fields may be in another order.
    pub(crate) fn tuple_converted_into(
        &mut self,
        e: &Expr,
        offset: i16,
        ty: &Type,
    ) -> Result<(), Diagnostic> {
        let own = self.ty(e)?;
        let from = match &e.kind {
            ExprKind::Var(name) => self.var(name),
            _ => self.written_out(e, &own, e.span)?,
        };
        self.convert_between(from, &own, offset, ty, e.span)
    }

    /// Copies the value at `from`, of type `from_ty`, to `fp + to` laid out as `to_ty`.
    fn convert_between(
        &mut self,
        from: Place,
        from_ty: &Type,
        to: i16,
        to_ty: &Type,
        span: Span,
    ) -> Result<(), Diagnostic> {
        match (from_ty, to_ty) {
            (Type::Tuple(a), Type::Tuple(b)) if a.len() == b.len() => {
                let (from_at, to_at) = (Type::field_offsets(a), Type::field_offsets(b));
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    self.convert_between(
                        (from.0, from.1 + from_at[i] as i16),
                        x,
                        to + to_at[i] as i16,
                        y,
                        span,
                    )?;
                }
                Ok(())
            }
            (Type::NamedTuple { names: m, fields: a }, Type::NamedTuple { names: n, fields: b })
                if m.len() == n.len() =>
            {
                let (from_at, to_at) = (Type::field_offsets(a), Type::field_offsets(b));
                for (j, (name, y)) in n.iter().zip(b).enumerate() {
                    let i = m.iter().position(|o| o == name).ok_or_else(|| {
                        Diagnostic::error(span, "internal error: a record stored where other fields are")
                    })?;
                    self.convert_between(
                        (from.0, from.1 + from_at[i] as i16),
                        &a[i],
                        to + to_at[j] as i16,
                        y,
                        span,
                    )?;
                }
                Ok(())
            }
            (Type::Str { size: a }, Type::Str { size: b }) => {
                let copied = from_ty.slot_size().min(to_ty.slot_size());
                self.copy_between(from.0, from.1, Reg::FP, to, copied);
                self.zero(to + copied as i16, to_ty.slot_size() - copied);
                if b < a {
                    // Cut short: the destination's last byte ends the string.
                    self.asm.store_imm(Size::B, Reg::FP, to + *b as i16 - 1, 0);
                }
                Ok(())
            }
            _ => {
                let copied = from_ty.slot_size().min(to_ty.slot_size());
                self.copy_between(from.0, from.1, Reg::FP, to, copied);
                self.zero(to + copied as i16, to_ty.slot_size() - copied);
                Ok(())
            }
        }
    }

    /// `e` written into a zeroed stack buffer laid out as its own type.
    fn written_out(&mut self, e: &Expr, ty: &Type, span: Span) -> Result<Place, Diagnostic> {
        let buffer = self.frame.alloc(ty.slot_size(), span)?;
        self.zero(buffer, ty.slot_size());
        self.value_into(e, buffer, ty)?;
        Ok((Reg::FP, buffer))
    }

    /// Jumps to `differ` unless the values at the two places are equal.
    fn compare_in_memory(
        &mut self,
        left: Place,
        left_ty: &Type,
        right: Place,
        right_ty: &Type,
        differ: Label,
        span: Span,
    ) -> Result<(), Diagnostic> {
        match (left_ty, right_ty) {
            (Type::Str { size: a }, Type::Str { size: b }) => {
                self.compare_strings_in_memory(left, *a, right, *b, differ);
                Ok(())
            }
            (Type::Tuple(a), Type::Tuple(b)) => {
                let (left_at, right_at) = (Type::field_offsets(a), Type::field_offsets(b));
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    let l = (left.0, left.1 + left_at[i] as i16);
                    let r = (right.0, right.1 + right_at[i] as i16);
                    self.compare_in_memory(l, x, r, y, differ, span)?;
                }
                Ok(())
            }
            (Type::NamedTuple { names: m, fields: a }, Type::NamedTuple { names: n, fields: b }) => {
                let (left_at, right_at) = (Type::field_offsets(a), Type::field_offsets(b));
                for (i, (name, x)) in m.iter().zip(a).enumerate() {
                    let j = n.iter().position(|o| o == name).ok_or_else(|| {
                        Diagnostic::error(span, "internal error: records compared without the same fields")
                    })?;
                    let l = (left.0, left.1 + left_at[i] as i16);
                    let r = (right.0, right.1 + right_at[j] as i16);
                    self.compare_in_memory(l, x, r, &b[j], differ, span)?;
                }
                Ok(())
            }
            (x, _) if x.array_parts().is_some() => {
                let bytes = x.array_parts().and_then(|(elem, len)| Some(elem.c_size()? * len));
                let bytes = bytes
                    .ok_or_else(|| Diagnostic::error(span, "internal error: an array without a size"))?;
                self.compare_bytes_in_memory(left, right, bytes, differ);
                Ok(())
            }
            (x, y) if x.is_int() && y.is_int() => {
                self.load_normalised(Reg::R1, left, x);
                self.load_normalised(Reg::R2, right, y);
                self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
                Ok(())
            }
            (x, y) => Err(Diagnostic::error(span, format!("internal error: comparing {x} with {y}"))),
        }
    }

    /// An integer field's 8-byte slot, read as a 64-bit value of its type (sign-extended, or with the bits
    /// above its width cleared), so that fields of two widths compare by value.
    fn load_normalised(&mut self, reg: Reg, place: Place, ty: &Type) {
        self.asm.load(Size::DW, reg, place.0, place.1);
        let (signed, bits) = match ty {
            Type::Int { signed, bits } => (*signed, *bits),
            Type::Bool => (false, 8),
            _ => (false, 64),
        };
        if bits < 64 {
            let shift = 64 - i32::from(bits);
            self.asm.alu64_imm(Alu::Lsh, reg, shift);
            self.asm.alu64_imm(if signed { Alu::Arsh } else { Alu::Rsh }, reg, shift);
        }
    }

    /// `bytes` bytes at two 8-byte aligned places, compared in the widest loads that fit: whatever a slot
    /// holds past them is not the value's.
    fn compare_bytes_in_memory(&mut self, left: Place, right: Place, bytes: usize, differ: Label) {
        let mut at = 0;
        for (size, width) in [(Size::DW, 8), (Size::W, 4), (Size::H, 2), (Size::B, 1)] {
            while bytes - at >= width {
                self.asm.load(size, Reg::R1, left.0, left.1 + at as i16);
                self.asm.load(size, Reg::R2, right.0, right.1 + at as i16);
                self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
                at += width;
            }
        }
    }

    /// Two strings of `a` and `b` bytes, equal up to their NUL: a byte at a time up to the shorter's length;
    /// then the longer must end there.
    fn compare_strings_in_memory(&mut self, left: Place, a: usize, right: Place, b: usize, differ: Label) {
        let same = self.asm.new_label();
        let shorter = a.min(b);
        for at in 0..shorter {
            self.asm.load(Size::B, Reg::R1, left.0, left.1 + at as i16);
            self.asm.load(Size::B, Reg::R2, right.0, right.1 + at as i16);
            self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
            self.asm.jump_imm(Cond::Eq, Reg::R1, 0, same);
        }
        if a != b {
            let longer = if a > b { left } else { right };
            self.asm.load(Size::B, Reg::R1, longer.0, longer.1 + shorter as i16);
            self.asm.jump_imm(Cond::Ne, Reg::R1, 0, differ);
        }
        self.asm.bind(same);
    }
}
