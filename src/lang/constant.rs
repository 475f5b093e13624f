//! Integers a script writes as constants: known before the program runs.

use super::ast::{BinOp, Expr, ExprKind, UnOp};

/// The value of a constant integer expression (a literal, possibly negated).
pub fn constant(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(n) => i64::try_from(*n).ok(),
        ExprKind::Unary { op: UnOp::Neg, operand } => constant(operand).map(i64::wrapping_neg),
        _ => None,
    }
}

/// The index of `$t[i]` when `i` is known before the program runs (`$t[1 + 1]`): literals combined
/// with `+`, `-` and `*`.
pub fn constant_index(e: &Expr) -> Option<usize> {
    fn value(e: &Expr) -> Option<i64> {
        match &e.kind {
            ExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (value(lhs)?, value(rhs)?);
                match op {
                    BinOp::Add => a.checked_add(b),
                    BinOp::Sub => a.checked_sub(b),
                    BinOp::Mul => a.checked_mul(b),
                    _ => None,
                }
            }
            _ => constant(e),
        }
    }
    usize::try_from(value(e)?).ok()
}
