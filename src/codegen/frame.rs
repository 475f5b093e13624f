//! Where values live while a program runs: three callee-saved registers first, then 8-byte slots
//! on the 512-byte BPF stack. Slots are handed back when a statement ends, so statements share them.
//! A program whose values do not fit in the stack is generated again with a scratch area: its entry of a
//! per-CPU array map, whose address R8 keeps from the program's start, holds the variables and the
//! large buffers (as bpftrace 0.27's scratch maps do).

use crate::lang::{Diagnostic, Span};
use bpf::Reg;

/// The kernel's limit on a program's stack.
pub const STACK_SIZE: usize = 512;

/// The register holding the address of the program's scratch area, where it has one.
pub const SCRATCH_BASE: Reg = Reg::R8;

/// The register holding it in a loop's callback (whose R8 points at the probe's frame), where the probe has
/// variables in the scratch area.
pub const SCRATCH_BASE_IN_CALLBACK: Reg = Reg::R7;

/// The most scratch area a program may have: the kernel allocates a per-CPU map value of up to 32 KiB.
pub const SCRATCH_SIZE: usize = 32 << 10;

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
    /// Whether an allocation found the stack full.
    overflowed: bool,
    /// The scratch area's bytes in use and the most ever used, when the program has one.
    scratch: Option<(usize, usize)>,
}

impl Default for Frame {
    fn default() -> Frame {
        // R9 keeps the context; R6-R8 hold values across helper calls.
        Frame {
            used: 0,
            deepest: 0,
            free_regs: vec![Reg::R8, Reg::R7, Reg::R6],
            overflowed: false,
            scratch: None,
        }
    }
}

/// The stack depth, free registers and scratch area in use at some point, to go back to.
#[derive(Clone)]
pub struct Mark(usize, Vec<Reg>, Option<usize>);

impl Frame {
    /// The frame of a loop's callback: R8 points at the probe's frame, where the variables are, and
    /// R9 keeps the context, so only R6 and R7 are free.
    pub fn for_callback() -> Frame {
        Frame { free_regs: vec![Reg::R7, Reg::R6], ..Frame::default() }
    }

    /// The frame of a loop's callback in a program with a scratch area: R7 holds its address too, and the
    /// callback's buffers there start at `start`, past those of the code around it.
    pub fn for_callback_with_scratch(start: usize) -> Frame {
        Frame { free_regs: vec![Reg::R6], scratch: Some((start, start)), ..Frame::default() }
    }

    /// Counts the scratch area a callback's frame used as this frame's, so that the next callback's buffers
    /// go past it.
    pub fn include_scratch(&mut self, callback: &Frame) {
        if let (Some((_, deepest)), Some((_, used))) = (&mut self.scratch, callback.scratch) {
            *deepest = (*deepest).max(used.max(callback.scratch_deepest()));
        }
    }

    /// From here on [`SCRATCH_BASE`] holds the address of the program's scratch area: it is no longer a
    /// register for values, and [`Frame::alloc_scratch`] hands out the area's bytes.
    pub fn use_scratch(&mut self) {
        self.free_regs.retain(|&reg| reg != SCRATCH_BASE);
        self.scratch = Some((0, 0));
    }

    /// Whether the program has a scratch area.
    pub fn has_scratch(&self) -> bool {
        self.scratch.is_some()
    }

    /// The most of the scratch area this frame has used so far.
    pub fn scratch_deepest(&self) -> usize {
        self.scratch.map_or(0, |(_, deepest)| deepest)
    }

    /// Whether some allocation found the stack full.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Notes that the stack is too small (for the call chain of a loop's callback).
    pub fn set_overflowed(&mut self) {
        self.overflowed = true;
    }

    /// `size` bytes (8-byte aligned) of the scratch area, as an offset from [`SCRATCH_BASE`]; `None` when
    /// the program has no scratch area.
    pub fn alloc_scratch(&mut self, size: usize, span: Span) -> Result<Option<i16>, Diagnostic> {
        let Some((used, deepest)) = self.scratch else { return Ok(None) };
        let end = used + size.div_ceil(8) * 8;
        if end > SCRATCH_SIZE {
            return Err(Diagnostic::error(
                span,
                format!(
                    "this needs more than the {SCRATCH_SIZE} bytes of scratch space a BPF program can have"
                ),
            )
            .with_help("read fewer or smaller values at a time"));
        }
        self.scratch = Some((end, deepest.max(end)));
        Ok(Some(used as i16))
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
            self.overflowed = true;
            return Err(Diagnostic::error(
                span,
                format!("this needs more than the {STACK_SIZE} bytes of stack a BPF program has"),
            )
            .with_help(
                "split the work over several statements or probes: variables and structs read whole go to a \
                 scratch map when the stack is short, but what a statement builds (a map's key and value, a \
                 tuple) is on the stack",
            ));
        }
        Ok(-(self.used as i16))
    }

    pub fn mark(&self) -> Mark {
        Mark(self.used, self.free_regs.clone(), self.scratch.map(|(used, _)| used))
    }

    /// Gives back every slot and register taken since `mark`.
    pub fn release_to(&mut self, mark: Mark) {
        self.used = mark.0;
        self.free_regs = mark.1;
        if let (Some((used, _)), Some(marked)) = (&mut self.scratch, mark.2) {
            *used = marked;
        }
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
