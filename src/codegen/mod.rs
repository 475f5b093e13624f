//! Code generation: one BPF program per attach point, from the checked syntax tree.

pub mod calls;
mod elf_object;
mod expr;
mod first_writes;
pub mod frame;
mod full;
pub mod join;
pub mod layout;
mod located;
mod loops;
mod maps;
mod members;
pub mod packets;
mod pointers;
mod read_warnings;
pub mod record;
mod record_values;
mod search;
mod seq_printf;
pub mod session;
mod stdlib_strings;
mod stmt;
mod task_ids;
mod tseries;
mod tuples;
pub mod user_stack_copy;
mod values;

use crate::lang::ast::{Block, Expr, ExprKind, StmtKind};
use crate::lang::{Diagnostic, Span};
use crate::probes::{trigger::FIRST_ARG_OFFSET, AttachPoint, Place};
use crate::sema::maps::{MapDecl, MapTable};
use crate::sema::{Checked, CheckedProbe};
use bpf::features::Features;
use bpf::{Asm, Code, Cond, Helper, Label, MapKind, MapSpec, ProgType, Reg, Size};
use calls::FunctionCode;
pub use elf_object::elf_object;
use frame::Frame;
pub use layout::{FixedMap, MapLayout, ScriptMapId};
use record::Records;
use std::collections::HashMap;

/// Entries a script map holds at most (bpftrace's default).
const MAP_ENTRIES: u32 = 4096;
/// `BPF_RB_NO_WAKEUP`: a ring buffer record that does not wake its reader.
pub const RINGBUF_NO_WAKEUP: i32 = 1;
/// Size of the ring buffer of a script whose output comes from steadytrace's own probes (BEGIN, END,
/// intervals) only. The kernel maps all of a ring buffer's pages into the reader, twice, so its size is
/// resident memory from the start.
const EVENTS_BYTES: u32 = 1 << 20;
/// Size of the ring buffer where the kernel's events print: room for about 80 ms of one CPU printing as fast
/// as it can (a record per system call), so that a reader scheduled out for a while loses nothing
/// (benches/event_cost.py's "printf" row: none of 1,000,000 records lost, docs/BENCHMARKS.md).
const BURST_EVENTS_BYTES: u32 = 8 << 20;

/// What the runtime needs to know while compiling.
pub struct Options {
    /// CLOCK_MONOTONIC at start-up: `elapsed` counts from here.
    pub start_ns: u64,
    /// The value of `ncpus`: CPUs online at start-up.
    pub ncpus: u64,
    /// CPUs the machine can ever have: how many values a per-CPU map holds under each key.
    pub possible_cpus: u32,
    /// `-p PID`: probes that fire in any process (per-CPU perf probes) only act for this one.
    pub filter_pid: Option<u32>,
    /// `-c CMD`: the child's pid, the value of `cpid`.
    pub cpid: Option<u32>,
    /// `--unsafe`: `system()` and `signal()` are allowed.
    pub allow_unsafe: bool,
    /// The pid namespace steadytrace runs in (its nsfs device and inode) when it is not the initial one
    /// (a container's): `pid`, `tid` and `-p` are then the numbers seen there, as `cpid` is.
    pub pid_namespace: Option<(u64, u64)>,
    /// `--scope namespace`: with a `pid_namespace`, probes that fire in any process act only for its tasks.
    pub namespace_only: bool,
    /// `-k`: each probe read of the script's expressions that fails sends a warning (bpftrace's `-k`).
    pub read_warnings: bool,
}

