//! A failed map update (the map was full: a hash refuses a new key with E2BIG) is never silent. Every
//! failure is counted in [`FixedMap::Dropped`] (for the exit summary and `--metrics`); a declared map
//! (`let @m = hash(100);`) also sends bpftrace's warning record at once. The success path costs one jump.

use super::record::Record;
use super::{FixedMap, Gen};
use crate::lang::{Diagnostic, Span};
use bpf::{Cond, Reg, Size};

impl Gen<'_> {
    /// After `bpf_map_update_elem` on `@name` (map number `map`): when it failed (r0 < 0), counts it, and
    /// for a declared map sends a record carrying r0.
    pub(crate) fn check_update(&mut self, name: &str, map: usize, span: Span) -> Result<(), Diagnostic> {
        let updated = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, Reg::R0, 0, updated);
        if let Some(declared) = self.maps.declared.get(name) {
            let record = Record::UpdateFailed {
                map: name.to_string(),
                storage: declared.storage.name(),
                span,
                warnings: Default::default(),
            };
            let id = self.records.add(record);
            let buf = self.frame.alloc(16, span)?;
            self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
            self.asm.store(Size::DW, Reg::FP, buf + 8, Reg::R0);
            self.output_warning(buf, 16, span)?;
        }
        self.count_dropped_update(map);
        self.asm.bind(updated);
        Ok(())
    }

    /// Adds one to the dropped-update counter of map number `map` (a script map); clobbers r1 and r2.
    pub(crate) fn count_dropped_update(&mut self, map: usize) {
        let Some(id) = self.layout.script_id(map) else { return };
        self.asm.ld_map_value(Reg::R1, FixedMap::Dropped.index());
        self.asm.mov64_imm(Reg::R2, 1);
        self.asm.atomic_add64(Reg::R1, (8 * id.0) as i16, Reg::R2);
    }
}
