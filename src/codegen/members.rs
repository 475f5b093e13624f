//! Members of kernel structs through BTF-typed pointers: `curtask->pid`, `((struct sock *)arg0)->sk_family`,
//! `curtask->se.vruntime`. The member's address is the pointer plus the offsets the kernel's BTF gives;
//! its bytes are copied to the stack with a probe-read helper (user memory in uprobes, kernel memory
//! elsewhere), so a bad pointer reads as zero instead of faulting.

use super::frame::Val;
use super::Gen;
use crate::kernel::{Member, MemberKind};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use bpf::{Alu, Helper, Reg, Size};

impl Gen<'_> {
    /// Whether `e` reads a member of a kernel struct (rather than a tuple element or a tracepoint field).
    pub(crate) fn is_member(&self, e: &Expr) -> bool {
        matches!(&e.kind, ExprKind::Field { base, .. }
            if matches!(self.ty(base), Ok(Type::Ptr { .. } | Type::Record { .. })))
    }

    /// `base->field` as an integer (or a pointer).
    pub(crate) fn member_int(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        let (address, member, user) = self.member_address(e)?;
        let (size, signed) = match member.kind {
            MemberKind::Int { size, signed } => (size, signed),
            MemberKind::Pointer { .. } => (8, false),
            MemberKind::Bitfield { shift, bits } => return self.bitfield(address, shift, bits, user, e),
            _ => return Err(Diagnostic::error(e.span, "internal error: reading a member that is no number")),
        };
        let buffer = self.frame.alloc(8, e.span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buffer, 0);
        self.read_memory(address, buffer, size as usize, user, e.span)?;
        let size = Size::for_bytes(size as usize).unwrap_or(Size::DW);
        self.load_into_fresh(Reg::FP, buffer, size, signed, e.span)
    }

    /// A bitfield of `bits` bits from bit `shift` at `address`: the bytes holding it read whole, shifted
    /// down and masked.
    fn bitfield(
        &mut self,
        address: Val,
        shift: u32,
        bits: u32,
        user: bool,
        e: &Expr,
    ) -> Result<Val, Diagnostic> {
        let bytes = (shift + bits).div_ceil(8).next_power_of_two();
        if bytes > 8 {
            return Err(Diagnostic::error(e.span, "a bitfield spread over more than 8 bytes cannot be read"));
        }
        let buffer = self.frame.alloc(8, e.span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buffer, 0);
        self.read_memory(address, buffer, bytes as usize, user, e.span)?;
        let value = self.load_into_fresh(Reg::FP, buffer, Size::DW, false, e.span)?;
        let reg = self.reg_of(value, Reg::R0);
        // Up to the top of the register, then down again: the bitfield's bits alone.
        self.asm.alu64_imm(Alu::Lsh, reg, (64 - shift - bits) as i32);
        self.asm.alu64_imm(Alu::Rsh, reg, (64 - bits) as i32);
        self.put(value, reg);
        Ok(value)
    }

    /// `base->name` of a `char name[N]` member into a string slot of `size` bytes at `fp + offset`.
    pub(crate) fn member_string_into(
        &mut self,
        e: &Expr,
        offset: i16,
        size: usize,
    ) -> Result<(), Diagnostic> {
        let (address, member, user) = self.member_address(e)?;
        let MemberKind::CharArray { len } = member.kind else {
            return Err(Diagnostic::error(e.span, "internal error: reading a member that is no string"));
        };
        self.zero(offset, size.div_ceil(8) * 8);
        self.read_memory(address, offset, (len as usize).min(size), user, e.span)?;
        Ok(())
    }

    /// `base->name` of an integer array member (`int y[4]`) into `slot` bytes at `fp + offset`.
    pub(crate) fn member_array_into(&mut self, e: &Expr, offset: i16, slot: usize) -> Result<(), Diagnostic> {
        let (address, member, user) = self.member_address(e)?;
        let MemberKind::IntArray { size, len, .. } = member.kind else {
            return Err(Diagnostic::error(e.span, "internal error: reading a member that is no array"));
        };
        self.zero(offset, slot);
        self.read_memory(address, offset, ((size * len) as usize).min(slot), user, e.span)?;
        Ok(())
    }

    /// `base->name[index]` of an integer array member: only the element is read, at the member's address plus
    /// the index's bytes; an index past the array's end (known only when the program runs) reads 0.
    pub(crate) fn member_element_int(
        &mut self,
        array: &Expr,
        index: &Expr,
        elem: &Type,
        len: usize,
        span: crate::lang::Span,
    ) -> Result<Val, Diagnostic> {
        let stride = elem.c_size().unwrap_or(8);
        let (address, _, user) = self.member_address(array)?;
        if let Some(at) = crate::sema::constant_index(index) {
            let reg = self.reg_of(address, Reg::R0);
            self.asm.alu64_imm(Alu::Add, reg, (at * stride) as i32);
            self.put(address, reg);
            return self.read_int(address, elem, user, span);
        }
        let n = self.int(index)?;
        let result = self.frame.fresh(span)?;
        let done = self.asm.new_label();
        let rn = self.reg_of(n, Reg::R1);
        self.asm.mov64_reg(Reg::R2, rn);
        self.frame.release(n);
        self.asm.mov64_imm(Reg::R0, 0);
        self.put(result, Reg::R0);
        self.asm.jump_imm(bpf::Cond::UGe, Reg::R2, len as i32, done);
        self.asm.alu64_imm(Alu::Mul, Reg::R2, stride as i32);
        let reg = self.reg_of(address, Reg::R0);
        self.asm.alu64_reg(Alu::Add, reg, Reg::R2);
        self.put(address, reg);
        let value = self.read_int(address, elem, user, span)?;
        let reg = self.reg_of(value, Reg::R0);
        self.put(result, reg);
        self.frame.release(value);
        self.asm.bind(done);
        Ok(result)
    }

    /// The address of the member `e` names, the member, and whether it is in a process's memory.
    pub(crate) fn member_address(&mut self, e: &Expr) -> Result<(Val, Member, bool), Diagnostic> {
        let ExprKind::Field { base, .. } = &e.kind else {
            return Err(Diagnostic::error(e.span, "internal error: a member without a base"));
        };
        let member = self.probe.types.member(e)?.clone();
        let (start, user) = match self.ty(base)? {
            Type::Ptr { user, .. } => (self.int(base)?, user),
            // `(*p).member`, `array[i].member`, `a->inner.member`.
            _ => self.record_start(base)?,
        };
        let home = self.writable(start, e.span)?;
        let reg = self.reg_of(home, Reg::R0);
        self.asm.alu64_imm(Alu::Add, reg, member.offset as i32);
        self.put(home, reg);
        Ok((home, member, user))
    }

    /// `*address` (at `span`): the 8 bytes at an address.
    pub(crate) fn dereference(&mut self, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
        // A plain address is the process's in a uprobe, the kernel's elsewhere.
        let user = match self.ty(operand)? {
            Type::Ptr { user, .. } => user,
            _ => self.point.provider.context().user_addresses,
        };
        let address = self.int(operand)?;
        let buffer = self.frame.alloc(8, operand.span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buffer, 0);
        self.read_memory(address, buffer, 8, user, span)?;
        self.load_into_fresh(Reg::FP, buffer, Size::DW, false, operand.span)
    }

    /// Copies `size` bytes at `address` (released) to `fp + to`, from a process's memory when `user`, for the
    /// expression at `span` (which `-k` names when the read fails).
    pub(crate) fn read_memory(
        &mut self,
        address: Val,
        to: i16,
        size: usize,
        user: bool,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let reg = self.reg_of(address, Reg::R3);
        self.asm.mov64_reg(Reg::R3, reg);
        self.frame.release(address);
        self.asm.mov64_reg(Reg::R1, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R1, to as i32);
        self.asm.mov64_imm(Reg::R2, size as i32);
        let helper = if user { Helper::ProbeReadUser } else { Helper::ProbeReadKernel };
        self.asm.call(helper.id());
        self.check_read(helper, span)
    }
}
