//! Compile-time functions of current bpftrace's standard library: the type tests `is_integer(e)`,
//! `is_unsigned_integer(e)`, `is_ptr(e)`, `is_str(e)`, `is_array(e)`, `is_literal(e)`; `static_assert(cond,
//! "msg")`, `assert_str(e)` and `default_str_length()`. Each is decided by the compiler: the argument is never
//! evaluated and no code is generated. Also `typeof(e)`, the type of `e`, which declares a variable:
//! `let $x: typeof(e) [= value]` (read as [`TYPEOF_LET`]).

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::lang::ast::{BinOp, Expr, ExprKind, UnOp, TYPEOF_LET};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::Env;

/// What `default_str_length()` gives: the bytes of a string read by `str()`, as `max_strlen` sets them.
const DEFAULT_STR_LENGTH: u64 = crate::sema::STR_SIZE as u64;

/// A type test: `true` when the argument's type passes it ([`passes`]).
macro_rules! type_test {
    ($name:literal) => {
        Function {
            name: $name,
            check: |env, call| {
                call.arity(1, 1)?;
                env.type_of(&call.args[0])?;
                Ok(Type::Bool)
            },
            check_statement: None,
            emit: Emit::Int(|gen, args, _| Ok(Val::Imm(passes($name, &gen.ty(&args[0])?) as u64))),
        }
    };
}

pub const FUNCTIONS: &[Function] = &[
    type_test!("is_integer"),
    type_test!("is_unsigned_integer"),
    type_test!("is_ptr"),
    type_test!("is_str"),
    type_test!("is_array"),
    Function {
        name: "typeof",
        check: |env, call| {
            call.arity(1, 1)?;
            match env.type_of(&call.args[0])? {
                // Of nothing (`typeof(system(...))`): there is no type to give.
                Type::Void => {
                    Err(Diagnostic::error(call.args[0].span, "this gives no value, so it has no type")
                        .with_help("`typeof()` takes a value or a type name"))
                }
                ty => Ok(ty),
            }
        },
        check_statement: None,
        emit: Emit::Into(|_, _, _, _, span| {
            Err(Diagnostic::error(span, "`typeof()` gives a type, not a value")
                .with_help("declare a variable of that type: `let $x: typeof(e);`, or take its size: `sizeof(typeof(e))`"))
        }),
    },
    Function {
        name: TYPEOF_LET,
        check: |env, call| {
            call.arity(1, 2)?;
            let ty = env.type_of(&call.args[0])?;
            if !(ty.is_int() || matches!(ty, Type::Str { .. })) {
                return Err(crate::sema::not_yet(
                    call.args[0].span,
                    &format!("a variable declared `typeof` a {ty} is"),
                ));
            }
            if let Some(value) = call.args.get(1) {
                let given = env.type_of(value)?;
                let fits = (ty.is_int() && given.is_int())
                    || matches!((&ty, &given), (Type::Str { .. }, Type::Str { .. }))
                    || ty == given;
                if !fits {
                    return Err(Diagnostic::error(
                        value.span,
                        format!("the variable is {ty} (`typeof`), the value {given}"),
                    ));
                }
            }
            Ok(ty)
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            let Some(value) = args.get(1) else {
                gen.zero(offset, ty.slot_size().div_ceil(8) * 8);
                return Ok(());
            };
            match ty {
                Type::Int { bits, signed } => {
                    let val = gen.int(value)?;
                    let val = gen.narrow(val, *bits, *signed, span)?;
                    gen.store_val(val, offset);
                    gen.frame.release(val);
                    Ok(())
                }
                ty => gen.value_into(value, offset, ty),
            }
        }),
    },
    Function {
        name: "is_literal",
        check: |_, call| {
            call.arity(1, 1)?;
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|_, args, _| Ok(Val::Imm(is_literal(&args[0]) as u64))),
    },
    Function {
        name: "default_str_length",
        check: |_, call| {
            call.arity(0, 0)?;
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|_, _, _| Ok(Val::Imm(DEFAULT_STR_LENGTH))),
    },
    Function {
        name: "static_assert",
        check: |env, call| {
            call.arity(2, 2)?;
            let ExprKind::Str(message) = &call.args[1].kind else {
                return Err(Diagnostic::error(
                    call.args[1].span,
                    "`static_assert()` takes a message string literal",
                ));
            };
            match comptime(env, &call.args[0]) {
                Some(0) => Err(Diagnostic::error(call.span, message.clone())),
                Some(_) => Ok(Type::Void),
                None => Err(Diagnostic::error(
                    call.args[0].span,
                    "`static_assert()` takes a condition the compiler can decide",
                )
                .with_help("use literals, `sizeof()` and the type tests such as `is_integer()`; `assert()` checks at run time")),
            }
        },
        check_statement: None,
        emit: Emit::Statement(|_, _, _| Ok(true)),
    },
    Function {
        name: "assert_str",
        check: |env, call| {
            call.arity(1, 1)?;
            assert_str(&env.type_of(&call.args[0])?, call.args[0].span)?;
            Ok(Type::Void)
        },
        check_statement: None,
        emit: Emit::Statement(|_, _, _| Ok(true)),
    },
];

