//! Expressions: integers into a [`Val`], strings into stack memory, conditions into jumps.

use super::calls::Emit;
use super::frame::Val;
use super::Gen;
use crate::kernel::Member;
use crate::lang::ast::{BinOp, Expr, ExprId, ExprKind, UnOp};
use crate::lang::{Diagnostic, Span};
use crate::probes::Place;
use crate::sema::builtins::Builtin;
use crate::sema::sign_warnings::is_literal_operand;
use crate::sema::typed::{Name, Resolved};
use crate::sema::types::{Operand, Signs, Type};
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

/// The jump condition of a comparison operator.
fn comparison(op: BinOp, signed: bool) -> Option<Cond> {
    Some(match (op, signed) {
        (BinOp::Eq, _) => Cond::Eq,
        (BinOp::Ne, _) => Cond::Ne,
        (BinOp::Lt, false) => Cond::ULt,
        (BinOp::Le, false) => Cond::ULe,
        (BinOp::Gt, false) => Cond::UGt,
        (BinOp::Ge, false) => Cond::UGe,
        (BinOp::Lt, true) => Cond::SLt,
        (BinOp::Le, true) => Cond::SLe,
        (BinOp::Gt, true) => Cond::SGt,
        (BinOp::Ge, true) => Cond::SGe,
        _ => return None,
    })
}

/// Whether `x op b` divides by a value that may be zero: then [`Gen::apply`] may call a helper.
pub(crate) fn divides_by_maybe_zero(op: BinOp, b: Val) -> bool {
    matches!(op, BinOp::Div | BinOp::Mod) && !matches!(b, Val::Imm(y) if y != 0)
}

/// Folds an operation on two constants the way the generated code computes it.
fn fold(op: BinOp, a: u64, b: u64) -> Option<u64> {
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::BitAnd => a & b,
        BinOp::BitOr => a | b,
        BinOp::BitXor => a ^ b,
        BinOp::Shl => a.wrapping_shl(b as u32),
        // As in bpftrace: `>>` is a logical shift, and division and modulo are unsigned, whatever the
        // signs. A zero divisor is left to run time, which gives 1 and a warning.
        BinOp::Shr => a.wrapping_shr(b as u32),
        BinOp::Div | BinOp::Mod if b == 0 => return None,
        BinOp::Div => a / b,
        BinOp::Mod => a % b,
        _ => return None,
    })
}

