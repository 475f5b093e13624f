//! Walking a syntax tree: the expressions a block's statements hold (at any depth of blocks), and the
//! expressions directly inside one expression; each for reading or for changing them, and as a fallible
//! [`Rewrite`] pass. Passes that
//! rewrite the tree (positional and named parameters, the standard library's macros and calls, the
//! builtins' names) and passes that read it (typing, numbering) all walk with these.

use super::ast::{Block, Expr, ExprKind, Probe, StmtKind};
use super::diag::Diagnostic;

/// Calls `f` on the expressions that statements of `block` hold directly, at any depth of blocks.
pub fn each_expr<'a>(block: &'a Block, f: &mut dyn FnMut(&'a Expr)) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Expr(e) => f(e),
            StmtKind::Assign { target, value, .. } => {
                f(target);
                f(value);
            }
            StmtKind::Let { value, .. } => value.iter().for_each(&mut *f),
            StmtKind::If { cond, then, otherwise } => {
                f(cond);
                each_expr(then, f);
                if let Some(otherwise) = otherwise {
                    each_expr(otherwise, f);
                }
            }
            StmtKind::Unroll { count: e, body } | StmtKind::While { cond: e, body } => {
                f(e);
                each_expr(body, f);
            }
            StmtKind::For { iterable, body, .. } => {
                f(iterable);
                each_expr(body, f);
            }
            StmtKind::Block(body) => each_expr(body, f),
            StmtKind::Return(Some(value)) => f(value),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }
}

/// [`each_expr`], for changing them.
pub fn each_expr_mut(block: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    for stmt in &mut block.stmts {
        match &mut stmt.kind {
            StmtKind::Expr(e) => f(e),
            StmtKind::Assign { target, value, .. } => {
                f(target);
                f(value);
            }
            StmtKind::Let { value, .. } => value.iter_mut().for_each(&mut *f),
            StmtKind::If { cond, then, otherwise } => {
                f(cond);
                each_expr_mut(then, f);
                if let Some(otherwise) = otherwise {
                    each_expr_mut(otherwise, f);
                }
            }
            StmtKind::Unroll { count: e, body } | StmtKind::While { cond: e, body } => {
                f(e);
                each_expr_mut(body, f);
            }
            StmtKind::For { iterable, body, .. } => {
                f(iterable);
                each_expr_mut(body, f);
            }
            StmtKind::Block(body) => each_expr_mut(body, f),
            StmtKind::Return(Some(value)) => f(value),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }
}

/// Calls `f` on the expressions directly inside `e`.
pub fn each_child<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Str(_) | ExprKind::Ident(_) | ExprKind::Var(_) => {}
        ExprKind::Map { keys: items, .. }
        | ExprKind::Call { args: items, .. }
        | ExprKind::Tuple(items)
        | ExprKind::NamedTuple { items, .. } => items.iter().for_each(f),
        ExprKind::Unary { operand: a, .. }
        | ExprKind::Cast { operand: a, .. }
        | ExprKind::Field { base: a, .. } => f(a),
        ExprKind::Binary { lhs: a, rhs: b, .. }
        | ExprKind::Index { base: a, index: b }
        | ExprKind::Range { from: a, to: b } => {
            f(a);
            f(b);
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            f(cond);
            f(then);
            f(otherwise);
        }
        ExprKind::Block { block, value } => {
            each_expr(block, f);
            value.as_deref().into_iter().for_each(f);
        }
    }
}

/// [`each_child`], for changing them.
pub fn each_child_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    match &mut e.kind {
        ExprKind::Int(_) | ExprKind::Str(_) | ExprKind::Ident(_) | ExprKind::Var(_) => {}
        ExprKind::Map { keys: items, .. }
        | ExprKind::Call { args: items, .. }
        | ExprKind::Tuple(items)
        | ExprKind::NamedTuple { items, .. } => items.iter_mut().for_each(f),
        ExprKind::Unary { operand: a, .. }
        | ExprKind::Cast { operand: a, .. }
        | ExprKind::Field { base: a, .. } => f(a),
        ExprKind::Binary { lhs: a, rhs: b, .. }
        | ExprKind::Index { base: a, index: b }
        | ExprKind::Range { from: a, to: b } => {
            f(a);
            f(b);
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            f(cond);
            f(then);
            f(otherwise);
        }
        ExprKind::Block { block, value } => {
            each_expr_mut(block, f);
            value.as_deref_mut().into_iter().for_each(f);
        }
    }
}

