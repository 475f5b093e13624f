//! `debugf(format, args...)`: a line in the kernel's trace buffer (`/sys/kernel/tracing/trace_pipe`) through
//! `bpf_trace_printk`, as bpftrace has it: for debugging a script where its output cannot go, at the cost of a
//! helper that formats in the kernel. At most three arguments (the helper's); integers are passed whole (`%d`
//! prints their low 32 bits as C's `int`, `%ld` all 64), strings as pointers to a copy on the stack.

use super::{Call, Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::format::{self, ConvKind, Conversion, Piece};
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Helper, Reg, Size};

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
        for (at, conv) in pieces.iter().filter_map(conversion).enumerate() {
            if kernel_conversion(conv).is_none() {
                diags.push(
                    Diagnostic::error(*span, "invalid format specifier for `debugf`")
                        .with_help("the kernel's bpf_trace_printk formats %d, %u, %x (with `l`), %p and %s"),
                );
            }
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

/// The conversion as the kernel's printk spells it, flags and width kept.
fn kernel_conversion(conv: &Conversion) -> Option<String> {
    let long = if conv.int_bytes == 8 { "ll" } else { "" };
    let letter = match conv.kind {
        ConvKind::Signed => format!("{long}d"),
        ConvKind::Unsigned => format!("{long}u"),
        ConvKind::HexLower => format!("{long}x"),
        ConvKind::Str => "s".into(),
        ConvKind::Pointer => "p".into(),
        _ => return None,
    };
    let mut text = String::from("%");
    for (set, flag) in
        [(conv.left, '-'), (conv.zero, '0'), (conv.plus, '+'), (conv.space, ' '), (conv.alt, '#')]
    {
        if set {
            text.push(flag);
        }
    }
    if let Some(width) = conv.width {
        text += &width.to_string();
    }
    if let Some(precision) = conv.precision {
        text += &format!(".{precision}");
    }
    Some(text + &letter)
}

/// The whole format in the kernel's terms.
fn kernel_format(pieces: &[Piece], span: Span) -> Result<String, Diagnostic> {
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => text += &t.replace('%', "%%"),
            Piece::Conv(conv) => {
                text += &kernel_conversion(conv).ok_or_else(|| {
                    Diagnostic::error(span, "internal error: a debugf() conversion not checked")
                })?
            }
        }
    }
    Ok(text)
}

fn emit(gen: &mut Gen, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
    let Some(Expr { kind: ExprKind::Str(text), span: format_span, .. }) = args.first() else {
        return Err(Diagnostic::error(span, "internal error: debugf() without a format"));
    };
    let format = kernel_format(&format::parse(text, *format_span)?, *format_span)?;
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
