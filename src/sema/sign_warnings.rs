//! Warnings where a binary operation mixes signs as bpftrace 0.27.1 warns of them (`types::Signs`): an unsigned
//! 64-bit operand taken as `int64` beside a signed one, and a division or modulo of signed operands, which BPF
//! computes unsigned.

use super::typed::ExprTypes;
use super::types::{is_literal, Operand, Signs, Type};
use crate::lang::ast::{BinOp, Block, Expr, ExprKind, StmtKind, UnOp};
use crate::lang::walk::{each_child, each_expr};
use crate::lang::Diagnostic;
use std::collections::HashSet;

/// The warnings of the operations in a probe's predicate and body; `literals` are its [`literal_vars`].
pub fn find(
    predicate: Option<&Expr>,
    body: &Block,
    types: &ExprTypes,
    literals: &HashSet<String>,
) -> Vec<Diagnostic> {
    let mut found = vec![];
    let mut visit = |e: &Expr| look(e, types, literals, &mut found);
    predicate.into_iter().for_each(&mut visit);
    each_expr(body, &mut visit);
    found
}

fn look(e: &Expr, types: &ExprTypes, literals: &HashSet<String>, found: &mut Vec<Diagnostic>) {
    if let ExprKind::Binary { op, lhs, rhs } = &e.kind {
        warn(*op, e, (lhs, rhs), types, literals, found);
    }
    each_child(e, &mut |child| look(child, types, literals, found));
}

/// Whether `e` counts as a literal that is not negative for [`Signs`]: one written so, or a variable only
/// ever given such literals (`$b = 1;`), which bpftrace 0.27.1 treats alike (`(uint64)$a > $b` warns of
/// nothing and is unsigned).
pub fn is_literal_operand(e: &Expr, literals: &HashSet<String>) -> bool {
    is_literal(e) || matches!(&e.kind, ExprKind::Var(name) if literals.contains(name))
}

/// The variables of a probe that are only ever given literals that are not negative: assigned with `=` or
/// `let`, never changed otherwise (`+=`, `++`, a loop variable, `&$x`).
pub fn literal_vars(predicate: Option<&Expr>, body: &Block) -> HashSet<String> {
    let (mut given, mut changed) = (HashSet::new(), HashSet::new());
    predicate.into_iter().for_each(|e| changes(e, &mut changed));
    statements(body, &mut given, &mut changed);
    given.retain(|name| !changed.contains(name));
    given
}

fn statements(block: &Block, given: &mut HashSet<String>, changed: &mut HashSet<String>) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Assign { target, op: None, value } if is_literal(value) => {
                if let ExprKind::Var(name) = &target.kind {
                    given.insert(name.clone());
                }
            }
            StmtKind::Assign { target: Expr { kind: ExprKind::Var(name), .. }, .. } => {
                changed.insert(name.clone());
            }
            StmtKind::Let { name, value: Some(value), .. } if !is_literal(value) => {
                changed.insert(name.clone());
            }
            StmtKind::For { var, .. } => {
                changed.insert(var.clone());
            }
            _ => {}
        }
        if let StmtKind::Let { name, value: Some(_), .. } = &stmt.kind {
            given.insert(name.clone());
        }
    }
    each_expr(block, &mut |e| changes(e, changed));
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::If { then, otherwise, .. } => {
                statements(then, given, changed);
                if let Some(otherwise) = otherwise {
                    statements(otherwise, given, changed);
                }
            }
            StmtKind::Unroll { body, .. }
            | StmtKind::While { body, .. }
            | StmtKind::For { body, .. }
            | StmtKind::Block(body) => statements(body, given, changed),
            _ => {}
        }
    }
}

/// Variables an expression changes (`$x++`, `&$x`), and those its blocks assign otherwise than a literal.
fn changes(e: &Expr, changed: &mut HashSet<String>) {
    match &e.kind {
        ExprKind::Unary { op, operand } if *op != UnOp::Neg && *op != UnOp::Not && *op != UnOp::BitNot => {
            if let ExprKind::Var(name) = &operand.kind {
                changed.insert(name.clone());
            }
        }
        ExprKind::Block { block, .. } => {
            let mut given = HashSet::new();
            statements(block, &mut given, changed);
        }
        _ => {}
    }
    each_child(e, &mut |child| changes(child, changed));
}

fn warn(
    op: BinOp,
    e: &Expr,
    (lhs, rhs): (&Expr, &Expr),
    types: &ExprTypes,
    literals: &HashSet<String>,
    found: &mut Vec<Diagnostic>,
) {
    if matches!(op, BinOp::And | BinOp::Or) {
        return;
    }
    let (Ok(a), Ok(b)) = (types.type_of(lhs), types.type_of(rhs)) else { return };
    if !a.is_int() || !b.is_int() {
        return;
    }
    // `p + n` moves a pointer: no sign is mixed.
    if matches!(op, BinOp::Add | BinOp::Sub) && (a.is_pointer() || b.is_pointer()) {
        return;
    }
    let signs = Signs::of(
        op == BinOp::Sub,
        Operand { ty: a, literal: is_literal_operand(lhs, literals) },
        Operand { ty: b, literal: is_literal_operand(rhs, literals) },
    );
    for ((side, ty), taken) in [(lhs, a), (rhs, b)].into_iter().zip(signs.taken_as_int64) {
        if taken {
            found.push(
                Diagnostic::warning(
                    side.span,
                    format!("this {} is taken as int64 beside a signed operand", shown(ty)),
                )
                .with_help("a value above int64's largest turns negative; cast it (`(int64)x`, `(uint64)y`) to say which is meant"),
            );
        }
    }
    if matches!(op, BinOp::Div | BinOp::Mod) && signs.signed() && !(constant(lhs) && constant(rhs)) {
        found.push(
            Diagnostic::warning(e.span, format!("`{}` of signed operands is computed unsigned", op.symbol()))
                .with_help("a negative operand is read as a huge number (`$x / 2` of -7 is 9223372036854775804); cast the operands to unsigned to say so"),
        );
    }
}

/// What bpftrace names the type in its warning: an enum constant's type by its enum.
fn shown(ty: &Type) -> String {
    match ty {
        Type::Enum { .. } => "enum constant".to_string(),
        ty => ty.to_string(),
    }
}

/// A literal, negative or not: bpftrace computes an operation of two when it compiles, warning of nothing.
fn constant(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) => true,
        ExprKind::Unary { op: UnOp::Neg, operand } => constant(operand),
        _ => false,
    }
}
