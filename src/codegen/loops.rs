//! Loops whose body is a callback subprogram that a kernel helper calls: `for ($kv : @map) { ... }` and
//! `len(@map)` on `bpf_for_each_map_elem` (Linux 5.13), which calls it once per entry and returns how many
//! entries it visited; `for ($i : a..b) { ... }` on `bpf_loop` (Linux 5.17), which calls it b - a times.
//! The verifier checks such a body about twice, however many times it runs, so bounds may be known only at
//! run time and be large.
//!
//! A loop body becomes a callback, placed after the probe's own code. It runs in a frame of its own,
//! so the variables stay in the probe's frame: the probe passes its frame pointer as the callback's
//! context, and the callback reaches every variable through R8. The probe's context (for `args`,
//! `arg0`, stacks) is spilled in the probe's frame and reloaded into R9. `continue` returns 0 (go on),
//! `break` returns 1 (stop); `return` and `exit()` also set a flag in the probe's frame that the probe
//! checks when the helper returns, to leave at once.
//!
//! Kernels without `bpf_loop` (5.10 to 5.16) get range loops as ordinary loops in the program instead
//! ([`Gen::for_range_bounded`]); without `bpf_for_each_map_elem` (before 5.13) a map loop is an error.

use super::Gen;
use crate::kernel;
use crate::lang::ast::{Block, Expr, ExprKind, StmtKind, UnOp};
use crate::lang::{Diagnostic, Span};
use crate::sema::constant;
use crate::sema::maps::{Agg, MapValue};
use crate::sema::types::Type;
use bpf::features::Feature;
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

/// A loop body waiting to be generated as a callback.
#[derive(Clone)]
pub(super) struct Callback {
    label: Label,
    var: String,
    over: Iterated,
    body: Block,
    span: Span,
    /// The callback whose body holds this loop; `None` for a loop in the probe's own body.
    parent: Option<usize>,
}

/// What a loop goes over.
#[derive(Clone)]
enum Iterated {
    Map(String),
    /// A range; its start is kept in the probe's frame at this offset.
    Range {
        start: i16,
    },
}

/// The probe-frame slots that loops share, allocated when a probe has a callback loop.
#[derive(Clone)]
pub(super) struct LoopSlots {
    /// Set when a callback ran `return` or `exit()`: the probe must end.
    pub stop: i16,
    /// The probe's context (R9), spilled for callbacks.
    pub ctx: i16,
    /// Where each range loop (by the start of its span) keeps its first value.
    pub range_starts: std::collections::HashMap<usize, i16>,
}

/// Instructions of loop body the verifier may walk for a range loop on a kernel without `bpf_loop`: a
/// quarter of the million it walks in all, leaving the rest for the code around the loop.
const BOUNDED_LOOP_WORK: usize = 250_000;

/// Branches the verifier may keep to come back to for a range loop of run-time bounds on a kernel without
/// `bpf_loop`: a quarter of the 8192 it keeps at most (a loop test may leave two).
const BOUNDED_LOOP_BRANCHES: usize = 2048;

/// The kernel's limit on the stack of all frames of a call chain together.
const CHAIN_STACK: usize = 512;

