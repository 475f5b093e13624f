//! Map operations: keys built on the stack, lookups, updates, aggregations on per-CPU values.

use super::expr::divides_by_maybe_zero;
use super::frame::Val;
use super::{Gen, ScriptMapId};
use crate::lang::ast::{BinOp, Expr, ExprKind, UnOp};
use crate::lang::{Diagnostic, Span};
use crate::sema::maps::{Agg, MapDecl, MapValue};
use crate::sema::types::Type;
use bpf::{Alu, Cond, Helper, Label, Reg, Size};

/// How many times a shared min() or max() tries its compare-and-exchange: each failure means another CPU
/// wrote a new extreme meanwhile, which the next try compares with.
const EXCHANGE_TRIES: i32 = 64;

/// `BPF_NOEXIST`: a map update that only inserts a new key.
const BPF_NOEXIST: i32 = 1;

impl Gen<'_> {
    pub(crate) fn decl(&self, name: &str) -> (usize, MapDecl) {
        let (index, decl) = self.maps.get(name).expect("checked maps are declared");
        (self.layout.script(ScriptMapId(index)), decl.clone())
    }

    /// The position of the map `@name` (a call's argument) in the script's map table.
    pub(crate) fn script_map_position(&self, map: &Expr) -> usize {
        let ExprKind::Map { name, .. } = &map.kind else { unreachable!("checked: a map argument") };
        self.maps.get(name).expect("checked maps are declared").0
    }

    /// Builds a map key on the stack: the key parts laid out as the map's key types, then the bucket
    /// index for histograms. A map without keys has the 8-byte key 0.
    pub(super) fn key_into(
        &mut self,
        decl: &MapDecl,
        keys: &[Expr],
        bucket: Option<Val>,
        span: Span,
    ) -> Result<i16, Diagnostic> {
        let key = self.frame.alloc(decl.key_size(), span)?;
        let mut at = 0;
        if keys.is_empty() {
            self.asm.store_imm(Size::DW, Reg::FP, key, 0);
            at = 8;
        }
        match keys {
            // One tuple for a map keyed by parts: the tuple's layout is the parts' layout.
            [tuple] if decl.key.len() > 1 => {
                let whole = Type::Tuple(decl.key.clone());
                self.value_into(tuple, key, &whole)?;
                at = whole.slot_size();
            }
            _ => {
                // Parts for a map keyed by one tuple are laid out as the tuple's fields.
                for (part, ty) in keys.iter().zip(crate::sema::maps::as_parts(&decl.key, keys.len())) {
                    self.value_into(part, key + at as i16, ty)?;
                    at += ty.slot_size();
                }
            }
        }
        if let Some(bucket) = bucket {
            let reg = self.reg_of(bucket, Reg::R0);
            self.asm.store(Size::DW, Reg::FP, key + at as i16, reg);
        }
        Ok(key)
    }

    fn pointer(&mut self, reg: Reg, offset: i16) {
        self.asm.mov64_reg(reg, Reg::FP);
        self.asm.alu64_imm(Alu::Add, reg, offset as i32);
    }

    /// r0 = the value under the key at `fp + key`, or 0.
    pub(super) fn lookup(&mut self, map: usize, key: i16) {
        self.asm.ld_map(Reg::R1, map);
        self.pointer(Reg::R2, key);
        self.asm.call(Helper::MapLookupElem.id());
    }

    /// Inserts or replaces the value under the key at `fp + key` in the map `@name` (number `map`).
    pub(super) fn update(
        &mut self,
        name: &str,
        map: usize,
        key: i16,
        value: i16,
        span: Span,
    ) -> Result<(), Diagnostic> {
        self.asm.ld_map(Reg::R1, map);
        self.pointer(Reg::R2, key);
        self.pointer(Reg::R3, value);
        self.asm.mov64_imm(Reg::R4, 0);
        self.asm.call(Helper::MapUpdateElem.id());
        self.check_update(name, map, span)
    }

    /// `@m[k]` as an integer: its value, or 0 when the key is absent; of a `count()`, `sum()`, `min()`,
    /// `max()` or `avg()` map, its CPUs' values merged.
    pub(crate) fn map_read_int(&mut self, name: &str, keys: &[Expr], span: Span) -> Result<Val, Diagnostic> {
        let (map, decl) = self.decl(name);
        let key = self.key_into(&decl, keys, None, span)?;
        if let MapValue::Agg(agg) = decl.value {
            let merged = self.frame.alloc(8, span)?;
            self.merge_cpus(name, agg, (Reg::FP, key), (Reg::FP, merged), span)?;
            return self.load_into_fresh(Reg::FP, merged, Size::DW, false, span);
        }
        self.lookup(map, key);
        let absent = self.asm.new_label();
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
        self.asm.load(Size::DW, Reg::R0, Reg::R0, 0);
        self.asm.bind(absent);
        self.take_r0(span)
    }

    /// Copies `@m[k]` (a string or tuple) into `slot` bytes at `fp + to`; zeroes when absent.
    pub(crate) fn map_read_into(
        &mut self,
        name: &str,
        keys: &[Expr],
        to: i16,
        slot: usize,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let (map, decl) = self.decl(name);
        let key = self.key_into(&decl, keys, None, span)?;
        let len = decl.value_size().min(slot);
        self.zero(to, slot);
        self.lookup(map, key);
        let absent = self.asm.new_label();
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
        self.copy_from(Reg::R0, to, len);
        self.asm.bind(absent);
        Ok(())
    }

    /// `@m[k] = value` for a plain (not aggregating) map.
    pub(crate) fn map_assign(
        &mut self,
        name: &str,
        keys: &[Expr],
        value: &Expr,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let (map, decl) = self.decl(name);
        let MapValue::Plain(ty) = &decl.value else {
            return Err(Diagnostic::error(span, "internal error: plain assignment to an aggregation"));
        };
        let buffer = self.frame.alloc(ty.slot_size(), span)?;
        self.value_into(value, buffer, ty)?;
        let key = self.key_into(&decl, keys, None, span)?;
        if ty.slot_size() == 8 && !self.deleted_maps.contains(name) {
            // An existing entry is overwritten in place (one aligned 8-byte store, never seen torn): an update
            // would swap in a new element under the bucket lock on every event. Not for a map the script
            // deletes from (`@start[tid] = nsecs` ... `delete(@start[tid])`): there the key is usually new,
            // and the lookup would only add to the update.
            let (absent, done) = (self.asm.new_label(), self.asm.new_label());
            self.lookup(map, key);
            self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, buffer);
            self.asm.store(Size::DW, Reg::R0, 0, Reg::R1);
            self.asm.jump(done);
            self.asm.bind(absent);
            self.update(name, map, key, buffer, span)?;
            self.asm.bind(done);
        } else {
            self.update(name, map, key, buffer, span)?;
        }
        Ok(())
    }

    /// `@m[k] op= value`: read, combine, write back (in place when the key exists). Returns the old and
    /// new values' homes when `want` asks for them (for `++`/`--` used as expressions).
    pub(crate) fn map_modify(
        &mut self,
        name: &str,
        keys: &[Expr],
        op: BinOp,
        operand: Val,
        span: Span,
    ) -> Result<(Val, Val), Diagnostic> {
        let (map, decl) = self.decl(name);
        let signed = matches!(&decl.value, MapValue::Plain(ty) if ty.is_signed());
        let key = self.key_into(&decl, keys, None, span)?;
        let (old, new) = (self.frame.fresh(span)?, self.frame.fresh(span)?);
        self.lookup(map, key);
        let (absent, done) = (self.asm.new_label(), self.asm.new_label());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
        // Present: combine in place. A division that may call a helper needs the value's pointer in
        // a home that survives the call.
        let may_call = divides_by_maybe_zero(op, operand);
        let pointer = if may_call { self.frame.fresh(span)? } else { Val::Reg(Reg::R5) };
        self.put(pointer, Reg::R0);
        let at = self.reg_of(pointer, Reg::R5);
        self.asm.load(Size::DW, Reg::R0, at, 0);
        self.put(old, Reg::R0);
        self.apply(op, Reg::R0, operand, signed, span)?;
        let at = self.reg_of(pointer, Reg::R5);
        self.asm.store(Size::DW, at, 0, Reg::R0);
        self.put(new, Reg::R0);
        if may_call {
            self.frame.release(pointer);
        }
        self.asm.jump(done);
        // Absent: combine with 0 and insert.
        self.asm.bind(absent);
        self.asm.mov64_imm(Reg::R0, 0);
        self.put(old, Reg::R0);
        self.apply(op, Reg::R0, operand, signed, span)?;
        self.put(new, Reg::R0);
        let buffer = self.frame.alloc(8, span)?;
        self.asm.store(Size::DW, Reg::FP, buffer, Reg::R0);
        self.update(name, map, key, buffer, span)?;
        self.asm.bind(done);
        Ok((old, new))
    }

    /// `$x++`, `++@m[k]` and the like: the old value (postfix) or the new one (prefix).
    pub(crate) fn increment(&mut self, op: UnOp, operand: &Expr, span: Span) -> Result<Val, Diagnostic> {
        let binop = if matches!(op, UnOp::PreInc | UnOp::PostInc) { BinOp::Add } else { BinOp::Sub };
        let postfix = matches!(op, UnOp::PostInc | UnOp::PostDec);
        let step = Self::increment_step(&self.ty(operand)?);
        match &operand.kind {
            ExprKind::Var(name) => {
                let (base, slot) = self.var(name);
                let home = self.frame.fresh(span)?;
                self.asm.load(Size::DW, Reg::R0, base, slot);
                if postfix {
                    self.put(home, Reg::R0);
                }
                self.asm.alu64_imm(if binop == BinOp::Add { Alu::Add } else { Alu::Sub }, Reg::R0, step);
                self.asm.store(Size::DW, base, slot, Reg::R0);
                if !postfix {
                    self.put(home, Reg::R0);
                }
                Ok(home)
            }
            ExprKind::Map { name, keys } => {
                let (old, new) = self.map_modify(name, keys, binop, Val::Imm(step as u64), span)?;
                let (keep, drop) = if postfix { (old, new) } else { (new, old) };
                self.frame.release(drop);
                Ok(keep)
            }
            _ => Err(Diagnostic::error(span, "internal error: increment of a non-variable")),
        }
    }

    /// `@m[k] = count()` and the other aggregations, on this CPU's value of a per-CPU map.
    pub(crate) fn aggregate(
        &mut self,
        name: &str,
        keys: &[Expr],
        args: &[Expr],
        span: Span,
    ) -> Result<(), Diagnostic> {
        let (map, decl) = self.decl(name);
        let MapValue::Agg(agg) = decl.value else {
            return Err(Diagnostic::error(span, "internal error: aggregation into a plain map"));
        };
        if let Agg::Tseries(series) = agg {
            return self.tseries(map, &decl, keys, &args[0], series, span);
        }
        let value = match args.first() {
            Some(arg) => self.int(arg)?,
            None => Val::Imm(1),
        };
        let known = args.first().and_then(|arg| self.known_range(arg));
        let bucket = match agg {
            Agg::Hist { bits } => Some(self.log2_bucket(value, known, bits, span)?),
            Agg::Lhist { min, max, step } => {
                Some(self.linear_bucket(value, known, (min, max, step), span)?)
            }
            _ => None,
        };
        let key = self.key_into(&decl, keys, bucket, span)?;
        if decl.shared {
            return self.aggregate_shared(map, key, agg, value, span);
        }
        self.lookup(map, key);
        let (absent, done) = (self.asm.new_label(), self.asm.new_label());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
        // count(), hist() and lhist() add 1 whatever the value (the buckets are computed from it above).
        let counts = matches!(agg, Agg::Count | Agg::Hist { .. } | Agg::Lhist { .. });
        let v = if counts { Reg::R2 } else { self.reg_of(value, Reg::R2) };
        match agg {
            Agg::Count | Agg::Hist { .. } | Agg::Lhist { .. } => self.add_at(Reg::R0, 0, Val::Imm(1)),
            Agg::Tseries(_) => unreachable!("handled above"),
            Agg::Sum { .. } => self.add_at(Reg::R0, 0, Val::Reg(v)),
            Agg::Avg | Agg::Stats => {
                self.add_at(Reg::R0, 0, Val::Imm(1));
                self.add_at(Reg::R0, 8, Val::Reg(v));
            }
            Agg::Min | Agg::Max => {
                let write = self.asm.new_label();
                self.asm.load(Size::DW, Reg::R1, Reg::R0, 8);
                self.asm.jump_imm(Cond::Eq, Reg::R1, 0, write);
                self.asm.load(Size::DW, Reg::R1, Reg::R0, 0);
                self.asm.jump_reg(if agg == Agg::Min { Cond::SGe } else { Cond::SLe }, v, Reg::R1, done);
                self.asm.bind(write);
                self.asm.store(Size::DW, Reg::R0, 0, v);
                self.asm.store_imm(Size::DW, Reg::R0, 8, 1);
            }
        }
        self.asm.jump(done);
        // First value under this key on this CPU.
        self.asm.bind(absent);
        let initial = self.frame.alloc(agg.value_size(), span)?;
        let v = if counts { Reg::R2 } else { self.reg_of(value, Reg::R2) };
        match agg {
            Agg::Count | Agg::Hist { .. } | Agg::Lhist { .. } => {
                self.asm.store_imm(Size::DW, Reg::FP, initial, 1)
            }
            Agg::Tseries(_) => unreachable!("handled above"),
            Agg::Sum { .. } => self.asm.store(Size::DW, Reg::FP, initial, v),
            Agg::Avg | Agg::Stats => {
                self.asm.store_imm(Size::DW, Reg::FP, initial, 1);
                self.asm.store(Size::DW, Reg::FP, initial + 8, v);
            }
            Agg::Min | Agg::Max => {
                self.asm.store(Size::DW, Reg::FP, initial, v);
                self.asm.store_imm(Size::DW, Reg::FP, initial + 8, 1);
            }
        }
        self.update(name, map, key, initial, span)?;
        self.asm.bind(done);
        self.frame.release(value);
        Ok(())
    }

    /// `count()`, `sum()`, `avg()`, `min()` or `max()` into a shared map ([`MapDecl::shared`]): an empty value
    /// is inserted where the key is new (unless another CPU's insert came first), then updated atomically.
    fn aggregate_shared(
        &mut self,
        map: usize,
        key: i16,
        agg: Agg,
        value: Val,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let (present, done) = (self.asm.new_label(), self.asm.new_label());
        self.lookup(map, key);
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, present);
        let zeros = self.frame.alloc(agg.value_size(), span)?;
        self.zero(zeros, agg.value_size());
        // A min or max starts at the far end, so that the first value always replaces it.
        match agg {
            Agg::Min => self.asm.mov_u64(Reg::R1, i64::MAX as u64),
            Agg::Max => self.asm.mov_u64(Reg::R1, i64::MIN as u64),
            _ => self.asm.mov64_imm(Reg::R1, 0),
        }
        self.asm.store(Size::DW, Reg::FP, zeros, Reg::R1);
        self.asm.ld_map(Reg::R1, map);
        self.pointer(Reg::R2, key);
        self.pointer(Reg::R3, zeros);
        self.asm.mov64_imm(Reg::R4, BPF_NOEXIST);
        self.asm.call(Helper::MapUpdateElem.id());
        self.lookup(map, key);
        // Still absent: the map is full.
        self.asm.jump_imm(Cond::Ne, Reg::R0, 0, present);
        self.count_dropped_update(map);
        self.asm.jump(done);
        self.asm.bind(present);
        let v = self.reg_of(value, Reg::R2);
        self.asm.mov64_imm(Reg::R1, 1);
        match agg {
            Agg::Count => self.asm.atomic_add64(Reg::R0, 0, Reg::R1),
            Agg::Sum { .. } => self.asm.atomic_add64(Reg::R0, 0, v),
            Agg::Avg | Agg::Stats => {
                self.asm.atomic_add64(Reg::R0, 0, Reg::R1);
                self.asm.atomic_add64(Reg::R0, 8, v);
            }
            Agg::Min | Agg::Max => self.extreme_shared(agg, v),
            _ => {
                return Err(Diagnostic::error(span, format!("internal error: a shared {}() map", agg.name())))
            }
        }
        self.asm.bind(done);
        self.frame.release(value);
        Ok(())
    }

    /// With r0 pointing at a shared (value, set) pair: the value replaced by `v` when `v` is lower (min) or
    /// higher (max), by compare-and-exchange, tried again while another CPU's exchange comes between (up to
    /// [`EXCHANGE_TRIES`] times, a bound the verifier needs); then `set`.
    fn extreme_shared(&mut self, agg: Agg, v: Reg) {
        let (again, set) = (self.asm.new_label(), self.asm.new_label());
        let keeps = if agg == Agg::Min { Cond::SGe } else { Cond::SLe };
        self.asm.mov64_reg(Reg::R3, Reg::R0);
        self.asm.mov64_reg(Reg::R4, v);
        self.asm.mov64_imm(Reg::R1, 0);
        self.asm.bind(again);
        self.asm.load(Size::DW, Reg::R5, Reg::R3, 0);
        self.asm.jump_reg(keeps, Reg::R4, Reg::R5, set);
        self.asm.mov64_reg(Reg::R0, Reg::R5);
        self.asm.atomic_cmpxchg64(Reg::R3, 0, Reg::R4);
        self.asm.jump_reg(Cond::Eq, Reg::R0, Reg::R5, set);
        self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
        self.asm.jump_imm(Cond::ULt, Reg::R1, EXCHANGE_TRIES, again);
        self.asm.bind(set);
        self.asm.store_imm(Size::DW, Reg::R3, 8, 1);
    }

    /// `*(u64 *)(ptr + offset) += amount` (per-CPU memory: no other CPU writes it).
    fn add_at(&mut self, ptr: Reg, offset: i16, amount: Val) {
        self.asm.load(Size::DW, Reg::R1, ptr, offset);
        match amount {
            Val::Imm(n) => self.asm.alu64_imm(Alu::Add, Reg::R1, n as i32),
            Val::Reg(r) => self.asm.alu64_reg(Alu::Add, Reg::R1, r),
            Val::Slot(_) => unreachable!("amounts are loaded into a register first"),
        }
        self.asm.store(Size::DW, ptr, offset, Reg::R1);
    }

    /// The `hist()` bucket of `value`: 0 for negatives, 1 for 0, 2 + floor(log2 v) above. With `bits`,
    /// each power of 2 has `2^bits` buckets: `1 + v` below `2^bits`, else `1 + ((l + 1) << bits | f)`, where
    /// `l` is floor(log2 v) - bits and `f` the `bits` bits after the leading 1. A value `known` not to be
    /// negative is not tested for it.
    fn log2_bucket(
        &mut self,
        value: Val,
        known: Option<(i64, i64)>,
        bits: u32,
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let home = self.frame.fresh(span)?;
        let v = self.reg_of(value, Reg::R0);
        self.asm.mov64_reg(Reg::R2, v);
        let done = self.asm.new_label();
        self.asm.mov64_imm(Reg::R1, 0);
        if known.is_none_or(|(lowest, _)| lowest < 0) {
            self.asm.jump_imm(Cond::SLt, Reg::R2, 0, done);
        }
        if bits > 0 {
            let mask = (1i32 << bits) - 1;
            let large = self.asm.new_label();
            self.asm.mov64_reg(Reg::R4, Reg::R2);
            self.asm.jump_imm(Cond::UGt, Reg::R2, mask, large);
            self.asm.mov64_reg(Reg::R1, Reg::R2);
            self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
            self.asm.jump(done);
            self.asm.bind(large);
            self.log2_search();
            self.asm.alu64_imm(Alu::Sub, Reg::R1, bits as i32);
            self.asm.alu64_reg(Alu::Rsh, Reg::R4, Reg::R1);
            self.asm.alu64_imm(Alu::And, Reg::R4, mask);
            self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
            self.asm.alu64_imm(Alu::Lsh, Reg::R1, bits as i32);
            self.asm.alu64_reg(Alu::Add, Reg::R1, Reg::R4);
            self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
            self.asm.bind(done);
            self.put(home, Reg::R1);
            return Ok(home);
        }
        self.asm.mov64_imm(Reg::R1, 1);
        self.asm.jump_imm(Cond::Eq, Reg::R2, 0, done);
        self.asm.mov64_imm(Reg::R1, 2);
        self.log2_search();
        self.asm.bind(done);
        self.put(home, Reg::R1);
        Ok(home)
    }

    /// `r1 += floor(log2 r2)` for `r2 > 0`, by binary search (r2 and r3 are clobbered).
    fn log2_search(&mut self) {
        for i in (0..=5).rev() {
            let shift = 1i32 << i;
            let skip = self.asm.new_label();
            self.jump_const(Cond::ULt, Reg::R2, 1i64 << shift, skip);
            self.asm.alu64_imm(Alu::Rsh, Reg::R2, shift);
            self.asm.alu64_imm(Alu::Add, Reg::R1, shift);
            self.asm.bind(skip);
        }
    }

    /// The `lhist()` bucket of `value`: 0 below `min`, `1 + (max - min) / step` above `max`, and
    /// `1 + (v - min) / step` between (`v - min` is then not negative: a power of 2 `step` is a shift). A
    /// value `known` to lie within `lowest..=highest` is not tested against a bound it cannot cross.
    fn linear_bucket(
        &mut self,
        value: Val,
        known: Option<(i64, i64)>,
        (min, max, step): (i64, i64, i64),
        span: Span,
    ) -> Result<Val, Diagnostic> {
        let home = self.frame.fresh(span)?;
        let v = self.reg_of(value, Reg::R0);
        let done = self.asm.new_label();
        if known.is_none_or(|(lowest, _)| lowest < min) {
            self.asm.mov64_imm(Reg::R1, 0);
            self.jump_const(Cond::SLt, v, min, done);
        }
        if known.is_none_or(|(_, highest)| highest > max) {
            self.asm.mov_u64(Reg::R1, 1 + ((max - min) / step) as u64);
            self.jump_const(Cond::SGt, v, max, done);
        }
        self.asm.mov64_reg(Reg::R1, v);
        match i32::try_from(min) {
            Ok(0) => {}
            Ok(min) => self.asm.alu64_imm(Alu::Sub, Reg::R1, min),
            Err(_) => {
                self.asm.mov_u64(Reg::R2, min as u64);
                self.asm.alu64_reg(Alu::Sub, Reg::R1, Reg::R2);
            }
        }
        match (step as u64).is_power_of_two() {
            true => self.asm.alu64_imm(Alu::Rsh, Reg::R1, step.trailing_zeros() as i32),
            false => {
                self.asm.mov_u64(Reg::R2, step as u64);
                self.asm.alu64_reg(Alu::Div, Reg::R1, Reg::R2);
            }
        }
        self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
        self.asm.bind(done);
        self.put(home, Reg::R1);
        Ok(home)
    }

    /// Jumps to `target` when `reg` compares with `value` as `cond` says: against an immediate where `value`
    /// fits one (r2 is clobbered otherwise).
    fn jump_const(&mut self, cond: Cond, reg: Reg, value: i64, target: Label) {
        match i32::try_from(value) {
            Ok(imm) => self.asm.jump_imm(cond, reg, imm, target),
            Err(_) => {
                let scratch = if reg == Reg::R2 { Reg::R3 } else { Reg::R2 };
                self.asm.mov_u64(scratch, value as u64);
                self.asm.jump_reg(cond, reg, scratch, target);
            }
        }
    }

    /// The values `e` can have, known from its form alone where it is `x & C` (`0..=C`) or `x % C`
    /// (`0..=C-1`, the modulo being unsigned) of a non-negative constant `C`, in a type that holds them.
    fn known_range(&self, e: &Expr) -> Option<(i64, i64)> {
        let ExprKind::Binary { op, rhs, .. } = &e.kind else { return None };
        let c = crate::sema::constant(rhs).filter(|c| *c >= 0)?;
        let highest = match op {
            BinOp::BitAnd => c,
            BinOp::Mod if c > 0 => c - 1,
            _ => return None,
        };
        let fits = match self.ty(e).ok()? {
            Type::Int { bits: 64, .. } => true,
            Type::Int { signed, bits } => highest < 1i64 << (bits - u8::from(signed)),
            _ => false,
        };
        fits.then_some((0, highest))
    }

    /// `delete(@m, k)` or `delete(@m[k])`: 1 when the key was there (the helper returns 0), 0 otherwise.
    pub(crate) fn delete(&mut self, args: &[Expr], span: Span) -> Result<Val, Diagnostic> {
        let ExprKind::Map { name, keys } = &args[0].kind else {
            return Err(Diagnostic::error(span, "internal error: delete of a non-map"));
        };
        let (map, decl) = self.decl(name);
        let keys = match args.get(1) {
            Some(key) => crate::sema::maps::key_parts(decl.key.len(), key),
            None => keys.clone(),
        };
        let key = self.key_into(&decl, &keys, None, span)?;
        self.asm.ld_map(Reg::R1, map);
        self.pointer(Reg::R2, key);
        self.asm.call(Helper::MapDeleteElem.id());
        self.r0_is_zero();
        self.take_r0(span)
    }

    /// `has_key(@m, key)`: 1 when the key is present.
    pub(crate) fn has_key(&mut self, args: &[Expr], span: Span) -> Result<Val, Diagnostic> {
        let ExprKind::Map { name, .. } = &args[0].kind else {
            return Err(Diagnostic::error(span, "internal error: has_key of a non-map"));
        };
        let (map, decl) = self.decl(name);
        let keys = crate::sema::maps::key_parts(decl.key.len(), &args[1]);
        let key = self.key_into(&decl, &keys, None, span)?;
        self.lookup(map, key);
        let absent = self.asm.new_label();
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);
        self.asm.mov64_imm(Reg::R0, 1);
        self.asm.bind(absent);
        self.take_r0(span)
    }
}
