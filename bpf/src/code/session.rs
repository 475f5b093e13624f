//! A kprobe session's program (Linux 6.10): a kprobe's program and its kretprobe's joined into one, which the
//! kernel runs at each function's entry and again at its return. A call of the kernel function
//! `bpf_session_is_return` says which run it is and picks the part; the entry part's 0 lets the return run.

use crate::code::insn::{class, Alu, Asm, Code, Insn, MapReloc, Reg};

/// `if dst != imm goto +off`.
const JNE_IMM: u8 = class::JMP | 0x50;

/// `entry`'s code, then `exit`'s, behind a test of `bpf_session_is_return()` (`is_return`, its BTF id): each
/// part starts with the context in R1, as it expects. `None` for parts with callbacks (their subprograms
/// would come between the parts) or an entry part too long to jump over.
pub fn join(entry: &Code, exit: &Code, is_return: u32) -> Option<Code> {
    if !entry.subprograms.is_empty() || !exit.subprograms.is_empty() {
        return None;
    }
    let over = i16::try_from(entry.insns.len()).ok()?;
    let mut asm = Asm::new();
    asm.mov64_reg(Reg::R6, Reg::R1);
    asm.call_kernel_function(is_return);
    asm.mov64_reg(Reg::R1, Reg::R6);
    // A `bool`: only its low byte is the answer.
    asm.alu64_imm(Alu::And, Reg::R0, 0xff);
    let mut insns = asm.finish().ok()?.insns;
    insns.push(Insn::new(JNE_IMM, Reg::R0, Reg(0), over, 0));
    let (entry_at, exit_at) = (insns.len(), insns.len() + entry.insns.len());
    insns.extend(&entry.insns);
    insns.extend(&exit.insns);
    let moved = |relocs: &[MapReloc], by: usize| -> Vec<MapReloc> {
        relocs.iter().map(|r| MapReloc { insn: r.insn + by, map: r.map }).collect()
    };
    let mut map_relocs = moved(&entry.map_relocs, entry_at);
    map_relocs.extend(moved(&exit.map_relocs, exit_at));
    Some(Code { insns, map_relocs, subprograms: vec![] })
}

/// Where [`join`] puts the entry part's first instruction.
pub const ENTRY_AT: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::insn::Size;

    fn part(value: i32, with_map: bool) -> Code {
        let mut asm = Asm::new();
        if with_map {
            asm.ld_map(Reg::R1, 3);
        }
        asm.mov64_imm(Reg::R0, value);
        asm.store(Size::DW, Reg::FP, -8, Reg::R0);
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        asm.finish().unwrap()
    }

    #[test]
    fn the_return_part_follows_the_entry_part_behind_the_test() {
        let (entry, exit) = (part(1, true), part(2, true));
        let joined = join(&entry, &exit, 77).unwrap();
        assert_eq!(joined.insns.len(), ENTRY_AT + entry.insns.len() + exit.insns.len());
        assert_eq!(joined.insns[1].imm, 77, "the kernel function called by its BTF id");
        let test = joined.insns[ENTRY_AT - 1];
        assert_eq!(
            (test.code, test.off as usize),
            (JNE_IMM, entry.insns.len()),
            "a return run skips the entry part"
        );
        assert_eq!(joined.insns[ENTRY_AT..ENTRY_AT + entry.insns.len()], entry.insns[..]);
        let relocs: Vec<usize> = joined.map_relocs.iter().map(|r| r.insn).collect();
        assert_eq!(relocs, [ENTRY_AT, ENTRY_AT + entry.insns.len()]);
        let mut with_callback = part(3, false);
        with_callback.subprograms.push(2);
        assert!(join(&with_callback, &exit, 77).is_none());
    }
}
