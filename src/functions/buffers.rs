//! `buf(data, length)`: bytes read from memory (or taken from a string), printed with `%r`.

use super::{Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::{constant, STR_SIZE};
use bpf::{Alu, Cond, Helper, Reg, Size};

/// The most bytes one `buf()` holds: bpftrace's string length.
const BUF_MAX: usize = STR_SIZE;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "buf",
    check: |env, call| {
        call.arity(1, 2)?;
        let args = call.args;
        let length = match args.get(1) {
            Some(length) => match constant(length) {
                Some(n) if (1..=BUF_MAX as i64).contains(&n) => Some(n as usize),
                Some(_) => {
                    return Err(Diagnostic::error(
                        length.span,
                        format!("the length of `buf()` is from 1 to {BUF_MAX}"),
                    ))
                }
                None if env.type_of(length)?.is_int() => None,
                None => return Err(Diagnostic::error(length.span, "the length of `buf()` is an integer")),
            },
            None => None,
        };
        let size = match env.type_of(&args[0])? {
            Type::Str { size } => length.unwrap_or(size).min(size),
            ty if ty.is_int() => match (length, args.get(1)) {
                (Some(n), _) => n,
                (None, Some(_)) => BUF_MAX,
                (None, None) => {
                    return Err(Diagnostic::error(call.span, "`buf()` of an address needs a length")
                        .with_help("for example `buf(arg1, 16)`"))
                }
            },
            ty => {
                return Err(Diagnostic::error(
                    args[0].span,
                    format!("`buf()` reads from an address or a string, not {ty}"),
                ))
            }
        };
        Ok(Type::Buf { size })
    },
    check_statement: None,
    emit: Emit::Into(buf_into),
}];

/// Writes `[length][bytes]` at `fp + offset`, the rest of the destination's buffer zeroed.
fn buf_into(gen: &mut Gen, args: &[Expr], offset: i16, ty: &Type, span: Span) -> Result<(), Diagnostic> {
    let Type::Buf { size: room } = ty else {
        return Err(Diagnostic::error(span, "internal error: buf() into a non-buffer"));
    };
    let size = match gen.ty(&args[0])? {
        Type::Str { size } => args.get(1).and_then(constant).map_or(size, |n| size.min(n as usize)),
        _ => args.get(1).and_then(constant).map_or(BUF_MAX, |n| n as usize),
    }
    .min(*room);
    let data = offset + 8;
    gen.zero(offset, ty.slot_size());
    match (&args[0].kind, gen.ty(&args[0])?) {
        (ExprKind::Str(text), _) => {
            let bytes = &text.as_bytes()[..text.len().min(size)];
            for (at, chunk) in bytes.chunks(4).enumerate() {
                let mut word = [0u8; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                gen.asm.store_imm(Size::W, Reg::FP, data + 4 * at as i16, i32::from_le_bytes(word));
            }
            gen.asm.store_imm(Size::DW, Reg::FP, offset, size as i32);
        }
        (_, Type::Str { size: whole }) => {
            // Written whole first: `string_into` would end a string cut at `size` with a NUL.
            let string = gen.frame.alloc(Type::Str { size: whole }.slot_size(), span)?;
            gen.string_into(&args[0], string, whole)?;
            gen.copy_between(Reg::FP, string, Reg::FP, data, size.div_ceil(8) * 8);
            gen.asm.store_imm(Size::DW, Reg::FP, offset, size as i32);
        }
        _ => {
            let pointer = gen.int(&args[0])?;
            match args.get(1).and_then(constant) {
                Some(n) => gen.asm.mov64_imm(Reg::R2, n as i32),
                None => {
                    // A length known only now: at most the buffer's size, so the verifier sees the bound.
                    let length = gen.int(&args[1])?;
                    let reg = gen.reg_of(length, Reg::R2);
                    gen.asm.mov64_reg(Reg::R2, reg);
                    gen.frame.release(length);
                    let within = gen.asm.new_label();
                    gen.asm.jump_imm(Cond::ULe, Reg::R2, size as i32, within);
                    gen.asm.mov64_imm(Reg::R2, size as i32);
                    gen.asm.bind(within);
                }
            }
            gen.asm.store(Size::DW, Reg::FP, offset, Reg::R2);
            let reg = gen.reg_of(pointer, Reg::R3);
            gen.asm.mov64_reg(Reg::R3, reg);
            gen.frame.release(pointer);
            gen.asm.mov64_reg(Reg::R1, Reg::FP);
            gen.asm.alu64_imm(Alu::Add, Reg::R1, data as i32);
            gen.asm.call(Helper::ProbeRead.id());
            gen.check_read(Helper::ProbeRead, span)?;
        }
    }
    Ok(())
}
