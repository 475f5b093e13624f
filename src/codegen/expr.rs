//! Expressions: integers into a [`Val`], strings into stack memory, conditions into jumps.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::{BinOp, Expr, ExprKind, UnOp};
use crate::lang::{Diagnostic, Span};
use crate::sema::builtins::{Builtin, COMM_SIZE};
use crate::sema::type_of;
use crate::sema::types::Type;
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

fn is_signed(e: &Expr) -> bool {
    matches!(type_of(e), Ok(Type::Int { signed: true }))
}

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

/// Folds an operation on two constants the way the BPF instruction would compute it.
fn fold(op: BinOp, a: u64, b: u64, signed: bool) -> Option<u64> {
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::BitAnd => a & b,
        BinOp::BitOr => a | b,
        BinOp::BitXor => a ^ b,
        BinOp::Shl => a.wrapping_shl(b as u32),
        BinOp::Shr if signed => ((a as i64).wrapping_shr(b as u32)) as u64,
        BinOp::Shr => a.wrapping_shr(b as u32),
        // Division by zero gives 0 and modulo by zero keeps the dividend, as BPF defines them.
        BinOp::Div if b == 0 => 0,
        BinOp::Mod if b == 0 => a,
        BinOp::Div if signed => (a as i64).wrapping_div(b as i64) as u64,
        BinOp::Mod if signed => (a as i64).wrapping_rem(b as i64) as u64,
        BinOp::Div => a / b,
        BinOp::Mod => a % b,
        _ => return None,
    })
}

