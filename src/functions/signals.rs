//! `signal(sig)` and `signal_thread(sig)`: a signal to the process (or thread) a probe fired in,
//! through `bpf_send_signal`; allowed with `--unsafe` only, as in bpftrace.

use super::{Call, Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::{constant, Env};
use bpf::{Helper, Reg};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "signal",
        check,
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| send(gen, "signal", Helper::SendSignal, args, span)),
    },
    Function {
        name: "signal_thread",
        check,
        check_statement: None,
        emit: Emit::Statement(|gen, args, span| {
            send(gen, "signal_thread", Helper::SendSignalThread, args, span)
        }),
    },
];

fn check(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    let arg = &call.args[0];
    match &arg.kind {
        ExprKind::Str(_) => {
            signal_number(arg)?;
        }
        _ => {
            let ty = env.type_of(arg)?;
            if !ty.is_int() {
                return Err(Diagnostic::error(
                    arg.span,
                    format!("`{}()` takes a signal's name (\"SIGUSR1\") or number, not {ty}", call.name),
                ));
            }
            if let Some(n) = constant(arg).filter(|n| !(1..=64).contains(n)) {
                return Err(Diagnostic::error(arg.span, format!("{n} is no signal number"))
                    .with_help("signals are numbered 1 to 64 (`kill -l`)"));
            }
        }
    }
    if let Some(point) = env.points.iter().find(|p| p.provider.fires_in_steadytrace()) {
        return Err(Diagnostic::error(
            call.span,
            format!(
                "`{}()` signals the process a probe fired in; `{}` fires in steadytrace's own thread",
                call.name, point.name
            ),
        )
        .with_help("use it in a kprobe, uprobe, usdt, tracepoint or profile probe"));
    }
    Ok(Type::Void)
}

/// The number of a signal given by name, with or without `SIG` (`"SIGKILL"`, `"KILL"`).
fn signal_number(arg: &Expr) -> Result<i32, Diagnostic> {
    let ExprKind::Str(name) = &arg.kind else {
        return Err(Diagnostic::error(arg.span, "internal error: a signal name that is no literal"));
    };
    let full = if name.starts_with("SIG") { name.clone() } else { format!("SIG{name}") };
    full.parse::<nix::sys::signal::Signal>().map(|s| s as i32).map_err(|_| {
        Diagnostic::error(arg.span, format!("there is no signal `{name}`"))
            .with_help("signal names are those of `kill -l`, such as \"SIGUSR1\" or \"SIGSTOP\"")
    })
}

/// `r0 = bpf_send_signal[_thread](sig)`; a failure (the task is exiting, or a kernel thread) is ignored.
fn send(gen: &mut Gen, name: &str, helper: Helper, args: &[Expr], span: Span) -> Result<bool, Diagnostic> {
    super::require_unsafe(gen, name, span)?;
    let arg = &args[0];
    let signal = match &arg.kind {
        ExprKind::Str(_) => crate::codegen::frame::Val::Imm(signal_number(arg)? as u64),
        _ => gen.int(arg)?,
    };
    let reg = gen.reg_of(signal, Reg::R1);
    if reg != Reg::R1 {
        gen.asm.mov64_reg(Reg::R1, reg);
    }
    gen.frame.release(signal);
    gen.asm.call(helper.id());
    Ok(true)
}
