//! Functions that print or stop: `printf`, `errorf`, `warnf`, `cat`, `system`, `print`, `time`, `join`,
//! `exit`.

use super::{Call, Emit, Function};
use crate::codegen::record::{Record, TextAction};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::Diagnostic;
use crate::sema::format::{self, ConvKind};
use crate::sema::maps::{Agg, MapValue};
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use crate::sema::{constant, Env};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "printf",
        check: check_format_args,
        check_statement: Some(check_format),
        emit: Emit::Statement(|gen, args, span| gen.printf(args, span, TextAction::Print).map(|()| true)),
    },
    Function {
        name: "cat",
        check: check_format_args,
        check_statement: Some(check_format),
        emit: Emit::Statement(|gen, args, span| gen.printf(args, span, TextAction::PrintFile).map(|()| true)),
    },
    Function {
        name: "system",
        check: check_format_args,
        check_statement: Some(check_format),
        emit: Emit::Statement(|gen, args, span| {
            super::require_unsafe(gen, "system", span)?;
            gen.printf(args, span, TextAction::RunCommand).map(|()| true)
        }),
    },
    Function {
        name: "errorf",
        check: check_format_args,
        check_statement: Some(check_format),
        emit: Emit::Statement(|gen, args, span| gen.log(args, span, true).map(|()| true)),
    },
    Function {
        name: "warnf",
        check: check_format_args,
        check_statement: Some(check_format),
        emit: Emit::Statement(|gen, args, span| gen.log(args, span, false).map(|()| true)),
    },
    Function {
        name: "exit",
        check: |_, _| Ok(Type::Void),
        check_statement: Some(check_exit),
        emit: Emit::Statement(|gen, args, span| gen.exit_call(args.first(), span).map(|()| false)),
    },
    Function {
        name: "print",
        check: check_print,
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| gen.print(args, span).map(|()| true)),
    },
    Function {
        name: "time",
        check: |_, call| {
            call.arity(0, 1)?;
            if let Some(arg) = call.args.first() {
                if !matches!(arg.kind, ExprKind::Str(_)) {
                    return Err(Diagnostic::error(
                        arg.span,
                        "`time()` takes a strftime format string literal",
                    ));
                }
            }
            Ok(Type::Void)
        },
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| {
            let format = match args.first().map(|a| &a.kind) {
                Some(ExprKind::Str(format)) => format.clone(),
                _ => "%H:%M:%S\n".to_string(),
            };
            gen.send_record(Record::Time { format }, span).map(|()| true)
        }),
    },
    Function {
        name: "join",
        check: |env, call| {
            call.arity(1, 2)?;
            let args = call.args;
            if !env.type_of(&args[0])?.is_int() {
                return Err(Diagnostic::error(
                    args[0].span,
                    "`join()` takes the address of an array of string pointers",
                )
                .with_help("for example `join(args.argv)` in tracepoint:syscalls:sys_enter_execve"));
            }
            if let Some(delim) = args.get(1) {
                if !matches!(delim.kind, ExprKind::Str(_)) {
                    return Err(Diagnostic::error(
                        delim.span,
                        "the separator of `join()` is a string literal",
                    ));
                }
            }
            Ok(Type::Void)
        },
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| gen.join(args, span).map(|()| true)),
    },
];

fn check_print(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 3)?;
    let args = call.args;
    match &args[0].kind {
        ExprKind::Map { name: map, keys }
            if keys.is_empty()
                && env.maps.get(map).is_some_and(|(_, d)| !d.key.is_empty() || args.len() > 1) =>
        {
            for extra in &args[1..] {
                if constant(extra).is_none_or(|v| v < 0) {
                    return Err(Diagnostic::error(
                        extra.span,
                        "`print(@map, top, div)` takes constant, non-negative integers",
                    ));
                }
            }
        }
        _ if args.len() > 1 => {
            return Err(Diagnostic::error(
                args[1].span,
                "only `print(@map, top, div)` takes more than one argument",
            ))
        }
        ExprKind::Map { name: map, keys }
            if keys.is_empty()
                && env.maps.get(map).is_some_and(|(_, d)| matches!(d.value, MapValue::Agg(_))) => {}
        ExprKind::Ident(name) if name == "args" => {
            env.args_record(args[0].span)?;
        }
        ExprKind::Map { name: map, keys }
            if !keys.is_empty()
                && env.maps.get(map).is_some_and(|(_, d)| d.value == MapValue::Agg(Agg::Stats)) =>
        {
            env.stats_entry_read(map, keys, args[0].span)?;
        }
        _ => match env.type_of(&args[0])? {
            Type::Void => return Err(Diagnostic::error(args[0].span, "this gives no value to print")),
            ty => {
                // A struct prints as the named tuple of its members.
                let value = crate::sema::struct_values::as_value(ty, args[0].span, env.kernel)?;
                env.resolved(&args[0], || Resolved::Type(value));
            }
        },
    }
    Ok(Type::Void)
}

