//! Functions of current bpftrace's standard library: `strlen`.

use super::{Emit, Function};
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use bpf::{Alu, Cond, Reg, Size};

pub const FUNCTIONS: &[Function] = &[Function {
    name: "strlen",
    check: |env, call| {
        call.arity(1, 1)?;
        match env.type_of(&call.args[0])? {
            Type::Str { .. } => Ok(Type::U64),
            ty => Err(Diagnostic::error(call.args[0].span, format!("`strlen()` takes a string, not {ty}"))
                .with_help("read a string from a pointer with `str()`, e.g. `strlen(str(arg0))`")),
        }
    },
    check_statement: None,
    emit: Emit::Int(|gen, args, span| {
        let Type::Str { size } = gen.ty(&args[0])? else {
            return Err(Diagnostic::error(span, "internal error: strlen() of a non-string"));
        };
        let mark = gen.frame.mark();
        let buffer = gen.frame.alloc(size.div_ceil(8) * 8, span)?;
        gen.string_into(&args[0], buffer, size)?;
        // Bytes before the first NUL, counted unrolled: a string is at most a few hundred bytes, and a
        // loop the verifier must walk would cost more instructions than it saves.
        let done = gen.asm.new_label();
        gen.asm.mov64_imm(Reg::R0, 0);
        for at in 0..size {
            gen.asm.load(Size::B, Reg::R1, Reg::FP, buffer + at as i16);
            gen.asm.jump_imm(Cond::Eq, Reg::R1, 0, done);
            gen.asm.alu64_imm(Alu::Add, Reg::R0, 1);
        }
        gen.asm.bind(done);
        gen.frame.release_to(mark);
        gen.take_r0(span)
    }),
}];
