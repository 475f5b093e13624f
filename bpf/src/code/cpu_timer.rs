//! Sampling every CPU with no perf event, its programs (`sys/cpu_timer.rs` creates their maps, loads and
//! attaches them): a BPF timer per CPU (pinned there with `BPF_F_TIMER_CPU_PIN`, Linux 6.7) that re-arms
//! itself for each deadline of its grid, and a raw tracepoint program that runs a target program, as an
//! ordinary raw tracepoint program, in the context the timer interrupted.
//!
//! A BPF timer is a soft hrtimer: it expires in the timer softirq, which the kernel normally runs as the
//! timer interrupt returns, on the interrupted task (the idle task on an idle CPU; on a CPU whose softirqs
//! are deferred, ksoftirqd or the task that re-enables them). The sample is taken on the raw tracepoint
//! `hrtimer_expire_entry`, which the kernel fires just before it calls the timer's callback, with
//! interrupts enabled and no lock held. The gate program attached there lets through only this CPU's
//! timer (the expiry of the expiring hrtimer equals the deadline the timer was armed for, which the
//! arming programs keep in a per-CPU slot) and tail-calls the target, so that `current`, its user
//! registers and the kernel stack are the interrupted ones, and every raw tracepoint helper works.
//!
//! Measured on 6.18 (docs/CONTAINERS.md): 99.0-99.2 samples a second per CPU at 99 Hz, the spinning task
//! of a CPU in 494 of its 495 samples, its function at the top of every user stack. The sample's kernel
//! stack holds the softirq's frames above the interrupted code (8 on that kernel, one more while another
//! program or trace event also hangs on the tracepoint: the kernel then calls them through an iterator),
//! up to the return address into the timer interrupt's entry: `FrameCount`, with [`frame_count_program`],
//! finds that address, so that stacks can start after it.
//!
//! `hrtimer_start`, where the callback re-arms the timer, was the other candidate. There interrupts are
//! off and the hrtimer base is locked while the probe runs, and its stacks pass through the callback's
//! frame, where the kernel's unwinder stopped in a rootless container (measured: 5 frames, the last in
//! `bpf_timer_start`; a program loaded through a BPF token is likely not in the kernel's symbol table).

use crate::code::helper::Helper;
use crate::code::insn::{Alu, Asm, Code, Cond, Reg, Size};
use crate::code::timer::{emit_lookup_first, emit_start, TIMER_ABS, TIMER_CPU_PIN};

/// The raw tracepoint the samples are taken on.
pub const TRACEPOINT: &str = "hrtimer_expire_entry";

/// Fields of a timer's value, after its `struct bpf_timer`.
pub(crate) const NEXT: usize = 0;
const PERIOD: usize = 1;
/// The element's CPU plus one: 0 is an element not armed from userspace.
const CPU: usize = 2;
pub(crate) const FIELDS: usize = 3;

/// Maps of the arming programs: the timers, then the per-CPU slot of the awaited deadline.
const TIMERS: usize = 0;
const AWAITED: usize = 1;
/// The gate's maps: the slot, then the program array holding the target.
const GATE_AWAITED: usize = 0;
const GATE_TARGETS: usize = 1;

/// `EXDEV`: the arming program ran on a CPU whose element was not prepared (the thread was not there).
const EXDEV: i32 = 18;
const ENOENT: i32 = 2;

/// Stores r`value` in this CPU's awaited slot (map `map`). Clobbers r0-r5.
fn await_deadline(asm: &mut Asm, map: usize, value: Reg) {
    let missing = asm.new_label();
    emit_lookup_first(asm, map, missing);
    asm.store(Size::DW, Reg::R0, 0, value);
    asm.bind(missing);
}

