//! BPF timers (`struct bpf_timer`, Linux 5.15): what every user of them shares. A map whose values hold
//! one (the kernel finds the timer in a value only through the map's BTF), the flags and clock of
//! `bpf_timer_start`, the instructions that set one going, and whether the kernel pins a timer to a
//! CPU. Tracing program types may not use timers, so the programs that arm them are classifiers run on
//! request (`BPF_PROG_TEST_RUN`), which run on the CPU of the thread that asks.

use crate::btf::TimerValue;
use crate::insn::{Alu, Asm, Cond, Label, Reg, Size};
use crate::{AttachMode, Helper, Map, MapKind, MapSpec, ProgType};
use std::io;

/// The clock timers count in: the one of `bpf_ktime_get_ns` and `clock_gettime(CLOCK_MONOTONIC)`.
pub const CLOCK_MONOTONIC: i32 = 1;
/// `BPF_F_TIMER_ABS`: the expiry is an absolute CLOCK_MONOTONIC time.
pub const TIMER_ABS: i32 = 1;
/// `BPF_F_TIMER_CPU_PIN` (Linux 6.7): the timer expires on the CPU that started it.
pub const TIMER_CPU_PIN: i32 = 2;
/// What `bpf_timer_init` says of a timer already set up.
const EBUSY: i32 = 16;

/// An array map whose values are `struct { struct bpf_timer timer; u64 fields[n]; }`.
pub struct TimerMap {
    pub map: Map,
    /// The offset of each u64 field in a value (the timer is at 0).
    pub fields: Vec<i16>,
    pub value_size: usize,
}

impl TimerMap {
    pub fn create(name: &str, entries: u32, fields: usize) -> io::Result<TimerMap> {
        let btf = TimerValue::load(fields)?;
        let value_size = 16 + 8 * fields;
        let spec = MapSpec {
            name: name.into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: value_size as u32,
            max_entries: entries,
        };
        let map = Map::create_with_btf(&spec, Some(&btf))?;
        Ok(TimerMap { map, fields: btf.offsets.iter().map(|&o| o as i16).collect(), value_size })
    }

    /// A value whose fields are `words` (the timer zeroed: writing it from userspace cancels and frees the
    /// element's timer, if it had one).
    pub fn value(&self, words: &[u64]) -> Vec<u8> {
        let mut value = vec![0u8; self.value_size];
        for (&offset, word) in self.fields.iter().zip(words) {
            let offset = offset as usize;
            value[offset..offset + 8].copy_from_slice(&word.to_ne_bytes());
        }
        value
    }
}

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

/// Whether `bpf_timer_start` takes `BPF_F_TIMER_ABS | BPF_F_TIMER_CPU_PIN` (Linux 6.7; EINVAL before):
/// a timer is started for 1000 s from now and cancelled at once by dropping its map.
pub(crate) fn cpu_pin_supported() -> bool {
    let Ok(timers) = TimerMap::create("st_feature", 1, 1) else { return false };
    let mut asm = Asm::new();
    let (callback, missing, done) = (asm.new_label(), asm.new_label(), asm.new_label());
    emit_lookup_first(&mut asm, 0, missing);
    asm.mov64_reg(Reg::R6, Reg::R0);
    asm.call(Helper::KtimeGetNs.id());
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.mov_u64(Reg::R1, 1_000_000_000_000);
    asm.alu64_reg(Alu::Add, Reg::R7, Reg::R1);
    emit_start(&mut asm, Reg::R6, 0, callback, Reg::R7, TIMER_ABS | TIMER_CPU_PIN, done);
    asm.bind(done);
    asm.exit();
    asm.bind(missing);
    asm.mov64_imm(Reg::R0, -1);
    asm.exit();
    asm.bind(callback);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    let fds = [std::os::fd::AsFd::as_fd(&timers.map)];
    match crate::load("st_feature", ProgType::SchedCls, AttachMode::PerfEvent, &code, &fds) {
        // An Ethernet header's worth of packet: all a classifier run on request needs.
        Ok(program) => matches!(program.run_on_packet(&[0u8; 14]), Ok(0)),
        Err(_) => false,
    }
}
