//! What sema learnt about each expression, for codegen: its type, the function a call is, the kernel
//! struct member a `->` reads, the pieces of a printf format. Keyed by [`ExprId`]: sema numbers every
//! expression of the program once, after scoping renamed its variables and before typing, so that ids
//! are unique however the parser or preprocessor produced the tree (spans are not: expansions repeat them).

use super::builtins::Builtin;
use super::env::FunctionId;
use super::env::Learnt;
use super::format::{self, Piece};
pub use super::resolved::Resolved;
use super::types::{StackType, Type};
use super::Env;
use crate::kernel::tracefs::Field;
use crate::kernel::{KernelTypes, Member, MemberKind};
use crate::lang::ast::{Block, Expr, ExprId, ExprKind, Probe};
use crate::lang::walk::{each_child, each_child_mut, each_expr, each_expr_mut};
use crate::lang::{Diagnostic, Span};
use std::collections::HashMap;

/// The facts about a probe's expressions.
#[derive(Default)]
pub struct ExprTypes {
    types: HashMap<ExprId, Type>,
    calls: HashMap<ExprId, FunctionId>,
    /// What each name (`ExprKind::Ident`) is: a builtin, or the value of an enum constant.
    names: HashMap<ExprId, Name>,
    members: HashMap<ExprId, Member>,
    formats: HashMap<ExprId, Vec<Piece>>,
    /// For each attach point of the probe, in order: the tracepoint fields the probe reads (`args.NAME`)
    /// as that point lays them out (the probe's tracepoints agree on their types, not their offsets).
    point_fields: Vec<HashMap<String, Field>>,
    /// For each attach point, its whole record when the probe prints `args`: `(name, type, is a pointer)`.
    args_records: Vec<Vec<(String, Type, bool)>>,
    /// The stacks the probe records (`kstack`, `ustack(5)`), in the order they appear: each needs a
    /// stack-trace map of its kind and depth.
    pub stacks: Vec<StackType>,
    /// What the checks of calls resolved, by the call's first argument (what names the type, member,
    /// variable or register).
    resolved: HashMap<ExprId, Resolved>,
    /// The members of each struct or union the probe copies as a value, by its id, inner ones too.
    record_members: HashMap<u32, Vec<(String, Member)>>,
    /// Where the kernel keeps a task's user registers, when the probe copies a user stack
    /// (`dw_ustack`) and the kernel cannot give them (no `bpf_task_pt_regs`): see
    /// [`saved_user_registers`].
    pub saved_user_registers: Option<(i32, i32)>,
}

/// What a name in an expression was resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Builtin(Builtin),
    /// `argN`: the probe's argument number N, wherever its attach point keeps it.
    Argument(usize),
    /// `retval`.
    Retval,
    /// An enum constant of the script's or the kernel's types, by value.
    EnumConstant(i64),
}

fn missing(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("internal error: the checker left no {what} for this expression"))
}

impl ExprTypes {
    /// The type of `e`.
    pub fn type_of(&self, e: &Expr) -> Result<&Type, Diagnostic> {
        self.types.get(&e.id).ok_or_else(|| missing(e.span, "type"))
    }

    /// The function the call `e` calls, `None` when `e` is no call of a builtin function.
    pub fn function(&self, e: &Expr) -> Option<FunctionId> {
        self.calls.get(&e.id).copied()
    }

    /// The builtin the name `e` is, `None` for any other expression (also for the names only some probes
    /// have, `args`, `func`, `retval`, `cpid`, which codegen reads by their probe's context).
    pub fn builtin(&self, e: &Expr) -> Option<Builtin> {
        match self.names.get(&e.id) {
            Some(Name::Builtin(builtin)) => Some(*builtin),
            _ => None,
        }
    }

    /// What the name `e` was resolved to.
    pub fn name(&self, e: &Expr) -> Option<Name> {
        self.names.get(&e.id).copied()
    }

    /// The value of the enum constant `e` names.
    pub fn enum_constant(&self, e: &Expr) -> Result<i64, Diagnostic> {
        match self.names.get(&e.id) {
            Some(Name::EnumConstant(value)) => Ok(*value),
            _ => Err(missing(e.span, "enum constant")),
        }
    }

    /// The member of a kernel struct that the field access `e` reads.
    pub fn member(&self, e: &Expr) -> Result<&Member, Diagnostic> {
        self.members.get(&e.id).ok_or_else(|| missing(e.span, "struct member"))
    }

    /// What the check of the call whose first argument is `arg` resolved.
    pub fn resolved(&self, arg: &Expr) -> Result<&Resolved, Diagnostic> {
        self.resolved.get(&arg.id).ok_or_else(|| missing(arg.span, "resolution"))
    }

    /// The constant the check of the call whose first argument is `arg` resolved.
    pub fn constant(&self, arg: &Expr) -> Result<u64, Diagnostic> {
        match self.resolved(arg)? {
            Resolved::Constant(value) => Ok(*value),
            _ => Err(missing(arg.span, "constant")),
        }
    }

