//! `debugf(format, args...)`: a line in the kernel's trace buffer (`/sys/kernel/tracing/trace_pipe`) through
//! `bpf_trace_printk`, as bpftrace has it: for debugging a script where its output cannot go, at the cost of a
//! helper that formats in the kernel. At most three arguments (the helper's); integers are passed whole (`%d`
//! prints their low 32 bits as C's `int`, `%ld` all 64), strings as pointers to a copy on the stack.

use super::{Call, Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::format::{self, ConvKind, Conversion, Piece};
use crate::sema::kernel_format;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Helper, Reg, Size};

/// The conversions bpftrace lets `debugf` have.
const DEBUGF_CONVERSIONS: &[ConvKind] =
    &[ConvKind::Signed, ConvKind::Unsigned, ConvKind::HexLower, ConvKind::Str, ConvKind::Pointer];

/// `bpf_trace_printk`'s arguments after the format.
const MOST_ARGUMENTS: usize = 3;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "debugf",
    check: |_: &Env, call: &Call| {
        if call.args.len() > 1 + MOST_ARGUMENTS {
            return Err(Diagnostic::error(
                call.args[1 + MOST_ARGUMENTS].span,
                format!("cannot use more than {MOST_ARGUMENTS} conversion specifiers"),
            )
            .with_help("the kernel's bpf_trace_printk takes no more arguments: use printf() for more"));
        }
        Ok(Type::Void)
    },
    check_statement: Some(check),
    emit: Emit::Statement(|gen, args, span| emit(gen, args, span).map(|()| true)),
}];

fn check(env: &Env, call: &Call) -> Vec<Diagnostic> {
    let mut diags = super::output::check_format(env, call);
    if let Some(Expr { kind: ExprKind::Str(text), span, .. }) = call.args.first() {
        let pieces = format::parse(text, *span).unwrap_or_default();
        let conversions = || pieces.iter().filter_map(conversion);
        if conversions().any(|conv| !DEBUGF_CONVERSIONS.contains(&conv.kind)) {
            diags.push(
                Diagnostic::error(*span, "invalid format specifier for `debugf`")
                    .with_help("the kernel's bpf_trace_printk formats %d, %u, %x (with `l`), %p and %s"),
            );
        } else if let Err(why) = kernel_format::format(&pieces) {
            diags.push(Diagnostic::error(*span, "invalid format for `debugf`").with_help(why));
        }
        for (at, conv) in conversions().enumerate() {
            // The kernel reads a string through its address: only a string's copy can be passed for `%s`.
            let arg = call.args.get(at + 1);
            let string = arg.map(|a| matches!(env.type_of(a), Ok(Type::Str { .. })));
            if conv.kind == ConvKind::Str && string == Some(false) {
                let arg = arg.expect("just typed");
                diags.push(
                    Diagnostic::error(arg.span, "`debugf()` prints only strings with `%s`")
                        .with_help("print stacks, symbols and other named values with printf()"),
                );
            }
        }
    }
    diags
}

fn conversion(piece: &Piece) -> Option<&Conversion> {
    match piece {
        Piece::Conv(conv) => Some(conv),
        Piece::Text(_) => None,
    }
}

fn emit(gen: &mut Gen, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
    let Some(Expr { kind: ExprKind::Str(text), span: format_span, .. }) = args.first() else {
        return Err(Diagnostic::error(span, "internal error: debugf() without a format"));
    };
    let format = kernel_format::format(&format::parse(text, *format_span)?).map_err(|why| {
        Diagnostic::error(*format_span, format!("internal error: a debugf() format not checked: {why}"))
    })?;
    let mark = gen.frame.mark();
    let format_slot = (format.len() + 1).div_ceil(8) * 8;
    let format_at = gen.frame.alloc(format_slot, span)?;
    gen.constant_into(format.as_bytes(), format_at, format_slot);
    // Each argument's 8 bytes: an integer, or the address of a string's copy.
    let slots = gen.frame.alloc(8 * MOST_ARGUMENTS, span)?;
    for (i, arg) in args[1..].iter().enumerate() {
        let slot = slots + 8 * i as i16;
        match gen.ty(arg)? {
            Type::Str { size } => {
                let copy = gen.frame.alloc(size.div_ceil(8) * 8, span)?;
                gen.string_into(arg, copy, size)?;
                gen.asm.mov64_reg(Reg::R1, Reg::FP);
                gen.asm.alu64_imm(bpf::Alu::Add, Reg::R1, i32::from(copy));
                gen.asm.store(Size::DW, Reg::FP, slot, Reg::R1);
            }
            _ => {
                let value = gen.int(arg)?;
                gen.store_val(value, slot);
                gen.frame.release(value);
            }
        }
    }
    gen.asm.mov64_reg(Reg::R1, Reg::FP);
    gen.asm.alu64_imm(bpf::Alu::Add, Reg::R1, i32::from(format_at));
    gen.asm.mov64_imm(Reg::R2, (format.len() + 1) as i32);
    for (i, reg) in [Reg::R3, Reg::R4, Reg::R5].into_iter().enumerate().take(args.len() - 1) {
        gen.asm.load(Size::DW, reg, Reg::FP, slots + 8 * i as i16);
    }
    gen.asm.call(Helper::TracePrintk.id());
    gen.frame.release_to(mark);
    Ok(())
}
