//! Code generation: one BPF program per attach point, from the checked syntax tree.

mod expr;
pub mod frame;
pub mod record;
mod stmt;

use crate::lang::{Diagnostic, Span};
use crate::probes::{trigger::FIRST_ARG_OFFSET, AttachPoint, ProbeKind};
use crate::sema::{Checked, CheckedProbe};
use bpf::{Asm, Code, Cond, Helper, Label, MapKind, MapSpec, ProgType, Reg, Size};
use frame::Frame;
use record::Records;

/// Map number of the ring buffer carrying every output record.
pub const EVENTS_MAP: usize = 0;
/// Map number of the per-CPU counter of records the full ring buffer refused.
pub const LOST_MAP: usize = 1;
/// Size of the ring buffer: enough for bursts of output while userspace is scheduled out.
const EVENTS_BYTES: u32 = 1 << 20;

/// What the runtime needs to know while compiling.
pub struct Options {
    /// CLOCK_MONOTONIC at start-up: `elapsed` counts from here.
    pub start_ns: u64,
}

/// A compiled script: maps to create, programs to load, and how to read their output.
pub struct Compiled {
    pub maps: Vec<MapSpec>,
    pub programs: Vec<ProgramCode>,
    pub records: Records,
}

pub struct ProgramCode {
    pub point: AttachPoint,
    pub prog_type: ProgType,
    pub code: Code,
    /// `(first instruction, source span)` of each statement, to explain verifier rejections.
    pub spans: Vec<(usize, Span)>,
}

impl ProgramCode {
    /// The script text that produced instruction `insn`.
    pub fn span_of(&self, insn: usize) -> Option<Span> {
        self.spans.iter().rev().find(|(start, _)| *start <= insn).map(|(_, span)| *span)
    }
}

pub fn compile(checked: &Checked, options: &Options) -> Result<Compiled, Diagnostic> {
    let maps = vec![
        MapSpec {
            name: "events".into(),
            kind: MapKind::RingBuf,
            key_size: 0,
            value_size: 0,
            max_entries: EVENTS_BYTES,
        },
        MapSpec {
            name: "lost".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: 8,
            max_entries: 1,
        },
    ];
    let mut records = Records::default();
    let mut programs = vec![];
    for probe in &checked.probes {
        for point in &probe.points {
            programs.push(compile_one(probe, point, options, &mut records)?);
        }
    }
    Ok(Compiled { maps, programs, records })
}

fn compile_one(
    probe: &CheckedProbe,
    point: &AttachPoint,
    options: &Options,
    records: &mut Records,
) -> Result<ProgramCode, Diagnostic> {
    let mut asm = Asm::new();
    let exit = asm.new_label();
    let mut gen = Gen { asm, frame: Frame::default(), point, options, records, spans: vec![], exit };
    gen.asm.mov64_reg(Reg::R9, Reg::R1);
    if let ProbeKind::Interval { index, .. } = point.kind {
        // Every interval program hangs on the same trigger; the argument says whose turn it is.
        gen.asm.load(Size::DW, Reg::R1, Reg::R1, FIRST_ARG_OFFSET);
        gen.asm.jump_imm(Cond::Ne, Reg::R1, index as i32, exit);
    }
    if let Some(predicate) = &probe.predicate {
        gen.spans.push((gen.asm.len(), predicate.span));
        gen.branch_unless(predicate, exit)?;
    }
    gen.block(&probe.body)?;
    let exit = gen.exit;
    gen.asm.bind(exit);
    gen.asm.mov64_imm(Reg::R0, 0);
    gen.asm.exit();
    let code = gen.asm.finish().map_err(|e| {
        Diagnostic::error(point.span, format!("internal error assembling the program: {e:?}"))
    })?;
    Ok(ProgramCode { point: point.clone(), prog_type: ProgType::Kprobe, code, spans: gen.spans })
}

/// The state of one program being generated.
struct Gen<'a> {
    asm: Asm,
    frame: Frame,
    point: &'a AttachPoint,
    options: &'a Options,
    records: &'a mut Records,
    spans: Vec<(usize, Span)>,
    /// The program's single exit, returning 0.
    exit: Label,
}

impl Gen<'_> {
    /// Sends `size` bytes at `fp + offset` to the ring buffer, counting a refusal as a lost record.
    fn output(&mut self, offset: i16, size: usize, span: Span) -> Result<(), Diagnostic> {
        self.asm.ld_map(Reg::R1, EVENTS_MAP);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R2, offset as i32);
        self.asm.mov64_imm(Reg::R3, size as i32);
        self.asm.mov64_imm(Reg::R4, 0);
        self.asm.call(Helper::RingbufOutput.id());
        let sent = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, Reg::R0, 0, sent);
        let key = self.frame.alloc(4, span)?;
        self.asm.store_imm(Size::W, Reg::FP, key, 0);
        self.asm.ld_map(Reg::R1, LOST_MAP);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R2, key as i32);
        self.asm.call(Helper::MapLookupElem.id());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, sent);
        self.asm.load(Size::DW, Reg::R1, Reg::R0, 0);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R1, 1);
        self.asm.store(Size::DW, Reg::R0, 0, Reg::R1);
        self.asm.bind(sent);
        Ok(())
    }
}
