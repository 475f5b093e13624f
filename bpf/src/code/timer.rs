//! BPF timers (`struct bpf_timer`, Linux 5.15), the code every user of them shares: the flags and clock of
//! `bpf_timer_start` and the instructions that set one going (`sys/timer.rs` makes the map holding them,
//! which the kernel finds in a value only through the map's BTF). Tracing program types may not use
//! timers, so the programs that arm them are classifiers run on request (`BPF_PROG_TEST_RUN`), which run
//! on the CPU of the thread that asks.

use crate::code::helper::Helper;
use crate::code::insn::{Alu, Asm, Cond, Label, Reg, Size};

/// The clock timers count in: the one of `bpf_ktime_get_ns` and `clock_gettime(CLOCK_MONOTONIC)`.
pub const CLOCK_MONOTONIC: i32 = 1;
/// `BPF_F_TIMER_ABS`: the expiry is an absolute CLOCK_MONOTONIC time.
pub const TIMER_ABS: i32 = 1;
/// `BPF_F_TIMER_CPU_PIN` (Linux 6.7): the timer expires on the CPU that started it.
pub const TIMER_CPU_PIN: i32 = 2;
/// What `bpf_timer_init` says of a timer already set up.
const EBUSY: i32 = 16;

/// Sets going the timer at the start of the map value that `value` (a callee-saved register) points to,
/// an element of map `map`: initialises it (one set up before is kept), gives it `callback` and starts it
/// for the time in `deadline` (a callee-saved register too) with `flags`. On failure jumps to `failed`
/// with the helper's error in r0; otherwise r0 is 0 after it. Clobbers r0-r5.
pub fn emit_start(
    asm: &mut Asm,
    value: Reg,
    map: usize,
    callback: Label,
    deadline: Reg,
    flags: i32,
    failed: Label,
) {
    let initialised = asm.new_label();
    asm.mov64_reg(Reg::R1, value);
    asm.ld_map(Reg::R2, map);
    asm.mov64_imm(Reg::R3, CLOCK_MONOTONIC);
    asm.call(Helper::TimerInit.id());
    asm.jump_imm(Cond::Eq, Reg::R0, -EBUSY, initialised);
    asm.jump_imm(Cond::SLt, Reg::R0, 0, failed);
    asm.bind(initialised);
    asm.mov64_reg(Reg::R1, value);
    asm.ld_func(Reg::R2, callback);
    asm.call(Helper::TimerSetCallback.id());
    asm.jump_imm(Cond::SLt, Reg::R0, 0, failed);
    asm.mov64_reg(Reg::R1, value);
    asm.mov64_reg(Reg::R2, deadline);
    asm.mov64_imm(Reg::R3, flags);
    asm.call(Helper::TimerStart.id());
    asm.jump_imm(Cond::SLt, Reg::R0, 0, failed);
}

/// Looks up element 0 of map `map` (an array) into r0, jumping to `missing` when there is none. Uses the
/// 4 bytes at `fp - 4`; clobbers r0-r5.
pub fn emit_lookup_first(asm: &mut Asm, map: usize, missing: Label) {
    asm.store_imm(Size::W, Reg::FP, -4, 0);
    asm.ld_map(Reg::R1, map);
    asm.mov64_reg(Reg::R2, Reg::FP);
    asm.alu64_imm(Alu::Add, Reg::R2, -4);
    asm.call(Helper::MapLookupElem.id());
    asm.jump_imm(Cond::Eq, Reg::R0, 0, missing);
}
