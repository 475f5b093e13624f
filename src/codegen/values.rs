//! Values in memory: strings and tuples written into stack buffers (records, map keys and values,
//! variables), copied, and compared.

use super::calls::Emit;
use super::frame::Val;
use super::Gen;
use crate::kernel::tracefs::FieldKind;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::probes::KernelStackStart;
use crate::sema::builtins::{Builtin, COMM_SIZE};
use crate::sema::types::{StackType, Type};

/// `BPF_F_USER_STACK`: `bpf_get_stackid` walks the user stack.
const USER_STACK: i32 = 1 << 8;
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

impl Gen<'_> {
    /// Writes the value of `e` at `fp + offset`, laid out as `ty` (the destination's type: its strings
    /// may be longer than the value's; the rest is NUL-padded).
    pub(crate) fn value_into(&mut self, e: &Expr, offset: i16, ty: &Type) -> Result<(), Diagnostic> {
        if let ExprKind::Block { block, value } = &e.kind {
            let value = self.block_value(block, value, e.span)?;
            return self.value_into(value, offset, ty);
        }
        // A struct stored as the named tuple of its members (expressions made up here, such as `print(args)`'s
        // fields, have no type of their own and are none).
        if let (Type::NamedTuple { .. }, Ok(Type::Record { .. })) = (ty, self.ty(e)) {
            return self.record_into(e, offset, ty);
        }
        if let (
            ExprKind::Call { .. },
            Type::Inet
            | Type::MacAddr
            | Type::Symbol { .. }
            | Type::Stack(_)
            | Type::Buf { .. }
            | Type::Timestamp { .. }
            | Type::CgroupPath { .. }
            | Type::ContainerId
            | Type::Bytes { .. },
        ) = (&e.kind, ty)
        {
            return self.call_into(e, offset, ty);
        }
        // `c ? a : b` of tuples, buffers and the like: each branch written in place.
        if let (ExprKind::Ternary { cond, then, otherwise }, false) = (&e.kind, ty.is_int()) {
            if !matches!(ty, Type::Str { .. }) {
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                self.value_into(then, offset, ty)?;
                self.asm.jump(done);
                self.asm.bind(no);
                self.value_into(otherwise, offset, ty)?;
                self.asm.bind(done);
                return Ok(());
            }
        }
        match ty {
            Type::Int { .. } | Type::Ptr { .. } | Type::Pointer { .. } | Type::Bool | Type::Enum { .. } => {
                let val = self.int(e)?;
                self.store_val(val, offset);
                Ok(())
            }
            Type::Str { size } => self.string_into(e, offset, *size),
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => match (&e.kind, ty) {
                (ExprKind::Tuple(items), _) => {
                    for ((item, field), at) in items.iter().zip(fields).zip(Type::field_offsets(fields)) {
                        self.value_into(item, offset + at as i16, field)?;
                    }
                    Ok(())
                }
                // Written in any order, evaluated as written, each stored at its field's place.
                (ExprKind::NamedTuple { names: written, items }, Type::NamedTuple { names, .. }) => {
                    let offsets = Type::field_offsets(fields);
                    for (name, item) in written.iter().zip(items) {
                        let index = names.iter().position(|n| n == name).ok_or_else(|| {
                            Diagnostic::error(item.span, "internal error: a record field out of place")
                        })?;
                        self.value_into(item, offset + offsets[index] as i16, &fields[index])?;
                    }
                    Ok(())
                }
                // A function's record (`typeinfo()`), written in place.
                (ExprKind::Call { .. }, _) => self.call_into(e, offset, ty),
                // Laid out otherwise (longer strings, fields in another order): converted field by field.
                _ if Type::field_offsets_differ(&self.ty(e)?, ty) => self.tuple_converted_into(e, offset, ty),
                _ => self.copy_value_into(e, offset, ty.slot_size()),
            },
            Type::Inet
            | Type::MacAddr
            | Type::Timestamp { .. }
            | Type::CgroupPath { .. }
            | Type::ContainerId
            | Type::Bytes { .. } => self.copy_value_into(e, offset, ty.slot_size()),
            // `username` is the uid, named in userspace.
            Type::Username => match self.probe.types.builtin(e) {
                Some(Builtin::Username) => {
                    let uid = self.builtin_int(Some(Builtin::Uid), e.span)?;
                    self.store_val(uid, offset);
                    Ok(())
                }
                _ => self.copy_value_into(e, offset, 8),
            },
            Type::Buf { size } => {
                // The value's buffer may be shorter than the destination's: copy it, zero the rest.
                let from = self.ty(e)?.slot_size();
                self.zero(offset, 8 + size.div_ceil(8) * 8);
                self.copy_value_into(e, offset, from)
            }
            Type::Symbol { .. } => match &e.kind {
                // Under a kprobe_multi link: the address of the function that fired.
                ExprKind::Ident(name) if name == "func" => {
                    self.asm.mov64_reg(Reg::R1, Reg::R9);
                    self.asm.call(Helper::GetFuncIp.id());
                    self.asm.store(Size::DW, Reg::FP, offset, Reg::R0);
                    Ok(())
                }
                _ => self.copy_value_into(e, offset, ty.slot_size()),
            },
            Type::Function { .. } => match &e.kind {
                // Under a uprobe_multi link: the index of the function that fired, its link cookie.
                ExprKind::Ident(name) if name == "func" => {
                    self.asm.mov64_reg(Reg::R1, Reg::R9);
                    self.asm.call(Helper::GetAttachCookie.id());
                    self.asm.store(Size::DW, Reg::FP, offset, Reg::R0);
                    Ok(())
                }
                _ => self.copy_value_into(e, offset, ty.slot_size()),
            },
            Type::Cpumask { bytes } => match &e.kind {
                ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                    let field = self.point_field(field, e.span)?;
                    self.zero(offset, *bytes);
                    self.data_loc_into(field.offset as i16, offset, *bytes, Helper::ProbeReadKernel);
                    Ok(())
                }
                _ => self.copy_value_into(e, offset, *bytes),
            },
            Type::Stack(stack) => match &e.kind {
                ExprKind::Ident(_) => self.stack_into(*stack, offset, e.span),
                _ => self.copy_value_into(e, offset, ty.slot_size()),
            },
            Type::Array { .. } => self.array_into(e, offset, ty),
            Type::Record { .. } | Type::Void => {
                Err(Diagnostic::error(e.span, "internal error: storing a struct or a value of type none"))
            }
        }
    }

    /// `ntop([af, ]addr)` at `fp + offset`: the family (given, or told by the address's size), then the
    /// address's bytes (an integer's low 4 bytes are an IPv4 address as it is stored, in network order).
    pub(crate) fn inet_into(&mut self, args: &[Expr], offset: i16) -> Result<(), Diagnostic> {
        let address = args.last().expect("checked: one or two arguments");
        let ty = self.ty(address)?;
        self.zero(offset, 24);
        match &ty {
            Type::Bytes { size } => {
                let buffer = self.frame.alloc(ty.slot_size(), address.span)?;
                self.value_into(address, buffer, &ty)?;
                self.copy_between(Reg::FP, buffer, Reg::FP, offset + 8, (*size).div_ceil(8) * 8);
            }
            Type::Str { size } => {
                let buffer = self.frame.alloc(Type::Str { size: *size }.slot_size(), address.span)?;
                self.string_into(address, buffer, *size)?;
                self.copy_between(Reg::FP, buffer, Reg::FP, offset + 8, (*size).div_ceil(8) * 8);
            }
            _ => {
                let value = self.int(address)?;
                let reg = self.reg_of(value, Reg::R0);
                self.asm.store(Size::W, Reg::FP, offset + 8, reg);
                self.frame.release(value);
            }
        }
        match args {
            [family, _] => {
                let family = self.int(family)?;
                self.store_val(family, offset);
            }
            _ => {
                let family =
                    if matches!(ty, Type::Str { size: 16 } | Type::Bytes { size: 16 }) { 10 } else { 2 };
                self.asm.store_imm(Size::DW, Reg::FP, offset, family);
            }
        }
        Ok(())
    }

    /// Reads the data a `__data_loc` field points to (its u32 locator at `ctx + field_offset`: offset in the
    /// low 16 bits, from the start of the record) into `size` bytes at `fp + to`, with `read` (a probe_read
    /// helper; the `_str` ones stop at the NUL).
    fn data_loc_into(&mut self, field_offset: i16, to: i16, size: usize, read: Helper) {
        self.asm.load(Size::W, Reg::R3, Reg::R9, field_offset);
        self.asm.alu64_imm(Alu::And, Reg::R3, 0xffff);
        // The record is the context: its address plus the data's offset is where the data is.
        self.asm.alu64_reg(Alu::Add, Reg::R3, Reg::R9);
        self.asm.mov64_reg(Reg::R1, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R1, to as i32);
        self.asm.mov64_imm(Reg::R2, size as i32);
        self.asm.call(read.id());
    }

    /// Records the current stack in its stack-trace map and stores its id (and for a user stack, the
    /// process id its addresses belong to) at `fp + offset`.
    pub(crate) fn stack_into(&mut self, stack: StackType, offset: i16, span: Span) -> Result<(), Diagnostic> {
        if stack.dwarf {
            return self.user_stack_copy_into(stack, offset, span);
        }
        let key = (stack.user, stack.depth);
        let index = self.stack_maps.iter().position(|k| *k == key).ok_or_else(|| {
            Diagnostic::error(span, "internal error: the checker found no stack-trace map for this stack")
        })?;
        // A kernel stack skips the frames of what ran the probe (a BPF timer's softirq), where it says so.
        let start = self.point.provider.kernel_stack_start().filter(|_| !stack.user);
        if let Some(start) = start {
            self.frames_to_skip_in_r3(start, span)?;
        }
        self.asm.mov64_reg(Reg::R1, Reg::R9);
        self.asm.ld_map(Reg::R2, self.layout.stack(index));
        if start.is_none() {
            self.asm.mov64_imm(Reg::R3, if stack.user { USER_STACK } else { 0 });
        }
        self.asm.call(Helper::GetStackid.id());
        self.asm.store(Size::DW, Reg::FP, offset, Reg::R0);
        if stack.user {
            self.pid_tgid(span)?;
            self.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
            self.asm.store(Size::DW, Reg::FP, offset + 8, Reg::R0);
        }
        Ok(())
    }

    /// Puts in r3 how many frames of the kernel stack come before the traced code: those up to the first
    /// at `start.after` among the first [`KernelStackStart::WITHIN`], read with `bpf_get_stack`; 0 where it
    /// is not among them. Clobbers r0-r5.
    fn frames_to_skip_in_r3(&mut self, start: KernelStackStart, span: Span) -> Result<(), Diagnostic> {
        let within = KernelStackStart::WITHIN;
        let mark = self.frame.mark();
        let frames = self.frame.alloc(8 * within, span)?;
        self.asm.mov64_reg(Reg::R1, Reg::R9);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R2, frames.into());
        self.asm.mov64_imm(Reg::R3, 8 * within as i32);
        self.asm.mov64_imm(Reg::R4, 0);
        self.asm.call(Helper::GetStack.id());
        self.asm.mov64_imm(Reg::R3, 0);
        self.asm.ld_imm64(Reg::R5, start.after);
        let done = self.asm.new_label();
        for i in 0..within {
            let next = self.asm.new_label();
            // r0 is the bytes the helper wrote (or an error): frame i is there when r0 > 8i.
            self.asm.jump_imm(Cond::SLe, Reg::R0, 8 * i as i32, done);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, frames + 8 * i as i16);
            self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R5, next);
            self.asm.mov64_imm(Reg::R3, i as i32 + 1);
            self.asm.jump(done);
            self.asm.bind(next);
        }
        self.asm.bind(done);
        self.frame.release_to(mark);
        Ok(())
    }

    /// Writes the string `e` into a `size`-byte string slot at `fp + offset`.
    pub(crate) fn string_into(&mut self, e: &Expr, offset: i16, size: usize) -> Result<(), Diagnostic> {
        let slot = size.div_ceil(8) * 8;
        match &e.kind {
            ExprKind::Block { block, value } => {
                let value = self.block_value(block, value, e.span)?;
                self.string_into(value, offset, size)?;
            }
            ExprKind::Str(text) => self.constant_into(text.as_bytes(), offset, slot),
            ExprKind::Ident(name) if name == "func" => {
                let function = match self.point.provider.context().func {
                    Some(crate::probes::Func::Name(function)) => function,
                    _ => String::new(),
                };
                self.constant_into(function.as_bytes(), offset, slot);
            }
            ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                let field = self.point_field(field, e.span)?;
                self.zero(offset, slot);
                match field.kind {
                    FieldKind::CharArray { len } => {
                        self.asm.mov64_reg(Reg::R1, Reg::FP);
                        self.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                        self.asm.mov64_imm(Reg::R2, (len as usize).min(size.saturating_sub(1)) as i32);
                        self.asm.mov64_reg(Reg::R3, Reg::R9);
                        self.asm.alu64_imm(Alu::Add, Reg::R3, field.offset as i32);
                        self.asm.call(Helper::ProbeReadKernel.id());
                    }
                    _ => self.data_loc_into(field.offset as i16, offset, size, Helper::ProbeReadKernelStr),
                }
            }
            ExprKind::Field { .. } if self.is_member(e) => self.member_string_into(e, offset, size)?,
            ExprKind::Call { .. } => self.call_into(e, offset, &Type::Str { size })?,
            ExprKind::Ident(_) => match self.probe.types.builtin(e) {
                Some(Builtin::Comm) => {
                    self.zero(offset, slot);
                    self.asm.mov64_reg(Reg::R1, Reg::FP);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                    self.asm.mov64_imm(Reg::R2, size.min(COMM_SIZE) as i32);
                    self.asm.call(Helper::GetCurrentComm.id());
                }
                Some(Builtin::Probetype) => {
                    let kind = self.point.probe_type().to_string();
                    self.constant_into(kind.as_bytes(), offset, slot);
                }
                _ => {
                    let name = self.point.name.clone();
                    self.constant_into(name.as_bytes(), offset, slot);
                }
            },
            ExprKind::Ternary { cond, then, otherwise } => {
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                self.string_into(then, offset, size)?;
                self.asm.jump(done);
                self.asm.bind(no);
                self.string_into(otherwise, offset, size)?;
                self.asm.bind(done);
            }
            _ => self.copy_value_into(e, offset, slot)?,
        }
        Ok(())
    }

    /// Writes the value of the call `call` at `fp + offset`, laid out as `ty`.
    fn call_into(&mut self, call: &Expr, offset: i16, ty: &Type) -> Result<(), Diagnostic> {
        match (&call.kind, self.probe.types.function(call).map(|id| self.functions.emit(id))) {
            (ExprKind::Call { args, .. }, Some(Emit::Into(emit))) => emit(self, args, offset, ty, call.span),
            _ => Err(Diagnostic::error(call.span, "internal error: this call gives no value in memory")),
        }
    }

    /// Copies a variable or map value holding a string or tuple into `slot` bytes at `fp + offset`.
    pub(crate) fn copy_value_into(&mut self, e: &Expr, offset: i16, slot: usize) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Block { block, value } => {
                let value = self.block_value(block, value, e.span)?;
                self.copy_value_into(value, offset, slot)
            }
            ExprKind::Var(name) => {
                let (base, from) = self.var(name);
                let len = self.ty(e)?.slot_size().min(slot);
                self.copy_between(base, from, Reg::FP, offset, len);
                self.zero(offset + len as i16, slot - len);
                Ok(())
            }
            ExprKind::Map { name, keys } => self.map_read_into(name, keys, offset, slot, e.span),
            ExprKind::Unary { .. } | ExprKind::Index { .. } => self.memory_into(e, offset, slot),
            // A tracepoint's byte array (`args.daddr`): copied out of the record.
            ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                let field = self.point_field(field, e.span)?;
                if !matches!(field.kind, crate::kernel::tracefs::FieldKind::ByteArray { .. }) {
                    return Err(Diagnostic::error(
                        e.span,
                        "internal error: copying a field that is no byte array",
                    ));
                }
                let len = (field.size as usize).min(slot);
                self.zero(offset, slot);
                self.asm.mov64_reg(Reg::R1, Reg::FP);
                self.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                self.asm.mov64_imm(Reg::R2, len as i32);
                self.asm.mov64_reg(Reg::R3, Reg::R9);
                self.asm.alu64_imm(Alu::Add, Reg::R3, field.offset as i32);
                self.asm.call(Helper::ProbeReadKernel.id());
                Ok(())
            }
            ExprKind::Field { .. } if self.is_member(e) => self.member_array_into(e, offset, slot),
            ExprKind::Field { .. } => {
                let (base, from, ty) = self.tuple_field(e)?;
                let len = ty.slot_size().min(slot);
                self.copy_between(base, from, Reg::FP, offset, len);
                self.zero(offset + len as i16, slot - len);
                Ok(())
            }
            _ => Err(Diagnostic::error(e.span, "internal error: no code for this value")),
        }
    }

    /// Where the tuple element `e` (`base.N`, `base.N.M`) is, as `(base register, offset)`, and its type:
    /// inside the variable itself (`var_base`), or in a stack buffer the tuple is first written to.
    pub(crate) fn tuple_field(&mut self, e: &Expr) -> Result<(Reg, i16, Type), Diagnostic> {
        let ExprKind::Field { base, field } = &e.kind else {
            return Err(Diagnostic::error(e.span, "internal error: not a tuple element"));
        };
        let whole = self.ty(base)?;
        let (fields, index) = match &whole {
            Type::Tuple(fields) => (fields, field.parse().unwrap_or(0)),
            Type::NamedTuple { names, fields } => {
                (fields, names.iter().position(|n| n == field).unwrap_or(0))
            }
            _ => return Err(Diagnostic::error(e.span, "internal error: element of a non-tuple")),
        };
        let at = Type::field_offsets(fields)[index] as i16;
        let (reg, start) = match &base.kind {
            ExprKind::Var(name) => self.var(name),
            ExprKind::Field { base: inner, .. } if !matches!(&inner.kind, ExprKind::Ident(n) if n == "args") =>
            {
                let (reg, start, _) = self.tuple_field(base)?;
                (reg, start)
            }
            _ => {
                let buffer = self.frame.alloc(whole.slot_size(), e.span)?;
                self.value_into(base, buffer, &whole)?;
                (Reg::FP, buffer)
            }
        };
        Ok((reg, start + at, fields[index].clone()))
    }

    /// Stores constant bytes, NUL-padded to `slot` bytes (the last byte always stays NUL).
    pub(crate) fn constant_into(&mut self, bytes: &[u8], offset: i16, slot: usize) {
        let bytes = &bytes[..bytes.len().min(slot.saturating_sub(1))];
        for at in (0..slot).step_by(4) {
            let mut word = [0u8; 4];
            for (i, b) in word.iter_mut().enumerate() {
                *b = bytes.get(at + i).copied().unwrap_or(0);
            }
            self.asm.store_imm(Size::W, Reg::FP, offset + at as i16, i32::from_le_bytes(word));
        }
    }

    /// Copies `len` bytes (a multiple of 8) from `from_base + from` to `to_base + to`.
    pub(crate) fn copy_between(&mut self, from_base: Reg, from: i16, to_base: Reg, to: i16, len: usize) {
        for at in (0..len).step_by(8) {
            self.asm.load(Size::DW, Reg::R1, from_base, from + at as i16);
            self.asm.store(Size::DW, to_base, to + at as i16, Reg::R1);
        }
    }

    /// Copies `len` bytes (a multiple of 8) from the memory `ptr` points to (a map value) to the stack.
    pub(crate) fn copy_from(&mut self, ptr: Reg, to: i16, len: usize) {
        for at in (0..len).step_by(8) {
            self.asm.load(Size::DW, Reg::R1, ptr, at as i16);
            self.asm.store(Size::DW, Reg::FP, to + at as i16, Reg::R1);
        }
    }

    /// `(bool)string`: 1 when the string is not empty.
    pub(crate) fn string_is_not_empty(&mut self, e: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let slot = self.ty(e)?.slot_size();
        let (base, at) = self.string_place(e, slot, span)?;
        self.asm.load(Size::B, Reg::R0, base, at);
        let empty = self.asm.new_label();
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, empty);
        self.asm.mov64_imm(Reg::R0, 1);
        self.asm.bind(empty);
        self.take_r0(span)
    }

    /// Where string `e`, padded to `slot` bytes, can be read: a variable's own slot (on this frame or,
    /// in a loop's callback, on the probe's) when it is already that long, a new stack buffer otherwise.
    pub(crate) fn string_place(
        &mut self,
        e: &Expr,
        slot: usize,
        span: Span,
    ) -> Result<(Reg, i16), Diagnostic> {
        if let ExprKind::Var(name) = &e.kind {
            if self.ty(e)?.slot_size() == slot {
                return Ok(self.var(name));
            }
        }
        let buffer = self.frame.alloc(slot, span)?;
        self.string_into(e, buffer, slot)?;
        Ok((Reg::FP, buffer))
    }

    /// A comparison's value once its code has jumped to `differ` where the two differ: 1 when equal, 0 when
    /// not; the other way round with `negate`.
    pub(crate) fn verdict(&mut self, differ: Label, negate: bool, span: Span) -> Result<Val, Diagnostic> {
        let done = self.asm.new_label();
        self.asm.mov64_imm(Reg::R0, !negate as i32);
        self.asm.jump(done);
        self.asm.bind(differ);
        self.asm.mov64_imm(Reg::R0, negate as i32);
        self.asm.bind(done);
        self.take_r0(span)
    }

    /// Compares two buffers (length and bytes, each laid out as the longer of the two): 1 when equal,
    /// 0 when not; the other way round with `negate`.
    pub(crate) fn compare_buffers(
        &mut self,
        a: &Expr,
        b: &Expr,
        negate: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let ty = self.ty(a)?.unify(&self.ty(b)?).unwrap_or(Type::Buf { size: 0 });
        let slot = ty.slot_size();
        let (left, right) = (self.frame.alloc(slot, span)?, self.frame.alloc(slot, span)?);
        self.value_into(a, left, &ty)?;
        self.value_into(b, right, &ty)?;
        let differ = self.asm.new_label();
        for at in (0..slot).step_by(8) {
            self.asm.load(Size::DW, Reg::R1, Reg::FP, left + at as i16);
            self.asm.load(Size::DW, Reg::R2, Reg::FP, right + at as i16);
            self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
        }
        self.verdict(differ, negate, span)
    }

    /// Compares two strings up to their first NUL (or `limit` bytes): 1 when equal, 0 when not; the
    /// other way round with `negate` (which makes `!=`, and `strncmp`'s 0-when-equal).
    pub(crate) fn compare_strings(
        &mut self,
        a: &Expr,
        b: &Expr,
        limit: Option<usize>,
        negate: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let slot = self.ty(a)?.slot_size().max(self.ty(b)?.slot_size());
        let compared = limit.unwrap_or(slot).min(slot);
        if compared == 0 {
            return Ok(Val::Imm(!negate as u64));
        }
        let (same, differ) = (self.asm.new_label(), self.asm.new_label());
        let literal = match (&a.kind, &b.kind) {
            (ExprKind::Str(_), ExprKind::Str(_)) => None,
            (ExprKind::Str(text), _) => Some((text, b)),
            (_, ExprKind::Str(text)) => Some((text, a)),
            _ => None,
        };
        // Against a literal, only the literal's bytes and its NUL are read: those must lie in the other
        // string's slot.
        let literal = match literal {
            Some((text, other)) if compared.min(text.len() + 1) <= self.ty(other)?.slot_size() => {
                Some((text, other))
            }
            _ => None,
        };
        match literal {
            Some((text, other)) => {
                self.compare_with_literal(other, text.as_bytes(), compared, span, (same, differ))?;
            }
            _ => {
                let left = self.string_place(a, slot, span)?;
                let right = self.string_place(b, slot, span)?;
                for at in 0..compared {
                    self.asm.load(Size::B, Reg::R1, left.0, left.1 + at as i16);
                    self.asm.load(Size::B, Reg::R2, right.0, right.1 + at as i16);
                    self.asm.jump_reg(Cond::Ne, Reg::R1, Reg::R2, differ);
                    self.asm.jump_imm(Cond::Eq, Reg::R1, 0, same);
                }
            }
        }
        self.asm.bind(same);
        self.verdict(differ, negate, span)
    }

    /// Compares string `e` with literal bytes, byte by byte against immediates: only the literal's
    /// bytes and its NUL are read, and the literal takes no stack.
    fn compare_with_literal(
        &mut self,
        e: &Expr,
        literal: &[u8],
        compared: usize,
        span: Span,
        (same, differ): (Label, Label),
    ) -> Result<(), Diagnostic> {
        let own = self.ty(e)?.slot_size();
        let (base, at) = self.string_place(e, own, span)?;
        for i in 0..compared.min(literal.len() + 1) {
            let byte = literal.get(i).copied().unwrap_or(0);
            self.asm.load(Size::B, Reg::R1, base, at + i as i16);
            self.asm.jump_imm(Cond::Ne, Reg::R1, byte as i32, differ);
        }
        self.asm.jump(same);
        Ok(())
    }
}