/// The classifier run on request on a CPU: arms that CPU's timer for the deadline userspace put in its
/// element, and awaits it. Returns 0, or the negative error of what failed.
pub(crate) fn arming_program(fields: &[i16]) -> Code {
    let (next, period, cpu) = (fields[NEXT], fields[PERIOD], fields[CPU]);
    let mut asm = Asm::new();
    let (callback, failed, found) = (asm.new_label(), asm.new_label(), asm.new_label());
    asm.call(Helper::GetSmpProcessorId.id());
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.store(Size::W, Reg::FP, -8, Reg::R0);
    asm.ld_map(Reg::R1, TIMERS);
    asm.mov64_reg(Reg::R2, Reg::FP);
    asm.alu64_imm(Alu::Add, Reg::R2, -8);
    asm.call(Helper::MapLookupElem.id());
    asm.jump_imm(Cond::Ne, Reg::R0, 0, found);
    asm.mov64_imm(Reg::R0, -ENOENT);
    asm.exit();
    asm.bind(found);
    asm.mov64_reg(Reg::R6, Reg::R0);
    let here = asm.new_label();
    asm.load(Size::DW, Reg::R1, Reg::R6, cpu);
    asm.alu64_imm(Alu::Add, Reg::R7, 1);
    asm.jump_reg(Cond::Eq, Reg::R1, Reg::R7, here);
    asm.mov64_imm(Reg::R0, -EXDEV);
    asm.exit();
    asm.bind(here);
    asm.load(Size::DW, Reg::R8, Reg::R6, next);
    await_deadline(&mut asm, AWAITED, Reg::R8);
    emit_start(&mut asm, Reg::R6, TIMERS, callback, Reg::R8, TIMER_ABS | TIMER_CPU_PIN, failed);
    asm.bind(failed);
    asm.exit();

    // callback(map, key, value): re-arms for the next deadline of the grid after now, on this CPU, unless
    // this is not the timer's CPU (the kernel moves a CPU's timers away when it goes offline).
    asm.bind(callback);
    let (on_time, moved) = (asm.new_label(), asm.new_label());
    asm.mov64_reg(Reg::R9, Reg::R3);
    asm.call(Helper::GetSmpProcessorId.id());
    asm.alu64_imm(Alu::Add, Reg::R0, 1);
    asm.load(Size::DW, Reg::R1, Reg::R9, cpu);
    asm.jump_reg(Cond::Ne, Reg::R0, Reg::R1, moved);
    asm.load(Size::DW, Reg::R6, Reg::R9, next);
    asm.load(Size::DW, Reg::R7, Reg::R9, period);
    asm.alu64_reg(Alu::Add, Reg::R6, Reg::R7);
    asm.call(Helper::KtimeGetNs.id());
    asm.jump_reg(Cond::UGt, Reg::R6, Reg::R0, on_time);
    // Late by a period or more: the first deadline of the grid after now (no burst of catching up).
    asm.alu64_reg(Alu::Sub, Reg::R0, Reg::R6);
    asm.alu64_reg(Alu::Div, Reg::R0, Reg::R7);
    asm.alu64_imm(Alu::Add, Reg::R0, 1);
    asm.alu64_reg(Alu::Mul, Reg::R0, Reg::R7);
    asm.alu64_reg(Alu::Add, Reg::R6, Reg::R0);
    asm.bind(on_time);
    asm.store(Size::DW, Reg::R9, next, Reg::R6);
    await_deadline(&mut asm, AWAITED, Reg::R6);
    asm.mov64_reg(Reg::R1, Reg::R9);
    asm.mov64_reg(Reg::R2, Reg::R6);
    asm.mov64_imm(Reg::R3, TIMER_ABS | TIMER_CPU_PIN);
    asm.call(Helper::TimerStart.id());
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.bind(moved);
    asm.store_imm(Size::DW, Reg::R9, next, 0);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the arming program's labels are bound")
}

