//! Current bpftrace's other spellings of builtins: its standard library wraps each builtin `NAME` in a
//! macro, so `NAME()` reads the same value as `NAME`, and `__builtin_NAME` is the builtin itself. Both are
//! read here as the plain `NAME`, before scoping. A user macro `NAME()` was expanded earlier, so it
//! wins over `NAME()` but not over `__builtin_NAME`.

use super::builtins::Builtin;
use super::env::FunctionTable;
use crate::lang::ast::*;
use crate::lang::walk::{each_child_mut, each_expr_mut};

/// The builtins a probe's context provides, besides those of [`Builtin`].
const CONTEXT_BUILTINS: &[&str] = &["func", "retval", "cpid"];

fn is_builtin(name: &str) -> bool {
    Builtin::from_name(name).is_some() || CONTEXT_BUILTINS.contains(&name)
}

/// Rewrites `NAME()` and `__builtin_NAME` of a builtin to `NAME` in the predicate and body of a probe.
pub fn rewrite(predicate: &mut Option<Expr>, body: &mut Block, functions: &dyn FunctionTable) {
    let mut rewrite = |e: &mut Expr| rewrite_expr(e, functions);
    if let Some(predicate) = predicate {
        rewrite(predicate);
    }
    each_expr_mut(body, &mut rewrite);
}

fn rewrite_expr(e: &mut Expr, functions: &dyn FunctionTable) {
    let plain = match &e.kind {
        ExprKind::Ident(name) => name.strip_prefix("__builtin_").filter(|name| is_builtin(name)),
        ExprKind::Call { name, args, .. } if args.is_empty() && functions.find(name).is_none() => {
            Some(name.as_str()).filter(|name| is_builtin(name))
        }
        _ => None,
    };
    if let Some(plain) = plain {
        e.kind = ExprKind::Ident(plain.to_string());
    }
    each_child_mut(e, &mut |child| rewrite_expr(child, functions));
}
