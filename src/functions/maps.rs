//! Functions on a script's maps: `clear`, `zero`, `delete`, `has_key`, `len`.

use super::{Call, Emit, Function};
use crate::codegen::record::Record;
use crate::lang::ast::ExprKind;
use crate::lang::Diagnostic;
use crate::sema::maps::{key_parts, MapValue};
use crate::sema::types::Type;
use crate::sema::Env;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "clear",
        check: whole_map,
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| {
            let map = gen.script_map_position(&args[0]);
            gen.send_record(Record::ClearMap { map }, span).map(|()| true)
        }),
    },
    Function {
        name: "zero",
        check: whole_map,
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| {
            let map = gen.script_map_position(&args[0]);
            gen.send_record(Record::ZeroMap { map }, span).map(|()| true)
        }),
    },
    Function {
        name: "delete",
        // `delete(@m, key)`, and 0.17's `delete(@m[key])`: true when the key was there.
        check: |env, call| {
            call.arity(1, 2)?;
            let args = call.args;
            let (map, keys) = env.map_arg(call.name, args.first(), call.span)?;
            match args.get(1) {
                Some(_) if !keys.is_empty() => {
                    return Err(Diagnostic::error(
                        args[0].span,
                        "write `delete(@map, key)` or `delete(@map[key])`",
                    )
                    .with_help(format!("the key goes in one place, not both: `delete(@{map}, ...)`")));
                }
                Some(key) => {
                    let parts = env.maps.get(map).map_or(1, |(_, decl)| decl.key.len());
                    env.check_keys(map, &key_parts(parts, key), key.span)?;
                }
                None => env.check_keys(map, keys, args[0].span)?,
            }
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| gen.delete(args, span)),
    },
    Function {
        name: "has_key",
        check: |env, call| {
            call.arity(2, 2)?;
            let args = call.args;
            let (map, keys) = env.map_arg(call.name, args.first(), call.span)?;
            if !keys.is_empty() {
                return Err(Diagnostic::error(args[0].span, "write `has_key(@map, key)`"));
            }
            if env.maps.get(map).is_some_and(|(_, decl)| decl.key.is_empty()) {
                return Err(Diagnostic::error(
                    args[0].span,
                    "call to has_key() expects a map with explicit keys (non-scalar map)",
                )
                .with_help(format!("`@{map}` has no keys: test whether it was set with `@{map} != 0`")));
            }
            let parts = env.maps.get(map).map_or(1, |(_, decl)| decl.key.len());
            env.check_keys(map, &key_parts(parts, &args[1]), args[1].span)?;
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| gen.has_key(args, span)),
    },
    Function {
        name: "len",
        check: |env, call| {
            call.arity(1, 1)?;
            let args = call.args;
            let (map, keys) = env.map_arg(call.name, args.first(), call.span)?;
            if !keys.is_empty() {
                return Err(Diagnostic::error(args[0].span, "`len()` counts the entries of a whole map")
                    .with_help(format!("write `len(@{map})`")));
            }
            if let Some((_, decl)) = env.maps.get(map) {
                if let MapValue::Agg(agg) = decl.value {
                    if agg.has_buckets() {
                        return Err(Diagnostic::error(
                            args[0].span,
                            format!("`len()` cannot count the entries of a `{}()` map", agg.name()),
                        )
                        .with_help("keep a `count()` map with the same keys, and take its `len()`"));
                    }
                }
                if decl.key.is_empty() {
                    return Err(Diagnostic::error(
                        args[0].span,
                        "call to len() expects a map with explicit keys (non-scalar map)",
                    )
                    .with_help("`len()` takes a map with keys, such as `@m[pid]`"));
                }
            }
            Ok(Type::I64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let ExprKind::Map { name: map, .. } = &args[0].kind else {
                return Err(Diagnostic::error(span, "internal error: len() of a non-map"));
            };
            gen.map_len(map, span)?;
            gen.take_r0(span)
        }),
    },
];

/// `clear(@map)`, `zero(@map)`: a whole map.
fn whole_map(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    let (map, keys) = env.map_arg(call.name, call.args.first(), call.span)?;
    if !keys.is_empty() {
        return Err(Diagnostic::error(
            call.args[0].span,
            format!("`{}()` takes a whole map: write `{}(@{map})`", call.name, call.name),
        ));
    }
    Ok(Type::Void)
}
