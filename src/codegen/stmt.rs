//! Statements, and the calls that act: `printf` and `exit`.

use super::record::{ArgSource, Record, EXIT_RECORD};
use super::Gen;
use crate::lang::ast::{Block, Expr, ExprKind, Stmt, StmtKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::builtins::Builtin;
use crate::sema::format;
use crate::sema::type_of;
use crate::sema::types::Type;
use bpf::{Reg, Size};

impl Gen<'_> {
    /// Generates a block; `false` when control never reaches its end (after `exit()` or `return`).
    /// Statements after that point get no code: the verifier rejects unreachable instructions.
    pub(super) fn block(&mut self, block: &Block) -> Result<bool, Diagnostic> {
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
            StmtKind::Block(block) => self.block(block)?,
            StmtKind::Return => {
                self.asm.jump(self.exit);
                false
            }
            _ => {
                return Err(Diagnostic::error(
                    stmt.span,
                    "internal error: statement passed the checks but has no code",
                ))
            }
        };
        self.frame.release_to(mark);
        Ok(falls_through)
    }

    /// An expression used as a statement: run for its effect; `false` after `exit()`.
    fn effect(&mut self, e: &Expr) -> Result<bool, Diagnostic> {
        match &e.kind {
            ExprKind::Call { name, args, .. } if name == "printf" => self.printf(args, e.span)?,
            ExprKind::Call { name, args, .. } if name == "exit" => {
                self.exit_call(args.first(), e.span)?;
                return Ok(false);
            }
            _ => {
                let val = self.int(e)?;
                self.frame.release(val);
            }
        }
        Ok(true)
    }

    fn printf(&mut self, args: &[Expr], span: Span) -> Result<(), Diagnostic> {
        let Some(Expr { kind: ExprKind::Str(text), span: format_span }) = args.first() else {
            return Err(Diagnostic::error(span, "internal error: printf without a format"));
        };
        let pieces = format::parse(text, *format_span)?;
        // Lay out the record: constants stay in userspace, the rest get 8-byte-aligned slots.
        let mut size = 8;
        let mut sources = vec![];
        for arg in &args[1..] {
            let source = match (&arg.kind, type_of(arg)?) {
                (ExprKind::Str(s), _) => ArgSource::ConstStr(s.clone()),
                (ExprKind::Ident(name), _) if Builtin::from_name(name) == Some(Builtin::Probe) => {
                    ArgSource::ConstStr(self.point.name.clone())
                }
                (ExprKind::Int(value), ty) => ArgSource::ConstInt { value: *value, signed: ty == Type::I64 },
                (_, Type::Str { size: len }) => {
                    let source = ArgSource::Str { offset: size, size: len };
                    size += len.div_ceil(8) * 8;
                    source
                }
                (_, ty) => {
                    let source = ArgSource::Int { offset: size, signed: ty == Type::I64 };
                    size += 8;
                    source
                }
            };
            sources.push(source);
        }
        let id = self.records.add(Record::Printf { pieces, args: sources.clone() });
        let buf = self.frame.alloc(size, span)?;
        self.asm.store_imm(Size::DW, Reg::FP, buf, id as i32);
        for (arg, source) in args[1..].iter().zip(&sources) {
            match *source {
                ArgSource::Int { offset, .. } => {
                    let val = self.int(arg)?;
                    let reg = self.reg_of(val, Reg::R0);
                    self.asm.store(Size::DW, Reg::FP, buf + offset as i16, reg);
                    self.frame.release(val);
                }
                ArgSource::Str { offset, size } => self.string_into(arg, buf + offset as i16, size)?,
                ArgSource::ConstStr(_) | ArgSource::ConstInt { .. } => {}
            }
        }
        self.output(buf, size, span)
    }

    /// `exit(code)`: tell userspace to stop, and leave this program at once.
    fn exit_call(&mut self, code: Option<&Expr>, span: Span) -> Result<(), Diagnostic> {
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
        self.output(buf, 16, span)?;
        self.asm.jump(self.exit);
        Ok(())
    }
}
