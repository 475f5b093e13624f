//! Functions of current bpftrace's standard library on strings, bytes and pointers: `strstr`, `str_concat`,
//! `strcap`, `memcmp`, `kptr`, `uptr` and `has_cpid`; `find(@m, key, $v)` and `config()`, whose fields sema reads as literals
//! (`sema/stdlib_calls.rs`): a call left is a key without a value or the record itself, an error.

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::lang::Diagnostic;
use crate::sema::constant;
use crate::sema::types::Type;
use crate::sema::Env;

/// The longest string `str_concat()` makes, its NUL counted: two strings `str()` reads whole.
const CONCAT_MAX: usize = 128;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "strstr",
        check: |env, call| {
            call.arity(2, 2)?;
            strings(env, call)?;
            Ok(Type::I64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| gen.string_search(&args[0], &args[1], true, span)),
    },
    Function {
        name: "str_concat",
        check: |env, call| {
            call.arity(2, 2)?;
            let (first, second) = strings(env, call)?;
            // Each size counts its NUL; the result has one. A variable concatenated onto itself
            // (`$p = str_concat($p, "/")`) would grow with each pass of the checker: the result is capped.
            Ok(Type::Str { size: (first + second - 1).min(CONCAT_MAX) })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            let Type::Str { size } = *ty else {
                return Err(Diagnostic::error(span, "internal error: str_concat() into a non-string"));
            };
            gen.concat_into(&args[0], &args[1], offset, size, span)
        }),
    },
    Function {
        name: "strcap",
        check: |env, call| {
            call.arity(1, 1)?;
            capacity(&env.type_of(&call.args[0])?).map(|_| Type::I64).ok_or_else(|| {
                Diagnostic::error(
                    call.args[0].span,
                    "`strcap()` takes a string or an array of 8-bit integers",
                )
                .with_help("for a pointer, read the string first: `strcap(str(ptr))`")
            })
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let size = capacity(&gen.ty(&args[0])?)
                .ok_or_else(|| Diagnostic::error(span, "internal error: strcap() of a non-string"))?;
            Ok(Val::Imm(size as u64))
        }),
    },
    Function {
        name: "memcmp",
        check: |env, call| {
            call.arity(3, 3)?;
            let smallest = [&call.args[0], &call.args[1]]
                .into_iter()
                .map(|arg| env.type_of(arg).map(|ty| capacity(&ty).unwrap_or(ty.slot_size())))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .min()
                .unwrap_or(0);
            match constant(&call.args[2]) {
                Some(count) if (0..=smallest as i64).contains(&count) => Ok(Type::I64),
                _ => Err(Diagnostic::error(
                    call.args[2].span,
                    format!("`memcmp()` compares a constant count of bytes, from 0 to {smallest} here"),
                )
                .with_help("the count is at most the size of the smaller value")),
            }
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let count = constant(&args[2]).unwrap_or(0) as usize;
            gen.compare_bytes(&args[0], &args[1], count, span)
        }),
    },
    Function {
        name: "kptr",
        check: |env, call| in_space(env, call, false),
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.int(&args[0])),
    },
    Function {
        name: "uptr",
        check: |env, call| in_space(env, call, true),
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.int(&args[0])),
    },
    Function {
        name: "config",
        check: |_, call| {
            let known = crate::config::fixed_keys().join(", ");
            Err(match call.args.first().map(|a| &a.kind) {
                Some(crate::lang::ast::ExprKind::Str(key)) => Diagnostic::error(
                    call.span,
                    format!("steadytrace has no value for the config key `{key}`"),
                )
                .with_help(format!("the keys it has values for: {known}")),
                _ => Diagnostic::error(call.span, "`config` is read by its fields, e.g. `config.max_strlen`")
                    .with_help(format!("the keys it has values for: {known}")),
            })
        },
        check_statement: None,
        emit: Emit::Int(|_, _, span| {
            Err(Diagnostic::error(span, "internal error: config() left to codegen"))
        }),
    },
    Function {
        // Read as an expression by sema (`sema/stdlib_calls.rs`); a call left is malformed.
        name: "find",
        check: |_, call| {
            Err(Diagnostic::error(call.span, "`find()` takes a map, a key and a `$variable` for the value")
                .with_help("for example `let $v; if (find(@m, 2, $v)) { print($v); }`"))
        },
        check_statement: None,
        emit: Emit::Int(|_, _, span| Err(Diagnostic::error(span, "internal error: find() left to codegen"))),
    },
    Function {
        name: "has_cpid",
        check: |_, call| {
            call.arity(0, 0)?;
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, _, _| Ok(Val::Imm(gen.has_child() as u64))),
    },
];

/// The sizes of the two string arguments of `call`, or an error naming the first that is not a string.
fn strings(env: &Env, call: &Call) -> Result<(usize, usize), Diagnostic> {
    let mut sizes = [0; 2];
    for (arg, size) in call.args.iter().zip(&mut sizes) {
        match env.type_of(arg)? {
            Type::Str { size: bytes } => *size = bytes,
            ty => {
                return Err(Diagnostic::error(
                    arg.span,
                    format!("`{}()` takes two strings, not {ty}", call.name),
                )
                .with_help("read a string from a pointer with `str()`"))
            }
        }
    }
    Ok((sizes[0], sizes[1]))
}

/// The bytes a string-like value holds: a string's size, an array of 8-bit integers' length.
fn capacity(ty: &Type) -> Option<usize> {
    match ty {
        Type::Str { size } => Some(*size),
        Type::Array { elem, len } if matches!(**elem, Type::Int { bits: 8, .. }) => Some(*len),
        _ => None,
    }
}

/// `kptr(p)` / `uptr(p)`: `p`, marked as an address in the kernel's memory or in the process's.
fn in_space(env: &Env, call: &Call, user: bool) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    match env.type_of(&call.args[0])? {
        Type::Ptr { to, .. } => Ok(Type::Ptr { to, user }),
        Type::Pointer { to, .. } => Ok(Type::Pointer { to, user }),
        // An address as an integer (`uptr(arg0)`): a pointer to bytes there, as bpftrace takes it.
        ty if ty.is_int() => Ok(Type::Pointer { to: Box::new(Type::Int { signed: true, bits: 8 }), user }),
        ty => Err(Diagnostic::error(
            call.args[0].span,
            format!("`{}()` takes a pointer or an address, not {ty}", call.name),
        )
        .with_help("pass a pointer (`(int8 *)arg0`) or an address as an integer (`arg0`)")),
    }
}
