//! A whole struct or union as a value (`$f = *p`, `@s[*p]`, `print(curtask->se)`): the record is read once
//! into a buffer with a probe-read helper (on the stack, or a large one in the scratch area where the program
//! has one), then each member is laid into its field of the named tuple sema typed the value as
//! (`sema::struct_values`). The verifier wants every stack access aligned to its size, so a member that is
//! not (a packed struct's, a bitfield's bytes) is put together a byte at a time.

use super::frame::Val;
use super::Gen;
use crate::kernel::MemberKind;
use crate::lang::ast::{Expr, ExprKind, UnOp};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use bpf::{Alu, Helper, Reg, Size};

/// A record larger than this many bytes is read into the scratch area, where the program has one.
const LARGE: usize = 64;

impl Gen<'_> {
    /// The struct or union `e` (of type `Record`) as the named tuple `ty`, at `fp + offset`.
    pub(crate) fn record_into(&mut self, e: &Expr, offset: i16, ty: &Type) -> Result<(), Diagnostic> {
        self.record_into_at(e, (Reg::FP, offset), ty)
    }

    /// The struct or union `e` as the named tuple `ty`, at `base + offset` (the stack, or a variable in the
    /// scratch area). With a scratch area the record is read into it when it is large.
    pub(crate) fn record_into_at(&mut self, e: &Expr, to: (Reg, i16), ty: &Type) -> Result<(), Diagnostic> {
        let Type::Record { record, .. } = self.ty(e)? else {
            return Err(Diagnostic::error(e.span, "internal error: copying a struct that is none"));
        };
        let size = record.size.unwrap_or(0);
        let (address, user) = self.record_start(e)?;
        let scratch = self.frame.has_scratch();
        let (base, buffer) = self.buffer(size, size > LARGE, e.span).map_err(|error| match scratch {
            true => error,
            false => Diagnostic::error(
                e.span,
                format!(
                    "{} is {size} bytes: copied as a value it needs them twice on the stack, beside the \
                     program's other values, more than the {} bytes a BPF program has",
                    record.name,
                    super::frame::STACK_SIZE
                ),
            )
            .with_help("read the members you need instead, e.g. `(*p).member`"),
        })?;
        if size % 8 != 0 {
            // The last word's bytes past the record are read whole when a member is copied by words.
            self.asm.store_imm(Size::DW, base, buffer + (size / 8 * 8) as i16, 0);
        }
        self.read_memory_at(address, (base, buffer), size, user, e.span)?;
        self.zero_at(to.0, to.1, ty.slot_size());
        self.lay_members(record.id, (base, buffer), to, ty, e)
    }

    /// An integer array member `e` copied into the `slot` bytes at `base + offset` (a variable of the scratch
    /// area): read straight into it.
    pub(crate) fn member_array_into_at(
        &mut self,
        e: &Expr,
        (base, offset): (Reg, i16),
        slot: usize,
    ) -> Result<(), Diagnostic> {
        let (address, member, user) = self.member_address(e)?;
        let MemberKind::IntArray { size, len, .. } = member.kind else {
            return Err(Diagnostic::error(e.span, "internal error: reading a member that is no array"));
        };
        self.zero_at(base, offset, slot);
        self.read_memory_at(address, (base, offset), ((size * len) as usize).min(slot), user, e.span)
    }

    /// Reads `size` bytes at `address` into `base + to`: the stack, or the scratch area.
    fn read_memory_at(
        &mut self,
        address: Val,
        (base, to): (Reg, i16),
        size: usize,
        user: bool,
        span: Span,
    ) -> Result<(), Diagnostic> {
        if base == Reg::FP {
            return self.read_memory(address, to, size, user, span);
        }
        let reg = self.reg_of(address, Reg::R3);
        self.asm.mov64_reg(Reg::R3, reg);
        self.frame.release(address);
        self.asm.mov64_reg(Reg::R1, base);
        self.asm.alu64_imm(Alu::Add, Reg::R1, to as i32);
        self.asm.mov64_imm(Reg::R2, size as i32);
        let helper = if user { Helper::ProbeReadUser } else { Helper::ProbeReadKernel };
        self.asm.call(helper.id());
        self.check_read(helper, span)
    }

    /// Where the record `e` starts in memory, and whether that is a process's memory.
    pub(crate) fn record_start(&mut self, e: &Expr) -> Result<(Val, bool), Diagnostic> {
        let Type::Record { record, user } = self.ty(e)? else {
            return Err(Diagnostic::error(e.span, "internal error: the start of a struct that is none"));
        };
        match &e.kind {
            // `*p`: where `p` points.
            ExprKind::Unary { op: UnOp::Deref, operand } => Ok((self.int(operand)?, user)),
            // `array[i]`: the array's element `i` (an index sema found constant).
            ExprKind::Index { base: array, index } => {
                let (start, _, _) = self.member_address(array)?;
                let at = crate::lang::constant::constant_index(index).ok_or_else(|| {
                    Diagnostic::error(index.span, "internal error: an array of structs indexed at run time")
                })?;
                let size = record.size.unwrap_or(0) as u64;
                let home = self.writable(start, e.span)?;
                let reg = self.reg_of(home, Reg::R0);
                self.asm.alu64_imm(Alu::Add, reg, (at as u64 * size) as i32);
                self.put(home, reg);
                Ok((home, user))
            }
            ExprKind::Field { .. } => {
                let (start, _, user) = self.member_address(e)?;
                Ok((start, user))
            }
            _ => Err(Diagnostic::error(
                e.span,
                "a struct is copied only from `*pointer`, a member or an array element",
            )
            .with_help("copy it into a variable first: `$s = *p;`")),
        }
    }

    /// Record `id`'s members, read at `from` (a base register and an offset), into the fields of `ty` at
    /// `to`.
    fn lay_members(
        &mut self,
        id: u32,
        from: (Reg, i16),
        to: (Reg, i16),
        ty: &Type,
        e: &Expr,
    ) -> Result<(), Diagnostic> {
        let probe = self.probe;
        let (Ok(members), Some(fields)) = (probe.types.record_members(id, e.span), ty.tuple_fields()) else {
            return Err(Diagnostic::error(e.span, "internal error: a struct's value without its members"));
        };
        let offsets = Type::field_offsets(fields);
        for (((_, member), field), at) in members.iter().zip(fields).zip(offsets) {
            let (src, dst) = ((from.0, from.1 + member.offset as i16), (to.0, to.1 + at as i16));
            match member.kind {
                MemberKind::Int { size, signed } => {
                    self.load_bytes(src, size as usize);
                    if signed && size < 8 {
                        let shift = 64 - 8 * size as i32;
                        self.asm.alu64_imm(Alu::Lsh, Reg::R0, shift);
                        self.asm.alu64_imm(Alu::Arsh, Reg::R0, shift);
                    }
                    self.asm.store(Size::DW, dst.0, dst.1, Reg::R0);
                }
                MemberKind::Pointer { .. } => {
                    self.load_bytes(src, 8);
                    self.asm.store(Size::DW, dst.0, dst.1, Reg::R0);
                }
                MemberKind::Bitfield { shift, bits } => {
                    let bytes = (shift + bits).div_ceil(8) as usize;
                    if bytes > 8 {
                        return Err(Diagnostic::error(
                            e.span,
                            "a bitfield spread over more than 8 bytes cannot be read",
                        ));
                    }
                    self.load_bytes(src, bytes);
                    // Up to the top of the register, then down again: the bitfield's bits alone.
                    self.asm.alu64_imm(Alu::Lsh, Reg::R0, (64 - shift - bits) as i32);
                    self.asm.alu64_imm(Alu::Rsh, Reg::R0, (64 - bits) as i32);
                    self.asm.store(Size::DW, dst.0, dst.1, Reg::R0);
                }
                MemberKind::CharArray { len } => self.copy_bytes(src, dst, len as usize),
                MemberKind::IntArray { size, len, .. } => self.copy_bytes(src, dst, (size * len) as usize),
                MemberKind::Record { id: inner } => self.lay_members(inner, src, dst, field, e)?,
                MemberKind::RecordArray { .. } | MemberKind::Other(_) => {
                    return Err(Diagnostic::error(e.span, "internal error: a struct member sema refused"));
                }
            }
        }
        Ok(())
    }

    /// The `size` bytes (up to 8, little-endian) at `base + at` into R0, zero-extended: one load when `at` is
    /// aligned to a load of that size, else a byte at a time.
    fn load_bytes(&mut self, (base, at): (Reg, i16), size: usize) {
        if let Some(load) = Size::for_bytes(size).filter(|s| at % s.bytes() as i16 == 0) {
            self.asm.load(load, Reg::R0, base, at);
            return;
        }
        self.asm.mov64_imm(Reg::R0, 0);
        for i in (0..size).rev() {
            self.asm.alu64_imm(Alu::Lsh, Reg::R0, 8);
            self.asm.load(Size::B, Reg::R1, base, at + i as i16);
            self.asm.alu64_reg(Alu::Or, Reg::R0, Reg::R1);
        }
    }

    /// Copies `len` bytes from `from` to `to` (a zeroed slot): by words while both are aligned.
    fn copy_bytes(&mut self, (from_base, from): (Reg, i16), (to_base, to): (Reg, i16), len: usize) {
        let words = if from % 8 == 0 && to % 8 == 0 { len / 8 } else { 0 };
        self.copy_between(from_base, from, to_base, to, words * 8);
        for i in words * 8..len {
            self.asm.load(Size::B, Reg::R1, from_base, from + i as i16);
            self.asm.store(Size::B, to_base, to + i as i16, Reg::R1);
        }
    }
}
