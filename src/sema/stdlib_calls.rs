//! Functions of current bpftrace's standard library that are shorthands for expressions, read here as the
//! expressions they stand for (before scoping, as bpftrace expands its stdlib macros):
//! `leader_tid(task)` is `task->group_leader->pid`, `leader_comm(task)` is `task->group_leader->comm` (the
//! task is `curtask` when none is given), and `container_of(ptr, struct T, member)` is
//! `(struct T *)((uint64)ptr - offsetof(struct T, member))`; `find(@m, key, $v)` is
//! `{ let $k = key; has_key(@m, $k) ? { $v = @m[$k]; true } : false }`; `has_cpid` is `has_cpid()`; `config.KEY` (also
//! `config().KEY`, `__builtin_config.KEY`) is the value steadytrace uses for the config key, a literal (a key
//! it has no fixed value for is left as `config("KEY")`, an error). A user macro of the same name was
//! expanded earlier, so it wins.

use crate::lang::ast::*;
use crate::lang::walk::{each_child_mut, each_expr_mut};
use crate::lang::Span;

/// Rewrites the shorthands in the predicate and body of a probe.
pub fn rewrite(predicate: &mut Option<Expr>, body: &mut Block) {
    if let Some(predicate) = predicate {
        rewrite_expr(predicate);
    }
    each_expr_mut(body, &mut rewrite_expr);
}

fn rewrite_expr(e: &mut Expr) {
    each_child_mut(e, &mut rewrite_expr);
    let span = e.span;
    if let ExprKind::Ident(name) = &e.kind {
        // These are also written as builtins.
        if ["leader_tid", "leader_comm", "has_cpid", "config", "__builtin_config"].contains(&name.as_str()) {
            let name = name.trim_start_matches("__builtin_").to_string();
            e.kind = ExprKind::Call { name, name_span: span, args: vec![], expanded_from: vec![] };
        }
    }
    if let ExprKind::Field { base, field } = &e.kind {
        if matches!(&base.kind, ExprKind::Call { name, args, .. } if name == "config" && args.is_empty()) {
            *e = config_value(field, span);
            return;
        }
    }
    let ExprKind::Call { name, args, .. } = &mut e.kind else { return };
    let expanded = match (name.as_str(), args.len()) {
        ("leader_tid" | "leader_comm", 0 | 1) => {
            let member = if name == "leader_tid" { "pid" } else { "comm" };
            let task = args.pop().unwrap_or_else(|| node(ExprKind::Ident("curtask".into()), span));
            let leader = field(task, "group_leader", span);
            field(leader, member, span)
        }
        ("container_of", 3) => {
            let (ptr, record, member) = (args[0].clone(), args[1].clone(), args[2].clone());
            let ExprKind::Ident(record_name) = &record.kind else { return };
            let ty = format!("{record_name} *");
            let address = node(ExprKind::Cast { ty: "uint64".into(), operand: Box::new(ptr) }, span);
            let offset = node(
                ExprKind::Call {
                    name: "offsetof".into(),
                    name_span: span,
                    args: vec![record, member],
                    expanded_from: vec![],
                },
                span,
            );
            let start = node(
                ExprKind::Binary { op: BinOp::Sub, lhs: Box::new(address), rhs: Box::new(offset) },
                span,
            );
            node(ExprKind::Cast { ty, operand: Box::new(start) }, span)
        }
        ("find", 3) if is_whole_map(&args[0]) && matches!(args[2].kind, ExprKind::Var(_)) => {
            let (map, key, var) = (args[0].clone(), args[1].clone(), args[2].clone());
            find(map, key, var, span)
        }
        _ => return,
    };
    *e = expanded;
}

fn is_whole_map(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Map { keys, .. } if keys.is_empty())
}

/// `find(@m, key, $v)`: whether `@m` has `key`, setting `$v` to its value when it has. The key is evaluated
/// once, into a variable no script can name.
fn find(map: Expr, key: Expr, var: Expr, span: Span) -> Expr {
    let ExprKind::Map { name, .. } = &map.kind else { return map };
    let key_var = || node(ExprKind::Var("find:key".into()), span);
    let bind =
        Stmt { kind: StmtKind::Let { name: "find:key".into(), decl_span: span, value: Some(key) }, span };
    let has_key = node(
        ExprKind::Call {
            name: "has_key".into(),
            name_span: span,
            args: vec![map.clone(), key_var()],
            expanded_from: vec![],
        },
        span,
    );
    let value = node(ExprKind::Map { name: name.clone(), keys: vec![key_var()] }, span);
    let assign = Stmt { kind: StmtKind::Assign { target: var, op: None, value }, span };
    let boolean = |b: bool| node(ExprKind::Ident(b.to_string()), span);
    let found = node(
        ExprKind::Block { block: Block { stmts: vec![assign], span }, value: Some(Box::new(boolean(true))) },
        span,
    );
    let choice = node(
        ExprKind::Ternary {
            cond: Box::new(has_key),
            then: Box::new(found),
            otherwise: Box::new(boolean(false)),
        },
        span,
    );
    node(ExprKind::Block { block: Block { stmts: vec![bind], span }, value: Some(Box::new(choice)) }, span)
}

/// `config.KEY`: the literal of the value steadytrace uses, or `config("KEY")` when it has none.
fn config_value(key: &str, span: Span) -> Expr {
    let kind = match crate::config::fixed_value(key) {
        Some(value) => match value.parse::<u64>() {
            Ok(n) => ExprKind::Int(n),
            Err(_) if value == "true" || value == "false" => ExprKind::Ident(value.into()),
            Err(_) => ExprKind::Str(value.into()),
        },
        None => ExprKind::Call {
            name: "config".into(),
            name_span: span,
            args: vec![node(ExprKind::Str(key.into()), span)],
            expanded_from: vec![],
        },
    };
    node(kind, span)
}

fn node(kind: ExprKind, span: Span) -> Expr {
    Expr { id: ExprId::NONE, kind, span }
}

fn field(base: Expr, name: &str, span: Span) -> Expr {
    node(ExprKind::Field { base: Box::new(base), field: name.into() }, span)
}