/// A compiled script: maps to create, programs to load, and how to read their output.
pub struct Compiled {
    pub maps: Vec<MapSpec>,
    /// One per attach point; a program's index is its slot in the program array.
    pub programs: Vec<ProgramCode>,
    /// Runs on each call of the trigger function and tail-calls the program of the slot it was given.
    pub dispatcher: Code,
    pub records: Records,
    /// Which map number is which map.
    pub layout: MapLayout,
    /// The script's maps (`@name`), in map number order ([`MapLayout::script_maps`]).
    pub script_maps: Vec<MapDecl>,
    /// The stack-trace maps, one per (kernel or user, depth), numbered after the script's maps.
    pub stack_maps: Vec<(bool, u8)>,
    /// What the kernel offers, as the programs were compiled for it: the runtime loads and fires them so.
    pub features: std::sync::Arc<Features>,
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

/// Generates the programs of `checked`, the calls of builtin functions by `functions`.
pub fn compile(
    checked: &Checked,
    options: &Options,
    functions: &dyn FunctionCode,
) -> Result<Compiled, Errors> {
    let mut records = Records::default();
    let mut programs = vec![];
    // A stack-trace map per kind and depth of stack the script records, known before any code is made.
    let mut stack_maps: Vec<(bool, u8)> = vec![];
    for stack in checked.probes.iter().flat_map(|probe| &probe.types.stacks).filter(|s| !s.dwarf) {
        if !stack_maps.contains(&(stack.user, stack.depth)) {
            stack_maps.push((stack.user, stack.depth));
        }
    }
    let layout = MapLayout::new(checked.maps.decls.len(), stack_maps.len());
    // The largest scratch area a program needs: each program has an entry of that size in the scratch map.
    let mut scratch_size = 0;
    for probe in &checked.probes {
        for point_index in 0..probe.points.len() {
            let (program, scratch) = compile_one(
                checked,
                (probe, point_index),
                (options, functions),
                (layout, programs.len()),
                &mut records,
                &stack_maps,
            )?;
            programs.push(program);
            scratch_size = scratch_size.max(scratch);
        }
    }
    let mut maps: Vec<MapSpec> = FixedMap::ALL
        .iter()
        .map(|map| fixed_map_spec(*map, programs.len(), checked.maps.decls.len()))
        .collect();
    let kernel_prints = programs.iter().any(|p| {
        p.point.provider.schedule() == crate::probes::Schedule::Kernel
            && p.code.map_relocs.iter().any(|r| r.map == FixedMap::Events.index())
    });
    if kernel_prints {
        maps[FixedMap::Events.index()].max_entries = BURST_EVENTS_BYTES;
    }
    let script_maps: Vec<MapDecl> = checked.maps.decls.to_vec();
    for decl in &script_maps {
        let declared = checked.maps.declared.get(&decl.name);
        let lru = declared.is_some_and(|d| d.storage.is_lru());
        maps.push(MapSpec {
            name: if decl.name.is_empty() { "AT_".into() } else { format!("AT_{}", decl.name) },
            kind: match (decl.is_per_cpu(), lru) {
                (false, false) => MapKind::Hash,
                (false, true) => MapKind::LruHash,
                (true, false) => MapKind::PercpuHash,
                (true, true) => MapKind::LruPercpuHash,
            },
            key_size: decl.key_size() as u32,
            value_size: decl.value_size() as u32,
            max_entries: declared.map_or(MAP_ENTRIES, |d| d.max_entries),
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
    if !records.captures().is_empty() {
        // One perf event per CPU that may ever come online: a CPU's index is its slot.
        let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1).max(1) as u32;
        maps.push(MapSpec {
            name: "packets".into(),
            kind: MapKind::PerfEventArray,
            key_size: 4,
            value_size: 4,
            max_entries: cpus,
        });
    }
    if programs.iter().any(|p| p.code.map_relocs.iter().any(|r| r.map == SCRATCH_MAP)) {
        // Last, so that no other map's number moves: the programs named it by a placeholder until now.
        let index = maps.len();
        for reloc in programs.iter_mut().flat_map(|p| &mut p.code.map_relocs) {
            if reloc.map == SCRATCH_MAP {
                reloc.map = index;
            }
        }
        maps.push(MapSpec {
            name: "scratch".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: scratch_size.max(8) as u32,
            max_entries: programs.len() as u32,
        });
    }
    Ok(Compiled {
        maps,
        programs,
        dispatcher: dispatcher(),
        records,
        layout,
        script_maps,
        stack_maps,
        features: checked.features.clone(),
    })
}

/// The description of a map every script has, for a script of `programs` programs and `script_maps` maps.
fn fixed_map_spec(map: FixedMap, programs: usize, script_maps: usize) -> MapSpec {
    let (name, kind, key_size, value_size, max_entries) = match map {
        FixedMap::Events => ("events", MapKind::RingBuf, 0, 0, EVENTS_BYTES),
        FixedMap::Lost => ("lost", MapKind::PercpuArray, 4, 8, 1),
        FixedMap::Programs => ("programs", MapKind::ProgArray, 4, 4, programs.max(1) as u32),
        FixedMap::Exited => ("exited", MapKind::Array, 4, 8, 1),
        FixedMap::Dropped => ("dropped", MapKind::Array, 4, 8 * script_maps.max(1) as u32, 1),
    };
    MapSpec { name: name.into(), kind, key_size, value_size, max_entries }
}

/// `tail_call(ctx, programs, first argument of the trigger)`; returns 0 when the slot is empty.
fn dispatcher() -> Code {
    let mut asm = Asm::new();
    asm.load(Size::DW, Reg::R3, Reg::R1, FIRST_ARG_OFFSET);
    asm.ld_map(Reg::R2, FixedMap::Programs.index());
    asm.call(Helper::TailCall.id());
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("the dispatcher has no labels")
}

/// The map number programs name the scratch map by until the maps are numbered (it comes last).
const SCRATCH_MAP: usize = usize::MAX;

/// The program of the `point_index`th attach point of `probe`, the `index`th program, and the size of the
/// scratch area it needs (0 for none). It is generated with every value on the stack; when they do not fit,
/// again with a scratch area (its entry of the scratch map) holding the variables and large buffers.
fn compile_one(
    checked: &Checked,
    (probe, point_index): (&CheckedProbe, usize),
    (options, functions): (&Options, &dyn FunctionCode),
    (layout, index): (MapLayout, usize),
    records: &mut Records,
    stack_maps: &[(bool, u8)],
) -> Result<(ProgramCode, usize), Errors> {
    let before = records.clone();
    let mut overflowed = false;
    let attempt = (probe, point_index, None);
    match compile_program(
        checked,
        attempt,
        (options, functions),
        layout,
        records,
        stack_maps,
        &mut overflowed,
    ) {
        Err(_) if overflowed => {
            *records = before;
            let attempt = (probe, point_index, Some(index));
            compile_program(
                checked,
                attempt,
                (options, functions),
                layout,
                records,
                stack_maps,
                &mut overflowed,
            )
        }
        result => result,
    }
}

/// The program of the `point_index`th attach point of `probe`, with a scratch area when the program's index
/// in the scratch map is given; `overflowed` is set when some value found the stack full.
fn compile_program(
    checked: &Checked,
    (probe, point_index, scratch): (&CheckedProbe, usize, Option<usize>),
    (options, functions): (&Options, &dyn FunctionCode),
    layout: MapLayout,
    records: &mut Records,
    stack_maps: &[(bool, u8)],
    overflowed: &mut bool,
) -> Result<(ProgramCode, usize), Errors> {
    let mut asm = Asm::new();
    let exit = asm.new_label();
    let point = &probe.points[point_index];
    let mut gen = Gen {
        asm,
        frame: Frame::default(),
        point,
        point_index,
        options,
        functions,
        records,
        maps: &checked.maps,
        features: &checked.features,
        probe,
        layout,
        deleted_maps: maps_deleted_from(checked),
        stack_maps,
        vars: HashMap::new(),
        in_scratch: Default::default(),
        scratch_index: None,
        var_base: Reg::FP,
        callbacks: vec![],
        current_callback: None,
        loop_slots: None,
        count_callback: None,
        searches: vec![],
        loops: vec![],
        spans: vec![],
        exit,
        returned: None,
        expanded_from: vec![],
        refused: vec![],
        kept_pid_tgid: None,
    };
    let generated = generate(&mut gen, checked, scratch);
    *overflowed = gen.frame.overflowed();
    generated?;
    let code = gen.asm.finish().map_err(|e| match e {
        bpf::AsmError::JumpTooFar => Diagnostic::error(
            point.span,
            "this probe's program is too long: a jump spans more than the 32767 instructions BPF allows",
        )
        .with_help("unroll fewer times, or split the probe's work over several probes"),
        e => Diagnostic::error(point.span, format!("internal error assembling the program: {e:?}")),
    })?;
    let mut code = code;
    let mut spans = gen.spans;
    // The context is kept in r9 from the first instruction; a program that never reads it does without.
    let keeps_context = code.insns.first().is_some_and(|i| i.dst() == Reg::R9 && i.src() == Reg::R1);
    if keeps_context && !code.names_reg_from(1, Reg::R9) {
        code.remove_first();
        spans.iter_mut().for_each(|(at, _)| *at = at.saturating_sub(1));
    }
    let scratch_size = gen.frame.scratch_deepest();
    let program = ProgramCode { point: point.clone(), prog_type: point.provider.prog_type(), code, spans };
    helpers_available(&program, &checked.features)?;
    Ok((program, scratch_size))
}

/// The instructions of `gen`'s program, with a scratch area when the program's index in the scratch map is
/// given.
fn generate(gen: &mut Gen<'_>, checked: &Checked, scratch: Option<usize>) -> Result<(), Errors> {
    let (point, probe, options, exit) = (gen.point, gen.probe, gen.options, gen.exit);
    gen.asm.mov64_reg(Reg::R9, Reg::R1);
    // `return value;` (a test's verdict) is kept in a slot of the probe's frame, which loop callbacks reach
    // too, and handed back at the exit; every path to the exit passes its zeroing.
    if returns_value(&probe.body) {
        let slot = gen.frame.alloc(8, point.span)?;
        gen.zero(slot, 8);
        gen.returned = Some(slot);
    }
    // One system call among all those a `raw_syscalls` tracepoint sees: the cheapest test first. A number
    // kept in the saved registers is compared as 32 bits (arm64 keeps it in an `s32`).
    if let Some((place, value)) = point.provider.only_when() {
        match place {
            Place::Context(offset) => gen.asm.load(Size::DW, Reg::R0, Reg::R9, offset),
            Place::Behind { pointer, offset } => {
                let slot = gen.frame.alloc(8, point.span)?;
                gen.read_behind(pointer, offset, slot);
                gen.asm.load(Size::W, Reg::R0, Reg::FP, slot);
            }
        }
        gen.asm.jump_imm(Cond::Ne, Reg::R0, value, exit);
    }
    if let Some(offset) = point.provider.skips_when_zero() {
        gen.asm.load(Size::DW, Reg::R0, Reg::R9, offset);
        gen.asm.jump_imm(Cond::Eq, Reg::R0, 0, exit);
    }
    if let Some(Place::Behind { pointer, offset }) = point.provider.native_calls_only() {
        let compat = bpf::arch::HOST.compat_mode;
        let slot = gen.frame.alloc(8, point.span)?;
        gen.read_behind(pointer, offset, slot);
        gen.asm.load(Size::W, Reg::R0, Reg::FP, slot);
        gen.asm.alu64_imm(bpf::Alu::And, Reg::R0, compat.mask);
        gen.asm.jump_imm(Cond::Eq, Reg::R0, compat.user, exit);
    }
    // After `exit()`, the probes steadytrace fires itself (BEGIN, intervals) do nothing more: a timer firing
    // cannot slip in before the exit record is read. Kernel-fired probes skip the check (a memory load that
    // misses the cache on every cold event): they stop when they are detached, moments later.
    if point.provider.checks_exit_flag() {
        gen.asm.ld_map_value(Reg::R1, FixedMap::Exited.index());
        gen.asm.load(Size::DW, Reg::R1, Reg::R1, 0);
        gen.asm.jump_imm(Cond::Ne, Reg::R1, 0, exit);
    }
    if let (Some(pid), true) = (options.filter_pid, point.provider.fires_in_any_process()) {
        gen.pid_tgid(point.span)?;
        gen.asm.alu64_imm(bpf::Alu::Rsh, Reg::R0, 32);
        gen.asm.mov_u64(Reg::R1, pid as u64);
        gen.asm.jump_reg(Cond::Ne, Reg::R0, Reg::R1, exit);
    } else if options.namespace_only && point.provider.fires_in_any_process() {
        gen.exit_outside_pid_namespace(exit, point.span)?;
    }
    let mut callback_loops = vec![];
    find_callback_loops(&probe.body, &checked.features, &mut callback_loops);
    if let Some(index) = scratch {
        gen.scratch_area(index, point.span)?;
    }
    // Scratch variables get their slots once, in one area zeroed so that every read is defined; variables
    // of blocks never open at the same time share slots. With a scratch area, those over 64 bytes live there
    // in an area of their own (not where loops' callbacks reach them through the probe's frame pointer: the
    // helpers take no other pointer). The others stay on the stack, where the verifier knows their values.
    let in_scratch = gen.frame.has_scratch();
    let loop_vars: Vec<&String> = callback_loops.iter().map(|(_, _, var)| *var).collect();
    let large = |name: &String, ty: &crate::sema::types::Type| {
        ty.slot_size() > LARGE_VARIABLE && !loop_vars.contains(&name)
    };
    let (places, size) = variable_places(probe, &|name, ty| !(in_scratch && large(name, ty)));
    if size > 0 {
        let area = gen.frame.alloc(size, point.span)?;
        let written_first = first_writes::written_first(probe);
        let skipped: Vec<usize> =
            places.iter().filter(|(name, _)| written_first.contains(*name)).map(|(_, at)| *at).collect();
        for at in (0..size).step_by(8).filter(|at| !skipped.contains(at)) {
            gen.zero(area + at as i16, 8);
        }
        gen.vars = places.into_iter().map(|(name, at)| (name, area + at as i16)).collect();
    }
    let (places, size) = variable_places(probe, &|name, ty| in_scratch && large(name, ty));
    if let (true, Some(area)) = (size > 0, gen.frame.alloc_scratch(size, point.span)?) {
        gen.zero_at(frame::SCRATCH_BASE, area, size);
        for (name, at) in places {
            gen.in_scratch.insert(name.clone());
            gen.vars.insert(name, area + at as i16);
        }
    }
    if !callback_loops.is_empty() {
        let stop = gen.frame.alloc(8, point.span)?;
        let ctx = gen.frame.alloc(8, point.span)?;
        gen.asm.store_imm(Size::DW, Reg::FP, stop, 0);
        gen.asm.store(Size::DW, Reg::FP, ctx, Reg::R9);
        let mut range_starts = HashMap::new();
        for &(range, span, _) in &callback_loops {
            if range {
                range_starts.insert(span.start, gen.frame.alloc(8, span)?);
            }
        }
        gen.loop_slots = Some(loops::LoopSlots { stop, ctx, range_starts });
    }
    let once = task_ids::once(probe);
    if once == Some(task_ids::Once::BeforePredicate) {
        gen.keep_pid_tgid(point.span)?;
    }
    if let Some(predicate) = &probe.predicate {
        gen.spans.push((gen.asm.len(), predicate.span));
        gen.branch_unless(predicate, exit)?;
    }
    if once == Some(task_ids::Once::AtBodyStart) {
        gen.keep_pid_tgid(point.span)?;
    }
    gen.block(&probe.body)?;
    let exit = gen.exit;
    gen.asm.bind(exit);
    match gen.returned {
        Some(slot) => gen.asm.load(Size::DW, Reg::R0, Reg::FP, slot),
        None => gen.asm.mov64_imm(Reg::R0, 0),
    }
    gen.asm.exit();
    let probe_stack = gen.frame.deepest();
    gen.generate_callbacks(probe_stack)?;
    if !gen.refused.is_empty() {
        // Loop bodies are generated after the probe's: said in the script's order.
        gen.refused.sort_by_key(|d| (d.span.start, d.span.end));
        return Err(Errors(std::mem::take(&mut gen.refused)));
    }
    Ok(())
}

/// Every helper the program calls that is newer than the ring buffer is one this kernel has; else the
/// error points at the statement that calls it, instead of the verifier's "unknown func" at load.
fn helpers_available(program: &ProgramCode, features: &Features) -> Result<(), Diagnostic> {
    for (at, id) in program.code.helper_calls() {
        let Some(feature) = Helper::from_id(id).and_then(bpf::features::Feature::of_helper) else { continue };
        // The feature asks an fentry program; iterators have bpf_d_path wherever they have it at all.
        if feature == bpf::features::Feature::DPath && program.point.provider.iterates() {
            continue;
        }
        if !features.has(feature) {
            let span = program.span_of(at).unwrap_or(program.point.span);
            return Err(crate::kernel::needs(features, feature, "this", span));
        }
    }
    Ok(())
}

/// A variable larger than this many bytes lives in the scratch area, where the program has one.
const LARGE_VARIABLE: usize = 64;

/// Where each variable of a probe that `chosen` takes (by its name and type) goes, in bytes from the start of the
/// variables' area, and the area's size. A block's variables follow those of the blocks around it; sibling
/// blocks start at the same place.
fn variable_places(
    probe: &CheckedProbe,
    chosen: &dyn Fn(&String, &crate::sema::types::Type) -> bool,
) -> (HashMap<String, usize>, usize) {
    type Chosen<'c> = &'c dyn Fn(&String, &crate::sema::types::Type) -> bool;
    fn place(
        block: &Block,
        at: usize,
        (probe, chosen): (&CheckedProbe, Chosen<'_>),
        out: &mut HashMap<String, usize>,
        end: &mut usize,
    ) {
        let mut at = at;
        for name in probe.declarations.get(&block.span.start).into_iter().flatten() {
            if let Some(ty) = probe.vars.get(name).filter(|ty| chosen(name, ty)) {
                out.insert(name.clone(), at);
                at += ty.slot_size();
            }
        }
        *end = (*end).max(at);
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::If { then, otherwise, .. } => {
                    place(then, at, (probe, chosen), out, end);
                    if let Some(otherwise) = otherwise {
                        place(otherwise, at, (probe, chosen), out, end);
                    }
                }
                StmtKind::Unroll { body, .. }
                | StmtKind::While { body, .. }
                | StmtKind::For { body, .. }
                | StmtKind::Block(body) => place(body, at, (probe, chosen), out, end),
                _ => {}
            }
        }
        for inner in block.expr_blocks() {
            place(inner, at, (probe, chosen), out, end);
        }
    }
    let mut out = HashMap::new();
    let mut end = 0;
    place(&probe.body, 0, (probe, chosen), &mut out, &mut end);
    // Anything not placed by its block (none expected) gets a slot of its own after the rest.
    let mut rest: Vec<&String> = probe
        .vars
        .iter()
        .filter(|(name, ty)| !out.contains_key(*name) && chosen(name, ty))
        .map(|(name, _)| name)
        .collect();
    rest.sort();
    for name in rest {
        out.insert(name.clone(), end);
        end += probe.vars[name].slot_size();
    }
    (out, end)
}

/// The maps that `delete(@map[...])` statements anywhere in the script delete from.
fn maps_deleted_from(checked: &Checked) -> std::collections::HashSet<String> {
    fn walk(block: &Block, out: &mut std::collections::HashSet<String>) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Expr(Expr { kind: ExprKind::Call { name, args, .. }, .. }) if name == "delete" => {
                    if let Some(Expr { kind: ExprKind::Map { name, .. }, .. }) = args.first() {
                        out.insert(name.clone());
                    }
                }
                StmtKind::If { then, otherwise, .. } => {
                    walk(then, out);
                    if let Some(otherwise) = otherwise {
                        walk(otherwise, out);
                    }
                }
                StmtKind::Unroll { body, .. }
                | StmtKind::While { body, .. }
                | StmtKind::For { body, .. }
                | StmtKind::Block(body) => walk(body, out),
                _ => {}
            }
        }
        block.expr_blocks().into_iter().for_each(|inner| walk(inner, out));
    }
    let mut out = std::collections::HashSet::new();
    checked.probes.iter().for_each(|probe| walk(&probe.body, &mut out));
    out
}