    /// The members of struct or union `id`, a value of which the probe copies.
    pub fn record_members(&self, id: u32, span: Span) -> Result<&[(String, Member)], Diagnostic> {
        self.record_members.get(&id).map(Vec::as_slice).ok_or_else(|| missing(span, "struct's members"))
    }

    /// The pieces of the format string literal `e` (the first argument of `printf` or `cat`).
    pub fn format(&self, e: &Expr) -> Result<&[Piece], Diagnostic> {
        self.formats.get(&e.id).map(Vec::as_slice).ok_or_else(|| missing(e.span, "format"))
    }

    /// The tracepoint field `name` at the probe's attach point number `point`.
    pub fn point_field(&self, point: usize, name: &str, span: Span) -> Result<&Field, Diagnostic> {
        self.point_fields.get(point).and_then(|fields| fields.get(name)).ok_or_else(|| missing(span, "field"))
    }

    /// The record `args` at the probe's attach point number `point`: `(name, type, is a pointer)`.
    pub fn args_record(&self, point: usize, span: Span) -> Result<&[(String, Type, bool)], Diagnostic> {
        self.args_records.get(point).map(Vec::as_slice).ok_or_else(|| missing(span, "record"))
    }

    /// Learns, for each attach point, the tracepoint fields of the probe's expressions (`args.NAME`, and
    /// every field of `args` printed whole).
    fn learn_points(&mut self, env: &Env, fields: &[(String, Span)], whole: Option<Span>) {
        for point in env.points {
            let env = Env { points: std::slice::from_ref(point), memo: None, ..*env };
            let record = whole.and_then(|span| env.args_record(span).ok()).unwrap_or_default();
            let mut known = HashMap::new();
            let names = fields
                .iter()
                .cloned()
                .chain(record.iter().map(|(name, ..)| (name.clone(), whole.unwrap_or_default())));
            for (name, span) in names {
                if let Ok((field, _)) = env.tracepoint_field(&name, span) {
                    known.insert(name, field);
                }
            }
            self.point_fields.push(known);
            self.args_records.push(record);
        }
    }

    /// Learns the facts of `e` and every expression in it, in the probe's final environment.
    fn learn(&mut self, env: &Env, e: &Expr) {
        if let Ok(ty) = env.type_of(e) {
            let recorded = matches!(&e.kind, ExprKind::Ident(_) | ExprKind::Call { .. });
            if let (Type::Stack(stack), true) = (&ty, recorded) {
                self.stacks.push(*stack);
            }
            if let Type::Record { record, .. } = &ty {
                self.learn_record(env.kernel, record.id);
            }
            self.types.insert(e.id, ty);
        }
        match &e.kind {
            ExprKind::Call { name, args, .. } => {
                if let Some(function) = env.functions.find(name) {
                    self.calls.insert(e.id, function);
                }
                if let (true, Some(Expr { kind: ExprKind::Str(text), span, id })) =
                    (matches!(name.as_str(), "printf" | "cat" | "system" | "errorf" | "warnf"), args.first())
                {
                    if let Ok(pieces) = format::parse(text, *span) {
                        self.formats.insert(*id, pieces);
                    }
                }
            }
            ExprKind::Field { base, field } if !matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                if let Ok((member, _)) = env.member(base, field, e.span) {
                    self.members.insert(e.id, member);
                }
            }
            ExprKind::Ident(name) => {
                let argument = name.strip_prefix("arg").and_then(|n| n.parse().ok()).map(Name::Argument);
                let resolved = match Builtin::from_name(name) {
                    Some(builtin) => Some(Name::Builtin(builtin)),
                    None if name == "retval" => Some(Name::Retval),
                    None => argument.or_else(|| {
                        env.kernel.enum_constant(name).map(|(_, value)| Name::EnumConstant(value))
                    }),
                };
                if let Some(resolved) = resolved {
                    self.names.insert(e.id, resolved);
                }
            }
            _ => {}
        }
        each_child(e, &mut |child| self.learn(env, child));
    }

    /// Learns the members of record `id` and of the records inside it.
    fn learn_record(&mut self, kernel: &KernelTypes, id: u32) {
        if self.record_members.contains_key(&id) {
            return;
        }
        let members = kernel.members(id).unwrap_or_default();
        let inner: Vec<u32> = members
            .iter()
            .filter_map(|(_, m)| match m.kind {
                MemberKind::Record { id } => Some(id),
                _ => None,
            })
            .collect();
        self.record_members.insert(id, members);
        for id in inner {
            self.learn_record(kernel, id);
        }
    }
}

/// Where a task's user registers are without `bpf_task_pt_regs` (before Linux 5.15): the offset of
/// `task_struct.stack`, and that of the registers from the stack's base (`THREAD_SIZE - sizeof(struct
/// pt_regs)`, x86-64's `TOP_OF_KERNEL_STACK_PADDING` being 0 on these kernels); `None` where the kernel's BTF
/// does not say.
fn saved_user_registers(kernel: &KernelTypes) -> Option<(i32, i32)> {
    let stack = kernel.member(kernel.record_id(false, "task_struct")?, "stack").ok()?.offset;
    let regs = kernel.record_size(kernel.record_id(false, "pt_regs")?)?;
    let size = bpf::arch::HOST.unwind_registers.kernel_stack_size;
    Some((i32::try_from(stack).ok()?, size - i32::try_from(regs).ok()?))
}

