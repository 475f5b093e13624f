//! Statements, and the calls that act: `printf`, `print`, `exit`, `clear`, `zero`, `delete`, `time`.

use super::calls::Emit;
use super::record::{ArgSource, Record, TextAction, EXIT_RECORD};
use super::Gen;
use crate::lang::ast::{BinOp, Block, Expr, ExprId, ExprKind, Stmt, StmtKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::builtins::Builtin;
use crate::sema::constant;
use crate::sema::format::{ConvKind, Piece};
use crate::sema::maps::{Agg, MapValue};
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use bpf::{Cond, Label, Reg, Size};

/// A printf record larger than this many bytes is built in the scratch area, where the program has one.
const LARGE_RECORD: usize = 64;

/// Where printf argument `source` is in the record, when it is sent at all.
fn arg_offset(source: &ArgSource) -> Option<usize> {
    match source {
        ArgSource::Args { offset, .. } | ArgSource::Value { offset, .. } => Some(*offset),
        &ArgSource::Int { offset, .. }
        | &ArgSource::Str { offset, .. }
        | &ArgSource::Stack { offset, .. }
        | &ArgSource::Cpumask { offset, .. }
        | &ArgSource::Symbol { offset, .. }
        | &ArgSource::Function { offset, .. }
        | &ArgSource::Buf { offset }
        | &ArgSource::Timestamp { offset, .. }
        | &ArgSource::CgroupPath { offset, .. }
        | &ArgSource::ContainerId { offset }
        | &ArgSource::Inet { offset }
        | &ArgSource::MacAddr { offset }
        | &ArgSource::Enum { offset, .. }
        | &ArgSource::Username { offset } => Some(offset),
        ArgSource::ConstStr(_) | ArgSource::ConstInt { .. } => None,
    }
}

/// The most instructions a program can have (BPF_COMPLEXITY_LIMIT_INSNS, for a privileged loader).
const MAX_PROGRAM_INSNS: usize = 1_000_000;

impl Gen<'_> {
    /// Generates a block; `false` when control never reaches its end (after `exit()`, `return`,
    /// `break` or `continue`). Statements after that point get no code: the verifier rejects
    /// unreachable instructions.
    pub(crate) fn block(&mut self, block: &Block) -> Result<bool, Diagnostic> {
        for stmt in &block.stmts {
            if !self.stmt(stmt)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Generates a statement; `false` when control never goes past it.
    fn stmt(&mut self, stmt: &Stmt) -> Result<bool, Diagnostic> {
        self.spans.push((self.asm.len(), stmt.span));
        let mark = self.frame.mark();
        let falls_through = match &stmt.kind {
            StmtKind::Expr(e) => self.effect(e)?,
            StmtKind::Assign { target, op, value } => {
                self.assign(target, *op, value, stmt.span)?;
                true
            }
            StmtKind::Let { name, value, .. } => {
                match value {
                    Some(value) => {
                        let var =
                            Expr { kind: ExprKind::Var(name.clone()), span: stmt.span, id: ExprId::NONE };
                        self.assign(&var, None, value, stmt.span)?;
                    }
                    // Its slot may have held another block's variable: a declared variable starts at zero.
                    None => {
                        if let Some(ty) = self.probe.vars.get(name) {
                            let ((base, slot), size) = (self.var(name), ty.slot_size());
                            self.zero_at(base, slot, size);
                        }
                    }
                }
                true
            }
            StmtKind::If { cond, then, otherwise } => {
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                let then_falls = self.block(then)?;
                let else_falls = match otherwise {
                    Some(otherwise) => {
                        if then_falls {
                            self.asm.jump(done);
                        }
                        self.asm.bind(no);
                        self.block(otherwise)?
                    }
                    None => {
                        self.asm.bind(no);
                        true
                    }
                };
                self.asm.bind(done);
                then_falls || else_falls
            }
            StmtKind::Unroll { count, body } => {
                let times = constant(count).unwrap_or(0);
                let mut falls = true;
                for _ in 0..times {
                    falls = self.block(body)?;
                    // Nested unrolls multiply: stop at the longest program the kernel loads.
                    if self.asm.len() > MAX_PROGRAM_INSNS {
                        return Err(Diagnostic::error(
                            stmt.span,
                            format!("unrolled, this program is longer than the {MAX_PROGRAM_INSNS} instructions the kernel loads"),
                        )
                        .with_help("unroll fewer times, or use `while` or `for ($i : 0..N)`, which are not copied"));
                    }
                    if !falls {
                        break;
                    }
                }
                falls
            }
            StmtKind::While { cond, body } => {
                let (top, end) = (self.asm.new_label(), self.asm.new_label());
                self.asm.bind(top);
                self.branch_unless(cond, end)?;
                self.loop_body(body, top, end, stmt.span)?;
                self.asm.bind(end);
                true
            }
            StmtKind::For { var, iterable: Expr { kind: ExprKind::Map { name, .. }, .. }, body, .. } => {
                self.for_each_entry(var, name, body, stmt.span)?;
                true
            }
            StmtKind::For { var, iterable, body, .. } if !matches!(iterable.kind, ExprKind::Range { .. }) => {
                self.for_each_cpu(var, iterable, body, stmt.span)?;
                true
            }
            StmtKind::For { var, iterable, body, .. } => {
                let ExprKind::Range { from, to } = &iterable.kind else {
                    return Err(Diagnostic::error(iterable.span, "internal error: for over a non-range"));
                };
                self.for_range(var, (from, to), body, stmt.span)?;
                true
            }
            StmtKind::Break | StmtKind::Continue => {
                let &(next, end) = self.loops.last().expect("checked: inside a loop");
                self.asm.jump(if matches!(stmt.kind, StmtKind::Break) { end } else { next });
                false
            }
            StmtKind::Block(block) => self.block(block)?,
            StmtKind::Return(value) => {
                if let Some(value) = value {
                    self.return_value(value)?;
                }
                self.asm.jump(self.exit);
                false
            }
        };
        self.frame.release_to(mark);
        Ok(falls_through)
    }

    /// `return value;`: an integer becomes the program's return value (a test's verdict), kept in the
    /// probe's frame; anything else is computed for its effects.
    fn return_value(&mut self, value: &Expr) -> Result<(), Diagnostic> {
        let (Some(slot), true) = (self.returned, self.ty(value)?.is_int()) else {
            self.effect(value)?;
            return Ok(());
        };
        let val = self.int(value)?;
        self.store_val_at(val, self.var_base, slot);
        Ok(())
    }

    /// `for ($cpu : mask) { ... }`: the body runs once per CPU set in the mask, in CPU order. Each
    /// 64-bit word of the mask is scanned by a bounded loop of 64 steps, shifting the word right; a
    /// word with no bits left ends its loop early.
    fn for_each_cpu(&mut self, var: &str, mask: &Expr, body: &Block, span: Span) -> Result<(), Diagnostic> {
        let ty = self.ty(mask)?;
        let buffer = self.frame.alloc(ty.slot_size(), span)?;
        self.value_into(mask, buffer, &ty)?;
        let (word, bit) = (self.frame.alloc(8, span)?, self.frame.alloc(8, span)?);
        let (base, slot) = self.var(var);
        for w in 0..ty.slot_size() / 8 {
            self.asm.load(Size::DW, Reg::R1, Reg::FP, buffer + 8 * w as i16);
            self.asm.store(Size::DW, Reg::FP, word, Reg::R1);
            self.asm.store_imm(Size::DW, Reg::FP, bit, 0);
            let (top, next, end) = (self.asm.new_label(), self.asm.new_label(), self.asm.new_label());
            self.asm.bind(top);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, bit);
            self.asm.jump_imm(Cond::UGe, Reg::R1, 64, end);
            self.asm.load(Size::DW, Reg::R2, Reg::FP, word);
            self.asm.jump_imm(Cond::Eq, Reg::R2, 0, end);
            self.asm.alu64_imm(bpf::Alu::And, Reg::R2, 1);
            self.asm.jump_imm(Cond::Eq, Reg::R2, 0, next);
            self.asm.alu64_imm(bpf::Alu::Add, Reg::R1, 64 * w as i32);
            self.asm.store(Size::DW, base, slot, Reg::R1);
            self.loop_body(body, next, end, span)?;
            self.asm.bind(next);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, word);
            self.asm.alu64_imm(bpf::Alu::Rsh, Reg::R1, 1);
            self.asm.store(Size::DW, Reg::FP, word, Reg::R1);
            self.asm.load(Size::DW, Reg::R1, Reg::FP, bit);
            self.asm.alu64_imm(bpf::Alu::Add, Reg::R1, 1);
            self.asm.store(Size::DW, Reg::FP, bit, Reg::R1);
            self.asm.jump(top);
            self.asm.bind(end);
        }
        Ok(())
    }

    /// A loop body whose end (or `continue`) jumps to `next` and whose `break` jumps to `end`.
    fn loop_body(
        &mut self,
        body: &Block,
        next: Label,
        end: Label,
        loop_span: Span,
    ) -> Result<(), Diagnostic> {
        self.loops.push((next, end));
        let falls = self.block(body)?;
        self.loops.pop();
        // What follows the body belongs to the loop itself (a verifier rejection of the jump back,
        // such as an infinite loop, points at the loop).
        self.spans.push((self.asm.len(), loop_span));
        if falls {
            self.asm.jump(next);
        }
        Ok(())
    }

    fn assign(
        &mut self,
        target: &Expr,
        op: Option<BinOp>,
        value: &Expr,
        span: Span,
    ) -> Result<(), Diagnostic> {
        match (&target.kind, op) {
            (ExprKind::Var(name), None) if self.ty(target)?.is_int() => {
                let (base, slot) = self.var(name);
                let val = self.int(value)?;
                self.store_val_at(val, base, slot);
            }
            // A struct's or a member array's copy finds its address, then reads memory into the slot, so
            // it goes straight into the variable: with no buffer beside it, an array of hundreds of bytes fits.
            (ExprKind::Var(name), None)
                if self.var(name).0 == Reg::FP
                    && match self.ty(value)? {
                        Type::Record { .. } => true,
                        Type::Array { .. } => self.is_member(value),
                        _ => false,
                    } =>
            {
                let ty = self.ty(target)?;
                self.value_into(value, self.vars[name], &ty)?;
            }
            // Likewise a struct's copy into a variable of the scratch area.
            (ExprKind::Var(name), None)
                if self.in_scratch.contains(name) && matches!(self.ty(value)?, Type::Record { .. }) =>
            {
                let ty = self.ty(target)?;
                self.record_into_at(value, self.var(name), &ty)?;
            }
            // Or a member array's.
            (ExprKind::Var(name), None)
                if self.in_scratch.contains(name)
                    && matches!(self.ty(value)?, Type::Array { .. })
                    && self.is_member(value) =>
            {
                let ty = self.ty(target)?;
                self.member_array_into_at(value, self.var(name), ty.slot_size())?;
            }
            // A variable of the scratch area given another of the same type: copied across, with no buffer.
            (ExprKind::Var(name), None)
                if self.in_scratch.contains(name)
                    && matches!(&value.kind, ExprKind::Var(_))
                    && self.ty(value)? == self.ty(target)? =>
            {
                let ExprKind::Var(from) = &value.kind else {
                    return Err(Diagnostic::error(value.span, "internal error: a variable that is none"));
                };
                let ((from_base, from), (to_base, to)) = (self.var(from), self.var(name));
                self.copy_between(from_base, from, to_base, to, self.ty(target)?.slot_size());
            }
            (ExprKind::Var(name), None) => {
                let ty = self.ty(target)?;
                let (base, slot) = self.var(name);
                // Written to a buffer first, so that `$s = $s` or `$x = ($x, 1)` read the old value.
                let buffer = self.frame.alloc(ty.slot_size(), span)?;
                self.value_into(value, buffer, &ty)?;
                self.copy_between(Reg::FP, buffer, base, slot, ty.slot_size());
            }
            (ExprKind::Var(name), Some(op)) => {
                let signed = self.ty(target)?.is_signed() && self.ty(value)?.is_signed();
                let operand = self.int(value)?;
                let operand = self.scaled(&self.ty(target)?, operand, span)?;
                let (base, slot) = self.var(name);
                self.asm.load(Size::DW, Reg::R0, base, slot);
                self.apply(op, Reg::R0, operand, signed, span)?;
                self.asm.store(Size::DW, base, slot, Reg::R0);
            }
            (ExprKind::Map { name, keys }, None) => match &value.kind {
                ExprKind::Call { name: f, args, .. } if crate::sema::is_aggregation(f) => {
                    self.aggregate(name, keys, args, span)?
                }
                _ => self.map_assign(name, keys, value, span)?,
            },
            (ExprKind::Map { name, keys }, Some(op)) => {
                let operand = self.int(value)?;
                let operand = self.scaled(&self.ty(target)?, operand, span)?;
                self.map_modify(name, keys, op, operand, span)?;
            }
            _ => return Err(Diagnostic::error(target.span, "internal error: assignment to a non-variable")),
        }
        Ok(())
    }

    /// An expression used as a statement: run for its effect; `false` after `exit()`.
    fn effect(&mut self, e: &Expr) -> Result<bool, Diagnostic> {
        match &e.kind {
            ExprKind::Block { block, value } => {
                if !self.block(block)? {
                    return Ok(false);
                }
                return match value {
                    Some(value) => self.effect(value),
                    None => Ok(true),
                };
            }
            // `c ? printf("a") : printf("b")`: a choice between two effects, as `if`/`else`.
            ExprKind::Ternary { cond, then, otherwise } if matches!(self.ty(e)?, Type::Void) => {
                let (no, done) = (self.asm.new_label(), self.asm.new_label());
                self.branch_unless(cond, no)?;
                let then_falls = self.effect(then)?;
                if then_falls {
                    self.asm.jump(done);
                }
                self.asm.bind(no);
                let else_falls = self.effect(otherwise)?;
                self.asm.bind(done);
                return Ok(then_falls || else_falls);
            }
            ExprKind::Call { args, expanded_from, .. } => {
                match self.probe.types.function(e).map(|id| self.functions.emit(id)) {
                    Some(Emit::Statement(emit)) => {
                        self.expanded_from.clone_from(expanded_from);
                        let emitted = emit(self, args, e.span);
                        self.expanded_from.clear();
                        return emitted;
                    }
                    _ if !self.ty(e)?.is_int() => self.discard_value(e)?,
                    _ => {
                        let val = self.int(e)?;
                        self.frame.release(val);
                    }
                }
            }
            // Reading a variable, a builtin or a literal has no effect: `username();`, `"text";`.
            ExprKind::Ident(_) | ExprKind::Var(_) | ExprKind::Str(_) | ExprKind::Int(_) => {}
            // Nor does naming a struct inside a struct (`curtask->se;`): nothing is read.
            _ if matches!(self.ty(e)?, Type::Record { .. }) => {}
            _ if !self.ty(e)?.is_int() => self.discard_value(e)?,
            _ => {
                let val = self.int(e)?;
                self.frame.release(val);
            }
        }
        Ok(true)
    }

    /// Computes a value that is not an integer (a string, a stack, a tuple) for its effects only.
    fn discard_value(&mut self, e: &Expr) -> Result<(), Diagnostic> {
        let ty = self.ty(e)?;
        let mark = self.frame.mark();
        let scratch = self.frame.alloc(ty.slot_size().div_ceil(8) * 8, e.span)?;
        self.value_into(e, scratch, &ty)?;
        self.frame.release_to(mark);
        Ok(())
    }

    /// Runs the statements of a block expression and gives the expression of its value.
    pub(crate) fn block_value<'e>(
        &mut self,
        block: &Block,
        value: &'e Option<Box<Expr>>,
        span: Span,
    ) -> Result<&'e Expr, Diagnostic> {
        if !self.block(block)? {
            return Err(Diagnostic::error(span, "this block ends the probe, so it gives no value")
                .with_help("end the probe after using the block's value instead"));
        }
        value
            .as_deref()
            .ok_or_else(|| Diagnostic::error(span, "internal error: a block without a value used as one"))
    }

    /// Sends a record that carries nothing but its id.
    pub(crate) fn send_record(&mut self, record: Record, span: Span) -> Result<(), Diagnostic> {
        let id = self.records.add(record);
        let buf = self.frame.alloc(8, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.output(buf, 8, span)
    }

    /// `r0 = (r0 == 0)`: a helper's 0-for-success return as a bool.
    pub(crate) fn r0_is_zero(&mut self) {
        let (nonzero, done) = (self.asm.new_label(), self.asm.new_label());
        self.asm.jump_imm(bpf::Cond::Ne, Reg::R0, 0, nonzero);
        self.asm.mov64_imm(Reg::R0, 1);
        self.asm.jump(done);
        self.asm.bind(nonzero);
        self.asm.mov64_imm(Reg::R0, 0);
        self.asm.bind(done);
    }

    /// Ends the program where `reg` holds 0 (a pointer the kernel may hand over as NULL, checked before use).
    pub(crate) fn exit_if_zero(&mut self, reg: Reg) {
        self.asm.jump_imm(bpf::Cond::Eq, reg, 0, self.exit);
    }

    /// Sends `[id][value]`: a record carrying one integer.
    pub(crate) fn send_record_with(
        &mut self,
        record: Record,
        value: &Expr,
        span: Span,
    ) -> Result<(), Diagnostic> {
        let id = self.records.add(record);
        let buf = self.frame.alloc(16, span)?;
        let val = self.int(value)?;
        let reg = self.reg_of(val, Reg::R0);
        self.asm.store(Size::DW, Reg::FP, buf + 8, reg);
        self.frame.release(val);
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.output(buf, 16, span)
    }

    pub(crate) fn print(&mut self, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
        if let ExprKind::Map { name, keys } = &args[0].kind {
            if keys.is_empty() {
                let (map, _) = self.maps.get(name).expect("checked");
                let top = args.get(1).and_then(constant).map(|n| n as usize).filter(|&n| n > 0);
                let div = args.get(2).and_then(constant).map(|n| n as u64).filter(|&n| n > 0);
                return self.send_record(Record::PrintMap { map, top, div }, span);
            }
        }
        if matches!(&args[0].kind, ExprKind::Ident(name) if name == "args") {
            return self.print_args(args[0].span, span);
        }
        if let ExprKind::Map { name, keys } = &args[0].kind {
            if self.decl(name).1.value == MapValue::Agg(Agg::Stats) {
                return self.print_stats_entry(name, keys, span);
            }
        }
        let ty = match self.probe.types.resolved(&args[0])? {
            Resolved::Type(ty) => ty.clone(),
            _ => {
                return Err(Diagnostic::error(
                    args[0].span,
                    "internal error: a printed value without its type",
                ))
            }
        };
        let id = self.records.add(Record::PrintValue { ty: ty.clone() });
        let buf = self.frame.alloc(8 + ty.slot_size(), span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.value_into(&args[0], buf + 8, &ty)?;
        self.output(buf, 8 + ty.slot_size(), span)
    }

    /// `print(@m[k])` of a `stats()` map: the entry's count, average and total, merged over the CPUs, printed
    /// as the record [`crate::sema::stats_entry`].
    fn print_stats_entry(&mut self, name: &str, keys: &[Expr], span: Span) -> Result<(), Diagnostic> {
        let ty = crate::sema::stats_entry();
        let (_, decl) = self.decl(name);
        let key = self.key_into(&decl, keys, None, span)?;
        let id = self.records.add(Record::PrintValue { ty: ty.clone() });
        let buf = self.frame.alloc(8 + ty.slot_size(), span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.merge_cpus(name, Agg::Stats, (Reg::FP, key), (Reg::FP, buf + 8), span)?;
        self.output(buf, 8 + ty.slot_size(), span)
    }

    /// `print(args)`: every readable field of the tracepoint's record, one after the other.
    fn print_args(&mut self, args_span: Span, span: Span) -> Result<(), Diagnostic> {
        let fields = self.args_fields(args_span)?;
        let size: usize = fields.iter().map(|(_, ty, _)| ty.slot_size()).sum();
        let buf = self.frame.alloc(8 + size, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, 0);
        self.args_into(&fields, buf + 8, args_span)?;
        let id = self.records.add(Record::PrintArgs { fields });
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        self.output(buf, 8 + size, span)
    }

    /// The fields of `args` in this program's own tracepoint (the probe's tracepoints agree on their names
    /// and types only): `(name, type, is a pointer)`.
    fn args_fields(&self, span: Span) -> Result<Vec<(String, Type, bool)>, Diagnostic> {
        self.probe.types.args_record(self.point_index, span).map(<[_]>::to_vec)
    }

    /// Writes the fields of `args`, one after the other, at `fp + at`.
    fn args_into(
        &mut self,
        fields: &[(String, Type, bool)],
        mut at: i16,
        span: Span,
    ) -> Result<(), Diagnostic> {
        for (name, ty, _) in fields {
            let args = Expr { kind: ExprKind::Ident("args".into()), span, id: ExprId::NONE };
            let field = Expr {
                kind: ExprKind::Field { base: Box::new(args), field: name.clone() },
                span,
                id: ExprId::NONE,
            };
            self.value_into(&field, at, ty)?;
            at += ty.slot_size() as i16;
        }
        Ok(())
    }

    /// `printf(format, args...)`, or what else `action` does with the text: print the file it names
    /// (`cat("/proc/%d/status", pid)`), run it as a command (`system("ps -p %d", pid)`).
    pub(crate) fn printf(&mut self, args: &[Expr], span: Span, action: TextAction) -> Result<(), Diagnostic> {
        if action == TextAction::Print && self.point.provider.pinned_at().is_some() {
            return self.seq_printf(args, span);
        }
        self.formatted(args, span, action, None)
    }

    /// `errorf(format, args...)` (`error`) or `warnf(...)`: a message logged with the call's place.
    pub(crate) fn log(&mut self, args: &[Expr], span: Span, error: bool) -> Result<(), Diagnostic> {
        let log = crate::codegen::record::Log {
            error,
            span,
            location: Default::default(),
            expanded_from: self.expanded_from.clone(),
            expansions: String::new(),
        };
        self.formatted(args, span, TextAction::Print, Some(log))
    }

    /// A formatted message: printed, a file named for `cat`, a command for `system`, or with `log` an
    /// error or warning message.
    pub(crate) fn formatted(
        &mut self,
        args: &[Expr],
        span: Span,
        action: TextAction,
        log: Option<crate::codegen::record::Log>,
    ) -> Result<(), Diagnostic> {
        let Some(format) = args.first() else {
            return Err(Diagnostic::error(span, "internal error: printf without a format"));
        };
        let pieces = self.probe.types.format(format)?.to_vec();
        let conversions: Vec<ConvKind> = pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Conv(conv) => Some(conv.kind),
                Piece::Text(_) => None,
            })
            .collect();
        // Lay out the record: constants stay in userspace, the rest get 8-byte-aligned slots.
        let mut size = 8;
        let mut sources = vec![];
        let mut types = vec![];
        for arg in &args[1..] {
            if matches!(&arg.kind, ExprKind::Ident(name) if name == "args") {
                let fields = self.args_fields(arg.span)?;
                let bytes: usize = fields.iter().map(|(_, ty, _)| ty.slot_size()).sum();
                sources.push(ArgSource::Args { offset: size, fields });
                size += bytes;
                types.push(Type::Void);
                continue;
            }
            let ty = self.ty(arg)?;
            let source = match (&arg.kind, &ty) {
                (ExprKind::Str(s), _) => ArgSource::ConstStr(s.clone()),
                (ExprKind::Ident(_), _) if self.probe.types.builtin(arg) == Some(Builtin::Probe) => {
                    ArgSource::ConstStr(self.point.name.clone())
                }
                (ExprKind::Ident(_), _) if self.probe.types.builtin(arg) == Some(Builtin::Probetype) => {
                    ArgSource::ConstStr(self.point.probe_type().to_string())
                }
                // `%s` of a value that is no string: printed as `print()` prints it.
                (
                    _,
                    Type::Int { .. }
                    | Type::Bool
                    | Type::Ptr { .. }
                    | Type::Pointer { .. }
                    | Type::Tuple(_)
                    | Type::NamedTuple { .. }
                    | Type::Array { .. }
                    | Type::Bytes { .. }
                    | Type::Record { .. },
                ) if conversions.get(sources.len()) == Some(&ConvKind::Str) => {
                    let ty = match &ty {
                        // A struct as the named tuple of its members, which the check resolved.
                        Type::Record { .. } => match self.probe.types.resolved(arg)? {
                            Resolved::Type(value) => value.clone(),
                            _ => {
                                return Err(Diagnostic::error(
                                    arg.span,
                                    "internal error: a printed struct without its value's type",
                                ))
                            }
                        },
                        ty => ty.clone(),
                    };
                    let source = ArgSource::Value { offset: size, ty: ty.clone() };
                    size += ty.slot_size();
                    source
                }
                (ExprKind::Int(value), ty) => ArgSource::ConstInt { value: *value, signed: ty.is_signed() },
                (_, Type::Username) => {
                    let source = ArgSource::Username { offset: size };
                    size += 8;
                    source
                }
                (_, Type::Stack(stack)) => {
                    let source = ArgSource::Stack { offset: size, stack: *stack };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Cpumask { bytes }) => {
                    let source = ArgSource::Cpumask { offset: size, bytes: *bytes };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Symbol { user }) => {
                    let source = ArgSource::Symbol { offset: size, user: *user };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Function { names }) => {
                    let source = ArgSource::Function { offset: size, names: names.clone() };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Buf { .. }) => {
                    let source = ArgSource::Buf { offset: size };
                    size += ty.slot_size();
                    source
                }
                (_, Type::CgroupPath { filter }) => {
                    let source = ArgSource::CgroupPath { offset: size, filter: filter.clone() };
                    size += ty.slot_size();
                    source
                }
                (_, Type::ContainerId) => {
                    let source = ArgSource::ContainerId { offset: size };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Timestamp { format }) => {
                    let source = ArgSource::Timestamp { offset: size, format: format.clone() };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Enum { def, .. }) if conversions.get(sources.len()) == Some(&ConvKind::Str) => {
                    let source = ArgSource::Enum { offset: size, def: def.clone() };
                    size += 8;
                    source
                }
                (_, Type::MacAddr) => {
                    let source = ArgSource::MacAddr { offset: size };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Inet) => {
                    let source = ArgSource::Inet { offset: size };
                    size += ty.slot_size();
                    source
                }
                (_, Type::Str { size: len }) => {
                    let source = ArgSource::Str { offset: size, size: *len };
                    size += ty.slot_size();
                    source
                }
                (_, ty) => {
                    let source = ArgSource::Int { offset: size, signed: ty.is_signed() };
                    size += 8;
                    source
                }
            };
            sources.push(source);
            types.push(ty);
        }
        let id = self.records.add(Record::Printf { pieces, args: sources.clone(), action, log });
        // A large record goes in the scratch area, where the program has one: each argument is written on
        // the stack, then copied there.
        let (base, buf) = self.buffer(size, size > LARGE_RECORD, span)?;
        self.asm.store_imm(Size::DW, base, buf, id as i32);
        let offsets: Vec<usize> = sources.iter().filter_map(arg_offset).chain([size]).collect();
        for ((arg, source), ty) in args[1..].iter().zip(&sources).zip(&types) {
            if base == Reg::FP {
                self.arg_into(arg, source, ty, buf)?;
                continue;
            }
            let Some(offset) = arg_offset(source) else { continue };
            let end = offsets.iter().copied().find(|&end| end > offset).unwrap_or(size);
            let (mark, len) = (self.frame.mark(), end - offset);
            let place = self.frame.alloc(len, arg.span)? - offset as i16;
            self.arg_into(arg, source, ty, place)?;
            self.copy_between(Reg::FP, place + offset as i16, base, buf + offset as i16, len);
            self.frame.release_to(mark);
        }
        self.refuse_when_pinned(span)?;
        self.output_from(base, buf, size, span, super::RINGBUF_NO_WAKEUP)
    }

    /// Writes printf argument `arg`, from `source`, at its place in the record at `fp + buf`.
    fn arg_into(&mut self, arg: &Expr, source: &ArgSource, ty: &Type, buf: i16) -> Result<(), Diagnostic> {
        match source {
            ArgSource::Args { offset, fields } => self.args_into(fields, buf + *offset as i16, arg.span)?,
            &ArgSource::Int { offset, .. }
            | &ArgSource::Str { offset, .. }
            | &ArgSource::Stack { offset, .. }
            | &ArgSource::Cpumask { offset, .. }
            | &ArgSource::Symbol { offset, .. }
            | &ArgSource::Function { offset, .. }
            | &ArgSource::Buf { offset }
            | &ArgSource::Timestamp { offset, .. }
            | &ArgSource::CgroupPath { offset, .. }
            | &ArgSource::ContainerId { offset }
            | &ArgSource::Inet { offset }
            | &ArgSource::MacAddr { offset }
            | &ArgSource::Enum { offset, .. }
            | &ArgSource::Username { offset } => self.value_into(arg, buf + offset as i16, ty)?,
            ArgSource::Value { offset, ty } => self.value_into(arg, buf + *offset as i16, ty)?,
            ArgSource::ConstStr(_) | ArgSource::ConstInt { .. } => {}
        }
        Ok(())
    }

    /// `exit(code)`: tell userspace to stop, and leave this program at once.
    pub(crate) fn exit_call(&mut self, code: Option<&Expr>, span: Span) -> Result<(), Diagnostic> {
        // A pinned iterator's reader is not steadytrace: the call for this object just ends.
        if self.point.provider.pinned_at().is_some() {
            self.asm.jump(self.exit);
            return Ok(());
        }
        let buf = self.frame.alloc(16, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, EXIT_RECORD as i32);
        match code {
            Some(code) => {
                let val = self.int(code)?;
                let reg = self.reg_of(val, Reg::R0);
                self.asm.store(Size::DW, Reg::FP, buf + 8, reg);
                self.frame.release(val);
            }
            None => self.asm.store_imm(Size::DW, Reg::FP, buf + 8, 0),
        }
        self.output_waking(buf, 16, span)?;
        self.asm.ld_map_value(Reg::R1, super::FixedMap::Exited.index());
        self.asm.store_imm(Size::DW, Reg::R1, 0, 1);
        self.asm.jump(self.exit);
        Ok(())
    }
}