impl Gen<'_> {
    /// The value in a register: `val`'s own, or `scratch` loaded with it.
    pub(super) fn reg_of(&mut self, val: Val, scratch: Reg) -> Reg {
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
    fn put(&mut self, val: Val, reg: Reg) {
        match val {
            Val::Reg(home) if home != reg => self.asm.mov64_reg(home, reg),
            Val::Slot(off) => self.asm.store(Size::DW, Reg::FP, off, reg),
            _ => {}
        }
    }

    /// A home for a result, taking R0 (just returned by a helper) into it.
    fn take_r0(&mut self, span: Span) -> Result<Val, Diagnostic> {
        let val = self.frame.fresh(span)?;
        self.put(val, Reg::R0);
        Ok(val)
    }

    /// A writable home holding `val`.
    fn writable(&mut self, val: Val, span: Span) -> Result<Val, Diagnostic> {
        if let Val::Imm(value) = val {
            let home = self.frame.fresh(span)?;
            let reg = self.reg_of(Val::Imm(value), Reg::R0);
            self.put(home, reg);
            return Ok(home);
        }
        Ok(val)
    }

    pub(super) fn int(&mut self, e: &Expr) -> Result<Val, Diagnostic> {
        match &e.kind {
            ExprKind::Int(n) => Ok(Val::Imm(*n)),
            ExprKind::Ident(name) => self.builtin_int(Builtin::from_name(name), e.span),
            ExprKind::Unary { op, operand } => self.unary(*op, operand, e.span),
            ExprKind::Binary { op: op @ (BinOp::And | BinOp::Or), lhs, rhs } => {
                self.logical(*op, lhs, rhs, e.span)
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, e.span),
            ExprKind::Ternary { cond, then, otherwise } => {
                let home = self.frame.fresh(e.span)?;
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                let value = self.int(then)?;
                self.assign(home, value);
                self.asm.jump(done);
                self.asm.bind(no);
                let value = self.int(otherwise)?;
                self.assign(home, value);
                self.asm.bind(done);
                Ok(home)
            }
            _ => Err(Diagnostic::error(e.span, "internal error: not an integer expression")),
        }
    }

    /// Moves `value` into `home` and releases it.
    fn assign(&mut self, home: Val, value: Val) {
        let reg = self.reg_of(value, Reg::R0);
        self.put(home, reg);
        self.frame.release(value);
    }

    fn builtin_int(&mut self, builtin: Option<Builtin>, span: Span) -> Result<Val, Diagnostic> {
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
                self.asm.call(Helper::GetCurrentPidTgid.id());
                self.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
                self.take_r0(span)
            }
            Some(Builtin::Tid) => {
                self.asm.call(Helper::GetCurrentPidTgid.id());
                self.asm.alu32_imm(Alu::Add, Reg::R0, 0); // a 32-bit operation clears the upper half
                self.take_r0(span)
            }
            Some(Builtin::Cpu) => {
                self.asm.call(Helper::GetSmpProcessorId.id());
                self.take_r0(span)
            }
            _ => Err(Diagnostic::error(span, "internal error: not an integer builtin")),
        }
    }

    fn unary(&mut self, op: UnOp, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
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
        let signed = is_signed(lhs) && is_signed(rhs);
        let a = self.int(lhs)?;
        let b = self.int(rhs)?;
        if let (Val::Imm(x), Val::Imm(y)) = (a, b) {
            if let Some(folded) = fold(op, x, y, signed) {
                return Ok(Val::Imm(folded));
            }
        }
        let home = self.writable(a, span)?;
        let ra = self.reg_of(home, Reg::R0);
        if let Some(cond) = comparison(op, signed) {
            let yes = self.asm.new_label();
            let rb = self.reg_of(b, Reg::R1);
            self.asm.mov64_imm(Reg::R2, 1);
            self.asm.jump_reg(cond, ra, rb, yes);
            self.asm.mov64_imm(Reg::R2, 0);
            self.asm.bind(yes);
            self.asm.mov64_reg(ra, Reg::R2);
        } else if signed && matches!(op, BinOp::Div | BinOp::Mod) {
            let rb = self.reg_of(b, Reg::R1);
            self.signed_div(op, ra, rb);
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
                BinOp::Shr if is_signed(lhs) => Alu::Arsh,
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
        self.put(home, ra);
        self.frame.release(b);
        Ok(home)
    }

    /// Signed division or remainder of `a` by `b` into `a`, on any kernel: BPF's own signed
    /// division needs the v4 instruction set (Linux 6.6), so divide magnitudes and fix the sign.
    fn signed_div(&mut self, op: BinOp, a: Reg, b: Reg) {
        let (r_neg, r_b) = (Reg::R3, Reg::R4);
        self.asm.mov64_imm(r_neg, 0);
        self.asm.mov64_reg(r_b, b);
        let a_positive = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, a, 0, a_positive);
        self.asm.alu64_imm(Alu::Neg, a, 0);
        self.asm.mov64_imm(r_neg, 1);
        self.asm.bind(a_positive);
        let b_positive = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, r_b, 0, b_positive);
        self.asm.alu64_imm(Alu::Neg, r_b, 0);
        if op == BinOp::Div {
            self.asm.alu64_imm(Alu::Xor, r_neg, 1);
        }
        self.asm.bind(b_positive);
        self.asm.alu64_reg(if op == BinOp::Div { Alu::Div } else { Alu::Mod }, a, r_b);
        let done = self.asm.new_label();
        self.asm.jump_imm(Cond::Eq, r_neg, 0, done);
        self.asm.alu64_imm(Alu::Neg, a, 0);
        self.asm.bind(done);
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
    pub(super) fn branch_unless(&mut self, cond: &Expr, target: Label) -> Result<(), Diagnostic> {
        if let ExprKind::Binary { op, lhs, rhs } = &cond.kind {
            let signed = is_signed(lhs) && is_signed(rhs);
            if let Some(negated) = comparison(*op, signed).and_then(Cond::negate) {
                let a = self.int(lhs)?;
                let b = self.int(rhs)?;
                let ra = self.reg_of(a, Reg::R0);
                match b {
                    Val::Imm(y) if i32::try_from(y as i64).is_ok() => {
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

    /// Writes the string `e` into `size` bytes of stack at `fp + offset`, NUL-padded.
    pub(super) fn string_into(&mut self, e: &Expr, offset: i16, size: usize) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Ident(name) if name == "comm" => {
                self.asm.mov64_reg(Reg::R1, Reg::FP);
                self.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                self.asm.mov64_imm(Reg::R2, size.min(COMM_SIZE) as i32);
                self.asm.call(Helper::GetCurrentComm.id());
                Ok(())
            }
            _ => Err(Diagnostic::error(e.span, "internal error: not a runtime string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_follows_bpf_division_rules() {
        assert_eq!(fold(BinOp::Div, 7, 0, false), Some(0));
        assert_eq!(fold(BinOp::Mod, 7, 0, false), Some(7));
        assert_eq!(fold(BinOp::Div, (-7i64) as u64, 2, true), Some((-3i64) as u64));
        assert_eq!(fold(BinOp::Shr, (-8i64) as u64, 1, true), Some((-4i64) as u64));
    }
}
