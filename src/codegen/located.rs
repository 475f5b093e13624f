//! USDT arguments (`arg0`..): each read where its probe point's note says, a register saved in the
//! context, the process's memory behind registers, or a constant, then extended to 64 bits by its sign.

use super::frame::Val;
use super::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::probes::usdt_args::{Argument, Location};
use crate::sema::typed::Name;
use bpf::{Alu, Helper, Reg, Size};

impl Gen<'_> {
    /// The argument the name `e` (`arg3`) is, at a probe point that says where each is; `None` for other
    /// points and names.
    pub(crate) fn located_argument(&self, e: &Expr) -> Option<Argument> {
        let Some(Name::Argument(n)) = self.probe.types.name(e) else { return None };
        self.point.provider.context().arguments?.located(n).cloned()
    }

    /// The value of `arg` in a new home.
    pub(crate) fn load_located(&mut self, arg: &Argument, span: Span) -> Result<Val, Diagnostic> {
        let size = Size::for_bytes(arg.size as usize).unwrap_or(Size::DW);
        match arg.location {
            Location::Constant(_) => Ok(Val::Imm(arg.constant().unwrap_or(0))),
            Location::Register(offset) => self.load_into_fresh(Reg::R9, offset, size, arg.signed, span),
            Location::Memory { base, index, offset } => {
                let slot = self.frame.alloc(8, span)?;
                self.asm.load(Size::DW, Reg::R3, Reg::R9, base);
                if let Some((index, scale)) = index {
                    self.asm.load(Size::DW, Reg::R1, Reg::R9, index);
                    self.asm.alu64_imm(Alu::Lsh, Reg::R1, scale.trailing_zeros() as i32);
                    self.asm.alu64_reg(Alu::Add, Reg::R3, Reg::R1);
                }
                self.asm.alu64_imm(Alu::Add, Reg::R3, offset);
                self.asm.mov64_reg(Reg::R1, Reg::FP);
                self.asm.alu64_imm(Alu::Add, Reg::R1, slot as i32);
                self.asm.mov64_imm(Reg::R2, arg.size as i32);
                // A failed read leaves zeros (and with `-k`, a warning).
                self.asm.call(Helper::ProbeReadUser.id());
                self.check_read(Helper::ProbeReadUser, span)?;
                self.load_into_fresh(Reg::FP, slot, size, arg.signed, span)
            }
        }
    }
}