/// The raw tracepoint program on `hrtimer_expire_entry(struct hrtimer *, ktime_t *now)`: when the expiring
/// hrtimer is this CPU's timer (its `_softexpires` is the awaited deadline), clears the slot and
/// tail-calls the target.
pub(crate) fn gate_program(softexpires: i16) -> Code {
    let mut asm = Asm::new();
    let out = asm.new_label();
    asm.mov64_reg(Reg::R6, Reg::R1);
    emit_lookup_first(&mut asm, GATE_AWAITED, out);
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.load(Size::DW, Reg::R8, Reg::R7, 0);
    asm.jump_imm(Cond::Eq, Reg::R8, 0, out);
    asm.load(Size::DW, Reg::R3, Reg::R6, 0);
    asm.alu64_imm(Alu::Add, Reg::R3, softexpires.into());
    asm.mov64_reg(Reg::R1, Reg::FP);
    asm.alu64_imm(Alu::Add, Reg::R1, -16);
    asm.mov64_imm(Reg::R2, 8);
    asm.call(Helper::ProbeReadKernel.id());
    asm.jump_imm(Cond::Ne, Reg::R0, 0, out);
    asm.load(Size::DW, Reg::R1, Reg::FP, -16);
    asm.jump_reg(Cond::Ne, Reg::R1, Reg::R8, out);
    asm.store_imm(Size::DW, Reg::R7, 0, 0);
    asm.mov64_reg(Reg::R1, Reg::R6);
    asm.ld_map(Reg::R2, GATE_TARGETS);
    asm.mov64_imm(Reg::R3, 0);
    asm.call(Helper::TailCall.id());
    asm.bind(out);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the gate's labels are bound")
}

/// Frames of the kernel stack in a sample, in the target program.
pub(crate) const MAX_FRAMES: u32 = 127;

pub(crate) fn frame_count_program() -> Code {
    let mut asm = Asm::new();
    let (out, store) = (asm.new_label(), asm.new_label());
    let bytes = (8 * MAX_FRAMES) as i32;
    asm.mov64_reg(Reg::R6, Reg::R1);
    emit_lookup_first(&mut asm, 0, out);
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.mov64_reg(Reg::R1, Reg::R6);
    asm.mov64_reg(Reg::R2, Reg::R7);
    asm.alu64_imm(Alu::Add, Reg::R2, 16);
    asm.mov64_imm(Reg::R3, bytes);
    asm.mov64_imm(Reg::R4, 0);
    asm.call(Helper::GetStack.id());
    asm.jump_imm(Cond::SLe, Reg::R0, 0, out);
    asm.jump_imm(Cond::UGt, Reg::R0, bytes, out);
    asm.mov64_reg(Reg::R8, Reg::R0);
    asm.alu64_imm(Alu::Rsh, Reg::R8, 3);
    asm.load(Size::DW, Reg::R1, Reg::R7, 0);
    asm.jump_imm(Cond::Eq, Reg::R1, 0, store);
    asm.jump_reg(Cond::UGe, Reg::R8, Reg::R1, out);
    asm.bind(store);
    asm.store(Size::DW, Reg::R7, 0, Reg::R8);
    // The last frame: at 16 + bytes - 8 in the value.
    asm.mov64_reg(Reg::R2, Reg::R7);
    asm.alu64_reg(Alu::Add, Reg::R2, Reg::R0);
    asm.load(Size::DW, Reg::R1, Reg::R2, 8);
    asm.store(Size::DW, Reg::R7, 8, Reg::R1);
    asm.bind(out);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the frame count's labels are bound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_assemble_with_their_maps() {
        let arming = arming_program(&[16, 24, 32]);
        let maps: Vec<usize> = arming.map_relocs.iter().map(|r| r.map).collect();
        assert!(maps.contains(&TIMERS) && maps.contains(&AWAITED), "{maps:?}");
        assert_eq!(arming.subprograms.len(), 1, "the callback");
        let gate = gate_program(32);
        assert!(gate.helper_calls().any(|(_, id)| id == Helper::TailCall.id() as i32));
        assert!(frame_count_program().helper_calls().any(|(_, id)| id == Helper::GetStack.id() as i32));
    }
}