/// Whether a value of `ty` passes the type test `test` (`is_integer`, ...).
fn passes(test: &str, ty: &Type) -> bool {
    match test {
        "is_integer" => matches!(ty, Type::Int { .. }),
        "is_unsigned_integer" => matches!(ty, Type::Int { signed: false, .. }),
        "is_ptr" => matches!(ty, Type::Ptr { .. } | Type::Pointer { .. }),
        "is_str" => matches!(ty, Type::Str { .. }),
        "is_array" => matches!(ty, Type::Array { .. }),
        _ => false,
    }
}

/// Whether `e` is written as a literal: `1`, `"text"`, `true`, or a tuple of literals.
fn is_literal(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Str(_) => true,
        ExprKind::Ident(name) => name == "true" || name == "false",
        ExprKind::Unary { op: UnOp::Neg, operand } => matches!(operand.kind, ExprKind::Int(_)),
        ExprKind::Tuple(items) => items.iter().all(is_literal),
        _ => false,
    }
}

/// An error unless a value of `ty` is string-like: a string, or an array of or pointer to 8-bit integers.
fn assert_str(ty: &Type, span: Span) -> Result<(), Diagnostic> {
    let char_like = |ty: &Type| matches!(ty, Type::Int { bits: 8, .. });
    match ty {
        Type::Str { .. } => Ok(()),
        Type::Array { elem, .. } if char_like(elem) => Ok(()),
        Type::Array { .. } => {
            Err(Diagnostic::error(span, "string-like arrays must contain a char-like type"))
        }
        Type::Pointer { to, .. } if char_like(to) => Ok(()),
        Type::Pointer { .. } | Type::Ptr { .. } => {
            Err(Diagnostic::error(span, "string-like pointers must point to a char-like type"))
        }
        _ => Err(Diagnostic::error(span, "string-like values must be either strings, arrays or pointers")),
    }
}

/// The value of `e` when the compiler can decide it: literals, the type tests, `sizeof()`,
/// `default_str_length()`, and arithmetic, comparisons and logic on them.
fn comptime(env: &Env, e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(n) => i64::try_from(*n).ok(),
        ExprKind::Ident(name) if name == "true" || name == "false" => Some((name == "true") as i64),
        ExprKind::Unary { op: UnOp::Neg, operand } => comptime(env, operand).map(i64::wrapping_neg),
        ExprKind::Unary { op: UnOp::Not, operand } => comptime(env, operand).map(|v| (v == 0) as i64),
        ExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (comptime(env, lhs)?, comptime(env, rhs)?);
            Some(match op {
                BinOp::Add => a.checked_add(b)?,
                BinOp::Sub => a.checked_sub(b)?,
                BinOp::Mul => a.checked_mul(b)?,
                BinOp::Eq => (a == b) as i64,
                BinOp::Ne => (a != b) as i64,
                BinOp::Lt => (a < b) as i64,
                BinOp::Le => (a <= b) as i64,
                BinOp::Gt => (a > b) as i64,
                BinOp::Ge => (a >= b) as i64,
                BinOp::And => (a != 0 && b != 0) as i64,
                BinOp::Or => (a != 0 || b != 0) as i64,
                _ => return None,
            })
        }
        ExprKind::Call { name, args, .. } => {
            let call = Call { name, args, span: e.span };
            let function = env.functions.find(name)?;
            // Only the functions decided by the compiler: their code is a constant.
            let decided = FUNCTIONS.iter().any(|f| f.name == name) || name == "sizeof";
            if !decided || env.functions.check(function, env, &call).is_err() {
                return None;
            }
            match name.as_str() {
                "sizeof" => super::types::size_of(&args[0], env).ok().map(|n| n as i64),
                "default_str_length" => Some(DEFAULT_STR_LENGTH as i64),
                "is_literal" => Some(is_literal(&args[0]) as i64),
                name if name.starts_with("is_") => Some(passes(name, &env.type_of(&args[0]).ok()?) as i64),
                _ => None,
            }
        }
        _ => None,
    }
}