/// The facts of every expression of a probe that passed the checks.
pub fn learn(env: &Env, predicate: Option<&Expr>, body: &Block) -> ExprTypes {
    let learnt = Learnt::default();
    let env = &Env { memo: Some(&learnt), ..*env };
    let mut types = ExprTypes::default();
    let (mut fields, mut whole) = (vec![], None);
    let mut learn = |e: &Expr| {
        types.learn(env, e);
        args_uses(e, &mut fields, &mut whole);
    };
    predicate.into_iter().for_each(&mut learn);
    each_expr(body, &mut learn);
    types.learn_points(env, &fields, whole);
    types.resolved = learnt.resolved.take();
    let copies_user_stack = types.stacks.iter().any(|s| s.user && s.dwarf);
    if copies_user_stack && !env.kernel.features.has(bpf::features::Feature::TaskPtRegs) {
        types.saved_user_registers = saved_user_registers(env.kernel);
    }
    types
}

/// The fields of `args` that `e` reads (`args.NAME`), and where it uses `args` whole, if it does.
fn args_uses(e: &Expr, fields: &mut Vec<(String, Span)>, whole: &mut Option<Span>) {
    let is_args = |e: &Expr| matches!(&e.kind, ExprKind::Ident(name) if name == "args");
    match &e.kind {
        ExprKind::Field { base, field } if is_args(base) => fields.push((field.clone(), e.span)),
        _ if is_args(e) => *whole = Some(e.span),
        _ => each_child(e, &mut |child| args_uses(child, fields, whole)),
    }
}

/// Gives every expression of the probes a number of its own, from 1.
pub fn number(probes: &mut [Probe]) {
    fn walk(e: &mut Expr, next: &mut u32) {
        e.id = ExprId(*next);
        *next += 1;
        each_child_mut(e, &mut |child| walk(child, next));
    }
    let mut next = 1;
    for probe in probes {
        if let Some(predicate) = &mut probe.predicate {
            walk(predicate, &mut next);
        }
        each_expr_mut(&mut probe.body, &mut |e| walk(e, &mut next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ast::StmtKind;

    /// `printf` alone, typed as a statement; `str()` is a builtin cast here, not a function.
    struct OnlyPrintf;

    impl crate::sema::FunctionTable for OnlyPrintf {
        fn find(&self, name: &str) -> Option<FunctionId> {
            (name == "printf").then_some(FunctionId(7))
        }
        fn check(&self, _: FunctionId, env: &Env, call: &crate::sema::Call) -> Result<Type, Diagnostic> {
            call.args.iter().try_for_each(|arg| env.type_of(arg).map(drop))?;
            Ok(Type::Void)
        }
        fn check_statement(&self, _: FunctionId, _: &Env, _: &crate::sema::Call) -> Vec<Diagnostic> {
            vec![]
        }
        fn not_yet(&self, _: &str) -> bool {
            false
        }
    }

    #[test]
    fn every_expression_gets_a_type_and_every_call_its_function() {
        let checked = crate::sema::check(
            &crate::lang::parse(r#"BEGIN { $s = comm; printf("%s %d\n", $s, pid + 1); }"#).expect("parses"),
            &Default::default(),
            &OnlyPrintf,
            &KernelTypes::none(),
        )
        .expect("checks");
        let probe = &checked.probes[0];
        let StmtKind::Expr(printf) = &probe.body.stmts[1].kind else { panic!("a printf statement") };
        let ExprKind::Call { args, .. } = &printf.kind else { panic!("a call") };
        assert_eq!(probe.types.function(printf), Some(FunctionId(7)));
        assert_eq!(probe.types.format(&args[0]).expect("parsed").len(), 4);
        assert_eq!(probe.types.type_of(&args[1]).ok(), Some(&Type::Str { size: 16 }));
        assert_eq!(probe.types.type_of(&args[2]).ok(), Some(&Type::U64));
        let ExprKind::Binary { lhs, .. } = &args[2].kind else { panic!("pid + 1") };
        assert!(probe.types.type_of(lhs).is_ok_and(Type::is_int));
    }

    #[test]
    fn numbers_are_unique() {
        let mut program =
            crate::lang::parse("BEGIN { @[1] = 2; } END /pid/ { print((1, 2)); }").expect("parses");
        number(&mut program.probes);
        let mut ids = vec![];
        for probe in &program.probes {
            let mut add = |e: &Expr| {
                fn all(e: &Expr, ids: &mut Vec<ExprId>) {
                    ids.push(e.id);
                    each_child(e, &mut |c| all(c, ids));
                }
                all(e, &mut ids)
            };
            probe.predicate.iter().for_each(&mut add);
            each_expr(&probe.body, &mut add);
        }
        let count = ids.len();
        assert_eq!(count, 8);
        ids.sort_by_key(|id| id.0);
        ids.dedup();
        assert_eq!(ids.len(), count);
        assert!(!ids.contains(&ExprId::NONE));
    }
}