/// The loops of a block, at any depth, whose bodies become callbacks: `for` over a map or a range, as
/// `(is a range, span of the loop, its variable)`.
fn find_callback_loops<'b>(block: &'b Block, features: &Features, out: &mut Vec<(bool, Span, &'b String)>) {
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::For { iterable, body, var, .. } => {
                match iterable.kind {
                    ExprKind::Map { .. } => out.push((false, stmt.span, var)),
                    // Without bpf_loop, a range loop is an ordinary loop in the probe.
                    ExprKind::Range { .. } if features.has(bpf::features::Feature::BpfLoop) => {
                        out.push((true, stmt.span, var))
                    }
                    _ => {}
                }
                find_callback_loops(body, features, out);
            }
            StmtKind::While { body, .. } | StmtKind::Unroll { body, .. } | StmtKind::Block(body) => {
                find_callback_loops(body, features, out)
            }
            StmtKind::If { then, otherwise, .. } => {
                find_callback_loops(then, features, out);
                if let Some(otherwise) = otherwise {
                    find_callback_loops(otherwise, features, out);
                }
            }
            _ => {}
        }
    }
    for inner in block.expr_blocks() {
        find_callback_loops(inner, features, out);
    }
}

/// The state of one program being generated.
pub struct Gen<'a> {
    pub(crate) asm: Asm,
    pub(crate) frame: Frame,
    pub(crate) point: &'a AttachPoint,
    /// The number of `point` among the probe's attach points.
    point_index: usize,
    pub(crate) options: &'a Options,
    /// The code of builtin function calls.
    functions: &'a dyn FunctionCode,
    records: &'a mut Records,
    /// The script's maps.
    maps: &'a MapTable,
    /// What the kernel offers (the answers sema had).
    pub(crate) features: &'a Features,
    /// The probe being generated, with the facts sema learnt of its expressions.
    probe: &'a CheckedProbe,
    /// Which map number is which map.
    layout: MapLayout,
    /// The maps some probe of the script deletes entries from.
    deleted_maps: std::collections::HashSet<String>,
    /// The stack-trace maps, by kind and depth (`Checked` lists the stacks the script records).
    stack_maps: &'a [(bool, u8)],
    /// Stack offset of each scratch variable, from `var_base` (from [`frame::SCRATCH_BASE`] for those
    /// `in_scratch`).
    vars: HashMap<String, i16>,
    /// The variables that live in the scratch area.
    in_scratch: std::collections::HashSet<String>,
    /// The program's entry in the scratch map, where it has a scratch area.
    scratch_index: Option<usize>,
    /// Where the variables are: the frame pointer, or in a loop's callback (whose own frame holds only
    /// its temporaries) a register pointing at the probe's frame.
    var_base: Reg,
    /// Loop bodies to generate as callbacks after the probe's code.
    callbacks: Vec<loops::Callback>,
    /// The callback being generated, if any.
    current_callback: Option<usize>,
    /// Slots of the probe's frame that map loops need, when the probe has one.
    loop_slots: Option<loops::LoopSlots>,
    /// The callback of `len()`, shared by every `len()` of the program.
    count_callback: Option<Label>,
    /// The `strcontains()` search callbacks, one per pair of string sizes.
    searches: Vec<search::Search>,
    /// `(continue, break)` targets of the loops around the code being generated, innermost last.
    loops: Vec<(Label, Label)>,
    spans: Vec<(usize, Span)>,
    /// The program's single exit, returning 0 or the value of a `return value;`.
    exit: Label,
    /// The slot of the probe's frame holding the value `return value;` gave, when the probe has one.
    returned: Option<i16>,
    /// While a call statement macro expansions brought is emitted: the places of those macro calls, innermost
    /// first (`errorf`/`warnf` name them).
    expanded_from: Vec<Span>,
    /// What a pinned iterator cannot do, each at its place: all said together once the program is generated.
    refused: Vec<Diagnostic>,
    /// The slot of the probe's frame holding `bpf_get_current_pid_tgid`'s value, where the program calls it
    /// once for all its reads (`task_ids.rs`), and the instruction after its store.
    kept_pid_tgid: Option<(i16, usize)>,
}

