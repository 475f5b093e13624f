//! Functions of current bpftrace's standard library that are macros there, expanded here into the
//! language they stand for before checking: `ppid`/`pcomm` (`task.real_parent.pid`/`.comm`, of `curtask`
//! without an argument) and `assert(cond, msg)` (`if (!cond) { errorf("assert failed: %s", msg); exit(1); }`).
//! Errors in the expansion point at the call.

use crate::lang::ast::{Block, Expr, ExprId, ExprKind, Probe, Stmt, StmtKind, UnOp};
use crate::lang::walk::{each_child_mut, each_expr_mut};
use crate::lang::Span;

pub fn expand(probes: &mut [Probe]) {
    for probe in probes {
        if let Some(predicate) = &mut probe.predicate {
            expand_expr(predicate);
        }
        expand_asserts(&mut probe.body);
        each_expr_mut(&mut probe.body, &mut expand_expr);
    }
}

fn expr(kind: ExprKind, span: Span) -> Expr {
    Expr { kind, span, id: ExprId::NONE }
}

fn field(base: Expr, name: &str, span: Span) -> Expr {
    expr(ExprKind::Field { base: Box::new(base), field: name.to_string() }, span)
}

/// `ppid`, `ppid()`, `ppid(task)` and the same of `pcomm`, at any depth.
fn expand_expr(e: &mut Expr) {
    each_child_mut(e, &mut expand_expr);
    let (name, task) = match &mut e.kind {
        ExprKind::Ident(name) if name == "ppid" || name == "pcomm" => (name.clone(), None),
        ExprKind::Call { name, args, .. } if (name == "ppid" || name == "pcomm") && args.len() <= 1 => {
            (name.clone(), args.pop())
        }
        _ => return,
    };
    let span = e.span;
    let task = task.unwrap_or_else(|| expr(ExprKind::Ident("curtask".to_string()), span));
    let member = if name == "ppid" { "pid" } else { "comm" };
    *e = field(field(task, "real_parent", span), member, span);
}

/// `assert(cond, msg);` statements, in every block.
fn expand_asserts(block: &mut Block) {
    for stmt in &mut block.stmts {
        match &mut stmt.kind {
            StmtKind::Expr(Expr { kind: ExprKind::Call { name, args, .. }, span, .. })
                if name == "assert" && args.len() == 2 =>
            {
                let span = *span;
                let message = args.pop().expect("two arguments");
                let cond = args.pop().expect("two arguments");
                let call = |name: &str, args: Vec<Expr>| Stmt {
                    kind: StmtKind::Expr(expr(
                        ExprKind::Call {
                            name: name.to_string(),
                            name_span: span,
                            args,
                            expanded_from: vec![],
                        },
                        span,
                    )),
                    span,
                };
                let format = expr(ExprKind::Str("assert failed: %s".to_string()), span);
                stmt.kind = StmtKind::If {
                    cond: expr(ExprKind::Unary { op: UnOp::Not, operand: Box::new(cond) }, span),
                    then: Block {
                        stmts: vec![
                            call("errorf", vec![format, message]),
                            call("exit", vec![expr(ExprKind::Int(1), span)]),
                        ],
                        span,
                    },
                    otherwise: None,
                };
            }
            StmtKind::If { then, otherwise, .. } => {
                expand_asserts(then);
                if let Some(otherwise) = otherwise {
                    expand_asserts(otherwise);
                }
            }
            StmtKind::Unroll { body, .. } | StmtKind::While { body, .. } | StmtKind::For { body, .. } => {
                expand_asserts(body)
            }
            StmtKind::Block(body) => expand_asserts(body),
            _ => {}
        }
    }
}
