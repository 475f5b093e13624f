//! The warning of a failed update of a declared map (`let @m = hash(100);`), as bpftrace gives it:
//! a full hash refuses a new key with E2BIG. Only declared maps are checked, so the programs of
//! scripts without declarations keep their size.

use super::record::Record;
use super::Gen;
use crate::lang::{Diagnostic, Span};
use bpf::{Cond, Reg, Size};

impl Gen<'_> {
    /// After `bpf_map_update_elem` on `@name`: when it failed (r0 < 0), a record carrying r0.
    pub(crate) fn warn_if_update_failed(&mut self, name: &str, span: Span) -> Result<(), Diagnostic> {
        let Some(declared) = self.maps.declared.get(name) else { return Ok(()) };
        let record = Record::UpdateFailed {
            map: name.to_string(),
            storage: declared.storage.name(),
            span,
            warnings: Default::default(),
        };
        let updated = self.asm.new_label();
        self.asm.jump_imm(Cond::SGe, Reg::R0, 0, updated);
        let id = self.records.add(record);
        let buf = self.frame.alloc(16, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.asm.store(Size::DW, Reg::FP, buf + 8, Reg::R0);
        self.output(buf, 16, span)?;
        self.asm.bind(updated);
        Ok(())
    }
}
