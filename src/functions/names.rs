//! `strerror(errno)`, `signal_name(sig)` and `syscall_name(nr)`: the text for a number, as a string of
//! 64 bytes made in BPF (as current bpftrace makes it), so it compares, keys maps and prints like any
//! string. The number is taken as a 32-bit integer; `strerror` also reads `-errno` as `errno`.

use super::{Call, Emit, Function};
use crate::codegen::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Alu, Cond, Reg, Size};

/// The size of the strings these functions give (bpftrace's `string[64]`).
const SIZE: usize = 64;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "strerror",
        check: check_number,
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| text_into(gen, args, offset, ty, span, Table::Errors)),
    },
    Function {
        name: "signal_name",
        check: check_number,
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            text_into(gen, args, offset, ty, span, Table::Signals)
        }),
    },
    Function {
        name: "syscall_name",
        check: check_number,
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            text_into(gen, args, offset, ty, span, Table::Syscalls)
        }),
    },
];

fn check_number(env: &Env, call: &Call) -> Result<Type, Diagnostic> {
    call.arity(1, 1)?;
    let ty = env.type_of(&call.args[0])?;
    if !ty.is_int() {
        return Err(Diagnostic::error(
            call.args[0].span,
            format!("`{}()` takes an integer, not {ty}", call.name),
        ));
    }
    Ok(Type::Str { size: SIZE })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Errors,
    Signals,
    Syscalls,
}

impl Table {
    /// The numbers with a text, and the text of any other number.
    fn entries(self) -> (Vec<(i64, &'static str)>, &'static str) {
        match self {
            Table::Errors => {
                (super::name_tables::ERRORS.iter().map(|&(n, t)| (n as i64, t)).collect(), "Unknown error")
            }
            Table::Signals => {
                (super::name_tables::SIGNALS.iter().map(|&(n, t)| (n as i64, t)).collect(), "N/A")
            }
            Table::Syscalls => (bpf::arch::HOST.syscall_names().collect(), "Unknown syscall"),
        }
    }
}

/// Writes the text of the number `args[0]` at `fp + offset`: a chain of comparisons, each storing its
/// text's words (only scripts calling these functions carry it).
fn text_into(
    gen: &mut Gen,
    args: &[Expr],
    offset: i16,
    ty: &Type,
    span: Span,
    table: Table,
) -> Result<(), Diagnostic> {
    let size = match ty {
        Type::Str { size } => *size,
        _ => return Err(Diagnostic::error(span, "internal error: a name stored as a non-string")),
    };
    let value = gen.int(&args[0])?;
    gen.zero(offset, size.div_ceil(8) * 8);
    let reg = gen.reg_of(value, Reg::R0);
    gen.asm.mov64_reg(Reg::R0, reg);
    gen.asm.alu64_imm(Alu::Lsh, Reg::R0, 32);
    gen.asm.alu64_imm(Alu::Arsh, Reg::R0, 32);
    if table == Table::Errors {
        let positive = gen.asm.new_label();
        gen.asm.jump_imm(Cond::SGe, Reg::R0, 0, positive);
        gen.asm.alu64_imm(Alu::Neg, Reg::R0, 0);
        gen.asm.bind(positive);
    }
    let (entries, unknown) = table.entries();
    let done = gen.asm.new_label();
    for (number, text) in entries {
        let next = gen.asm.new_label();
        gen.asm.jump_imm(Cond::Ne, Reg::R0, number as i32, next);
        store_text(gen, offset, size, text);
        gen.asm.jump(done);
        gen.asm.bind(next);
    }
    store_text(gen, offset, size, unknown);
    gen.asm.bind(done);
    gen.frame.release(value);
    Ok(())
}

/// Stores `text` (at most `size - 1` bytes, so a NUL ends it) at `fp + offset`, over zeroes.
fn store_text(gen: &mut Gen, offset: i16, size: usize, text: &str) {
    let bytes = &text.as_bytes()[..text.len().min(size.saturating_sub(1))];
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        gen.asm.mov_u64(Reg::R1, u64::from_le_bytes(word));
        gen.asm.store(Size::DW, Reg::FP, offset + 8 * i as i16, Reg::R1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_one_text_per_number() {
        for table in [Table::Errors, Table::Signals, Table::Syscalls] {
            let (entries, _) = table.entries();
            let mut numbers: Vec<i64> = entries.iter().map(|&(n, _)| n).collect();
            numbers.sort();
            numbers.dedup();
            assert_eq!(numbers.len(), entries.len());
            assert!(entries.iter().all(|(_, text)| text.len() < SIZE));
        }
    }
}