impl Gen<'_> {
    /// The call of `bpf_for_each_map_elem` for `for ($var : @map) { body }`.
    pub(crate) fn for_each_entry(
        &mut self,
        var: &str,
        map: &str,
        body: &Block,
        span: Span,
    ) -> Result<(), Diagnostic> {
        if !self.features.has(Feature::ForEachMapElem) {
            return Err(kernel::needs(
                self.features,
                Feature::ForEachMapElem,
                &format!("`for` over @{map}"),
                span,
            ));
        }
        let label = self.queue_callback(var, Iterated::Map(map.to_string()), body, span);
        self.visit_entries(map, label);
        self.stop_if_asked(span)
    }

    /// `for ($var : from..to) { body }`: `bpf_loop(to - from, callback, var_base, 0)`, no iteration when
    /// `to <= from`. The start is kept in the probe's frame, where the callback adds the iteration number.
    pub(crate) fn for_range(
        &mut self,
        var: &str,
        (from, to): (&Expr, &Expr),
        body: &Block,
        span: Span,
    ) -> Result<(), Diagnostic> {
        if !self.features.has(Feature::BpfLoop) {
            return self.for_range_bounded(var, (from, to), body, span);
        }
        let start = self.loop_slots.as_ref().and_then(|slots| slots.range_starts.get(&span.start).copied());
        let start =
            start.ok_or_else(|| Diagnostic::error(span, "internal error: a range loop without its slot"))?;
        let first = self.int(from)?;
        self.store_val_at(first, self.var_base, start);
        let end = self.int(to)?;
        let reg = self.reg_of(end, Reg::R2);
        self.asm.mov64_reg(Reg::R2, reg);
        self.frame.release(end);
        self.asm.load(Size::DW, Reg::R3, self.var_base, start);
        // No iteration at all when to <= from.
        let done = self.asm.new_label();
        self.asm.jump_reg(Cond::SLe, Reg::R2, Reg::R3, done);
        self.asm.mov64_reg(Reg::R1, Reg::R2);
        self.asm.alu64_reg(Alu::Sub, Reg::R1, Reg::R3);
        let label = self.queue_callback(var, Iterated::Range { start }, body, span);
        self.asm.ld_func(Reg::R2, label);
        self.asm.mov64_reg(Reg::R3, self.var_base);
        self.asm.mov64_imm(Reg::R4, 0);
        self.asm.call(Helper::Loop.id());
        self.stop_if_asked(span)?;
        self.asm.bind(done);
        Ok(())
    }

    /// `for ($var : from..to) { body }` where the kernel has no `bpf_loop` (before 5.17): an ordinary loop
    /// in the program, which the verifier walks once per iteration (bounded loops, 5.3). It runs at most as
    /// many times as the verifier can walk ([`BOUNDED_LOOP_WORK`], and [`BOUNDED_LOOP_BRANCHES`] for bounds
    /// known only at run time): more is an error for constant bounds, and a warning when it happens for others.
    fn for_range_bounded(
        &mut self,
        var: &str,
        (from, to): (&Expr, &Expr),
        body: &Block,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let (next_value, end_value, iterations) =
            (self.frame.alloc(8, span)?, self.frame.alloc(8, span)?, self.frame.alloc(8, span)?);
        let first = self.int(from)?;
        self.store_val_at(first, Reg::FP, next_value);
        let end = self.int(to)?;
        self.store_val_at(end, Reg::FP, end_value);
        self.asm.store_imm(Size::DW, Reg::FP, iterations, 0);
        let (top, next, done) = (self.asm.new_label(), self.asm.new_label(), self.asm.new_label());
        self.asm.bind(top);
        self.asm.load(Size::DW, Reg::R1, Reg::FP, next_value);
        self.asm.load(Size::DW, Reg::R2, Reg::FP, end_value);
        self.asm.jump_reg(Cond::SGe, Reg::R1, Reg::R2, done);
        let (base, at) = self.var(var);
        self.asm.store(Size::DW, base, at, Reg::R1);
        self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
        self.asm.store(Size::DW, Reg::FP, next_value, Reg::R1);
        let body_start = self.asm.len();
        self.loops.push((next, done));
        let falls = self.block(body)?;
        self.loops.pop();
        self.spans.push((self.asm.len(), span));
        // Known now: how long the body is, so how many times the verifier can walk it. With a bound known
        // only at run time, each iteration also leaves the verifier a way out to come back to, and each
        // branch of the body one more: it keeps at most 8192 such.
        let mut most = (BOUNDED_LOOP_WORK / (self.asm.len() - body_start + 8)).max(1);
        let bounds = (constant(from), constant(to));
        if bounds.0.is_none() || bounds.1.is_none() {
            let pending = 1 + self.asm.conditional_jumps_since(body_start);
            most = most.min(BOUNDED_LOOP_BRANCHES / pending).max(1);
        }
        if let (Some(from), Some(to)) = bounds {
            let times = to.saturating_sub(from).max(0) as usize;
            if times > most {
                return Err(kernel::needs(
                    self.features,
                    Feature::BpfLoop,
                    &format!("a range loop of {times} iterations (at most {most} without it)"),
                    span,
                ));
            }
        }
        if falls || self.asm.is_jumped_to(next) {
            self.asm.bind(next);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, iterations);
            self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
            self.asm.store(Size::DW, Reg::FP, iterations, Reg::R1);
            self.asm.jump_imm(Cond::ULt, Reg::R1, most as i32, top);
            // Cut short with values left: say so, as the event happens.
            self.asm.load(Size::DW, Reg::R1, Reg::FP, next_value);
            self.asm.load(Size::DW, Reg::R2, Reg::FP, end_value);
            self.asm.jump_reg(Cond::SGe, Reg::R1, Reg::R2, done);
            let id = self.records.add(super::record::Record::LoopCut { span, most, warning: String::new() });
            self.asm.store_imm(Size::DW, Reg::FP, iterations, id as i32);
            self.output_warning(iterations, 8, span)?;
        }
        self.asm.bind(done);
        Ok(())
    }

    fn queue_callback(&mut self, var: &str, over: Iterated, body: &Block, span: Span) -> Label {
        let label = self.asm.new_label();
        let parent = self.current_callback;
        self.callbacks.push(Callback { label, var: var.to_string(), over, body: body.clone(), span, parent });
        label
    }

    /// After a callback loop: leave the probe when the body ran `return` or `exit()`.
    fn stop_if_asked(&mut self, span: Span) -> Result<(), Diagnostic> {
        let stop = self.loop_slots.as_ref().map(|slots| slots.stop).ok_or_else(|| {
            Diagnostic::error(span, "internal error: a callback loop in a probe without loop slots")
        })?;
        self.asm.load(Size::DW, Reg::R1, self.var_base, stop);
        self.asm.jump_imm(Cond::Ne, Reg::R1, 0, self.exit);
        Ok(())
    }

    /// `len(@map)`: the helper's count of entries, with a callback that only goes on.
    pub(crate) fn map_len(&mut self, map: &str, span: Span) -> Result<(), Diagnostic> {
        if !self.features.has(Feature::ForEachMapElem) {
            return Err(kernel::needs(self.features, Feature::ForEachMapElem, &format!("len(@{map})"), span));
        }
        let label = match self.count_callback {
            Some(label) => label,
            None => *self.count_callback.insert(self.asm.new_label()),
        };
        self.visit_entries(map, label);
        Ok(())
    }

    /// `r0 = bpf_for_each_map_elem(map, callback, var_base, 0)`
    fn visit_entries(&mut self, map: &str, callback: Label) {
        let (map, _) = self.decl(map);
        self.asm.ld_map(Reg::R1, map);
        self.asm.ld_func(Reg::R2, callback);
        self.asm.mov64_reg(Reg::R3, self.var_base);
        self.asm.mov64_imm(Reg::R4, 0);
        self.asm.call(Helper::ForEachMapElem.id());
    }

    /// Generates the callbacks asked for so far (and those their bodies ask for), after the probe's
    /// code; `probe_stack` is the stack the probe's own frame uses.
    pub(crate) fn generate_callbacks(&mut self, probe_stack: usize) -> Result<(), Diagnostic> {
        // Stack of the whole call chain down to and including each callback.
        let mut chains: Vec<usize> = vec![];
        let mut next = 0;
        while let Some(callback) = self.callbacks.get(next).cloned() {
            let own = self.callback(&callback, next)?;
            let above = callback.parent.map_or(frame_size(probe_stack), |p| chains[p]);
            let chain = above + frame_size(own);
            if chain > CHAIN_STACK {
                self.frame.set_overflowed();
                return Err(Diagnostic::error(
                    callback.span,
                    format!("this loop and the code around it need {chain} bytes of stack, more than the {CHAIN_STACK} a BPF program has"),
                )
                .with_help("use fewer or shorter string variables, or move work out of the loop"));
            }
            chains.push(chain);
            next += 1;
        }
        // Last: `len()` and `strcontains()` may be used in any callback's body. Their frames hold nothing.
        if let Some(label) = self.count_callback {
            self.asm.bind(label);
            self.asm.mov64_imm(Reg::R0, 0);
            self.asm.exit();
        }
        self.generate_searches();
        Ok(())
    }

    /// One callback: `(map, key, value, probe frame)` in R1-R4 for a map, `(index, probe frame)` in R1-R2
    /// for a range. Returns the stack its frame uses.
    fn callback(&mut self, callback: &Callback, index: usize) -> Result<usize, Diagnostic> {
        let slots = self.loop_slots.clone().expect("a probe with callbacks has loop slots");
        let stop = self.asm.new_label();
        let frame = match self.scratch_index {
            Some(_) => super::frame::Frame::for_callback_with_scratch(self.frame.scratch_deepest()),
            None => super::frame::Frame::for_callback(),
        };
        let saved_frame = std::mem::replace(&mut self.frame, frame);
        let saved_loops = std::mem::take(&mut self.loops);
        let saved = (self.exit, self.var_base, self.current_callback);
        (self.exit, self.var_base, self.current_callback) = (stop, Reg::R8, Some(index));

        self.asm.bind(callback.label);
        self.spans.push((self.asm.len(), callback.span));
        let var = self.vars[&callback.var];
        match &callback.over {
            Iterated::Map(map) => {
                self.asm.mov64_reg(Reg::R8, Reg::R4);
                self.asm.load(Size::DW, Reg::R9, Reg::R8, slots.ctx);
                let Some(Type::Tuple(entry)) = self.probe.vars.get(&callback.var).cloned() else {
                    return Err(Diagnostic::error(
                        callback.span,
                        "internal error: a loop variable that is no entry",
                    ));
                };
                let key_size = entry[0].slot_size();
                self.copy_from_pointer(Reg::R2, var, key_size);
                let value = var + key_size as i16;
                match self.decl(map).1.value {
                    MapValue::Plain(ty) => self.copy_from_pointer(Reg::R3, value, ty.slot_size()),
                    MapValue::Agg(agg) => self.merge_cpus(
                        map,
                        agg,
                        (self.var_base, var),
                        (self.var_base, value),
                        callback.span,
                    )?,
                }
            }
            Iterated::Range { start } => {
                self.asm.mov64_reg(Reg::R8, Reg::R2);
                self.asm.load(Size::DW, Reg::R9, Reg::R8, slots.ctx);
                self.asm.load(Size::DW, Reg::R2, Reg::R8, *start);
                self.asm.alu64_reg(Alu::Add, Reg::R1, Reg::R2);
                self.asm.store(Size::DW, Reg::R8, var, Reg::R1);
            }
        }
        if let Some(index) = self.scratch_index {
            self.scratch_in_callback(index, callback.span)?;
        }
        let mut written = vec![];
        assigned_vars(&callback.body, &mut written);
        written.sort();
        written.dedup();
        // (The verifier knows nothing of what the scratch area holds.)
        written.retain(|name| !self.in_scratch.contains(name));
        for name in written {
            if let Some(ty) = self.probe.vars.get(&name) {
                self.forget_value(self.vars[&name], ty.slot_size());
            }
        }

        let (next, end) = (self.asm.new_label(), self.asm.new_label());
        self.loops.push((next, end));
        let falls = self.block(&callback.body)?;
        // Each way out only where something goes: the verifier rejects unreachable code.
        if falls || self.asm.is_jumped_to(next) {
            self.asm.bind(next);
            self.asm.mov64_imm(Reg::R0, 0);
            self.asm.exit();
        }
        if self.asm.is_jumped_to(end) {
            self.asm.bind(end);
            self.asm.mov64_imm(Reg::R0, 1);
            self.asm.exit();
        }
        if self.asm.is_jumped_to(stop) {
            self.asm.bind(stop);
            self.asm.store_imm(Size::DW, Reg::R8, slots.stop, 1);
            self.asm.mov64_imm(Reg::R0, 1);
            self.asm.exit();
        }

        let own = self.frame.deepest();
        let callback_frame = std::mem::replace(&mut self.frame, saved_frame);
        self.frame.include_scratch(&callback_frame);
        self.loops = saved_loops;
        (self.exit, self.var_base, self.current_callback) = saved;
        Ok(own)
    }

    /// Points [`SCRATCH_BASE_IN_CALLBACK`](super::frame::SCRATCH_BASE_IN_CALLBACK) at the program's entry
    /// `index` of the scratch map, where the probe's large variables are, for the rest of the callback.
    fn scratch_in_callback(&mut self, index: usize, span: Span) -> Result<(), Diagnostic> {
        let key = self.frame.alloc(4, span)?;
        self.asm.store_imm(Size::W, Reg::FP, key, index as i32);
        self.asm.ld_map(Reg::R1, super::SCRATCH_MAP);
        self.asm.mov64_reg(Reg::R2, Reg::FP);
        self.asm.alu64_imm(Alu::Add, Reg::R2, key as i32);
        self.asm.call(Helper::MapLookupElem.id());
        // (It always has it: the probe found it.)
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, self.exit);
        self.asm.mov64_reg(super::frame::SCRATCH_BASE_IN_CALLBACK, Reg::R0);
        Ok(())
    }

    /// Makes the verifier forget what it knows of the variable of `size` bytes at `var_base + slot`, by
    /// copying it onto itself with a helper. The verifier checks a callback as if it ran again and again
    /// until the states it sees repeat; a counter it tracks exactly (`$n++; if ($n == 2) { ... }`, also
    /// in a tuple) never repeats, and it would give up after a million instructions.
    fn forget_value(&mut self, slot: i16, size: usize) {
        self.asm.mov64_reg(Reg::R1, self.var_base);
        self.asm.alu64_imm(Alu::Add, Reg::R1, slot as i32);
        self.asm.mov64_imm(Reg::R2, size as i32);
        self.asm.mov64_reg(Reg::R3, Reg::R1);
        self.asm.call(Helper::ProbeReadKernel.id());
    }

    /// Copies `len` bytes (a multiple of 8) from the memory `from` points to into the variables at
    /// `var_base + to`.
    fn copy_from_pointer(&mut self, from: Reg, to: i16, len: usize) {
        for at in (0..len).step_by(8) {
            self.asm.load(Size::DW, Reg::R1, from, at as i16);
            self.asm.store(Size::DW, self.var_base, to + at as i16, Reg::R1);
        }
    }

    /// Stores at `var_base + to` an aggregation's value under the key at `var_base + key`, merged over
    /// every possible CPU as userspace would print it; of a shared map, its one value. Of a `stats()` map,
    /// three: the count, the average and the total.
    pub(crate) fn merge_cpus(
        &mut self,
        map: &str,
        agg: Agg,
        (key_base, key): (Reg, i16),
        (to_base, to): (Reg, i16),
        span: Span,
    ) -> Result<(), Diagnostic> {
        let shared = self.decl(map).1.shared;
        if !shared && !self.features.has(Feature::PercpuLookup) {
            // Sema made every other aggregation read here a shared map (`MapTable::share_aggregations_read`).
            let what = || format!("reading @{map}'s {}() value", agg.name());
            if self.maps.declared.contains_key(map) {
                return Err(kernel::needs(self.features, Feature::PercpuLookup, &what(), span));
            }
            if matches!(agg, Agg::Min | Agg::Max) && !self.features.has(Feature::Cmpxchg) {
                let error = kernel::needs(self.features, Feature::PercpuLookup, &what(), span);
                let since = Feature::Cmpxchg.since();
                return Err(error.with_help(format!(
                    "run it on Linux {since} or later, where such a map is shared by the CPUs and updated with {}",
                    Feature::Cmpxchg.what()
                )));
            }
            return Err(Diagnostic::error(
                span,
                format!("internal error: @{map} is read here, but the checks saw no read of it"),
            ));
        }
        let (cpus, lookup) = match shared {
            true => (1, Helper::MapLookupElem),
            false => (self.options.possible_cpus, Helper::MapLookupPercpuElem),
        };
        let (acc, other, cpu) =
            (self.frame.alloc(8, span)?, self.frame.alloc(8, span)?, self.frame.alloc(8, span)?);
        // acc: the count, sum, or extreme so far; other: avg's total, or whether min/max saw a value.
        self.asm.store_imm(Size::DW, Reg::FP, acc, 0);
        self.asm.store_imm(Size::DW, Reg::FP, other, 0);
        self.asm.store_imm(Size::DW, Reg::FP, cpu, 0);
        let (map_index, _) = self.decl(map);
        let (top, next, done) = (self.asm.new_label(), self.asm.new_label(), self.asm.new_label());
        self.asm.bind(top);
        self.asm.load(Size::DW, Reg::R3, Reg::FP, cpu);
        self.asm.jump_imm(Cond::UGe, Reg::R3, cpus as i32, done);
        self.asm.ld_map(Reg::R1, map_index);
        self.asm.mov64_reg(Reg::R2, key_base);
        self.asm.alu64_imm(Alu::Add, Reg::R2, key as i32);
        self.asm.call(lookup.id());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, next);
        match agg {
            Agg::Count | Agg::Sum { .. } => self.add_from(Reg::R0, 0, acc),
            Agg::Avg | Agg::Stats => {
                self.add_from(Reg::R0, 0, acc);
                self.add_from(Reg::R0, 8, other);
            }
            _ => {
                // (value, set): a CPU that never saw a value has set = 0.
                let take = self.asm.new_label();
                self.asm.load(Size::DW, Reg::R1, Reg::R0, 8);
                self.asm.jump_imm(Cond::Eq, Reg::R1, 0, next);
                self.asm.load(Size::DW, Reg::R1, Reg::R0, 0);
                self.asm.load(Size::DW, Reg::R2, Reg::FP, other);
                self.asm.jump_imm(Cond::Eq, Reg::R2, 0, take);
                self.asm.load(Size::DW, Reg::R2, Reg::FP, acc);
                let keeps = if agg == Agg::Min { Cond::SGe } else { Cond::SLe };
                self.asm.jump_reg(keeps, Reg::R1, Reg::R2, next);
                self.asm.bind(take);
                self.asm.store(Size::DW, Reg::FP, acc, Reg::R1);
                self.asm.store_imm(Size::DW, Reg::FP, other, 1);
            }
        }
        self.asm.bind(next);
        self.asm.load(Size::DW, Reg::R1, Reg::FP, cpu);
        self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
        self.asm.store(Size::DW, Reg::FP, cpu, Reg::R1);
        self.asm.jump(top);
        self.asm.bind(done);
        // stats(): (count, average, total), the average computed below.
        let to = match agg {
            Agg::Stats => {
                self.asm.load(Size::DW, Reg::R1, Reg::FP, acc);
                self.asm.store(Size::DW, to_base, to, Reg::R1);
                self.asm.load(Size::DW, Reg::R1, Reg::FP, other);
                self.asm.store(Size::DW, to_base, to + 16, Reg::R1);
                to + 8
            }
            _ => to,
        };
        self.asm.load(Size::DW, Reg::R1, Reg::FP, acc);
        if matches!(agg, Agg::Avg | Agg::Stats) {
            // total / count, rounded toward zero as userspace prints it (BPF division is unsigned).
            let (positive, stored) = (self.asm.new_label(), self.asm.new_label());
            self.asm.load(Size::DW, Reg::R2, Reg::FP, other);
            self.asm.mov64_reg(Reg::R3, Reg::R1);
            self.asm.mov64_imm(Reg::R1, 0);
            self.asm.jump_imm(Cond::Eq, Reg::R3, 0, stored);
            self.asm.jump_imm(Cond::SGe, Reg::R2, 0, positive);
            self.asm.alu64_imm(Alu::Neg, Reg::R2, 0);
            self.asm.alu64_reg(Alu::Div, Reg::R2, Reg::R3);
            self.asm.alu64_imm(Alu::Neg, Reg::R2, 0);
            self.asm.mov64_reg(Reg::R1, Reg::R2);
            self.asm.jump(stored);
            self.asm.bind(positive);
            self.asm.alu64_reg(Alu::Div, Reg::R2, Reg::R3);
            self.asm.mov64_reg(Reg::R1, Reg::R2);
            self.asm.bind(stored);
        }
        self.asm.store(Size::DW, to_base, to, Reg::R1);
        Ok(())
    }

    /// `*(fp + slot) += *(ptr + offset)`
    fn add_from(&mut self, ptr: Reg, offset: i16, slot: i16) {
        self.asm.load(Size::DW, Reg::R1, ptr, offset);
        self.asm.load(Size::DW, Reg::R2, Reg::FP, slot);
        self.asm.alu64_reg(Alu::Add, Reg::R2, Reg::R1);
        self.asm.store(Size::DW, Reg::FP, slot, Reg::R2);
    }
}

