//! Code generation: one BPF program per attach point, from the checked syntax tree.

mod expr;
pub mod frame;
mod maps;
pub mod record;
mod stmt;
mod values;

use crate::lang::{Diagnostic, Span};
use crate::probes::{trigger::FIRST_ARG_OFFSET, AttachPoint, IntervalEngine, ProbeKind};
use crate::sema::maps::MapDecl;
use crate::sema::{Checked, CheckedProbe, Env};
use bpf::{Asm, Code, Cond, Helper, Label, MapKind, MapSpec, ProgType, Reg, Size};
use frame::Frame;
use record::Records;
use std::collections::HashMap;

/// Map number of the ring buffer carrying every output record.
pub const EVENTS_MAP: usize = 0;
/// Map number of the per-CPU counter of records the full ring buffer refused.
pub const LOST_MAP: usize = 1;
/// Map number of the program array the dispatcher tail-calls into; slot `i` holds program `i`.
pub const PROGRAMS_MAP: usize = 2;
/// Map number of the script's first map (`@name`); the others follow in declaration order.
pub const FIRST_SCRIPT_MAP: usize = 3;
/// Entries a script map holds at most (bpftrace's default).
const MAP_ENTRIES: u32 = 4096;
/// Size of the ring buffer: enough for bursts of output while userspace is scheduled out.
const EVENTS_BYTES: u32 = 1 << 20;

/// What the runtime needs to know while compiling.
pub struct Options {
    /// CLOCK_MONOTONIC at start-up: `elapsed` counts from here.
    pub start_ns: u64,
    /// The value of `ncpus`: CPUs online at start-up.
    pub ncpus: u64,
    pub interval_engine: IntervalEngine,
    /// `-p PID`: probes that fire in any process (per-CPU perf probes) only act for this one.
    pub filter_pid: Option<u32>,
    /// `-c CMD`: the child's pid, the value of `cpid`.
    pub cpid: Option<u32>,
}

/// A compiled script: maps to create, programs to load, and how to read their output.
pub struct Compiled {
    pub maps: Vec<MapSpec>,
    /// One per attach point; a program's index is its slot in the program array.
    pub programs: Vec<ProgramCode>,
    /// Runs on each call of the trigger function and tail-calls the program of the slot it was given.
    pub dispatcher: Code,
    pub records: Records,
    /// The script's maps (`@name`), in map number order from [`FIRST_SCRIPT_MAP`].
    pub script_maps: Vec<MapDecl>,
    /// The stack-trace maps, one per (kernel or user, depth), numbered after the script's maps.
    pub stack_maps: Vec<(bool, u8)>,
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
    let mut stack_maps = vec![];
    for probe in &checked.probes {
        for point in &probe.points {
            programs.push(compile_one(checked, probe, point, options, &mut records, &mut stack_maps)?);
        }
    }
    let mut maps = maps;
    maps.push(MapSpec {
        name: "programs".into(),
        kind: MapKind::ProgArray,
        key_size: 4,
        value_size: 4,
        max_entries: programs.len().max(1) as u32,
    });
    for decl in &checked.maps.decls {
        maps.push(MapSpec {
            name: if decl.name.is_empty() { "AT_".into() } else { format!("AT_{}", decl.name) },
            kind: if decl.is_per_cpu() { MapKind::PercpuHash } else { MapKind::Hash },
            key_size: decl.key_size() as u32,
            value_size: decl.value_size() as u32,
            max_entries: MAP_ENTRIES,
        });
    }
    for &(user, depth) in &stack_maps {
        maps.push(MapSpec {
            name: if user { format!("ustack_{depth}") } else { format!("kstack_{depth}") },
            kind: MapKind::StackTrace,
            key_size: 4,
            value_size: 8 * depth as u32,
            max_entries: MAP_ENTRIES,
        });
    }
    Ok(Compiled {
        maps,
        programs,
        dispatcher: dispatcher(),
        records,
        script_maps: checked.maps.decls.clone(),
        stack_maps,
    })
}

