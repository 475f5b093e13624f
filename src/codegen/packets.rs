//! `skboutput()`'s code: a header (the capture's id, the CLOCK_BOOTTIME time, the length) and the socket
//! buffer's first bytes written by `bpf_skb_output` into the CPU's ring of the packets' perf event array.

use super::frame::Val;
use super::record::Capture;
use super::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use bpf::{Alu, Helper, Reg, Size};

/// The header before each packet's bytes, as the runtime reads it: id, time, length (u64 each).
pub const PACKET_HEADER_BYTES: usize = 24;

impl Gen<'_> {
    /// Writes the first `length` bytes of `skb` for `capture`; the helper's result (0, or a negative errno:
    /// -EFAULT when the buffer is shorter than `length`, -ENOENT on a CPU without a ring).
    pub(crate) fn capture_packet(
        &mut self,
        capture: Capture,
        skb: &Expr,
        length: &Expr,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let id = self.records.add_capture(capture);
        let mark = self.frame.mark();
        let header = self.frame.alloc(PACKET_HEADER_BYTES, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, header, id as i32);
        self.asm.call(Helper::KtimeGetBootNs.id());
        self.asm.store(Size::DW, Reg::FP, header + 8, Reg::R0);
        let length = self.int(length)?;
        self.store_val(length, header + 16);
        self.frame.release(length);
        // The buffer as the trampoline handed it over: the kernel checks that it is a `struct sk_buff`.
        let skb = self.int(skb)?;
        let reg = self.reg_of(skb, Reg::R1);
        if reg != Reg::R1 {
            self.asm.mov64_reg(Reg::R1, reg);
        }
        self.frame.release(skb);
        self.asm.ld_map(Reg::R2, self.layout.packets());
        // Flags: the length in the upper half, BPF_F_CURRENT_CPU (0xffffffff) in the lower.
        self.asm.load(Size::DW, Reg::R3, Reg::FP, header + 16);
        self.asm.alu64_imm(Alu::Lsh, Reg::R3, 32);
        self.asm.alu32_imm(Alu::Mov, Reg::R4, -1);
        self.asm.alu64_reg(Alu::Or, Reg::R3, Reg::R4);
        self.asm.mov64_reg(Reg::R4, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R4, i32::from(header));
        self.asm.mov64_imm(Reg::R5, PACKET_HEADER_BYTES as i32);
        self.asm.call(Helper::SkbOutput.id());
        self.frame.release_to(mark);
        let result = self.take_r0(span)?;
        self.narrow(result, 32, false, span)
    }
}
