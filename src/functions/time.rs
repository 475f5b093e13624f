//! Functions of time: `strftime(format, nsecs)` and `nsecs(clock)`.

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::codegen::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::{constant, Env};
use bpf::{Alu, Helper, Reg};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "strftime",
        check: |env, call| {
            call.arity(2, 2)?;
            let args = call.args;
            let ExprKind::Str(format) = &args[0].kind else {
                return Err(Diagnostic::error(
                    args[0].span,
                    "the format of `strftime()` is a string literal",
                ));
            };
            if !env.type_of(&args[1])?.is_int() {
                return Err(Diagnostic::error(
                    args[1].span,
                    "`strftime()` formats a time in nanoseconds since boot (an integer, e.g. `nsecs`)",
                ));
            }
            if constant(&args[1]).is_some_and(|n| n < 0) {
                return Err(Diagnostic::error(args[1].span, "the time of `strftime()` cannot be negative"));
            }
            Ok(Type::Timestamp { format: format.as_str().into() })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, _| {
            let time = gen.int(&args[1])?;
            gen.store_val(time, offset);
            Ok(())
        }),
    },
    Function { name: "nsecs", check: check_nsecs, check_statement: None, emit: Emit::Int(nsecs) },
];

/// The clocks `nsecs(clock)` reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clock {
    Monotonic,
    Boot,
    Tai,
    /// TAI from the boot clock plus the offset between the two, measured once at compile time (for
    /// kernels without `bpf_ktime_get_tai_ns`).
    SwTai,
}

fn clock(call_args: &[Expr]) -> Option<Clock> {
    match call_args.first().map(|a| &a.kind) {
        None => Some(Clock::Monotonic),
        Some(ExprKind::Ident(name)) => match name.as_str() {
            "monotonic" => Some(Clock::Monotonic),
            "boot" => Some(Clock::Boot),
            "tai" => Some(Clock::Tai),
            "sw_tai" => Some(Clock::SwTai),
            _ => None,
        },
        Some(_) => None,
    }
}

fn check_nsecs(_: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(0, 1)?;
    match clock(call.args) {
        Some(_) => Ok(Type::U64),
        None => Err(Diagnostic::error(
            call.args[0].span,
            "`nsecs()` reads one of the clocks `monotonic`, `boot`, `tai` and `sw_tai`",
        )),
    }
}

fn nsecs(gen: &mut Gen, args: &[Expr], span: Span) -> Result<Val, Diagnostic> {
    let helper = match clock(args) {
        Some(Clock::Monotonic) => Helper::KtimeGetNs,
        Some(Clock::Boot | Clock::SwTai) => Helper::KtimeGetBootNs,
        Some(Clock::Tai) => Helper::KtimeGetTaiNs,
        None => return Err(Diagnostic::error(span, "internal error: nsecs() of an unknown clock")),
    };
    gen.asm.call(helper.id());
    if clock(args) == Some(Clock::SwTai) {
        gen.asm.ld_imm64(Reg::R1, crate::clocks::tai_minus_boot());
        gen.asm.alu64_reg(Alu::Add, Reg::R0, Reg::R1);
    }
    gen.take_r0(span)
}
