//! A disassembler printing instructions in the notation of the kernel verifier and `bpftool`
//! (`r1 = *(u64 *)(r10 -8)`), used by `steadytrace -d`.

use crate::code::helper::Helper;
use crate::code::insn::{
    class, Alu, Code, Cond, Insn, Size, ATOMIC_CMPXCHG, OP_CALL, OP_END, OP_EXIT, OP_JA, PSEUDO_CALL,
    PSEUDO_FUNC, PSEUDO_MAP_VALUE,
};
use std::fmt::Write;

/// One line per instruction slot (the second half of an `ld_imm64` gets none); `map_name` names the
/// maps that relocations refer to.
pub fn disassemble(code: &Code, map_name: &dyn Fn(usize) -> String) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < code.insns.len() {
        let insn = &code.insns[i];
        let text = if insn.code == class::LD | Size::DW as u8 {
            let high = code.insns.get(i + 1).map_or(0, |next| next.imm as u32 as u64);
            let value = (high << 32) | insn.imm as u32 as u64;
            match code.map_relocs.iter().find(|r| r.insn == i) {
                Some(reloc) if insn.src().0 == PSEUDO_MAP_VALUE => {
                    format!("{} = map_value[{}]", insn.dst(), map_name(reloc.map))
                }
                Some(reloc) => format!("{} = map[{}]", insn.dst(), map_name(reloc.map)),
                None if insn.src().0 == PSEUDO_FUNC => {
                    format!("{} = subprog[{}]", insn.dst(), i as i64 + 1 + insn.imm as i64)
                }
                None => format!("{} = {:#x} ll", insn.dst(), value),
            }
        } else {
            one(insn, i)
        };
        let _ = writeln!(out, "{i:4}: {text}");
        i += if insn.code == class::LD | Size::DW as u8 { 2 } else { 1 };
    }
    out
}

fn size_name(size: Size) -> &'static str {
    match size {
        Size::B => "u8",
        Size::H => "u16",
        Size::W => "u32",
        Size::DW => "u64",
    }
}

fn alu_symbol(op: Alu) -> &'static str {
    match op {
        Alu::Add => "+=",
        Alu::Sub => "-=",
        Alu::Mul => "*=",
        Alu::Div => "/=",
        Alu::Or => "|=",
        Alu::And => "&=",
        Alu::Lsh => "<<=",
        Alu::Rsh => ">>=",
        Alu::Neg => "= -",
        Alu::Mod => "%=",
        Alu::Xor => "^=",
        Alu::Mov => "=",
        Alu::Arsh => "s>>=",
    }
}

fn cond_symbol(cond: Cond) -> &'static str {
    match cond {
        Cond::Eq => "==",
        Cond::Ne => "!=",
        Cond::UGt => ">",
        Cond::UGe => ">=",
        Cond::ULt => "<",
        Cond::ULe => "<=",
        Cond::SGt => "s>",
        Cond::SGe => "s>=",
        Cond::SLt => "s<",
        Cond::SLe => "s<=",
        Cond::Set => "&",
    }
}

fn one(insn: &Insn, at: usize) -> String {
    let (dst, src) = (insn.dst(), insn.src());
    let from_reg = insn.code & 0x08 != 0;
    let operand = if from_reg { src.to_string() } else { insn.imm.to_string() };
    let target = at as i64 + 1 + insn.off as i64;
    match insn.code & 0x07 {
        class::ALU64 | class::ALU => {
            let wide = insn.code & 0x07 == class::ALU64;
            let (d, s) = if wide {
                (dst.to_string(), operand)
            } else {
                (format!("w{}", dst.0), operand.replace('r', "w"))
            };
            match Alu::from_code(insn.code) {
                None if insn.code & 0xf0 == OP_END => format!("{dst} = be{} {dst}", insn.imm),
                Some(Alu::Neg) => format!("{d} = -{d}"),
                Some(op) => format!("{d} {} {s}", alu_symbol(op)),
                None => format!("<alu {:#04x}>", insn.code),
            }
        }
        class::LDX => format!("{dst} = *({} *)({src} {:+})", size_name(Size::from_code(insn.code)), insn.off),
        class::STX if insn.code & 0xe0 == 0xc0 && insn.imm == ATOMIC_CMPXCHG => {
            format!("r0 = cmpxchg_64({dst} {:+}, r0, {src})", insn.off)
        }
        class::STX if insn.code & 0xe0 == 0xc0 => {
            format!("lock *({} *)({dst} {:+}) += {src}", size_name(Size::from_code(insn.code)), insn.off)
        }
        class::STX => format!("*({} *)({dst} {:+}) = {src}", size_name(Size::from_code(insn.code)), insn.off),
        class::ST => {
            format!("*({} *)({dst} {:+}) = {}", size_name(Size::from_code(insn.code)), insn.off, insn.imm)
        }
        class::JMP | class::JMP32 => match insn.code & 0xf0 {
            OP_JA => format!("goto {target}"),
            OP_CALL if insn.src().0 == PSEUDO_CALL => format!("call pc{:+}", insn.imm),
            OP_CALL => {
                format!("call {}", Helper::name_of(insn.imm).map_or(insn.imm.to_string(), str::to_string))
            }
            OP_EXIT => "exit".to_string(),
            _ => match Cond::from_code(insn.code) {
                Some(cond) => format!("if {dst} {} {operand} goto {target}", cond_symbol(cond)),
                None => format!("<jmp {:#04x}>", insn.code),
            },
        },
        _ => format!("<{:#04x}>", insn.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::insn::{Asm, Reg};

    #[test]
    fn prints_verifier_notation() {
        let mut asm = Asm::new();
        let done = asm.new_label();
        asm.ld_map(Reg::R1, 0);
        asm.load(Size::DW, Reg::R2, Reg::FP, -8);
        asm.store_imm(Size::W, Reg::FP, -16, 3);
        asm.jump_imm(Cond::Ne, Reg::R2, 0, done);
        asm.call(Helper::KtimeGetNs.id());
        asm.alu64_reg(Alu::Add, Reg::R0, Reg::R2);
        asm.bind(done);
        asm.exit();
        let text = disassemble(&asm.finish().unwrap(), &|_| "events".into());
        let expected = "   0: r1 = map[events]
   2: r2 = *(u64 *)(r10 -8)
   3: *(u32 *)(r10 -16) = 3
   4: if r2 != 0 goto 7
   5: call ktime_get_ns
   6: r0 += r2
   7: exit
";
        assert_eq!(text, expected);
    }
}
