//! Where values live while a program runs: three callee-saved registers first, then 8-byte slots
//! on the 512-byte BPF stack. Slots are handed back when a statement ends, so statements share them.

use crate::lang::{Diagnostic, Span};
use bpf::Reg;

/// The kernel's limit on a program's stack.
pub const STACK_SIZE: usize = 512;

/// A value's home: a register that survives helper calls, a stack slot, or a constant not yet
/// materialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    Reg(Reg),
    Slot(i16),
    Imm(u64),
}

pub struct Frame {
    used: usize,
    deepest: usize,
    free_regs: Vec<Reg>,
}

impl Default for Frame {
    fn default() -> Frame {
        // R9 keeps the context; R6-R8 hold values across helper calls.
        Frame { used: 0, deepest: 0, free_regs: vec![Reg::R8, Reg::R7, Reg::R6] }
    }
}

/// The stack depth and free registers at some point, to go back to.
#[derive(Clone)]
pub struct Mark(usize, Vec<Reg>);

impl Frame {
    /// The frame of a loop's callback: R8 points at the probe's frame, where the variables are, and
    /// R9 keeps the context, so only R6 and R7 are free.
    pub fn for_callback() -> Frame {
        Frame { used: 0, deepest: 0, free_regs: vec![Reg::R7, Reg::R6] }
    }

    /// The most stack this frame has used so far.
    pub fn deepest(&self) -> usize {
        self.deepest
    }

    /// `size` bytes of stack (8-byte aligned), as an offset from the frame pointer.
    pub fn alloc(&mut self, size: usize, span: Span) -> Result<i16, Diagnostic> {
        self.used += size.div_ceil(8) * 8;
        self.deepest = self.deepest.max(self.used);
        if self.used > STACK_SIZE {
            return Err(Diagnostic::error(
                span,
                format!("this needs more than the {STACK_SIZE} bytes of stack a BPF program has"),
            )
            .with_help(
                "split the work over several statements or probes; a value of hundreds of bytes can live in a \
                 map (`@v = ...`) rather than in a `$variable`, which holds its stack for the whole probe",
            ));
        }
        Ok(-(self.used as i16))
    }

    pub fn mark(&self) -> Mark {
        Mark(self.used, self.free_regs.clone())
    }

    /// Gives back every slot and register taken since `mark`.
    pub fn release_to(&mut self, mark: Mark) {
        self.used = mark.0;
        self.free_regs = mark.1;
    }

    /// A place for a new value: a free register, else a stack slot.
    pub fn fresh(&mut self, span: Span) -> Result<Val, Diagnostic> {
        match self.free_regs.pop() {
            Some(reg) => Ok(Val::Reg(reg)),
            None => Ok(Val::Slot(self.alloc(8, span)?)),
        }
    }

    /// Returns a value's register to the pool (slots go back with their statement).
    pub fn release(&mut self, val: Val) {
        if let Val::Reg(reg) = val {
            self.free_regs.push(reg);
        }
    }
}
