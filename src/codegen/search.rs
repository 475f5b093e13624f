//! `strcontains(haystack, needle)`: 1 when needle occurs in haystack (an empty needle always does), else 0.
//!
//! The haystack and needle are written side by side into one stack buffer, followed by the result, and
//! `bpf_loop` calls a search callback once per start position in the haystack. The verifier checks the
//! callback once with the position unknown, so its work grows with the needle's size only; two nested
//! loops in the probe itself made it walk every (start, offset) pair, which long strings exceed. Kernels
//! without `bpf_loop` (before 5.17) get a loop calling the callback directly, for short strings only.

use super::frame::Val;
use super::Gen;
use crate::kernel;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use bpf::features::Feature;
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

/// Haystack bytes times needle bytes a search may have on a kernel without `bpf_loop`: the verifier then
/// walks every (start, offset) pair, and keeps a branch to come back to for each (at most 8192).
const CALLED_SEARCH_PAIRS: usize = 4096;

/// A search callback for one pair of buffer sizes.
#[derive(Clone, Copy)]
pub(super) struct Search {
    label: Label,
    hay: usize,
    needle: usize,
    /// Whether a match stores where it starts (`strstr`) rather than 1 (`strcontains`).
    position: bool,
}

impl Gen<'_> {
    /// `strcontains(haystack, needle)` (1 or 0) or, with `position`, `strstr(haystack, needle)` (where the
    /// needle first starts, -1 when it is not there); an empty needle is found at 0.
    pub(crate) fn string_search(
        &mut self,
        haystack: &Expr,
        needle: &Expr,
        position: bool,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let (hay, needle_size) = (self.ty(haystack)?.slot_size(), self.ty(needle)?.slot_size());
        let looped = self.features.has(Feature::BpfLoop);
        if !looped && hay * needle_size > CALLED_SEARCH_PAIRS {
            let call = if position { "strstr()" } else { "strcontains()" };
            let what = format!("{call} of a {hay}-byte string and a {needle_size}-byte one (at most {CALLED_SEARCH_PAIRS} byte pairs without it)");
            return Err(kernel::needs(self.features, Feature::BpfLoop, &what, span));
        }
        let (empty, absent) = if position { (0, -1) } else { (1, 0) };
        // The buffer is given back as soon as the result is out of it.
        let mark = self.frame.mark();
        let buffer = self.frame.alloc(hay + needle_size + 8, span)?;
        let result = buffer + (hay + needle_size) as i16;
        self.string_into(haystack, buffer, hay)?;
        self.string_into(needle, buffer + hay as i16, needle_size)?;
        // An empty needle is found without searching.
        let done = self.asm.new_label();
        self.asm.store_imm(Size::DW, Reg::FP, result, empty);
        self.asm.load(Size::B, Reg::R1, Reg::FP, buffer + hay as i16);
        self.asm.jump_imm(Cond::Eq, Reg::R1, 0, done);
        self.asm.store_imm(Size::DW, Reg::FP, result, absent);
        let label = self.search_callback(hay, needle_size, position);
        if looped {
            self.asm.mov64_imm(Reg::R1, hay as i32);
            self.asm.ld_func(Reg::R2, label);
            self.asm.mov64_reg(Reg::R3, Reg::FP);
            self.asm.alu64_imm(Alu::Add, Reg::R3, buffer as i32);
            self.asm.mov64_imm(Reg::R4, 0);
            self.asm.call(Helper::Loop.id());
        } else {
            self.call_per_start(label, hay, buffer, span)?;
        }
        self.asm.bind(done);
        self.asm.load(Size::DW, Reg::R0, Reg::FP, result);
        self.frame.release_to(mark);
        self.take_r0(span)
    }

    /// Where the kernel has no `bpf_loop`: a loop in the program calling the search callback itself (a
    /// bpf-to-bpf call) for each start in turn, until it says stop.
    fn call_per_start(
        &mut self,
        callback: Label,
        hay: usize,
        buffer: i16,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let start = self.frame.alloc(8, span)?;
        let (top, done) = (self.asm.new_label(), self.asm.new_label());
        self.asm.store_imm(Size::DW, Reg::FP, start, 0);
        self.asm.bind(top);
        self.asm.load(Size::DW, Reg::R1, Reg::FP, start);
        self.asm.jump_imm(Cond::UGe, Reg::R1, hay as i32, done);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R2, buffer as i32);
        self.asm.call_local(callback);
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, done);
        self.asm.load(Size::DW, Reg::R1, Reg::FP, start);
        self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
        self.asm.store(Size::DW, Reg::FP, start, Reg::R1);
        self.asm.jump(top);
        self.asm.bind(done);
        Ok(())
    }

    pub(super) fn search_callback(&mut self, hay: usize, needle: usize, position: bool) -> Label {
        if let Some(search) =
            self.searches.iter().find(|s| s.hay == hay && s.needle == needle && s.position == position)
        {
            return search.label;
        }
        let label = self.asm.new_label();
        self.searches.push(Search { label, hay, needle, position });
        label
    }

    /// The search callbacks asked for: `(start position, buffer)` in R1-R2. Each returns 0 to try the next
    /// start and 1 to stop, having set the result when the needle matched at this start.
    pub(crate) fn generate_searches(&mut self) {
        for Search { label, hay, needle, position } in std::mem::take(&mut self.searches) {
            let (next_start, stop, inner, found) =
                (self.asm.new_label(), self.asm.new_label(), self.asm.new_label(), self.asm.new_label());
            let (hay, needle) = (hay as i32, needle as i32);
            self.asm.bind(label);
            self.asm.jump_imm(Cond::UGe, Reg::R1, hay, stop);
            // The haystack ended: no start from here on can match.
            self.byte_at(Reg::R3, Reg::R1, 0);
            self.asm.jump_imm(Cond::Eq, Reg::R3, 0, stop);
            // r5: how far the match got.
            self.asm.mov64_imm(Reg::R5, 0);
            self.asm.bind(inner);
            self.asm.jump_imm(Cond::UGe, Reg::R5, needle, found);
            self.byte_at(Reg::R4, Reg::R5, hay);
            self.asm.jump_imm(Cond::Eq, Reg::R4, 0, found);
            self.asm.mov64_reg(Reg::R0, Reg::R1);
            self.asm.alu64_reg(Alu::Add, Reg::R0, Reg::R5);
            self.asm.jump_imm(Cond::UGe, Reg::R0, hay, stop);
            self.byte_at(Reg::R3, Reg::R0, 0);
            self.asm.jump_reg(Cond::Ne, Reg::R3, Reg::R4, next_start);
            self.asm.alu64_imm(Alu::Add, Reg::R5, 1);
            self.asm.jump(inner);
            self.asm.bind(found);
            if position {
                self.asm.store(Size::DW, Reg::R2, (hay + needle) as i16, Reg::R1);
            } else {
                self.asm.store_imm(Size::DW, Reg::R2, (hay + needle) as i16, 1);
            }
            self.asm.bind(stop);
            self.asm.mov64_imm(Reg::R0, 1);
            self.asm.exit();
            self.asm.bind(next_start);
            self.asm.mov64_imm(Reg::R0, 0);
            self.asm.exit();
        }
    }

    /// `dst = *(u8 *)(r2 + index + offset)`: a byte of the search buffer, `index` a bounded register.
    fn byte_at(&mut self, dst: Reg, index: Reg, offset: i32) {
        self.asm.mov64_reg(dst, Reg::R2);
        self.asm.alu64_reg(Alu::Add, dst, index);
        self.asm.load(Size::B, dst, dst, offset as i16);
    }
}
