//! `printf` in a pinned iterator (`iter:task:PIN`): the program runs whenever the pinned file is read, long
//! after steadytrace has gone, so the text is made in the kernel, with `bpf_seq_printf` into that file (as
//! bpftrace does). The format is spelt in the kernel's terms ([`kernel_format`]) and built on the stack;
//! each argument takes 8 bytes: an integer widened to 64 bits, or the address of a string's copy (a
//! character's too, as a string of one).

use super::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::format::{conversions, ConvKind};
use crate::sema::kernel_format;
use crate::sema::types::Type;
use bpf::{Alu, Helper, Reg, Size};

/// `bpf_seq_printf`'s most arguments (the kernel's `MAX_BPRINTF_VARARGS`).
const MOST_ARGUMENTS: usize = 12;

/// The longest format (with its NUL) built on the stack, leaving room for the arguments' copies.
const MOST_FORMAT_BYTES: usize = 256;

/// The offset of `seq` in `struct bpf_iter_meta`, and of `meta` in every `struct bpf_iter__NAME`.
const SEQ_OF_META: i16 = 0;
const META_OF_CONTEXT: i16 = 0;

impl Gen<'_> {
    /// `printf(format, args...)` into the pinned iterator's file.
    pub(crate) fn seq_printf(&mut self, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
        let Some(format_arg @ Expr { kind: ExprKind::Str(_), span: format_span, .. }) = args.first() else {
            return Err(Diagnostic::error(span, "internal error: printf without a format"));
        };
        let pinned = |message: String| {
            Diagnostic::error(*format_span, message).with_help(format!(
                "a pinned iterator's text is made by the kernel when its file is read: it formats {}",
                kernel_format::CONVERSIONS
            ))
        };
        let pieces = self.probe.types.format(format_arg)?.to_vec();
        let values = &args[1..];
        // Every reason the kernel cannot print this is said (with the pinned iterator's other refusals).
        let mut refused = vec![];
        let format = match kernel_format::format(&pieces) {
            Ok(format) if format.len() < MOST_FORMAT_BYTES => format,
            Ok(_) => {
                refused.push(
                    Diagnostic::error(*format_span, format!("a pinned iterator's format takes at most {} bytes", MOST_FORMAT_BYTES - 1))
                        .with_help("it is built on the program's 512-byte stack: split the line into several printf calls"),
                );
                String::new()
            }
            Err(why) => {
                refused.push(pinned(format!("{why} in a pinned iterator")));
                String::new()
            }
        };
        if let Some(extra) = values.get(MOST_ARGUMENTS) {
            refused.push(
                Diagnostic::error(extra.span, "a pinned iterator's printf takes at most 12 arguments")
                    .with_help(
                        "the kernel's bpf_seq_printf takes no more: split the line into several printf calls",
                    ),
            );
        }
        for (conv, arg) in conversions(&pieces).zip(values) {
            let ty = self.ty(arg)?;
            let fits = match conv.kind {
                ConvKind::Str => matches!(ty, Type::Str { .. }),
                _ => ty.is_int(),
            };
            if !fits {
                let help = match (conv.kind, ty.is_pointer()) {
                    (ConvKind::Str, true) => "the kernel formats integers and strings only: read a `char *` into a string with str()",
                    (ConvKind::Str, false) if ty.is_int() => "the kernel's `%s` takes strings only: print an integer with `%d`",
                    _ => "the kernel formats integers and strings only: what steadytrace names or formats (symbols, stacks, addresses, times, buffers) cannot go into a pinned iterator's file",
                };
                refused.push(
                    Diagnostic::error(
                        arg.span,
                        format!("a pinned iterator cannot print a value of type `{ty}` here"),
                    )
                    .with_help(help),
                );
            }
        }
        if !refused.is_empty() {
            self.refused.extend(refused);
            return Ok(());
        }

        let mark = self.frame.mark();
        let format_slot = (format.len() + 1).div_ceil(8) * 8;
        let format_at = self.frame.alloc(format_slot, span)?;
        self.constant_into(format.as_bytes(), format_at, format_slot);
        let data = match values.len() {
            0 => None,
            n => Some(self.frame.alloc(8 * n, span)?),
        };
        for (i, (conv, arg)) in conversions(&pieces).zip(values).enumerate() {
            let slot = data.expect("arguments have slots") + 8 * i as i16;
            match self.ty(arg)? {
                Type::Str { size } => {
                    let copy = self.frame.alloc(size.div_ceil(8) * 8, span)?;
                    self.string_into(arg, copy, size)?;
                    self.asm.mov64_reg(Reg::R1, Reg::FP);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, i32::from(copy));
                    self.asm.store(Size::DW, Reg::FP, slot, Reg::R1);
                }
                _ if conv.kind == ConvKind::Char => {
                    // The character and a NUL, for the `%s` it is printed with.
                    let text = self.frame.alloc(8, span)?;
                    self.zero(text, 8);
                    let value = self.int(arg)?;
                    let reg = self.reg_of(value, Reg::R0);
                    self.asm.store(Size::B, Reg::FP, text, reg);
                    self.frame.release(value);
                    self.asm.mov64_reg(Reg::R1, Reg::FP);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, i32::from(text));
                    self.asm.store(Size::DW, Reg::FP, slot, Reg::R1);
                }
                _ => {
                    let value = self.int(arg)?;
                    let reg = self.reg_of(value, Reg::R0);
                    if reg != Reg::R0 {
                        self.asm.mov64_reg(Reg::R0, reg);
                    }
                    self.frame.release(value);
                    // The kernel has no `h`/`hh`: the value is cut to its width here and printed as an `int`.
                    if conv.int_bytes < 4 {
                        let shift = 64 - 8 * i32::from(conv.int_bytes);
                        let signed = conv.kind == ConvKind::Signed;
                        self.asm.alu64_imm(Alu::Lsh, Reg::R0, shift);
                        self.asm.alu64_imm(if signed { Alu::Arsh } else { Alu::Rsh }, Reg::R0, shift);
                    }
                    self.asm.store(Size::DW, Reg::FP, slot, Reg::R0);
                }
            }
        }
        // The iterator's `seq_file`: ctx->meta->seq.
        self.asm.load(Size::DW, Reg::R1, Reg::R9, META_OF_CONTEXT);
        self.asm.load(Size::DW, Reg::R1, Reg::R1, SEQ_OF_META);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R2, i32::from(format_at));
        self.asm.mov64_imm(Reg::R3, (format.len() + 1) as i32);
        match data {
            Some(data) => {
                self.asm.mov64_reg(Reg::R4, Reg::FP);
                self.asm.alu64_imm(Alu::Add, Reg::R4, i32::from(data));
            }
            None => self.asm.mov64_imm(Reg::R4, 0),
        }
        self.asm.mov64_imm(Reg::R5, 8 * values.len() as i32);
        self.asm.call(Helper::SeqPrintf.id());
        self.frame.release_to(mark);
        Ok(())
    }
}