/// The variables a block assigns, at any depth (`$x = ...`, `$x += ...`, `$x++`).
fn assigned_vars(block: &Block, out: &mut Vec<String>) {
    fn expr(e: &Expr, out: &mut Vec<String>) {
        match &e.kind {
            ExprKind::Unary { op: UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec, operand } => {
                if let ExprKind::Var(name) = &operand.kind {
                    out.push(name.clone());
                }
            }
            ExprKind::Unary { operand, .. } | ExprKind::Cast { operand, .. } => expr(operand, out),
            ExprKind::Binary { lhs, rhs, .. } => {
                expr(lhs, out);
                expr(rhs, out);
            }
            ExprKind::Ternary { cond, then, otherwise } => {
                expr(cond, out);
                expr(then, out);
                expr(otherwise, out);
            }
            ExprKind::Call { args, .. }
            | ExprKind::Tuple(args)
            | ExprKind::NamedTuple { items: args, .. }
            | ExprKind::Map { keys: args, .. } => args.iter().for_each(|a| expr(a, out)),
            _ => {}
        }
    }
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Assign { target, value, .. } => {
                if let ExprKind::Var(name) = &target.kind {
                    out.push(name.clone());
                }
                expr(value, out);
            }
            StmtKind::Let { name, value, .. } => {
                out.push(name.clone());
                if let Some(value) = value {
                    expr(value, out);
                }
            }
            StmtKind::Expr(e) => expr(e, out),
            StmtKind::If { cond, then, otherwise } => {
                expr(cond, out);
                assigned_vars(then, out);
                if let Some(otherwise) = otherwise {
                    assigned_vars(otherwise, out);
                }
            }
            StmtKind::While { cond, body } => {
                expr(cond, out);
                assigned_vars(body, out);
            }
            StmtKind::For { var, body, .. } => {
                out.push(var.clone());
                assigned_vars(body, out);
            }
            StmtKind::Unroll { body, .. } | StmtKind::Block(body) => assigned_vars(body, out),
            StmtKind::Return(Some(value)) => expr(value, out),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }
    for inner in block.expr_blocks() {
        assigned_vars(inner, out);
    }
}

/// Stack the verifier counts for a frame of a JIT-compiled program: rounded up to 16 bytes.
fn frame_size(bytes: usize) -> usize {
    bytes.div_ceil(16) * 16
}
