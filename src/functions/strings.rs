//! Functions on strings: `str`, `strncmp`, `strcontains`.

use super::{Emit, Function};
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::{constant, STR_SIZE};
use bpf::{Alu, Cond, Helper, Reg, Size};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "str",
        check: |env, call| {
            call.arity(1, 2)?;
            let args = call.args;
            Ok(match env.type_of(&args[0])? {
                Type::Str { size } => {
                    let size = match args.get(1) {
                        Some(n) => match constant(n) {
                            Some(n) if n >= 0 => size.min(n as usize + 1),
                            _ => {
                                return Err(Diagnostic::error(
                                    n.span,
                                    "the length of `str()` is a constant, not negative",
                                ))
                            }
                        },
                        None => size,
                    };
                    Type::Str { size }
                }
                Type::Int { .. } | Type::Ptr { .. } | Type::Pointer { .. } => {
                    let size = match args.get(1) {
                        Some(n) => match constant(n) {
                            Some(n) if (1..=STR_SIZE as i64).contains(&n) => n as usize + 1,
                            // A length known only when the probe runs (`str(args.buf, args.count)`): at
                            // most STR_SIZE bytes are read.
                            None if env.type_of(n)?.is_int() => STR_SIZE + 1,
                            _ => {
                                return Err(Diagnostic::error(
                                    n.span,
                                    format!("the length of `str()` is a constant from 1 to {STR_SIZE}"),
                                ))
                            }
                        },
                        None => STR_SIZE,
                    };
                    Type::Str { size }
                }
                ty => {
                    return Err(Diagnostic::error(args[0].span, format!("`str()` takes a string, not {ty}")))
                }
            })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            let Type::Str { size } = *ty else {
                return Err(Diagnostic::error(args[0].span, "internal error: str() into a non-string"));
            };
            let slot = size.div_ceil(8) * 8;
            if gen.ty(&args[0])?.is_int() {
                // A pointer: read the NUL-terminated string it points to (user or kernel memory).
                let pointer = gen.int(&args[0])?;
                let length = match args.get(1) {
                    Some(n) if constant(n).is_none() => Some(gen.int(n)?),
                    _ => None,
                };
                gen.zero(offset, slot);
                match length {
                    // At most `size - 1` bytes and the NUL; a negative length reads none, as in bpftrace.
                    Some(length) => {
                        let reg = gen.reg_of(length, Reg::R2);
                        gen.asm.mov64_reg(Reg::R2, reg);
                        let (not_long, within) = (gen.asm.new_label(), gen.asm.new_label());
                        gen.asm.jump_imm(Cond::SLe, Reg::R2, (size - 1) as i32, not_long);
                        gen.asm.mov64_imm(Reg::R2, (size - 1) as i32);
                        gen.asm.bind(not_long);
                        gen.asm.jump_imm(Cond::SGe, Reg::R2, 0, within);
                        gen.asm.mov64_imm(Reg::R2, 0);
                        gen.asm.bind(within);
                        gen.asm.alu64_imm(Alu::Add, Reg::R2, 1);
                        gen.frame.release(length);
                    }
                    None => gen.asm.mov64_imm(Reg::R2, size as i32),
                }
                let reg = gen.reg_of(pointer, Reg::R3);
                gen.asm.mov64_reg(Reg::R3, reg);
                gen.asm.mov64_reg(Reg::R1, Reg::FP);
                gen.asm.alu64_imm(Alu::Add, Reg::R1, offset as i32);
                gen.asm.call(Helper::ProbeReadStr.id());
                gen.check_read(Helper::ProbeReadStr, span)?;
                gen.frame.release(pointer);
            } else {
                gen.string_into(&args[0], offset, size)?;
                let limit = args.get(1).and_then(constant).map_or(size, |n| n as usize);
                // `str(s, n)` keeps n bytes: cut with a NUL there.
                if limit < size {
                    gen.asm.store_imm(Size::B, Reg::FP, offset + limit as i16, 0);
                }
            }
            Ok(())
        }),
    },
    Function {
        name: "strcontains",
        check: |env, call| {
            call.arity(2, 2)?;
            for arg in call.args {
                if !matches!(env.type_of(arg)?, Type::Str { .. }) {
                    return Err(Diagnostic::error(
                        arg.span,
                        "`strcontains()` looks for a string in a string",
                    )
                    .with_help(
                        "read a string from a pointer with `str()`, e.g. `strcontains(str(arg0), \"x\")`",
                    ));
                }
            }
            Ok(Type::Bool)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| gen.string_search(&args[0], &args[1], false, span)),
    },
    Function {
        name: "strncmp",
        check: |env, call| {
            call.arity(3, 3)?;
            let args = call.args;
            for arg in &args[..2] {
                if !matches!(env.type_of(arg)?, Type::Str { .. }) {
                    return Err(Diagnostic::error(arg.span, "`strncmp()` compares two strings"));
                }
            }
            if constant(&args[2]).is_none_or(|n| n < 0) {
                return Err(Diagnostic::error(
                    args[2].span,
                    "the length of `strncmp()` must be a constant integer",
                ));
            }
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let limit = constant(&args[2]).unwrap_or(0) as usize;
            gen.compare_strings(&args[0], &args[1], Some(limit), true, span)
        }),
    },
];
