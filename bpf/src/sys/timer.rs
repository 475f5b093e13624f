//! BPF timers in the kernel: the map whose values hold one, created with its BTF, and whether the kernel
//! pins a timer to a CPU. The code that arms them is `code/timer.rs`.

use crate::code::helper::Helper;
use crate::code::insn::{Alu, Asm, Reg};
use crate::code::map::{MapKind, MapSpec};
use crate::code::prog::{AttachMode, ProgType};
use crate::code::timer::{emit_lookup_first, emit_start, TIMER_ABS, TIMER_CPU_PIN};
use crate::sys::btf::TimerValue;
use crate::sys::map::Map;
use std::io;

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
    match crate::sys::prog::load("st_feature", ProgType::SchedCls, AttachMode::PerfEvent, &code, &fds) {
        // An Ethernet header's worth of packet: all a classifier run on request needs.
        Ok(program) => matches!(program.run_on_packet(&[0u8; 14]), Ok(0)),
        Err(_) => false,
    }
}
