//! How much of a ring buffer one run of a program can fill, read from its instructions: what a ring buffer
//! sized to the script must hold.

use crate::code::helper::Helper;
use crate::code::insn::{class, Alu, Code, Insn, Reg, MODE_ATOMIC, OP_CALL, OP_EXIT, OP_JA};

/// The header the kernel puts before each ring buffer record (`BPF_RINGBUF_HDR_SZ`).
pub const RINGBUF_HEADER_BYTES: u64 = 8;

/// How far before a ring buffer call its size may be set.
const SIZE_SET_WITHIN: usize = 8;

impl Code {
    /// The most bytes one run of the program takes in ring buffers: its records, each rounded up to 8 bytes,
    /// with their headers. `None` when the instructions do not tell: a ring buffer write that may run more
    /// than once (inside a loop, or in a subprogram such as a loop's callback) or whose size is not a
    /// constant set just before the call.
    pub fn ring_bytes_bound(&self) -> Option<u64> {
        let main_end = self.subprograms.iter().copied().min().unwrap_or(self.insns.len());
        let jumps: Vec<(usize, usize)> = self.jumps().collect();
        let mut total = 0;
        for (at, helper) in self.helper_calls() {
            let size_reg = match Helper::from_id(helper) {
                Some(Helper::RingbufOutput) => Reg::R3,
                Some(Helper::RingbufReserve) => Reg::R2,
                _ => continue,
            };
            let in_loop = jumps.iter().any(|&(from, to)| to <= from && (to..=from).contains(&at));
            if at >= main_end || in_loop {
                return None;
            }
            let size = self.constant_before(at, size_reg, &jumps)?;
            total += size.div_ceil(8) * 8 + RINGBUF_HEADER_BYTES;
        }
        Some(total)
    }

    /// Every jump, as (instruction, target).
    fn jumps(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.insns.iter().enumerate().filter_map(|(at, insn)| {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            if (class != class::JMP && class != class::JMP32) || op == OP_CALL || op == OP_EXIT {
                return None;
            }
            // `gotol` (a JA of class JMP32) keeps its distance in the immediate.
            let distance =
                if class == class::JMP32 && op == OP_JA { insn.imm as i64 } else { insn.off as i64 };
            usize::try_from(at as i64 + 1 + distance).ok().map(|to| (at, to))
        })
    }

    /// The constant `reg` holds at instruction `at`: set by a `mov` shortly before, with no jump landing
    /// between the two and nothing between them changing it.
    fn constant_before(&self, at: usize, reg: Reg, jumps: &[(usize, usize)]) -> Option<u64> {
        for set in (at.saturating_sub(SIZE_SET_WITHIN)..at).rev() {
            let insn = &self.insns[set];
            if jumps.iter().any(|&(_, to)| to > set && to <= at) {
                return None;
            }
            if is_mov64_imm(insn) && insn.dst() == reg {
                return u64::try_from(insn.imm).ok();
            }
            if may_change(insn, reg) {
                return None;
            }
        }
        None
    }
}

/// `reg = imm`, 64 bits.
fn is_mov64_imm(insn: &Insn) -> bool {
    insn.code == class::ALU64 | Alu::Mov as u8
}

/// Whether `insn` may change `reg` (conservatively).
fn may_change(insn: &Insn, reg: Reg) -> bool {
    match insn.code & 0x07 {
        class::LD | class::LDX | class::ALU | class::ALU64 => insn.dst() == reg,
        // Atomic operations with BPF_FETCH write their source register (cmpxchg, R0).
        class::STX => insn.code & 0xe0 == MODE_ATOMIC && (insn.src() == reg || reg == Reg::R0),
        // A call changes R0-R5.
        class::JMP | class::JMP32 => insn.code & 0xf0 == OP_CALL && reg.0 <= 5,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::code::helper::Helper;
    use crate::code::insn::{Asm, Cond, Reg};

    fn output(asm: &mut Asm, size: i32) {
        asm.ld_map(Reg::R1, 0);
        asm.mov64_reg(Reg::R2, Reg::FP);
        asm.mov64_imm(Reg::R3, size);
        asm.mov64_imm(Reg::R4, 1);
        asm.call(Helper::RingbufOutput.id());
    }

    #[test]
    fn straight_line_records_are_added_up_with_their_headers() {
        let mut asm = Asm::new();
        output(&mut asm, 16);
        let skip = asm.new_label();
        asm.jump_imm(Cond::Eq, Reg::R0, 0, skip);
        output(&mut asm, 20);
        asm.bind(skip);
        asm.ld_map(Reg::R1, 0);
        asm.mov64_imm(Reg::R2, 1032);
        asm.mov64_imm(Reg::R3, 0);
        asm.call(Helper::RingbufReserve.id());
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), Some((16 + 8) + (24 + 8) + (1032 + 8)));
    }

    #[test]
    fn no_output_is_nothing() {
        let mut asm = Asm::new();
        asm.mov64_imm(Reg::R0, 0);
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), Some(0));
    }

    #[test]
    fn an_output_in_a_loop_has_no_bound() {
        let mut asm = Asm::new();
        let top = asm.new_label();
        asm.bind(top);
        output(&mut asm, 16);
        asm.jump_imm(Cond::Ne, Reg::R0, 0, top);
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), None);
    }

    #[test]
    fn an_output_in_a_callback_has_no_bound() {
        let mut asm = Asm::new();
        let callback = asm.new_label();
        asm.ld_func(Reg::R2, callback);
        asm.call(Helper::Loop.id());
        asm.exit();
        asm.bind(callback);
        output(&mut asm, 16);
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), None);
    }

    #[test]
    fn a_size_not_set_by_a_constant_has_no_bound() {
        let mut asm = Asm::new();
        asm.ld_map(Reg::R1, 0);
        asm.mov64_imm(Reg::R3, 16);
        asm.mov64_reg(Reg::R3, Reg::R6);
        asm.call(Helper::RingbufOutput.id());
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), None);
        // A jump landing between the constant and the call.
        let mut asm = Asm::new();
        let late = asm.new_label();
        asm.jump_imm(Cond::Eq, Reg::R6, 0, late);
        asm.mov64_imm(Reg::R3, 16);
        asm.bind(late);
        asm.call(Helper::RingbufOutput.id());
        asm.exit();
        assert_eq!(asm.finish().unwrap().ring_bytes_bound(), None);
    }
}
