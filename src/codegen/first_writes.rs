//! Scratch variables that need no zeroing at the program's start.
//!
//! Every variable's slot is zeroed before the predicate, so that a read before any assignment is defined (and the
//! verifier sees no uninitialized stack). An integer variable whose first mention is a plain assignment among
//! the body's own statements before the first that holds a block (`$t = tid;` before any `if` or loop, its
//! value not reading it) is written whole (8 bytes) before anything can read it, on every run: its zeroing is a
//! store for nothing, and is left out.

use crate::lang::ast::{Expr, ExprKind, StmtKind};
use crate::lang::walk::each_child;
use crate::sema::CheckedProbe;
use std::collections::HashSet;

/// The variables of `probe` that its body writes, whole, before anything reads them.
pub(super) fn written_first(probe: &CheckedProbe) -> HashSet<String> {
    let mut mentioned = HashSet::new();
    if let Some(predicate) = &probe.predicate {
        mention(predicate, &mut mentioned);
    }
    let mut out = HashSet::new();
    for stmt in &probe.body.stmts {
        let (name, value) = match &stmt.kind {
            StmtKind::Assign { target: Expr { kind: ExprKind::Var(name), .. }, op: None, value } => {
                (name, value)
            }
            StmtKind::Let { name, value: Some(value), .. } => (name, value),
            StmtKind::Let { name, value: None, .. } => {
                mentioned.insert(name.clone());
                continue;
            }
            StmtKind::Expr(_) | StmtKind::Assign { .. } => {
                stmt.exprs().into_iter().for_each(|e| mention(e, &mut mentioned));
                continue;
            }
            // A statement holding a block (an `if`, a loop) may or may not run what it holds: what follows it
            // is left as it was.
            _ => break,
        };
        mention(value, &mut mentioned);
        let whole_int = probe.vars.get(name).is_some_and(|ty| ty.is_int() && ty.slot_size() == 8);
        if whole_int && !mentioned.contains(name) {
            out.insert(name.clone());
        }
        mentioned.insert(name.clone());
    }
    out
}

/// Adds the variables `e` mentions (at any depth, blocks inside it included) to `out`.
fn mention(e: &Expr, out: &mut HashSet<String>) {
    if let ExprKind::Var(name) = &e.kind {
        out.insert(name.clone());
    }
    each_child(e, &mut |c| mention(c, out));
}
