//! `kstack`, `ustack` and `dw_ustack` with arguments: `kstack(perf, 10)`, `dw_ustack(5)`.

use super::{Emit, Function};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::constant;
use crate::sema::types::{StackType, Type};
use crate::symbols::StackMode;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "kstack",
        check: |_, call| stack_args(call.name, call.args, call.span).map(Type::Stack),
        check_statement: None,
        emit: Emit::Into(stack_into),
    },
    Function {
        name: "ustack",
        check: |_, call| stack_args(call.name, call.args, call.span).map(Type::Stack),
        check_statement: None,
        emit: Emit::Into(stack_into),
    },
    Function {
        name: "dw_ustack",
        check: |_, call| stack_args(call.name, call.args, call.span).map(Type::Stack),
        check_statement: None,
        emit: Emit::Into(stack_into),
    },
];

fn stack_into(
    gen: &mut crate::codegen::Gen,
    _: &[Expr],
    offset: i16,
    ty: &Type,
    span: Span,
) -> Result<(), Diagnostic> {
    let Type::Stack(stack) = ty else {
        return Err(Diagnostic::error(span, "internal error: a stack into a non-stack"));
    };
    gen.stack_into(*stack, offset, span)
}

/// `kstack(perf)`, `ustack(5)`, `kstack(raw, 10)`: a mode, a depth, or both.
fn stack_args(name: &str, args: &[Expr], span: Span) -> Result<StackType, Diagnostic> {
    let help = format!(
        "write `{name}`, `{name}(N)`, `{name}(perf)` or `{name}(perf, N)`; modes are bpftrace, perf, raw and (ustack only) build_id"
    );
    let mut stack = StackType::named(name);
    let (mode, depth) = match args {
        [] => (None, None),
        [Expr { kind: ExprKind::Ident(mode), span, .. }] => (Some((mode, *span)), None),
        [depth] => (None, Some(depth)),
        [Expr { kind: ExprKind::Ident(mode), span, .. }, depth] => (Some((mode, *span)), Some(depth)),
        _ => {
            return Err(
                Diagnostic::error(span, format!("`{name}()` takes a mode, a depth, or both")).with_help(help)
            )
        }
    };
    if let Some((mode, mode_span)) = mode {
        stack.mode = StackMode::from_name(mode).ok_or_else(|| {
            Diagnostic::error(mode_span, format!("unknown stack mode `{mode}`")).with_help(help.clone())
        })?;
        if stack.mode == StackMode::BuildId && !stack.user {
            return Err(Diagnostic::error(
                mode_span,
                "`build_id` is a mode of user stacks: kernel code has no file offset",
            )
            .with_help(help));
        }
    }
    if let Some(depth) = depth {
        stack.depth = constant(depth)
            .filter(|d| (1..=i64::from(StackType::MAX_DEPTH)).contains(d))
            .ok_or_else(|| {
                Diagnostic::error(depth.span, "the depth of a stack is a number from 1 to 127")
                    .with_help(help)
            })? as u8;
    }
    Ok(stack)
}

/// `--unwind dwarf`: every `ustack` and `ustack(...)` of the program becomes `dw_ustack`.
pub fn unwind_ustack_with_dwarf(program: &mut crate::lang::ast::Program) {
    fn rename(e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Ident(name) | ExprKind::Call { name, .. } if name == "ustack" => {
                *name = "dw_ustack".into()
            }
            _ => {}
        }
        crate::lang::walk::each_child_mut(e, &mut rename);
    }
    for probe in &mut program.probes {
        if let Some(predicate) = &mut probe.predicate {
            rename(predicate);
        }
        crate::lang::walk::each_expr_mut(&mut probe.body, &mut rename);
    }
}
