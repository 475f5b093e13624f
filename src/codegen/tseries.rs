//! `@m[k] = tseries(value, interval, intervals[, agg])`: the slot of the current interval
//! (`epoch % intervals`, `epoch = now / interval`) is a key part after the user's key; each slot holds
//! `(value, meta, epoch)` per CPU, and userspace shows the latest epoch of each slot (`output/tseries.rs`).
//! A slot last written in an older epoch starts over when an aggregating series writes it again.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::sema::maps::{MapDecl, MapValue};
use crate::sema::tseries::{Reduce, Tseries};
use crate::sema::types::Type;
use bpf::{Alu, Cond, Helper, Reg, Size};

/// bpftrace's test hook: the name of a scalar map (`@ts`) whose value is the clock of every `tseries()`.
const DUMMY_CLOCK: &str = "BPFTRACE_DUMMY_TS_MAP";

const VALUE: i16 = 0;
const META: i16 = 8;
const EPOCH: i16 = 16;

impl Gen<'_> {
    pub(super) fn tseries(
        &mut self,
        map: usize,
        decl: &MapDecl,
        keys: &[Expr],
        value: &Expr,
        series: Tseries,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let value = self.int(value)?;
        let value = self.writable(value, span)?;
        let now = self.tseries_clock(span)?;
        // epoch = now / interval, slot = epoch % intervals (unsigned: BPF's division is).
        let (epoch, slot) = (self.frame.fresh(span)?, self.frame.fresh(span)?);
        let r = self.reg_of(now, Reg::R1);
        self.asm.mov64_reg(Reg::R1, r);
        self.asm.mov_u64(Reg::R2, series.interval);
        self.asm.alu64_reg(Alu::Div, Reg::R1, Reg::R2);
        self.put(epoch, Reg::R1);
        self.asm.mov_u64(Reg::R2, series.intervals);
        self.asm.alu64_reg(Alu::Mod, Reg::R1, Reg::R2);
        self.put(slot, Reg::R1);
        let key = self.key_into(decl, keys, Some(slot), span)?;
        self.lookup(map, key);
        let (absent, done) = (self.asm.new_label(), self.asm.new_label());
        self.asm.jump_imm(Cond::Eq, Reg::R0, 0, absent);

        // The slot exists on this CPU: r0 points at its triple.
        if series.reduce != Reduce::Last {
            let same = self.asm.new_label();
            self.asm.load(Size::DW, Reg::R1, Reg::R0, EPOCH);
            let e = self.reg_of(epoch, Reg::R2);
            self.asm.jump_reg(Cond::Eq, Reg::R1, e, same);
            self.asm.store_imm(Size::DW, Reg::R0, VALUE, 0);
            self.asm.store_imm(Size::DW, Reg::R0, META, 0);
            self.asm.bind(same);
        }
        let v = self.reg_of(value, Reg::R2);
        match series.reduce {
            Reduce::Last => {
                self.asm.store(Size::DW, Reg::R0, VALUE, v);
                let n = self.reg_of(now, Reg::R1);
                self.asm.store(Size::DW, Reg::R0, META, n);
            }
            Reduce::Sum | Reduce::Avg => {
                self.asm.load(Size::DW, Reg::R1, Reg::R0, VALUE);
                self.asm.alu64_reg(Alu::Add, Reg::R1, v);
                self.asm.store(Size::DW, Reg::R0, VALUE, Reg::R1);
                if series.reduce == Reduce::Avg {
                    self.asm.load(Size::DW, Reg::R1, Reg::R0, META);
                    self.asm.alu64_imm(Alu::Add, Reg::R1, 1);
                    self.asm.store(Size::DW, Reg::R0, META, Reg::R1);
                }
            }
            Reduce::Min | Reduce::Max => {
                let (write, keep) = (self.asm.new_label(), self.asm.new_label());
                self.asm.load(Size::DW, Reg::R1, Reg::R0, META);
                self.asm.jump_imm(Cond::Eq, Reg::R1, 0, write);
                self.asm.load(Size::DW, Reg::R1, Reg::R0, VALUE);
                let keeps_old = match (series.reduce == Reduce::Min, series.signed) {
                    (true, true) => Cond::SGe,
                    (true, false) => Cond::UGe,
                    (false, true) => Cond::SLe,
                    (false, false) => Cond::ULe,
                };
                self.asm.jump_reg(keeps_old, v, Reg::R1, keep);
                self.asm.bind(write);
                self.asm.store(Size::DW, Reg::R0, VALUE, v);
                self.asm.store_imm(Size::DW, Reg::R0, META, 1);
                self.asm.bind(keep);
            }
        }
        let e = self.reg_of(epoch, Reg::R1);
        self.asm.store(Size::DW, Reg::R0, EPOCH, e);
        self.asm.jump(done);

        // First value of this slot on this CPU.
        self.asm.bind(absent);
        let initial = self.frame.alloc(24, span)?;
        let v = self.reg_of(value, Reg::R2);
        self.asm.store(Size::DW, Reg::FP, initial + VALUE, v);
        match series.reduce {
            Reduce::Last => {
                let n = self.reg_of(now, Reg::R1);
                self.asm.store(Size::DW, Reg::FP, initial + META, n);
            }
            Reduce::Sum => self.asm.store_imm(Size::DW, Reg::FP, initial + META, 0),
            Reduce::Avg | Reduce::Min | Reduce::Max => {
                self.asm.store_imm(Size::DW, Reg::FP, initial + META, 1)
            }
        }
        let e = self.reg_of(epoch, Reg::R1);
        self.asm.store(Size::DW, Reg::FP, initial + EPOCH, e);
        self.update(&decl.name.clone(), map, key, initial, span)?;
        self.asm.bind(done);
        for val in [value, now, epoch, slot] {
            self.frame.release(val);
        }
        Ok(())
    }

    /// Nanoseconds of the TAI clock (from the boot clock plus their offset, as `nsecs(sw_tai)`), or the
    /// value of the map `BPFTRACE_DUMMY_TS_MAP` names, as bpftrace's tests use it.
    fn tseries_clock(&mut self, span: Span) -> Result<Val, Diagnostic> {
        if let Ok(name) = std::env::var(DUMMY_CLOCK) {
            let name = name.strip_prefix('@').unwrap_or(&name).to_string();
            return match self.maps.get(&name) {
                Some((_, decl))
                    if decl.key.is_empty()
                        && matches!(decl.value, MapValue::Plain(Type::Int { signed: false, .. })) =>
                {
                    self.map_read_int(&name, &[], span)
                }
                _ => Err(Diagnostic::error(
                    span,
                    format!("{DUMMY_CLOCK} names `@{name}`, which is not a scalar map of unsigned integers"),
                )),
            };
        }
        self.asm.call(Helper::KtimeGetBootNs.id());
        self.asm.ld_imm64(Reg::R1, crate::clocks::tai_minus_boot());
        self.asm.alu64_reg(Alu::Add, Reg::R0, Reg::R1);
        self.take_r0(span)
    }
}
