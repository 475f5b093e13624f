//! Functions naming addresses: `ksym`, `usym`, `kaddr`, `ntop`.

use super::{Call, Emit, Function};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Alu, Reg, Size};

pub const FUNCTIONS: &[Function] = &[
    Function { name: "ksym", check: symbol, check_statement: None, emit: Emit::Into(symbol_into) },
    Function { name: "usym", check: symbol, check_statement: None, emit: Emit::Into(symbol_into) },
    Function {
        name: "kaddr",
        check: |env, call| {
            call.arity(1, 1)?;
            let arg = &call.args[0];
            let ExprKind::Str(symbol) = &arg.kind else {
                return Err(Diagnostic::error(
                    arg.span,
                    "`kaddr()` takes a kernel symbol's name as a string literal",
                ));
            };
            let Some(address) = env.kernel.symbol_address(symbol) else {
                return Err(Diagnostic::error(arg.span, format!("the kernel has no symbol `{symbol}`"))
                    .with_help(
                        "kernel symbols are listed in /proc/kallsyms (with their addresses only for root)",
                    ));
            };
            env.resolved(arg, || Resolved::Constant(address));
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.probe_constant(&args[0]).map(crate::codegen::frame::Val::Imm)),
    },
    Function {
        name: "ntop",
        check: |env, call| {
            call.arity(1, 2)?;
            let args = call.args;
            if args.len() == 2 && !env.type_of(&args[0])?.is_int() {
                return Err(Diagnostic::error(
                    args[0].span,
                    "the address family of `ntop()` is an integer (AF_INET, AF_INET6)",
                ));
            }
            let address = args.last().expect("one or two arguments");
            match env.type_of(address)? {
                ty if ty.is_int() => {}
                Type::Str { size: 4 | 16 } | Type::Bytes { size: 4 | 16 } => {}
                ty => {
                    return Err(Diagnostic::error(address.span, format!("`ntop()` takes an IPv4 address (an integer or 4 bytes) or an IPv6 one (16 bytes), not {ty}")))
                }
            }
            Ok(Type::Inet)
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, _| gen.inet_into(args, offset)),
    },
];

/// `ksym(addr)`, `usym(addr)`: an address, named when printed.
fn symbol(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    if !env.type_of(&call.args[0])?.is_int() {
        return Err(Diagnostic::error(
            call.args[0].span,
            format!("`{}()` takes an address (an integer)", call.name),
        ));
    }
    Ok(Type::Symbol { user: call.name == "usym" })
}

/// The address, and for a user symbol the process it belongs to.
fn symbol_into(
    gen: &mut crate::codegen::Gen,
    args: &[Expr],
    offset: i16,
    ty: &Type,
    span: Span,
) -> Result<(), Diagnostic> {
    let address = gen.int(&args[0])?;
    gen.store_val(address, offset);
    if matches!(ty, Type::Symbol { user: true }) {
        gen.pid_tgid(span)?;
        gen.asm.alu64_imm(Alu::Rsh, Reg::R0, 32);
        gen.asm.store(Size::DW, Reg::FP, offset + 8, Reg::R0);
    }
    Ok(())
}