impl Gen<'_> {
    /// The type of an expression that passed the checks.
    pub(crate) fn ty(&self, e: &Expr) -> Result<Type, Diagnostic> {
        match (&e.kind, e.id) {
            // `let $x = value` is generated as an assignment to a `$x` that is not in the program.
            (ExprKind::Var(name), ExprId::NONE) => {
                self.probe.vars.get(name).cloned().ok_or_else(|| {
                    Diagnostic::error(e.span, format!("internal error: `${name}` has no type"))
                })
            }
            _ => self.probe.types.type_of(e).cloned(),
        }
    }

    /// What sema resolved for the call whose first argument is `arg` (a size, an offset, a BTF id).
    pub(crate) fn resolved(&self, arg: &Expr) -> Result<Resolved, Diagnostic> {
        self.probe.types.resolved(arg).cloned()
    }

    /// The constant sema resolved for the call whose first argument is `arg`.
    pub(crate) fn probe_constant(&self, arg: &Expr) -> Result<u64, Diagnostic> {
        self.probe.types.constant(arg)
    }

    /// The kernel struct member the field access `e` reads, as sema found it.
    pub(crate) fn member_read(&self, e: &Expr) -> Result<Member, Diagnostic> {
        self.probe.types.member(e).cloned()
    }

    /// Whether `lhs op rhs` is signed (decides comparisons), as sema's [`Signs`] rule says.
    fn signed(&self, op: BinOp, lhs: &Expr, rhs: &Expr) -> bool {
        let (Ok(a), Ok(b)) = (self.ty(lhs), self.ty(rhs)) else { return false };
        Signs::of(
            op == BinOp::Sub,
            Operand { ty: &a, literal: is_literal_operand(lhs, &self.probe.literal_vars) },
            Operand { ty: &b, literal: is_literal_operand(rhs, &self.probe.literal_vars) },
        )
        .signed()
    }

    /// The value in a register: `val`'s own, or `scratch` loaded with it.
    pub(crate) fn reg_of(&mut self, val: Val, scratch: Reg) -> Reg {
        match val {
            Val::Reg(reg) => reg,
            Val::Slot(off) => {
                self.asm.load(Size::DW, scratch, Reg::FP, off);
                scratch
            }
            Val::Imm(value) => {
                self.asm.mov_u64(scratch, value);
                scratch
            }
        }
    }

    /// Stores the register `reg` into the home `val` (a no-op when it is already there).
    pub(crate) fn put(&mut self, val: Val, reg: Reg) {
        match val {
            Val::Reg(home) if home != reg => self.asm.mov64_reg(home, reg),
            Val::Slot(off) => self.asm.store(Size::DW, Reg::FP, off, reg),
            _ => {}
        }
    }

    /// `arg0`..`argN` and `retval` (the name `e`): where the value is in this point's context, its size
    /// and sign.
    fn probe_int(&self, e: &Expr) -> Option<(i16, Size, bool)> {
        match self.probe.types.name(e)? {
            Name::Retval => {
                let retval = self.point.provider.context().retval?;
                Some((retval.offset, Size::for_bytes(retval.size.into())?, retval.signed))
            }
            Name::Argument(n) => Some((self.point.provider.context().arguments?.offset(n)?, Size::DW, false)),
            _ => None,
        }
    }

    /// A value loaded from `base + offset` (`size` bytes, sign-extended when `signed`) into a new home.
    pub(crate) fn load_into_fresh(
        &mut self,
        base: Reg,
        offset: i16,
        size: Size,
        signed: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        self.asm.load(size, Reg::R0, base, offset);
        if signed && size != Size::DW {
            let shift = 64 - 8 * size.bytes() as i32;
            self.asm.alu64_imm(Alu::Lsh, Reg::R0, shift);
            self.asm.alu64_imm(Alu::Arsh, Reg::R0, shift);
        }
        self.take_r0(span)
    }

    /// A value of the probe's context, where its provider says it is, loaded into a new home.
    pub(crate) fn load_place(
        &mut self,
        place: Place,
        size: Size,
        signed: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        match place {
            Place::Context(offset) => self.load_into_fresh(Reg::R9, offset, size, signed, span),
            Place::Behind { pointer, offset } => {
                let slot = self.frame.alloc(8, span)?;
                self.read_behind(pointer, offset, slot);
                self.load_into_fresh(Reg::FP, slot, size, signed, span)
            }
        }
    }

    /// Copies the 8 bytes at `offset` behind the kernel pointer at `pointer` in the context to `fp + slot`.
    pub(crate) fn read_behind(&mut self, pointer: i16, offset: i16, slot: i16) {
        self.asm.mov64_reg(Reg::R1, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R1, slot as i32);
        self.asm.mov64_imm(Reg::R2, 8);
        self.asm.load(Size::DW, Reg::R3, Reg::R9, pointer);
        self.asm.alu64_imm(Alu::Add, Reg::R3, offset as i32);
        self.asm.call(Helper::ProbeReadKernel.id());
    }

    /// The number of CPUs set in a cpumask: a population count of each 64-bit word (SWAR).
    pub(crate) fn cpumask_weight(&mut self, mask: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let ty = self.ty(mask)?;
        let buffer = self.frame.alloc(ty.slot_size(), span)?;
        self.value_into(mask, buffer, &ty)?;
        let total = self.frame.alloc(8, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, total, 0);
        for w in 0..ty.slot_size() / 8 {
            let (x, t) = (Reg::R1, Reg::R2);
            self.asm.load(Size::DW, x, Reg::FP, buffer + 8 * w as i16);
            // x -= (x >> 1) & 0x5555...
            self.asm.mov64_reg(t, x);
            self.asm.alu64_imm(Alu::Rsh, t, 1);
            self.asm.ld_imm64(Reg::R3, 0x5555_5555_5555_5555);
            self.asm.alu64_reg(Alu::And, t, Reg::R3);
            self.asm.alu64_reg(Alu::Sub, x, t);
            // x = (x & 0x3333...) + ((x >> 2) & 0x3333...)
            self.asm.ld_imm64(Reg::R3, 0x3333_3333_3333_3333);
            self.asm.mov64_reg(t, x);
            self.asm.alu64_imm(Alu::Rsh, t, 2);
            self.asm.alu64_reg(Alu::And, t, Reg::R3);
            self.asm.alu64_reg(Alu::And, x, Reg::R3);
            self.asm.alu64_reg(Alu::Add, x, t);
            // x = (x + (x >> 4)) & 0x0f0f...; count = (x * 0x0101...) >> 56
            self.asm.mov64_reg(t, x);
            self.asm.alu64_imm(Alu::Rsh, t, 4);
            self.asm.alu64_reg(Alu::Add, x, t);
            self.asm.ld_imm64(Reg::R3, 0x0f0f_0f0f_0f0f_0f0f);
            self.asm.alu64_reg(Alu::And, x, Reg::R3);
            self.asm.ld_imm64(Reg::R3, 0x0101_0101_0101_0101);
            self.asm.alu64_reg(Alu::Mul, x, Reg::R3);
            self.asm.alu64_imm(Alu::Rsh, x, 56);
            self.asm.load(Size::DW, t, Reg::FP, total);
            self.asm.alu64_reg(Alu::Add, t, x);
            self.asm.store(Size::DW, Reg::FP, total, t);
        }
        self.asm.load(Size::DW, Reg::R0, Reg::FP, total);
        self.take_r0(span)
    }

    /// `cpumask_test(mask, cpu)`: bit `cpu` of the mask, 0 for a CPU beyond it. The word holding the bit is
    /// found by comparing with each word's index (unrolled), so a CPU known only at run time needs no
    /// variable stack offset.
    pub(crate) fn cpumask_test(&mut self, mask: &Expr, cpu: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let ty = self.ty(mask)?;
        let buffer = self.frame.alloc(ty.slot_size(), span)?;
        self.value_into(mask, buffer, &ty)?;
        let cpu = self.int(cpu)?;
        let (wanted, found) = (self.frame.alloc(8, span)?, self.frame.alloc(8, span)?);
        self.store_val(cpu, wanted);
        self.asm.store_imm(Size::DW, Reg::FP, found, 0);
        for w in 0..ty.slot_size() / 8 {
            let other = self.asm.new_label();
            self.asm.load(Size::DW, Reg::R1, Reg::FP, wanted);
            self.asm.mov64_reg(Reg::R2, Reg::R1);
            self.asm.alu64_imm(Alu::Rsh, Reg::R2, 6);
            self.asm.jump_imm(Cond::Ne, Reg::R2, w as i32, other);
            self.asm.load(Size::DW, Reg::R3, Reg::FP, buffer + 8 * w as i16);
            self.asm.alu64_imm(Alu::And, Reg::R1, 63);
            self.asm.alu64_reg(Alu::Rsh, Reg::R3, Reg::R1);
            self.asm.alu64_imm(Alu::And, Reg::R3, 1);
            self.asm.store(Size::DW, Reg::FP, found, Reg::R3);
            self.asm.bind(other);
        }
        self.asm.load(Size::DW, Reg::R0, Reg::FP, found);
        self.take_r0(span)
    }

    /// Stores an integer value into the stack slot at `fp + offset`.
    pub(crate) fn store_val(&mut self, val: Val, offset: i16) {
        self.store_val_at(val, Reg::FP, offset);
    }

    /// Stores a value at `base + offset` (`base` is the frame pointer or, for variables, `var_base`).
    pub(crate) fn store_val_at(&mut self, val: Val, base: Reg, offset: i16) {
        self.store_low_bytes(val, Size::DW, base, offset);
    }

    /// Stores the low `size` bytes of a value at `base + offset`.
    pub(crate) fn store_low_bytes(&mut self, val: Val, size: Size, base: Reg, offset: i16) {
        match val {
            // A narrower store takes the immediate's low bytes only.
            Val::Imm(v) if size != Size::DW || i32::try_from(v as i64).is_ok() => {
                self.asm.store_imm(size, base, offset, v as i64 as i32)
            }
            _ => {
                let reg = self.reg_of(val, Reg::R0);
                self.asm.store(size, base, offset, reg);
            }
        }
        self.frame.release(val);
    }

    /// `r0 = tgid << 32 | pid` of the current task, as `bpf_get_current_pid_tgid` gives them, or in a
    /// pid namespace of its own as seen there (0 for a task outside it). Clobbers r1-r5.
    pub(crate) fn pid_tgid(&mut self, span: Span) -> Result<(), Diagnostic> {
        if self.load_kept_pid_tgid() {
            return Ok(());
        }
        let Some((dev, ino)) = self.options.pid_namespace else {
            self.asm.call(Helper::GetCurrentPidTgid.id());
            return Ok(());
        };
        let info = self.ns_pid_tgid(dev, ino, span)?;
        self.asm.load(Size::DW, Reg::R0, Reg::FP, info);
        Ok(())
    }

    /// Jumps to `exit` when the current task is not in steadytrace's own pid namespace (the helper then
    /// fails); nothing without one. Clobbers r0-r5.
    pub(crate) fn exit_outside_pid_namespace(&mut self, exit: Label, span: Span) -> Result<(), Diagnostic> {
        let Some((dev, ino)) = self.options.pid_namespace else { return Ok(()) };
        self.ns_pid_tgid(dev, ino, span)?;
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, exit);
        Ok(())
    }

    /// Calls `bpf_get_ns_current_pid_tgid` for the pid namespace `(dev, ino)`: r0 is 0 when the current task
    /// is in it, and the frame slot returned holds `struct bpf_pidns_info { u32 pid; u32 tgid; }`, which read
    /// as one word has `bpf_get_current_pid_tgid`'s layout. Clobbers r0-r5.
    fn ns_pid_tgid(&mut self, dev: u64, ino: u64, span: Span) -> Result<i16, Diagnostic> {
        let info = self.frame.alloc(8, span)?;
        self.asm.mov_u64(Reg::R1, dev);
        self.asm.mov_u64(Reg::R2, ino);
        self.asm.mov64_reg(Reg::R3, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R3, info as i32);
        self.asm.mov64_imm(Reg::R4, 8);
        self.asm.call(Helper::GetNsCurrentPidTgid.id());
        Ok(info)
    }

    /// A home for a result, taking R0 (just returned by a helper) into it.
    pub(crate) fn take_r0(&mut self, span: Span) -> Result<Val, Diagnostic> {
        let val = self.frame.fresh(span)?;
        self.put(val, Reg::R0);
        Ok(val)
    }

    /// A writable home holding `val`.
    pub(crate) fn writable(&mut self, val: Val, span: Span) -> Result<Val, Diagnostic> {
        if let Val::Imm(value) = val {
            let home = self.frame.fresh(span)?;
            let reg = self.reg_of(Val::Imm(value), Reg::R0);
            self.put(home, reg);
            return Ok(home);
        }
        Ok(val)
    }

    pub(crate) fn int(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        match &e.kind {
            ExprKind::Block { block, value } => {
                let value = self.block_value(block, value, e.span)?;
                self.int(value)
            }
            ExprKind::Int(n) => Ok(Val::Imm(*n)),
            ExprKind::Ident(name) if name == "true" || name == "false" => {
                Ok(Val::Imm((name == "true") as u64))
            }
            ExprKind::Ident(_) if self.located_argument(e).is_some() => {
                let arg = self.located_argument(e).expect("just checked");
                self.load_located(&arg, e.span)
            }
            ExprKind::Ident(_) if self.probe_int(e).is_some() => {
                let (offset, size, signed) = self.probe_int(e).expect("just checked");
                self.load_into_fresh(Reg::R9, offset, size, signed, e.span)
            }
            ExprKind::Ident(name) if name == "cpid" => match self.options.cpid {
                Some(pid) => Ok(Val::Imm(pid as u64)),
                None => Err(Diagnostic::error(e.span, "`cpid` is the pid of the command that -c starts")
                    .with_help("run with -c 'COMMAND'")),
            },
            ExprKind::Ident(_) => match self.probe.types.builtin(e) {
                Some(builtin) => self.builtin_int(Some(builtin), e.span),
                None => self.probe.types.enum_constant(e).map(|value| Val::Imm(value as u64)),
            },
            ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                let field = self.point_field(field, e.span)?;
                let size = Size::for_bytes(field.size as usize).unwrap_or(Size::DW);
                let place = self.point.provider.field_place(&field);
                self.load_place(place, size, field.signed, e.span)
            }
            ExprKind::Call { name, args, .. } => {
                match self.probe.types.function(e).map(|id| self.functions.emit(id)) {
                    Some(Emit::Int(emit)) => emit(self, args, e.span),
                    // A function that writes its value in memory, giving an integer here: in a slot of its own.
                    Some(Emit::Into(emit)) if self.ty(e)?.is_int() => {
                        let ty = self.ty(e)?;
                        let slot = self.frame.alloc(8, e.span)?;
                        emit(self, args, slot, &ty, e.span)?;
                        Ok(Val::Slot(slot))
                    }
                    _ => Err(Diagnostic::error(
                        e.span,
                        format!("internal error: `{name}()` is not an integer"),
                    )),
                }
            }
            ExprKind::Var(name) => {
                let home = self.frame.fresh(e.span)?;
                let reg = if let Val::Reg(reg) = home { reg } else { Reg::R0 };
                let (base, at) = self.var(name);
                self.asm.load(Size::DW, reg, base, at);
                self.put(home, reg);
                Ok(home)
            }
            ExprKind::Map { name, keys } => self.map_read_int(name, keys, e.span),
            ExprKind::Field { .. } if self.is_member(e) => self.member_int(e),
            ExprKind::Field { .. } => {
                let (base, at, _) = self.tuple_field(e)?;
                let home = self.frame.fresh(e.span)?;
                self.asm.load(Size::DW, Reg::R0, base, at);
                self.put(home, Reg::R0);
                Ok(home)
            }
            ExprKind::Unary {
                op: op @ (UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec),
                operand,
            } => self.increment(*op, operand, e.span),
            ExprKind::Unary { op: op @ UnOp::BitNot, operand } => {
                let val = self.unary(*op, operand, e.span)?;
                self.wrap_to_type(val, e)
            }
            ExprKind::Unary { op: UnOp::AddrOf, operand } => self.address_of(operand, e.span),
            ExprKind::Unary { op: UnOp::Deref, operand }
                if matches!(self.ty(operand)?, Type::Pointer { .. }) =>
            {
                self.pointee_int(operand, e.span)
            }
            ExprKind::Unary { op, operand } => self.unary(*op, operand, e.span),
            ExprKind::Index { .. } => self.element_int(e),
            ExprKind::Cast { operand, .. } => {
                let target = self.ty(e)?;
                self.cast(&target, operand, e.span)
            }
            ExprKind::Binary { op: op @ (BinOp::Eq | BinOp::Ne), lhs, rhs }
                if matches!(self.ty(lhs)?, Type::Buf { .. }) =>
            {
                self.compare_buffers(lhs, rhs, *op == BinOp::Ne, e.span)
            }
            ExprKind::Binary { op: op @ (BinOp::Eq | BinOp::Ne), lhs, rhs }
                if matches!(
                    self.ty(lhs)?,
                    Type::Tuple(_) | Type::NamedTuple { .. } | Type::Array { .. } | Type::Bytes { .. }
                ) =>
            {
                self.compare_in_memory_values(lhs, rhs, *op == BinOp::Ne, e.span)
            }
            ExprKind::Binary { op: op @ (BinOp::Eq | BinOp::Ne), lhs, rhs } if !self.ty(lhs)?.is_int() => {
                self.compare_strings(lhs, rhs, None, *op == BinOp::Ne, e.span)
            }
            ExprKind::Binary { op: op @ (BinOp::And | BinOp::Or), lhs, rhs } => {
                self.logical(*op, lhs, rhs, e.span)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let val = self.binary(*op, lhs, rhs, e.span)?;
                self.wrap_to_type(val, e)
            }
            ExprKind::Ternary { cond, then, otherwise } => {
                let home = self.frame.fresh(e.span)?;
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                let value = self.int(then)?;
                self.move_into(home, value);
                self.asm.jump(done);
                self.asm.bind(no);
                let value = self.int(otherwise)?;
                self.move_into(home, value);
                self.asm.bind(done);
                Ok(home)
            }
            _ => Err(Diagnostic::error(e.span, "internal error: not an integer expression")),
        }
    }

    /// Moves `value` into `home` and releases it.
    fn move_into(&mut self, home: Val, value: Val) {
        let reg = self.reg_of(value, Reg::R0);
        self.put(home, reg);
        self.frame.release(value);
    }

    pub(super) fn builtin_int(&mut self, builtin: Option<Builtin>, span: Span) -> Result<Val, Diagnostic> {
        match builtin {
            Some(Builtin::Nsecs) => {
                self.asm.call(Helper::KtimeGetNs.id());
                self.take_r0(span)
            }
            Some(Builtin::Elapsed) => {
                self.asm.call(Helper::KtimeGetNs.id());
                self.asm.ld_imm64(Reg::R1, self.options.start_ns);
                self.asm.alu64_reg(Alu::Sub, Reg::R0, Reg::R1);
                self.take_r0(span)
            }
            Some(Builtin::Pid) => {
                self.pid_tgid(span)?;
                self.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
                self.take_r0(span)
            }
            Some(Builtin::Tid) => {
                self.pid_tgid(span)?;
                self.asm.alu32_imm(Alu::Add, Reg::R0, 0); // a 32-bit operation clears the upper half
                self.take_r0(span)
            }
            Some(Builtin::Cpu) => {
                self.asm.call(Helper::GetSmpProcessorId.id());
                self.take_r0(span)
            }
            Some(Builtin::Curtask) => {
                self.asm.call(Helper::GetCurrentTask.id());
                self.take_r0(span)
            }
            Some(Builtin::Jiffies) => {
                self.asm.call(Helper::Jiffies64.id());
                self.take_r0(span)
            }
            Some(Builtin::Numaid) => {
                self.asm.call(Helper::GetNumaNodeId.id());
                self.take_r0(span)
            }
            Some(Builtin::Usermode) => self.usermode(span),
            Some(Builtin::Ctx) => {
                self.asm.mov64_reg(Reg::R0, Reg::R9);
                self.take_r0(span)
            }
            Some(Builtin::Cgroup) => {
                self.asm.call(Helper::GetCurrentCgroupId.id());
                self.take_r0(span)
            }
            Some(Builtin::Uid) | Some(Builtin::Gid) => {
                self.asm.call(Helper::GetCurrentUidGid.id());
                if builtin == Some(Builtin::Gid) {
                    self.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
                } else {
                    self.asm.alu32_imm(Alu::Add, Reg::R0, 0);
                }
                self.take_r0(span)
            }
            Some(Builtin::Rand) => {
                self.asm.call(Helper::GetPrandomU32.id());
                self.take_r0(span)
            }
            Some(Builtin::Ncpus) => Ok(Val::Imm(self.options.ncpus)),
            _ => Err(Diagnostic::error(span, "internal error: not an integer builtin")),
        }
    }

    /// The result of an arithmetic operation on narrow integers wrapped at its type's width (a no-op
    /// for 64-bit results, so scripts without narrow types get no extra instructions).
    fn wrap_to_type(&mut self, val: Val, e: &Expr) -> Result<Val, Diagnostic> {
        match self.ty(e)? {
            Type::Int { signed, bits } if bits < 64 => self.narrow(val, bits, signed, e.span),
            _ => Ok(val),
        }
    }

    /// `val` cut to its low `bits` bits, then sign- or zero-extended to 64 bits.
    pub(crate) fn narrow(&mut self, val: Val, bits: u8, signed: bool, span: Span) -> Result<Val, Diagnostic> {
        let shift = 64 - bits as i32;
        if let Val::Imm(v) = val {
            let narrowed = v << shift;
            return Ok(Val::Imm(if signed {
                ((narrowed as i64) >> shift) as u64
            } else {
                narrowed >> shift
            }));
        }
        let home = self.writable(val, span)?;
        let reg = self.reg_of(home, Reg::R0);
        if bits == 32 && !signed {
            self.asm.alu32_imm(Alu::Add, reg, 0); // a 32-bit operation clears the upper half
        } else {
            self.asm.alu64_imm(Alu::Lsh, reg, shift);
            self.asm.alu64_imm(if signed { Alu::Arsh } else { Alu::Rsh }, reg, shift);
        }
        self.put(home, reg);
        Ok(home)
    }

    /// `(type)value`: narrow to the type's width, sign-extending for signed types; `(bool)` is 0 or 1;
    /// a pointer keeps the address.
    fn cast(&mut self, target: &Type, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
        if let (Type::Bool, Type::Str { .. }) = (target, self.ty(operand)?) {
            return self.string_is_not_empty(operand, span);
        }
        // An array's bytes as an integer of its size (checked: the sizes are equal).
        if let from @ (Type::Array { .. } | Type::Bytes { .. }) = self.ty(operand)? {
            let (reg, start) = self.in_memory(operand, &from)?;
            let size = Size::for_bytes(target.c_size().unwrap_or(8)).unwrap_or(Size::DW);
            return self.load_into_fresh(reg, start, size, target.is_signed(), span);
        }
        let val = self.int(operand)?;
        if *target == Type::Bool {
            if let Val::Imm(v) = val {
                return Ok(Val::Imm((v != 0) as u64));
            }
            let home = self.writable(val, span)?;
            let reg = self.reg_of(home, Reg::R0);
            let zero = self.asm.new_label();
            self.asm.jump_imm(Cond::Eq, reg, 0, zero);
            self.asm.mov64_imm(reg, 1);
            self.asm.bind(zero);
            self.put(home, reg);
            return Ok(home);
        }
        match (target, self.ty(operand)?) {
            (&Type::Int { signed, bits }, _) if bits < 64 => self.narrow(val, bits, signed, span),
            // A narrow signed value becomes an address zero-extended, as bpftrace's (LLVM's inttoptr) does:
            // `(uint8 *)-1` (an int8 literal) is 0xff.
            (Type::Ptr { .. } | Type::Pointer { .. }, Type::Int { signed: true, bits }) if bits < 64 => {
                self.narrow(val, bits, false, span)
            }
            _ => Ok(val),
        }
    }

    fn unary(&mut self, op: UnOp, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
        if op == UnOp::Deref {
            return self.dereference(operand, span);
        }
        let val = self.int(operand)?;
        if let Val::Imm(v) = val {
            return Ok(Val::Imm(match op {
                UnOp::Neg => v.wrapping_neg(),
                UnOp::BitNot => !v,
                _ => (v == 0) as u64,
            }));
        }
        let home = self.writable(val, span)?;
        let reg = self.reg_of(home, Reg::R0);
        match op {
            UnOp::Neg => self.asm.alu64_imm(Alu::Neg, reg, 0),
            UnOp::BitNot => self.asm.alu64_imm(Alu::Xor, reg, -1),
            _ => {
                let zero = self.asm.new_label();
                self.asm.mov64_imm(Reg::R1, 1);
                self.asm.jump_imm(Cond::Eq, reg, 0, zero);
                self.asm.mov64_imm(Reg::R1, 0);
                self.asm.bind(zero);
                self.asm.mov64_reg(reg, Reg::R1);
            }
        }
        self.put(home, reg);
        Ok(home)
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let signed = self.signed(op, lhs, rhs);
        let a = self.int(lhs)?;
        let b = self.int(rhs)?;
        // A pointer moves by whole pointees.
        let (a, b) = match op {
            BinOp::Add | BinOp::Sub => {
                (self.scaled(&self.ty(rhs)?, a, span)?, self.scaled(&self.ty(lhs)?, b, span)?)
            }
            _ => (a, b),
        };
        if let (Val::Imm(x), Val::Imm(y)) = (a, b) {
            if let Some(folded) = fold(op, x, y) {
                return Ok(Val::Imm(folded));
            }
        }
        let home = self.writable(a, span)?;
        let ra = self.reg_of(home, Reg::R0);
        self.apply(op, ra, b, signed, span)?;
        self.put(home, ra);
        self.frame.release(b);
        Ok(home)
    }

    /// `ra = ra op b`, with `b` a value home; uses r1-r4 as scratch (`ra` must be none of them). A
    /// division by a value that may be zero can call a helper: nothing but `ra` may be live in r0-r5.
    pub(crate) fn apply(
        &mut self,
        op: BinOp,
        ra: Reg,
        b: Val,
        signed: bool,
        span: Span,
    ) -> Result<(), Diagnostic> {
        if let Some(cond) = comparison(op, signed) {
            let yes = self.asm.new_label();
            let rb = self.reg_of(b, Reg::R1);
            self.asm.mov64_imm(Reg::R2, 1);
            self.asm.jump_reg(cond, ra, rb, yes);
            self.asm.mov64_imm(Reg::R2, 0);
            self.asm.bind(yes);
            self.asm.mov64_reg(ra, Reg::R2);
        } else if divides_by_maybe_zero(op, b) {
            // A zero divisor gives 1 and a warning, as in current bpftrace (BPF itself gives 0, or
            // keeps the dividend for modulo). The warning's helper call clobbers r0-r5, so `ra` is
            // set after it.
            let rb = self.reg_of(b, Reg::R1);
            let (divide, done) = (self.asm.new_label(), self.asm.new_label());
            self.asm.jump_imm(Cond::Ne, rb, 0, divide);
            let id = self.records.add(super::record::Record::DivideByZero { span, warning: String::new() });
            let buf = self.frame.alloc(8, span)?;
            self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
            self.output_warning(buf, 8, span)?;
            self.asm.mov64_imm(ra, 1);
            self.asm.jump(done);
            self.asm.bind(divide);
            self.asm.alu64_reg(if op == BinOp::Div { Alu::Div } else { Alu::Mod }, ra, rb);
            self.asm.bind(done);
        } else {
            let alu = match op {
                BinOp::Add => Alu::Add,
                BinOp::Sub => Alu::Sub,
                BinOp::Mul => Alu::Mul,
                BinOp::Div => Alu::Div,
                BinOp::Mod => Alu::Mod,
                BinOp::BitAnd => Alu::And,
                BinOp::BitOr => Alu::Or,
                BinOp::BitXor => Alu::Xor,
                BinOp::Shl => Alu::Lsh,
                _ => Alu::Rsh,
            };
            match b {
                Val::Imm(y) if i32::try_from(y as i64).is_ok() => {
                    self.asm.alu64_imm(alu, ra, y as i64 as i32)
                }
                _ => {
                    let rb = self.reg_of(b, Reg::R1);
                    self.asm.alu64_reg(alu, ra, rb);
                }
            }
        }
        Ok(())
    }

    fn logical(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let home = self.frame.fresh(span)?;
        let (short, done) = (self.asm.new_label(), self.asm.new_label());
        // `a && b` is false as soon as a is; `a || b` true as soon as a is.
        let short_value = (op == BinOp::Or) as i32;
        for side in [lhs, rhs] {
            let val = self.int(side)?;
            let reg = self.reg_of(val, Reg::R0);
            self.asm.jump_imm(if op == BinOp::Or { Cond::Ne } else { Cond::Eq }, reg, 0, short);
            self.frame.release(val);
        }
        self.asm.mov64_imm(Reg::R0, 1 - short_value);
        self.asm.jump(done);
        self.asm.bind(short);
        self.asm.mov64_imm(Reg::R0, short_value);
        self.asm.bind(done);
        self.put(home, Reg::R0);
        Ok(home)
    }

    /// Jumps to `target` when `cond` is zero (false).
    pub(crate) fn branch_unless(&mut self, cond: &Expr, target: Label) -> Result<(), Diagnostic> {
        if let ExprKind::Binary { op, lhs, rhs } = &cond.kind {
            let signed = self.signed(*op, lhs, rhs);
            let ints = self.ty(lhs)?.is_int();
            if let Some(negated) = comparison(*op, signed).and_then(Cond::negate).filter(|_| ints) {
                let a = self.int(lhs)?;
                let before = self.asm.len();
                let b = self.int(rhs)?;
                let ra = self.reg_of(a, Reg::R0);
                match b {
                    Val::Imm(y) if i32::try_from(y as i64).is_ok() => {
                        // A value just moved out of r0 (a helper's result) is compared there.
                        let moved = self.asm.len() == before && self.asm.undo_move(ra, Reg::R0);
                        let ra = if moved { Reg::R0 } else { ra };
                        self.asm.jump_imm(negated, ra, y as i64 as i32, target)
                    }
                    _ => {
                        let rb = self.reg_of(b, Reg::R1);
                        self.asm.jump_reg(negated, ra, rb, target);
                    }
                }
                self.frame.release(a);
                self.frame.release(b);
                return Ok(());
            }
        }
        let val = self.int(cond)?;
        let reg = self.reg_of(val, Reg::R0);
        self.asm.jump_imm(Cond::Eq, reg, 0, target);
        self.frame.release(val);
        Ok(())
    }
}