/// `exit(code)` as a statement: at most one argument, an integer from 0 to 255.
fn check_exit(env: &Env, call: &Call) -> Vec<Diagnostic> {
    let args = call.args;
    if args.len() > 1 {
        return vec![Diagnostic::error(call.span, "`exit` takes at most one argument, the exit code")];
    }
    let Some(arg) = args.first() else { return vec![] };
    let ty = match env.type_of(arg) {
        Ok(ty) => ty,
        Err(diag) => return vec![diag],
    };
    if !ty.is_int() {
        vec![Diagnostic::error(arg.span, format!("the exit code must be an integer, not {ty}"))]
    } else if constant(arg).is_some_and(|code| !(0..=255).contains(&code)) {
        vec![Diagnostic::error(arg.span, "an exit code is a number from 0 to 255")
            .with_help("the shell sees only the low 8 bits of a process's exit status")]
    } else {
        vec![]
    }
}

/// The arguments of `printf` and its kin: a struct, which `%s` prints as `print()` does, is the named tuple
/// of its members (its conversions are checked by `check_format`).
fn check_format_args(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    for arg in call.args.iter().skip(1) {
        if let Ok(ty @ Type::Record { .. }) = env.type_of(arg) {
            let value = crate::sema::struct_values::as_value(ty, arg.span, env.kernel)?;
            env.resolved(arg, || Resolved::Type(value));
        }
    }
    Ok(Type::Void)
}

/// `printf(format, args...)` and `cat(format, args...)` as statements: the format is a literal whose
/// conversions fit the arguments.
pub(super) fn check_format(env: &Env, call: &Call) -> Vec<Diagnostic> {
    let (args, span) = (call.args, call.span);
    let types: Vec<Result<Type, Diagnostic>> = args.iter().map(|a| env.type_of(a)).collect();
    let Some(Expr { kind: ExprKind::Str(format), span: format_span, .. }) = args.first() else {
        let at = args.first().map_or(span, |a| a.span);
        return vec![Diagnostic::error(
            at,
            format!("the first argument of `{}` must be a format string literal", call.name),
        )
        .with_help(format!("write `{}(\"%d\\n\", value)`", call.name))];
    };
    let pieces = match format::parse(format, *format_span) {
        Ok(pieces) => pieces,
        Err(diag) => return vec![diag],
    };
    let convs: Vec<_> = format::conversions(&pieces).collect();
    if convs.len() != args.len() - 1 {
        return vec![Diagnostic::error(
            span,
            format!(
                "the format has {} conversion{} but {} argument{} follow{} it",
                convs.len(),
                if convs.len() == 1 { "" } else { "s" },
                args.len() - 1,
                if args.len() == 2 { "" } else { "s" },
                if args.len() == 2 { "s" } else { "" }
            ),
        )];
    }
    let mut diags = vec![];
    for ((conv, arg), ty) in convs.iter().zip(&args[1..]).zip(&types[1..]) {
        // `args` as a whole prints as `print(args)` shows it.
        if matches!(&arg.kind, ExprKind::Ident(name) if name == "args") {
            if let Err(diag) = env.args_record(arg.span) {
                diags.push(diag);
            } else if !conv.kind.takes_string() {
                diags.push(Diagnostic::error(arg.span, "`args` as a whole prints with `%s`"));
            }
            continue;
        }
        let ty = match ty {
            Ok(ty) => ty,
            Err(diag) => {
                diags.push(diag.clone());
                continue;
            }
        };
        let fits = match ty {
            Type::Str { .. }
            | Type::Stack(_)
            | Type::Cpumask { .. }
            | Type::Symbol { .. }
            | Type::Function { .. }
            | Type::Timestamp { .. }
            | Type::CgroupPath { .. }
            | Type::ContainerId
            | Type::Username
            | Type::Inet
            | Type::MacAddr => conv.kind.takes_string(),
            // `%s` prints a buffer as `%r` does.
            Type::Buf { .. } => matches!(conv.kind, ConvKind::Buffer { .. } | ConvKind::Str),
            // `%s` prints any value as `print()` does (an enum by its constant's name).
            Type::Int { .. } | Type::Ptr { .. } | Type::Pointer { .. } | Type::Bool | Type::Enum { .. } => {
                conv.kind == ConvKind::Str || !conv.kind.takes_string()
            }
            Type::Tuple(_)
            | Type::NamedTuple { .. }
            | Type::Array { .. }
            | Type::Record { .. }
            | Type::Bytes { .. } => conv.kind == ConvKind::Str,
            Type::Void => false,
        };
        if !fits {
            let wanted = match conv.kind {
                ConvKind::Str | ConvKind::Buffer { .. } => "a string",
                _ => "an integer",
            };
            let diag = Diagnostic::error(
                arg.span,
                format!("this conversion wants {wanted}, but the argument is {ty}"),
            );
            diags.push(match ty {
                Type::Buf { .. } => diag.with_help("a buffer prints with `%r`, `%rx` or `%rh`"),
                _ => diag,
            });
        }
    }
    diags
}
