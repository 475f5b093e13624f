//! Functions that change what the traced system does, allowed with `--unsafe` only, as in bpftrace:
//! `write_user(dst, src, len)` writes into the current process's memory (`bpf_probe_write_user`);
//! `override(rc)` makes the kprobed kernel function return `rc` without running (`bpf_override_return`, on
//! functions the kernel lists for error injection).

use super::{Call, Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::Expr;
use crate::lang::constant::constant;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::features::Feature;
use bpf::{Helper, Reg};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "write_user",
        check: check_write_user,
        check_statement: None,
        emit: Emit::Int(write_user),
    },
    Function {
        name: "override",
        check: check_override,
        check_statement: None,
        emit: Emit::Statement(override_return),
    },
];

/// The bytes `src` is written from: a string's, or an integer's 8.
fn source_size(ty: &Type) -> Option<usize> {
    match ty {
        Type::Str { size } => Some(*size),
        ty if ty.is_int() => Some(8),
        _ => None,
    }
}

fn check_write_user(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(3, 3)?;
    let (dst, src, len) = (&call.args[0], &call.args[1], &call.args[2]);
    let dst_ty = env.type_of(dst)?;
    if !dst_ty.is_pointer() && !dst_ty.is_int() {
        return Err(Diagnostic::error(
            dst.span,
            format!("`write_user()` writes at a user address, not {dst_ty}"),
        ));
    }
    let src_ty = env.type_of(src)?;
    let Some(size) = source_size(&src_ty) else {
        return Err(Diagnostic::error(
            src.span,
            format!("`write_user()` writes a string or an integer, not {src_ty}"),
        ));
    };
    match constant(len) {
        Some(n) if n >= 1 && n as usize <= size => Ok(Type::Bool),
        Some(n) => Err(Diagnostic::error(
            len.span,
            format!("{n} bytes: `write_user()` writes 1 to {size} bytes of this value"),
        )),
        None => Err(Diagnostic::error(len.span, "`write_user()` takes its length as a number")
            .with_help("the kernel must know how many bytes are written when it checks the program")),
    }
}

/// `bpf_probe_write_user(dst, copy of src, len)`; true when it wrote.
fn write_user(gen: &mut Gen, args: &[Expr], span: Span) -> Result<crate::codegen::frame::Val, Diagnostic> {
    super::require_unsafe(gen, "write_user", span)?;
    if !gen.features.has(Feature::WriteUser) {
        let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown").unwrap_or_default();
        if lockdown.contains("[integrity]") || lockdown.contains("[confidentiality]") {
            return Err(Diagnostic::error(
                span,
                "this kernel is locked down: it refuses to let BPF programs write to user memory",
            )
            .with_help(
                "boot it with lockdown=none (and without Secure Boot enforcing lockdown) to use write_user()",
            ));
        }
        return Err(crate::kernel::needs(gen.features, Feature::WriteUser, "`write_user()`", span));
    }
    let (dst, src) = (&args[0], &args[1]);
    let len =
        constant(&args[2]).ok_or_else(|| Diagnostic::error(span, "internal error: write_user() length"))?;
    let size = source_size(&gen.ty(src)?)
        .ok_or_else(|| Diagnostic::error(span, "internal error: write_user() source"))?;
    let mark = gen.frame.mark();
    let copy = gen.frame.alloc(size.div_ceil(8) * 8, span)?;
    match gen.ty(src)? {
        Type::Str { .. } => gen.string_into(src, copy, size)?,
        _ => {
            let value = gen.int(src)?;
            gen.store_val(value, copy);
            gen.frame.release(value);
        }
    }
    let address = gen.int(dst)?;
    let reg = gen.reg_of(address, Reg::R1);
    gen.asm.mov64_reg(Reg::R1, reg);
    gen.frame.release(address);
    gen.asm.mov64_reg(Reg::R2, Reg::FP);
    gen.asm.alu64_imm(bpf::Alu::Add, Reg::R2, i32::from(copy));
    gen.asm.mov64_imm(Reg::R3, len as i32);
    gen.asm.call(Helper::ProbeWriteUser.id());
    gen.r0_is_zero();
    gen.frame.release_to(mark);
    gen.take_r0(span)
}

fn check_override(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    let ty = env.type_of(&call.args[0])?;
    if !ty.is_int() {
        return Err(Diagnostic::error(
            call.args[0].span,
            format!("`override()` takes the value to return, not {ty}"),
        ));
    }
    if let Some(point) = env.points.iter().find(|p| !p.provider.overrides_return()) {
        return Err(Diagnostic::error(call.span, format!("`override()` makes a kprobed function return; `{}` is no kprobe at a function's entry", point.name))
            .with_help("use it in a `kprobe:FUNCTION` probe, on a function the kernel allows error injection for (/sys/kernel/debug/error_injection/list)"));
    }
    Ok(Type::Void)
}

/// `bpf_override_return(ctx, rc)`.
fn override_return(gen: &mut Gen, args: &[Expr], span: Span) -> Result<bool, Diagnostic> {
    super::require_unsafe(gen, "override", span)?;
    if !gen.features.has(Feature::OverrideReturn) {
        return Err(crate::kernel::needs(gen.features, Feature::OverrideReturn, "`override()`", span)
            .with_help("the kernel must be built with CONFIG_BPF_KPROBE_OVERRIDE"));
    }
    let value = gen.int(&args[0])?;
    let reg = gen.reg_of(value, Reg::R2);
    gen.asm.mov64_reg(Reg::R2, reg);
    gen.frame.release(value);
    gen.asm.mov64_reg(Reg::R1, Reg::R9);
    gen.asm.call(Helper::OverrideReturn.id());
    Ok(true)
}
