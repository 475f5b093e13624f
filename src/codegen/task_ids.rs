//! `bpf_get_current_pid_tgid` called once per run of a program where it would be called several times.
//!
//! `pid`, `tid`, a user stack (keyed with its process) and a user symbol each read the current task's ids,
//! which cannot change while the program runs. `/pid == $PID/ { printf("%d\n", tid); }` called the helper twice;
//! current bpftrace's LLVM merges the calls into one. Here, when the predicate reads the ids on every
//! evaluation (not behind `&&`, `||` or `?:`) and the probe reads them again, the helper is called once before
//! the predicate and its value kept in a slot of the probe's frame, which every later read loads (a loop's
//! callback through the probe's frame pointer); when only the body's own statements read them more than once,
//! at least once in a statement that always runs, the same happens at the body's start. Elsewhere (one read,
//! or every read behind a condition) nothing changes: a call made before knowing it is needed would cost the
//! events that never needed it.

use super::Gen;
use crate::lang::ast::{BinOp, Block, Expr, ExprKind, StmtKind};
use crate::lang::walk::{each_child, each_expr};
use crate::lang::{Diagnostic, Span};
use crate::sema::builtins::Builtin;
use crate::sema::types::Type;
use crate::sema::CheckedProbe;
use bpf::{Reg, Size};

/// Reads of the task's ids: all of them, and those made on every evaluation.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct Reads {
    pub all: usize,
    pub always: usize,
}

/// Where the program calls the helper once, if it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Once {
    BeforePredicate,
    AtBodyStart,
}

/// Whether `probe`'s program reads the task's ids once, and where.
pub(super) fn once(probe: &CheckedProbe) -> Option<Once> {
    let predicate = probe.predicate.as_ref().map_or(Reads::default(), |p| reads(probe, p));
    let body = Reads { all: block_reads(probe, &probe.body), always: statement_reads(probe, &probe.body) };
    if predicate.always > 0 && predicate.all + body.all >= 2 {
        return Some(Once::BeforePredicate);
    }
    (body.always > 0 && body.all >= 2).then_some(Once::AtBodyStart)
}

/// The reads of `e`.
fn reads(probe: &CheckedProbe, e: &Expr) -> Reads {
    let own = usize::from(reads_ids(probe, e));
    let mut out = Reads { all: own, always: own };
    match &e.kind {
        ExprKind::Binary { op: BinOp::And | BinOp::Or, lhs, rhs } => {
            let (l, r) = (reads(probe, lhs), reads(probe, rhs));
            out.all += l.all + r.all;
            out.always += l.always;
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            let c = reads(probe, cond);
            out.all += c.all + reads(probe, then).all + reads(probe, otherwise).all;
            out.always += c.always;
        }
        // A function may evaluate an argument or not (`sizeof`, a macro's block): only counted.
        ExprKind::Call { .. } | ExprKind::Block { .. } => {
            each_child(e, &mut |c| out.all += reads(probe, c).all)
        }
        _ => each_child(e, &mut |c| {
            let r = reads(probe, c);
            out.all += r.all;
            out.always += r.always;
        }),
    }
    out
}

/// Whether `e` itself (not what it holds) reads the task's ids.
fn reads_ids(probe: &CheckedProbe, e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Ident(_) if matches!(probe.types.builtin(e), Some(Builtin::Pid | Builtin::Tid)) => true,
        ExprKind::Ident(_) | ExprKind::Call { .. } => {
            matches!(
                probe.types.type_of(e),
                Ok(Type::Stack(stack)) if stack.user
            ) || matches!(probe.types.type_of(e), Ok(Type::Symbol { user: true }))
        }
        _ => false,
    }
}

/// All reads of the statements of `block`, at any depth.
fn block_reads(probe: &CheckedProbe, block: &Block) -> usize {
    let mut all = 0;
    each_expr(block, &mut |e| all += reads(probe, e).all);
    all
}

/// The reads every run of `block` makes: those of its statements before the first that holds a block (an `if`,
/// a loop), on every evaluation. (After an `exit()` statement nothing is generated: its reads cost nothing.)
fn statement_reads(probe: &CheckedProbe, block: &Block) -> usize {
    let mut always = 0;
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Expr(_) | StmtKind::Assign { .. } | StmtKind::Let { .. } => {
                always += stmt.exprs().iter().map(|e| reads(probe, e).always).sum::<usize>()
            }
            // A condition is evaluated at least once; what follows may not run (a `return` in it).
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => {
                return always + reads(probe, cond).always;
            }
            _ => return always,
        }
    }
    always
}

impl Gen<'_> {
    /// Calls the helper and keeps its value for every later read (see the module's documentation).
    pub(super) fn keep_pid_tgid(&mut self, span: Span) -> Result<(), Diagnostic> {
        let slot = self.frame.alloc(8, span)?;
        self.pid_tgid(span)?;
        self.asm.store(Size::DW, Reg::FP, slot, Reg::R0);
        self.kept_pid_tgid = Some((slot, self.asm.len()));
        Ok(())
    }

    /// `r0 = ` the kept value, when the program keeps it (r0 still holds it right after the store, unless
    /// code jumps there from elsewhere).
    pub(super) fn load_kept_pid_tgid(&mut self) -> bool {
        let Some((slot, stored)) = self.kept_pid_tgid else { return false };
        if self.asm.len() != stored || self.asm.is_label_at(stored) {
            self.asm.load(Size::DW, Reg::R0, self.var_base, slot);
        }
        true
    }
}
