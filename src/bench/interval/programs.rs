//! The benchmark's BPF programs, written with the `bpf` crate's assembler. Every one sends the same
//! record through the ring buffer (map 0): [`Record`].

use bpf::timer::{emit_lookup_first, emit_start, TIMER_ABS};
use bpf::{Alu, Asm, Code, Cond, Helper, Reg, Size};

/// Bytes of one record: deadline, time in BPF, periods skipped, CPU (all u64).
pub const RECORD_SIZE: usize = 32;

/// What a BPF engine's program reports per firing.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    /// The intended deadline, 0 when the engine has none.
    pub deadline_ns: u64,
    /// `bpf_ktime_get_ns()` on entry.
    pub at_ns: u64,
    /// Periods the engine skipped right after this firing, and said so.
    pub skipped: u64,
    pub cpu: u32,
}

impl Record {
    pub fn parse(bytes: &[u8]) -> Option<Record> {
        let word = |i: usize| Some(u64::from_ne_bytes(bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?));
        Some(Record { deadline_ns: word(0)?, at_ns: word(1)?, skipped: word(2)?, cpu: word(3)? as u32 })
    }
}

/// Stack slots of the record being built.
const RECORD_AT: i16 = -(RECORD_SIZE as i16);

/// Sends the record whose deadline is in r6, time in r7 and skipped count in r8 (the CPU is read
/// here). Clobbers r0-r5.
fn send_record(asm: &mut Asm) {
    asm.call(Helper::GetSmpProcessorId.id());
    asm.store(Size::DW, Reg::FP, RECORD_AT + 24, Reg::R0);
    asm.store(Size::DW, Reg::FP, RECORD_AT, Reg::R6);
    asm.store(Size::DW, Reg::FP, RECORD_AT + 8, Reg::R7);
    asm.store(Size::DW, Reg::FP, RECORD_AT + 16, Reg::R8);
    asm.ld_map(Reg::R1, 0);
    asm.mov64_reg(Reg::R2, Reg::FP);
    asm.alu64_imm(Alu::Add, Reg::R2, RECORD_AT.into());
    asm.mov64_imm(Reg::R3, RECORD_SIZE as i32);
    // BPF_RB_NO_WAKEUP: the reader polls on its own, so no firing pays for waking it up.
    asm.mov64_imm(Reg::R4, 1);
    asm.call(Helper::RingbufOutput.id());
}

/// A program that records one firing: its deadline read from the context at `deadline_at` (the first
/// argument of a raw tracepoint run on request, or of the trigger function's uprobe), or none.
pub fn recorder(deadline_at: Option<i16>) -> Code {
    let mut asm = Asm::new();
    match deadline_at {
        Some(offset) => asm.load(Size::DW, Reg::R6, Reg::R1, offset),
        None => asm.mov64_imm(Reg::R6, 0),
    }
    asm.call(Helper::KtimeGetNs.id());
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.mov64_imm(Reg::R8, 0);
    send_record(&mut asm);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the recorder's labels are bound")
}

/// Offsets of the fields of the timer map's value (after the `struct bpf_timer` at 0).
pub struct TimerFields {
    pub next_deadline: i16,
    pub period: i16,
    pub last_deadline: i16,
}

/// The `bpf-timer` engine, for a classifier run once on request: it arms the timer in element 0 of map
/// 1 for `next_deadline`, absolute, with a callback that records each firing and re-arms for the next
/// deadline after now (counting the periods it skipped), up to `last_deadline`. Returns 0, or the
/// negative error of the helper that failed.
pub fn timer_starter(fields: &TimerFields) -> Code {
    let mut asm = Asm::new();
    let callback = asm.new_label();
    let done = asm.new_label();
    let missing = asm.new_label();
    emit_lookup_first(&mut asm, 1, missing);
    asm.mov64_reg(Reg::R6, Reg::R0);
    asm.load(Size::DW, Reg::R7, Reg::R6, fields.next_deadline);
    emit_start(&mut asm, Reg::R6, 1, callback, Reg::R7, TIMER_ABS, done);
    asm.bind(done);
    asm.exit();
    asm.bind(missing);
    asm.mov64_imm(Reg::R0, -libc::ENOENT);
    asm.exit();

    // callback(map, key, value): r9 = value.
    asm.bind(callback);
    asm.mov64_reg(Reg::R9, Reg::R3);
    asm.call(Helper::KtimeGetNs.id());
    asm.mov64_reg(Reg::R7, Reg::R0);
    asm.load(Size::DW, Reg::R6, Reg::R9, fields.next_deadline);
    // Skipped periods: whole periods between the deadline and now.
    asm.mov64_imm(Reg::R8, 0);
    let on_time = asm.new_label();
    asm.jump_reg(Cond::ULe, Reg::R7, Reg::R6, on_time);
    asm.mov64_reg(Reg::R8, Reg::R7);
    asm.alu64_reg(Alu::Sub, Reg::R8, Reg::R6);
    asm.load(Size::DW, Reg::R1, Reg::R9, fields.period);
    asm.alu64_reg(Alu::Div, Reg::R8, Reg::R1);
    asm.bind(on_time);
    send_record(&mut asm);
    // Next deadline: deadline + (skipped + 1) * period, unless past the last one.
    asm.mov64_reg(Reg::R2, Reg::R8);
    asm.alu64_imm(Alu::Add, Reg::R2, 1);
    asm.load(Size::DW, Reg::R1, Reg::R9, fields.period);
    asm.alu64_reg(Alu::Mul, Reg::R2, Reg::R1);
    asm.alu64_reg(Alu::Add, Reg::R2, Reg::R6);
    asm.load(Size::DW, Reg::R1, Reg::R9, fields.last_deadline);
    let finished = asm.new_label();
    asm.jump_reg(Cond::UGt, Reg::R2, Reg::R1, finished);
    asm.store(Size::DW, Reg::R9, fields.next_deadline, Reg::R2);
    asm.mov64_reg(Reg::R1, Reg::R9);
    asm.mov64_imm(Reg::R3, TIMER_ABS);
    asm.call(Helper::TimerStart.id());
    asm.bind(finished);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the timer program's labels are bound")
}