impl Gen<'_> {
    /// `usermode`: 1 when the probe interrupted user code. BEGIN, END and interval probes run for
    /// steadytrace's own thread from user space (as bpftrace's, fired by a uprobe); kernel-fired probes read
    /// the interrupted mode from their saved registers, which only kprobes, uprobes and perf events have.
    fn usermode(&mut self, span: Span) -> Result<Val, Diagnostic> {
        if self.point.provider.schedule() != crate::probes::Schedule::Kernel {
            return Ok(Val::Imm(1));
        }
        if !matches!(self.point.provider.prog_type(), bpf::ProgType::Kprobe | bpf::ProgType::PerfEvent) {
            return Err(Diagnostic::error(span, "`usermode` needs a probe with saved registers")
                .with_help("it is known in kprobe, uprobe, profile, software and hardware probes, BEGIN, END and interval"));
        }
        let mode = bpf::arch::HOST.user_mode;
        self.asm.load(Size::DW, Reg::R0, Reg::R9, mode.register);
        // (register & mask) ^ user is 0 in user mode and a small positive number otherwise: 0 - 1 sets the
        // top bit, any other value does not.
        self.asm.alu64_imm(Alu::And, Reg::R0, mode.mask);
        self.asm.alu64_imm(Alu::Xor, Reg::R0, mode.user);
        self.asm.alu64_imm(Alu::Sub, Reg::R0, 1);
        self.asm.alu64_imm(Alu::Rsh, Reg::R0, 63);
        self.take_r0(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_follows_bpftrace_division_and_shift_rules() {
        assert_eq!(fold(BinOp::Div, 7, 0), None);
        assert_eq!(fold(BinOp::Mod, 7, 0), None);
        assert_eq!(fold(BinOp::Div, (-7i64) as u64, 2), Some(9223372036854775804));
        assert_eq!(fold(BinOp::Shr, (-16i64) as u64, 2), Some(0x3ffffffffffffffc));
    }
}