/// `tail_call(ctx, programs, first argument of the trigger)`; returns 0 when the slot is empty.
fn dispatcher() -> Code {
    let mut asm = Asm::new();
    asm.load(Size::DW, Reg::R3, Reg::R1, FIRST_ARG_OFFSET);
    asm.ld_map(Reg::R2, PROGRAMS_MAP);
    asm.call(Helper::TailCall.id());
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the dispatcher has no labels")
}

fn compile_one(
    checked: &Checked,
    probe: &CheckedProbe,
    point: &AttachPoint,
    options: &Options,
    records: &mut Records,
    stack_maps: &mut Vec<(bool, u8)>,
) -> Result<ProgramCode, Diagnostic> {
    let mut asm = Asm::new();
    let exit = asm.new_label();
    let mut gen = Gen {
        asm,
        frame: Frame::default(),
        point,
        options,
        records,
        env: checked.env(probe),
        first_stack_map: FIRST_SCRIPT_MAP + checked.maps.decls.len(),
        stack_maps,
        vars: HashMap::new(),
        loops: vec![],
        spans: vec![],
        exit,
    };
    gen.asm.mov64_reg(Reg::R9, Reg::R1);
    let any_process = matches!(
        point.kind,
        ProbeKind::PerCpu(_)
            | ProbeKind::Tracepoint(_)
            | ProbeKind::RawTracepoint { .. }
            | ProbeKind::Kprobe { .. }
            | ProbeKind::KprobeMulti { .. }
    );
    if let (Some(pid), true) = (options.filter_pid, any_process) {
        gen.asm.call(Helper::GetCurrentPidTgid.id());
        gen.asm.alu64_imm(bpf::Alu::Rsh, Reg::R0, 32);
        gen.asm.mov_u64(Reg::R1, pid as u64);
        gen.asm.jump_reg(Cond::Ne, Reg::R0, Reg::R1, exit);
    }
    // Scratch variables live for the whole probe, zeroed so that every read is defined.
    let mut names: Vec<&String> = probe.vars.keys().collect();
    names.sort();
    for name in names {
        let ty = &probe.vars[name];
        let offset = gen.frame.alloc(ty.slot_size(), point.span)?;
        gen.zero(offset, ty.slot_size());
        gen.vars.insert(name.clone(), offset);
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
    // Probes that steadytrace fires itself run on request, as raw tracepoint programs.
    let prog_type = match point.kind {
        ProbeKind::Interval { .. } if options.interval_engine == IntervalEngine::Perf => ProgType::PerfEvent,
        ProbeKind::Begin | ProbeKind::End | ProbeKind::Interval { .. } => ProgType::RawTracepoint,
        ProbeKind::PerCpu(_) => ProgType::PerfEvent,
        ProbeKind::Tracepoint(_) => ProgType::Tracepoint,
        // Loaded as a raw tracepoint program too, but attached by name rather than run on request.
        ProbeKind::RawTracepoint { .. } => ProgType::RawTracepoint,
        ProbeKind::Uprobe { .. } | ProbeKind::Kprobe { .. } | ProbeKind::KprobeMulti { .. } => {
            ProgType::Kprobe
        }
    };
    Ok(ProgramCode { point: point.clone(), prog_type, code, spans: gen.spans })
}

/// The state of one program being generated.
struct Gen<'a> {
    asm: Asm,
    frame: Frame,
    point: &'a AttachPoint,
    options: &'a Options,
    records: &'a mut Records,
    env: Env<'a>,
    /// Map number of the first stack-trace map.
    first_stack_map: usize,
    /// The stack-trace maps asked for so far, by every program.
    stack_maps: &'a mut Vec<(bool, u8)>,
    /// Stack offset of each scratch variable.
    vars: HashMap<String, i16>,
    /// `(continue, break)` targets of the loops around the code being generated, innermost last.
    loops: Vec<(Label, Label)>,
    spans: Vec<(usize, Span)>,
    /// The program's single exit, returning 0.
    exit: Label,
}

impl Gen<'_> {
    /// Zeroes `size` bytes (a multiple of 8) of stack at `fp + offset`.
    fn zero(&mut self, offset: i16, size: usize) {
        for at in (0..size).step_by(8) {
            self.asm.store_imm(Size::DW, Reg::FP, offset + at as i16, 0);
        }
    }

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