/// A pass over the tree that rewrites expressions, may fail, and may rename the variables `let` and `for`
/// declare (the macros' expansion and hygiene); [`rewrite_block`] runs it over a block's statements, assignments
/// value first.
pub trait Rewrite {
    /// Rewrites `e`; walking into its children is up to the pass ([`rewrite_children`]).
    fn expr(&mut self, e: &mut Expr) -> Result<(), Diagnostic>;
    /// A variable that `let` or `for` declares.
    fn declared(&mut self, _name: &mut String) {}
}

pub fn rewrite_block(block: &mut Block, pass: &mut dyn Rewrite) -> Result<(), Diagnostic> {
    for stmt in &mut block.stmts {
        match &mut stmt.kind {
            StmtKind::Expr(e) => pass.expr(e)?,
            StmtKind::Assign { target, value, .. } => {
                pass.expr(value)?;
                pass.expr(target)?;
            }
            StmtKind::Let { name, value, .. } => {
                if let Some(value) = value {
                    pass.expr(value)?;
                }
                pass.declared(name);
            }
            StmtKind::If { cond, then, otherwise } => {
                pass.expr(cond)?;
                rewrite_block(then, pass)?;
                if let Some(otherwise) = otherwise {
                    rewrite_block(otherwise, pass)?;
                }
            }
            StmtKind::Unroll { count: e, body } | StmtKind::While { cond: e, body } => {
                pass.expr(e)?;
                rewrite_block(body, pass)?;
            }
            StmtKind::For { var, iterable, body, .. } => {
                pass.expr(iterable)?;
                pass.declared(var);
                rewrite_block(body, pass)?;
            }
            StmtKind::Block(body) => rewrite_block(body, pass)?,
            StmtKind::Return(Some(value)) => pass.expr(value)?,
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }
    Ok(())
}

/// Runs `pass` on the children of `e`.
pub fn rewrite_children(e: &mut Expr, pass: &mut dyn Rewrite) -> Result<(), Diagnostic> {
    match &mut e.kind {
        ExprKind::Int(_) | ExprKind::Str(_) | ExprKind::Ident(_) | ExprKind::Var(_) => Ok(()),
        ExprKind::Map { keys: items, .. }
        | ExprKind::Call { args: items, .. }
        | ExprKind::Tuple(items)
        | ExprKind::NamedTuple { items, .. } => items.iter_mut().try_for_each(|item| pass.expr(item)),
        ExprKind::Unary { operand: a, .. }
        | ExprKind::Cast { operand: a, .. }
        | ExprKind::Field { base: a, .. } => pass.expr(a),
        ExprKind::Binary { lhs: a, rhs: b, .. }
        | ExprKind::Index { base: a, index: b }
        | ExprKind::Range { from: a, to: b } => {
            pass.expr(a)?;
            pass.expr(b)
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            pass.expr(cond)?;
            pass.expr(then)?;
            pass.expr(otherwise)
        }
        ExprKind::Block { block, value } => {
            rewrite_block(block, pass)?;
            value.as_deref_mut().map_or(Ok(()), |value| pass.expr(value))
        }
    }
}

impl Probe {
    /// Whether the predicate or the body reads the identifier `name` (a builtin such as `probe`).
    pub fn uses_ident(&self, name: &str) -> bool {
        self.predicate.as_ref().is_some_and(|e| e.uses_ident(name)) || self.body.uses_ident(name)
    }
}

impl Block {
    /// The blocks of the block expressions that this block's statements compute (not those of its nested
    /// statement blocks): passes walking statements go into these too.
    pub fn expr_blocks(&self) -> Vec<&Block> {
        let mut out = vec![];
        for stmt in &self.stmts {
            for e in stmt.exprs() {
                e.blocks(&mut out);
            }
        }
        out
    }

    /// Whether an expression of the block, at any depth, reads the identifier `name`.
    pub fn uses_ident(&self, name: &str) -> bool {
        let mut found = false;
        each_expr(self, &mut |e| found = found || e.uses_ident(name));
        found
    }
}

impl Expr {
    /// Whether the expression, or one inside it, reads the identifier `name`.
    pub fn uses_ident(&self, name: &str) -> bool {
        let mut found = matches!(&self.kind, ExprKind::Ident(ident) if ident == name);
        each_child(self, &mut |child| found = found || child.uses_ident(name));
        found
    }

    /// The outermost block expressions in this expression, in order.
    pub fn blocks<'a>(&'a self, out: &mut Vec<&'a Block>) {
        if let ExprKind::Block { block, value } = &self.kind {
            out.push(block);
            if let Some(value) = value {
                value.blocks(out);
            }
            return;
        }
        each_child(self, &mut |child| child.blocks(out));
    }
}