/// Errors of code generation: one, or every refusal of a program (each where the script asks for it).
#[derive(Debug)]
pub struct Errors(pub Vec<Diagnostic>);

impl From<Diagnostic> for Errors {
    fn from(diagnostic: Diagnostic) -> Errors {
        Errors(vec![diagnostic])
    }
}

/// Whether a `return value;` is among the statements.
fn returns_value(block: &crate::lang::ast::Block) -> bool {
    use crate::lang::ast::StmtKind;
    block.stmts.iter().any(|stmt| match &stmt.kind {
        StmtKind::Return(value) => value.is_some(),
        StmtKind::If { then, otherwise, .. } => {
            returns_value(then) || otherwise.as_ref().is_some_and(returns_value)
        }
        StmtKind::Unroll { body, .. }
        | StmtKind::While { body, .. }
        | StmtKind::For { body, .. }
        | StmtKind::Block(body) => returns_value(body),
        _ => false,
    })
}

impl Gen<'_> {
    /// The tracepoint field `name` as this program's tracepoint lays it out: the probe's tracepoints agree on
    /// its type (checked), not on its offset.
    fn point_field(&self, name: &str, span: Span) -> Result<crate::kernel::tracefs::Field, Diagnostic> {
        self.probe.types.point_field(self.point_index, name, span).cloned()
    }

    /// Where variable `name` is: a base register and an offset from it.
    pub(crate) fn var(&self, name: &str) -> (Reg, i16) {
        let base = match (self.in_scratch.contains(name), self.current_callback) {
            (false, _) => self.var_base,
            (true, None) => frame::SCRATCH_BASE,
            (true, Some(_)) => frame::SCRATCH_BASE_IN_CALLBACK,
        };
        (base, self.vars[name])
    }

    /// Zeroes `size` bytes (a multiple of 8) of stack at `fp + offset`.
    pub(crate) fn zero(&mut self, offset: i16, size: usize) {
        self.zero_at(Reg::FP, offset, size);
    }

    /// Zeroes `size` bytes (a multiple of 8) at `base + offset`.
    pub(crate) fn zero_at(&mut self, base: Reg, offset: i16, size: usize) {
        for at in (0..size).step_by(8) {
            self.asm.store_imm(Size::DW, base, offset + at as i16, 0);
        }
    }

    /// Points [`frame::SCRATCH_BASE`] at the program's entry `index` of the scratch map for the rest of
    /// the program, which ends here if the map has none (it always has).
    fn scratch_area(&mut self, index: usize, span: Span) -> Result<(), Diagnostic> {
        let mark = self.frame.mark();
        let key = self.frame.alloc(4, span)?;
        self.asm.store_imm(Size::W, Reg::FP, key, index as i32);
        self.asm.ld_map(Reg::R1, SCRATCH_MAP);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R2, key as i32);
        self.asm.call(Helper::MapLookupElem.id());
        self.exit_if_zero(Reg::R0);
        self.asm.mov64_reg(frame::SCRATCH_BASE, Reg::R0);
        self.frame.release_to(mark);
        self.frame.use_scratch();
        self.scratch_index = Some(index);
        Ok(())
    }

    /// `size` bytes for a buffer: in the scratch area when the program has one and the buffer is `large`,
    /// else on the stack; as a base register and an offset from it.
    pub(crate) fn buffer(&mut self, size: usize, large: bool, span: Span) -> Result<(Reg, i16), Diagnostic> {
        if large {
            if let Some(at) = self.frame.alloc_scratch(size, span)? {
                let base = match self.current_callback {
                    None => frame::SCRATCH_BASE,
                    Some(_) => frame::SCRATCH_BASE_IN_CALLBACK,
                };
                return Ok((base, at));
            }
        }
        Ok((Reg::FP, self.frame.alloc(size, span)?))
    }

    /// Sends `size` bytes at `fp + offset` to the ring buffer, counting a refusal as a lost record.
    /// The reader is not woken: it looks every [`OUTPUT_POLL`](crate::runtime::OUTPUT_POLL) (a wake-up per
    /// record costs the probe more than the record itself).
    fn output(&mut self, offset: i16, size: usize, span: Span) -> Result<(), Diagnostic> {
        self.refuse_when_pinned(span)?;
        self.output_flags(offset, size, span, RINGBUF_NO_WAKEUP)
    }

    /// Sends a warning's record (a map update that failed, a division by zero, a loop cut short); a pinned
    /// iterator has nobody to tell, and sends nothing.
    fn output_warning(&mut self, offset: i16, size: usize, span: Span) -> Result<(), Diagnostic> {
        match self.point.provider.pinned_at() {
            Some(_) => Ok(()),
            None => self.output(offset, size, span),
        }
    }

    /// What steadytrace prints or does for a probe needs steadytrace there: a pinned iterator's program runs
    /// when its file is read, after steadytrace has gone, and can only `printf` into that file.
    /// (Noted, and generation goes on: every such place is said.)
    pub(crate) fn refuse_when_pinned(&mut self, span: Span) -> Result<(), Diagnostic> {
        if let Some(pin) = self.point.provider.pinned_at() {
            let refusal = Diagnostic::error(span, "a pinned iterator can only printf() into its file").with_help(format!(
                "the program runs whenever {} is read, after steadytrace has gone: nothing else it prints or asks for reaches anybody (drop the pin to have this)",
                pin.display()
            ));
            if !self.refused.iter().any(|r| r.span == span) {
                self.refused.push(refusal);
            }
        }
        Ok(())
    }

    /// Sends a record and wakes the reader at once (the exit record).
    fn output_waking(&mut self, offset: i16, size: usize, span: Span) -> Result<(), Diagnostic> {
        self.output_flags(offset, size, span, 0)
    }

    fn output_flags(&mut self, offset: i16, size: usize, span: Span, flags: i32) -> Result<(), Diagnostic> {
        self.output_from(Reg::FP, offset, size, span, flags)
    }

    /// Sends `size` bytes at `base + offset` (the stack or the scratch area) to the ring buffer.
    fn output_from(
        &mut self,
        base: Reg,
        offset: i16,
        size: usize,
        span: Span,
        flags: i32,
    ) -> Result<(), Diagnostic> {
        self.asm.ld_map(Reg::R1, FixedMap::Events.index());
        self.asm.mov64_reg(Reg::R2, base);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R2, offset as i32);
        self.asm.mov64_imm(Reg::R3, size as i32);
        self.asm.mov64_imm(Reg::R4, flags);
        self.asm.call(Helper::RingbufOutput.id());
        let sent = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, Reg::R0, 0, sent);
        self.count_lost_record(span)?;
        self.asm.bind(sent);
        Ok(())
    }

    /// Counts a record the ring buffer refused (said as lost events).
    pub(crate) fn count_lost_record(&mut self, span: Span) -> Result<(), Diagnostic> {
        let counted = self.asm.new_label();
        let key = self.frame.alloc(4, span)?;
        self.asm.store_imm(Size::W, Reg::FP, key, 0);
        self.asm.ld_map(Reg::R1, FixedMap::Lost.index());
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R2, key as i32);
        self.asm.call(Helper::MapLookupElem.id());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, counted);
        self.asm.load(Size::DW, Reg::R1, Reg::R0, 0);
        self.asm.alu64_imm(bpf::Alu::Add, Reg::R1, 1);
        self.asm.store(Size::DW, Reg::R0, 0, Reg::R1);
        self.asm.bind(counted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelTypes;

    fn places(script: &str) -> (HashMap<String, usize>, usize) {
        let parsed = crate::lang::parse(script).expect("parses");
        let checked = crate::sema::check(
            &parsed,
            &Default::default(),
            &crate::sema::env::NoFunctions,
            &KernelTypes::none(),
        )
        .expect("checks");
        variable_places(&checked.probes[0], &|_, _| true)
    }

    #[test]
    fn variables_of_sibling_blocks_share_stack() {
        let (at, size) =
            places(r#"BEGIN { $n = 1; if ($n) { $a = "x"; $b = 2; } else { $c = 3; } { $d = (1, 2); } }"#);
        assert_eq!(at["n#1"], 0);
        assert_eq!((at["a#1"], at["b#1"]), (8, 16));
        assert_eq!(at["c#1"], 8);
        assert_eq!(at["d#1"], 8);
        assert_eq!(size, 24);
    }

    #[test]
    fn a_loop_variable_lives_in_its_body() {
        let (at, size) = places("BEGIN { $n = 1; for ($i : 0..3) { $x = $i; } for ($j : 0..3) { } }");
        assert_eq!((at["i#1"], at["x#1"], at["j#1"]), (8, 16, 8));
        assert_eq!(size, 24);
    }
    /// The instructions of the first program of `script`, compiled against the fixture kernel's types.
    fn disassembled(script: &str) -> String {
        let compiled = compiled(script);
        bpf::disasm::disassemble(&compiled.programs[0].code, &|map| format!("map{map}"))
    }

    /// `script` compiled against the fixture kernel's types.
    fn compiled(script: &str) -> Compiled {
        let parsed = crate::lang::parse(script).expect("parses");
        let kernel = crate::kernel::fixture::kernel_with(parsed.c_types.clone());
        let checked = crate::sema::check(&parsed, &Default::default(), &crate::functions::TABLE, &kernel)
            .expect("checks");
        let options = Options {
            start_ns: 0,
            ncpus: 1,
            possible_cpus: 1,
            filter_pid: None,
            cpid: None,
            allow_unsafe: false,
            pid_namespace: None,
            namespace_only: false,
            read_warnings: false,
        };
        compile(&checked, &options, &crate::functions::TABLE).expect("compiles")
    }

    #[test]
    fn values_too_big_for_the_stack_live_in_the_scratch_map() {
        let script = r#"struct Big { char x[400]; int y; }
            BEGIN { $a = *(struct Big *)0; $b = *(struct Big *)0; printf("%d %d\n", $a.y, $b.y); }
            END { printf("%d\n", 1); }"#;
        let compiled = compiled(script);
        let scratch = compiled.maps.last().expect("maps");
        assert_eq!((scratch.name.as_str(), scratch.kind), ("scratch", MapKind::PercpuArray));
        // An entry per program, holding both variables and the struct read.
        assert_eq!(scratch.max_entries, 2);
        assert!(scratch.value_size >= 3 * 400, "{}", scratch.value_size);
        let code = bpf::disasm::disassemble(&compiled.programs[0].code, &|map| format!("map{map}"));
        assert!(code.contains("r8 = r0"), "{code}");
        let last = compiled.maps.len() - 1;
        assert!(compiled.programs[0].code.map_relocs.iter().any(|r| r.map == last));
        // END fits on the stack: no scratch area.
        assert!(!compiled.programs[1].code.map_relocs.iter().any(|r| r.map == last));
    }

    #[test]
    fn a_program_that_fits_the_stack_has_no_scratch_map() {
        let compiled = compiled(r#"BEGIN { $a = 1; $s = "x"; printf("%d %s\n", $a, $s); }"#);
        assert!(compiled.maps.iter().all(|map| map.name != "scratch"));
    }

    /// How many times the first program of `script` calls `bpf_get_current_pid_tgid`.
    fn pid_tgid_calls(script: &str) -> usize {
        disassembled(script).lines().filter(|l| l.ends_with("call get_current_pid_tgid")).count()
    }

    #[test]
    fn the_task_ids_are_read_once_where_every_run_reads_them() {
        // The predicate reads them on every evaluation: once, before it.
        assert_eq!(pid_tgid_calls(r#"profile:hz:99 /pid == 5/ { printf("%d\n", tid); }"#), 1);
        assert_eq!(
            pid_tgid_calls("profile:hz:99 /pid == 5/ { @[pid, comm] = count(); @u[ustack] = count(); }"),
            1
        );
        // The body's first statements do: once, after the predicate.
        let code = disassembled("profile:hz:99 /cpu == 0/ { @[tid] = count(); @p[pid] = count(); }");
        let lines: Vec<&str> = code.lines().collect();
        let at = |text: &str| lines.iter().position(|l| l.ends_with(text)).expect(text);
        assert!(at("call get_smp_processor_id") < at("call get_current_pid_tgid"), "{code}");
        assert_eq!(lines.iter().filter(|l| l.ends_with("call get_current_pid_tgid")).count(), 1, "{code}");
        // A loop's body reads the kept value through the probe's frame pointer.
        let code = disassembled("profile:hz:99 /pid == 5/ { for ($i : 0..3) { @[tid, $i] = count(); } }");
        assert_eq!(code.lines().filter(|l| l.ends_with("call get_current_pid_tgid")).count(), 1, "{code}");
        // One read, or reads only some runs make: as before, where they are.
        assert_eq!(pid_tgid_calls("profile:hz:99 /pid == 5/ { @ = count(); }"), 1);
        assert_eq!(pid_tgid_calls("profile:hz:99 /cpu == 0 && pid == 5/ { @[tid] = count(); }"), 2);
        assert_eq!(
            pid_tgid_calls("profile:hz:99 { if (cpu == 0) { @[tid] = count(); } @p[pid] = count(); }"),
            2
        );
        let code = disassembled(
            "profile:hz:99 /cpu == 0/ { if (cpu == 1) { @[tid] = count(); @p[pid] = count(); } }",
        );
        let lines: Vec<&str> = code.lines().collect();
        let calls = |name: &str| lines.iter().filter(|l| l.ends_with(name)).count();
        assert_eq!(
            (calls("call get_smp_processor_id"), calls("call get_current_pid_tgid")),
            (2, 2),
            "{code}"
        );
    }

    #[test]
    fn linear_buckets_shift_by_a_power_of_2_step_and_test_only_the_bounds_a_value_can_cross() {
        let code = disassembled("profile:hz:99 { @l = lhist(nsecs & 0xff, 0, 256, 16); }");
        assert!(code.contains("r1 >>= 4"), "{code}");
        assert!(!code.contains("/=") && !code.contains(" s< ") && !code.contains(" s> "), "{code}");
        let code = disassembled("profile:hz:99 { @l = lhist(nsecs & 0xfff, 0, 256, 16); }");
        assert!(code.contains("if r6 s> 256 goto") && !code.contains(" s< "), "{code}");
        let code = disassembled("profile:hz:99 { @l = lhist(cpu, 10, 100, 30); }");
        assert!(
            code.contains("if r6 s< 10 goto") && code.contains("r1 -= 10") && code.contains("r1 /= r2"),
            "{code}"
        );
        let code = disassembled("profile:hz:99 { @h = hist(nsecs % 1000); }");
        assert!(!code.contains("s< 0"), "{code}");
        assert!(code.contains("if r2 < 0x10000 goto") || code.contains("if r2 < 65536 goto"), "{code}");
    }

    #[test]
    fn kernel_members_are_read_where_the_kernels_btf_puts_them() {
        let code = disassembled("BEGIN { @ = curtask->parent->pid; @s = sizeof(struct task_struct); }");
        let lines: Vec<&str> = code.lines().map(|l| l.split_once(": ").map_or(l, |(_, i)| i)).collect();
        let at = |insn: &str| lines.iter().position(|l| *l == insn);
        let (parent, pid) = (at("r6 += 8").expect("`parent` at 8"), at("r6 += 4").expect("`pid` at 4"));
        assert!(parent < pid, "{code}");
        assert_eq!(lines[pid + 5], "r2 = 4", "`pid` is 4 bytes:\n{code}");
        assert!(at("*(u64 *)(r10 -8) = 40").is_some(), "sizeof 40:\n{code}");
    }
}
