//! Semantic analysis: attach points resolved by their providers, maps and variables given their
//! types, builtins, functions and printf formats checked. Every problem found is reported, not only
//! the first.
//!
//! Its passes, in the order [`check`] runs them (the front end's own list is in `pipeline.rs`):
//!
//! | pass | reads | adds |
//! |------|-------|------|
//! | `builtin_names`, `stdlib_calls`, `aggregated_blocks` | each probe | calls spelled as builtins, bpftrace's stdlib calls, `@x = count()` blocks rewritten |
//! | `scope::resolve` | each probe | variables renamed by scope, their declarations; scope errors |
//! | `declared::read` | `let @m = ...` declarations | the declared maps |
//! | `probes::resolve` | attach points, probe options, the kernel's BTF | the attach points of each probe |
//! | `stdlib_macros::expand`, `typed::number` | the probes | macros of the stdlib expanded, an id per expression |
//! | `check_points`: learning walks | every probe, again until nothing changes | each map's and variable's type |
//! | `check_points`: checking walk | every compiled probe | every error; the aggregations read as numbers |
//! | `typed::learn` | each probe in its final environment | `ExprTypes`: a type per expression, the function of each call, members, and what each call resolved against the kernel's types (`Resolved`) |
//! | `maps::check_declared` | the declared maps, the maps the probes use | errors of declarations that do not fit their use; unused declarations warned |
//! | `MapTable::share_aggregations_read` | the aggregations the checking walk saw read, the kernel's features | which maps are shared by the CPUs (without per-CPU lookups) |
//!
//! One decision may check a probe twice: a kprobe wildcard first shares one kprobe_multi link; a script
//! that fails so (`func` as a string) is checked again with a program per function.

mod aggregated_blocks;
mod builtin_names;
pub mod builtins;
pub mod casts;
mod context;
pub mod declared;
pub mod env;
pub mod format;
pub mod kernel_format;
mod map_access;
pub mod maps;
pub mod resolved;
pub mod scope;
pub mod sign_warnings;
mod stdlib_calls;
mod stdlib_macros;
pub mod struct_values;
pub mod tseries;
pub mod typed;
pub mod types;
mod typing;

use crate::kernel::KernelTypes;
use crate::lang::ast::*;
pub use crate::lang::constant::{constant, constant_index};
use crate::lang::{Diagnostic, Span};
use crate::probes::{self, AttachPoint};
use bpf::features::Features;
pub use env::{Call, Env, FunctionId, FunctionTable, STR_SIZE};
pub use map_access::{is_aggregation, stats_entry};
use maps::{Agg, MapDecl, MapTable, MapValue};
use std::collections::HashMap;
use std::sync::Arc;
use types::Type;

/// A program that passed every check.
pub struct Checked {
    pub probes: Vec<CheckedProbe>,
    /// The builtin functions the program was checked against.
    pub functions: &'static dyn FunctionTable,
    pub maps: MapTable,
    /// What the kernel offers, as sema was told: codegen and the runtime decide by the same answers.
    pub features: Arc<Features>,
    /// What the script runs with but should change.
    pub warnings: Vec<Diagnostic>,
}

pub struct CheckedProbe {
    pub points: Vec<AttachPoint>,
    pub predicate: Option<Expr>,
    pub body: Block,
    /// The probe's scratch variables and their types.
    pub vars: HashMap<String, Type>,
    /// Which block declares each variable.
    pub declarations: scope::Declarations,
    /// The type of every expression, the function of every call, and what else codegen needs of them.
    pub types: typed::ExprTypes,
    /// The variables only ever given literals that are not negative, which take the sign of an unsigned
    /// operand beside them (`sign_warnings::literal_vars`).
    pub literal_vars: std::collections::HashSet<String>,
}

/// Checks `program` against the builtin `functions`: resolves its attach points, types every expression
/// and records what codegen needs.
pub fn check(
    program: &Program,
    options: &probes::Options,
    functions: &'static dyn FunctionTable,
    kernel: &KernelTypes,
) -> Result<Checked, Vec<Diagnostic>> {
    let mut diags = vec![];
    let mut warnings = vec![];
    let mut program = program.clone();
    let mut declarations = vec![];
    for probe in &mut program.probes {
        builtin_names::rewrite(&mut probe.predicate, &mut probe.body, functions);
        stdlib_calls::rewrite(&mut probe.predicate, &mut probe.body);
        aggregated_blocks::rewrite(&mut probe.body);
        let (declared, problems) = scope::resolve(&mut probe.predicate, &mut probe.body);
        declarations.push(declared);
        let (warned, errors): (Vec<_>, Vec<_>) = problems.into_iter().partition(|d| d.is_warning);
        warnings.extend(warned);
        diags.extend(errors);
    }
    let (declared, problems) = declared::read(&program.map_decls);
    diags.extend(problems);
    let mut points = vec![];
    let mut kept = vec![];
    let mut unresolved = vec![];
    for probe in &program.probes {
        let mut resolved = vec![];
        let mut failed = false;
        for text in probe.attach_points.iter().filter(|text| options.attaches(&text.text)) {
            match probes::resolve(&text.text, text.span, options, kernel) {
                Ok(found) => resolved.extend(found),
                Err(diag) => {
                    diags.push(diag);
                    failed = true;
                }
            }
        }
        // A probe all of whose attach points were skipped as missing (`missing_probes`) is left out.
        kept.push(failed || !resolved.is_empty());
        unresolved.push(failed && resolved.is_empty());
        points.push(resolved);
    }
    diags.extend(names_used_twice(points.iter().flatten()));
    diags.extend(iterators_alone(points.iter().flatten()));
    if !kept.iter().any(|&k| k) {
        let span =
            program.probes.first().and_then(|p| p.attach_points.first()).map_or(Span::new(0, 0), |a| a.span);
        let (message, help) = match options.probe_filter {
            Some(_) => ("--probe-filter matches none of the script's attach points: nothing to trace", "the filter is a regular expression found anywhere in an attach point as written (`interval:ms:200`, `kprobe:vfs_*`)"),
            None => ("none of the script's attach points exists here: nothing to trace", "`steadytrace -l` lists the probes of this kernel"),
        };
        return Err(vec![Diagnostic::error(span, message).with_help(help)]);
    }
    // A probe all of whose attach points were skipped is only read for the maps it sets; so is one none of
    // whose attach points could be had, whose error is reported already (its body, checked against no probe
    // type, would only add errors that follow from that one).
    let learn_only: Vec<bool> = kept.iter().zip(&unresolved).map(|(keep, failed)| !keep || *failed).collect();
    for ((probe, points), skipped) in program.probes.iter().zip(&mut points).zip(&learn_only) {
        if *skipped {
            *points = vec![probes::missing::Absent::point(probe.attach_points[0].span)];
        }
    }
    let missing: Vec<bool> = kept.iter().map(|k| !k).collect();
    warnings.extend(exit_codes_nobody_gets(&program, &points));
    let mut checked =
        check_resolved(&program, &declarations, points, (&learn_only, &missing), diags, functions, kernel)
            .map_err(|diags| {
                name_missing_headers(diags, &program.missing_headers, &program.built_in_headers)
            })?;
    let (errors, unused) = maps::check_declared(&declared, &checked.maps);
    if !errors.is_empty() {
        return Err(errors);
    }
    checked.maps.declared = declared;
    checked.maps.share_aggregations_read(&kernel.features);
    for probe in &checked.probes {
        warnings.extend(sign_warnings::find(
            probe.predicate.as_ref(),
            &probe.body,
            &probe.types,
            &probe.literal_vars,
        ));
    }
    checked.warnings = warnings;
    checked.warnings.extend(unused);
    Ok(checked)
}

/// An unknown identifier named like a macro in a script that includes a header found nowhere may be that
/// header's: its help names the header. A header found nowhere is otherwise not worth a word: bpftrace's own
/// tools include kernel headers for types that BTF gives here. Else, where a header is not installed and its
/// constants come from steadytrace's tables alone, the help names it and says where the tables come from.
fn name_missing_headers(
    diags: Vec<Diagnostic>,
    missing: &[(String, Span)],
    built_in: &[String],
) -> Vec<Diagnostic> {
    let help = match (missing.first(), built_in.first()) {
        (Some((header, _)), _) => format!("the script includes `{header}`, which was not found here (neither installed nor one of the tables in src/lang/headers.rs): the name may be defined there; add its directory with -I DIR, or write its value"),
        (None, Some(header)) => format!("the script includes `{header}`, which is not installed here: its constants come from steadytrace's tables (the uapi headers of Debian's linux-libc-dev, and a few of the kernel's own), which lack this name; add the header's directory with -I DIR, or write its value"),
        (None, None) => return diags,
    };
    let macro_like = |d: &Diagnostic| {
        let name = d.message.strip_prefix("unknown identifier `").and_then(|n| n.strip_suffix('`'));
        name.is_some_and(|n| {
            n.len() > 1 && n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
    };
    diags
        .into_iter()
        .map(|d| match macro_like(&d) {
            true => d.with_help(help.clone()),
            false => d,
        })
        .collect()
}

/// Checks the probes of `program` attached at `points` (one list per probe), after the `diags` of
/// resolving them, deciding which kprobe wildcards keep their kprobe_multi link.
fn check_resolved(
    program: &Program,
    declarations: &[scope::Declarations],
    mut points: Vec<Vec<AttachPoint>>,
    learn_only: (&[bool], &[bool]),
    diags: Vec<Diagnostic>,
    functions: &'static dyn FunctionTable,
    kernel: &KernelTypes,
) -> Result<Checked, Vec<Diagnostic>> {
    let mut program = program.clone();
    stdlib_macros::expand(&mut program.probes);
    typed::number(&mut program.probes);
    let program = &program;
    for (probe, points) in program.probes.iter().zip(&mut points) {
        // `probe` names the function that fired, which one program on many functions cannot know:
        // such a probe gets a program per function, as in bpftrace.
        if probe.uses_ident("probe") {
            *points = per_function(std::mem::take(points));
        }
    }
    let grouped = points.iter().flatten().any(|p| p.provider.per_function(p.span).is_some());
    match check_points(program, declarations, points.clone(), learn_only, diags.clone(), functions, kernel) {
        // Under a kprobe_multi link `func` is found at run time (a ksym), so a script using it as a
        // string fails here; with one program per function it is a constant string again. Grouping
        // functions must never make a script fail that checks without it.
        Err(_) if grouped => {
            let points = points.into_iter().map(per_function).collect();
            check_points(program, declarations, points, learn_only, diags, functions, kernel)
        }
        result => result,
    }
}

/// The points with each point that shares one program among many functions (a kprobe_multi link)
/// replaced by one point per function.
fn per_function(points: Vec<AttachPoint>) -> Vec<AttachPoint> {
    points
        .into_iter()
        .flat_map(|point| point.provider.per_function(point.span).unwrap_or_else(|| vec![point]))
        .collect()
}

/// Types the probes of `program`, attached at `points` (one list per probe), after the `diags` of
/// resolving them.
/// Probes marked `learn_only` only teach map declarations: they are not compiled. Of them, those `missing`
/// (every attach point skipped as absent) are checked for the mistakes that do not depend on the probe type.
fn check_points(
    program: &Program,
    declarations: &[scope::Declarations],
    points: Vec<Vec<AttachPoint>>,
    (learn_only, missing): (&[bool], &[bool]),
    mut diags: Vec<Diagnostic>,
    functions: &'static dyn FunctionTable,
    kernel: &KernelTypes,
) -> Result<Checked, Vec<Diagnostic>> {
    // Maps may be used in one probe before another gives them their type: first learn every
    // declaration (silently, until nothing new is learnt), then check with all of them known.
    let mut maps = MapTable::default();
    // Each pass can learn a map that only a later-declared one made visible (loops over maps); stop once a
    // pass learns nothing. Each probe's variables are learnt with them: a variable may be read before the
    // assignment that types it (`let $x; print($x); $x = 1;` reads 0, as in bpftrace), so every walk starts
    // from what the last one learnt, and the checking walk below from what they all did.
    let mut learnt: Vec<HashMap<String, Type>> = vec![HashMap::new(); program.probes.len()];
    for _ in 0..64 {
        let before = (maps.decls.len(), maps.decls.clone(), learnt.clone());
        for ((probe, points), vars) in program.probes.iter().zip(&points).zip(&mut learnt) {
            let mut checker = Checker {
                maps: &mut maps,
                vars: vars.clone(),
                points,
                functions,
                kernel,
                diags: None,
                loops: 0,
                unrolled: 1,
            };
            checker.probe(probe);
            *vars = checker.vars;
        }
        if (maps.decls.len(), maps.decls.clone(), learnt.clone()) == before {
            break;
        }
    }
    for (((probe, points), vars), _) in
        program.probes.iter().zip(&points).zip(&learnt).zip(missing).filter(|(_, missing)| **missing)
    {
        let mut found = vec![];
        let mut checker = Checker {
            maps: &mut maps,
            vars: vars.clone(),
            points,
            functions,
            kernel,
            diags: Some(&mut found),
            loops: 0,
            unrolled: 1,
        };
        checker.probe(probe);
        diags.extend(found.into_iter().filter(independent_of_the_probe));
    }
    // What the compiled probes read, from their checking walk alone: learning walks and probes only learnt
    // from are not compiled.
    maps.forget_aggregation_reads();
    let mut checked = vec![];
    for ((((probe, points), declarations), vars), _) in program
        .probes
        .iter()
        .zip(points)
        .zip(declarations.iter().cloned())
        .zip(learnt)
        .zip(learn_only)
        .filter(|(_, skipped)| !**skipped)
    {
        let mut checker = Checker {
            maps: &mut maps,
            vars,
            points: &points,
            functions,
            kernel,
            diags: Some(&mut diags),
            loops: 0,
            unrolled: 1,
        };
        checker.probe(probe);
        let vars = checker.vars;
        let env = Env { maps: &maps, vars: &vars, points: &points, functions, kernel, memo: None };
        let types = typed::learn(&env, probe.predicate.as_ref(), &probe.body);
        checked.push(CheckedProbe {
            points,
            predicate: probe.predicate.clone(),
            body: probe.body.clone(),
            vars,
            declarations,
            types,
            literal_vars: sign_warnings::literal_vars(probe.predicate.as_ref(), &probe.body),
        });
    }
    if diags.is_empty() {
        Ok(Checked { probes: checked, functions, maps, features: kernel.features.clone(), warnings: vec![] })
    } else {
        diags.sort_by_key(|d| d.span.start);
        diags.dedup();
        Err(diags)
    }
}

/// Whether an error in a skipped probe's body would be one whatever its probe: an unknown name, a variable
/// read before it is set, a call with the wrong number of arguments or a format they do not fit. Anything
/// else may come of the stand-in probe's context (no `args`, `func` as a string where the real probe had a
/// symbol, no binary for `uaddr()`), so it is not reported.
fn independent_of_the_probe(diag: &Diagnostic) -> bool {
    let message = diag.message.as_str();
    !diag.is_warning
        && (message.starts_with("unknown function")
            || message.starts_with("unknown identifier")
            || message.contains("is used before it is given a value")
            || message.starts_with("the format has")
            || (message.contains("` takes ") && message.contains("argument")))
}

/// Whether `e` reads the map `name`.
fn reads_map(e: &Expr, name: &str) -> bool {
    let mut found = matches!(&e.kind, ExprKind::Map { name: n, .. } if n == name);
    crate::lang::walk::each_child(e, &mut |child| found |= reads_map(child, name));
    found
}

pub(crate) fn not_yet(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("{what} not supported yet"))
        .with_help("see docs/LANGUAGE.md for what this version compiles")
}

struct Checker<'a> {
    maps: &'a mut MapTable,
    vars: HashMap<String, Type>,
    /// The probe's attach points: they decide which builtins exist.
    points: &'a [AttachPoint],
    functions: &'static dyn FunctionTable,
    kernel: &'a KernelTypes,
    /// `None` while learning map declarations: errors are found again when checking.
    diags: Option<&'a mut Vec<Diagnostic>>,
    /// Loops enclosing the statement being checked (for `break` and `continue`).
    loops: usize,
    /// How many times the innermost enclosing `unroll` body is repeated (the product of the nested counts).
    unrolled: u64,
}

impl Checker<'_> {
    /// Records a problem; an empty message is a consequence of one already reported.
    fn report(&mut self, diag: Diagnostic) {
        if diag.message.is_empty() {
            return;
        }
        // A variable whose assignment failed is never given a type: its reads are no further error.
        if diag.message.ends_with(NEVER_GIVEN) && self.diags.as_ref().is_some_and(|d| !d.is_empty()) {
            return;
        }
        if let Some(diags) = self.diags.as_deref_mut() {
            diags.push(diag);
        }
    }

    fn env(&self) -> Env<'_> {
        Env {
            maps: self.maps,
            vars: &self.vars,
            points: self.points,
            functions: self.functions,
            kernel: self.kernel,
            memo: None,
        }
    }

    fn probe(&mut self, probe: &Probe) {
        if let Some(predicate) = &probe.predicate {
            self.inner_blocks(predicate);
            self.int_expr(predicate, "a predicate");
        }
        self.block(&probe.body);
    }

    fn block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        self.inner_blocks_of(stmt);
        self.increments_inside(stmt);
        match &stmt.kind {
            StmtKind::Expr(e) => match &e.kind {
                ExprKind::Unary {
                    op: UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec,
                    operand,
                } => {
                    let one = Expr { kind: ExprKind::Int(1), span: e.span, id: ExprId::NONE };
                    self.assign(operand, Some(BinOp::Add), &one, stmt.span);
                }
                ExprKind::Call { name, args, .. } if is_aggregation(name) => {
                    let _ = args;
                    self.report(
                        Diagnostic::error(e.span, format!("`{name}()` must be assigned to a map"))
                            .with_help(format!("write `@name = {name}(...)` or `@name[key] = {name}(...)`")),
                    );
                }
                _ => {
                    if self.expr(e).is_some() {
                        self.statement_calls(e);
                    }
                }
            },
            StmtKind::Assign { target, op, value } => self.assign(target, *op, value, stmt.span),
            // `let $x;` gives no type: the first assignment does.
            StmtKind::Let { name, value, .. } => {
                if let Some(ty) = value.as_ref().and_then(|value| self.expr(value)) {
                    self.define_var(name, ty, stmt.span);
                }
            }
            StmtKind::If { cond, then, otherwise } => {
                self.int_expr(cond, "a condition");
                self.block(then);
                if let Some(otherwise) = otherwise {
                    self.block(otherwise);
                }
            }
            StmtKind::Unroll { count, body } => {
                // bpftrace's words, which scripts and its tests know.
                let problem = match count.kind {
                    ExprKind::Int(n) if (1..=100).contains(&n) => None,
                    ExprKind::Int(n) if n > 100 => Some("unroll maximum value is 100"),
                    ExprKind::Int(_) => Some("unroll minimum value is 1"),
                    _ => Some("`unroll` takes a number from 1 to 100"),
                };
                if let Some(problem) = problem {
                    self.report(
                        Diagnostic::error(count.span, problem)
                            .with_help("for more repetitions use `while` or `for ($i : 0..N)`"),
                    );
                }
                let outer = self.unrolled;
                self.unrolled = outer.saturating_mul(match count.kind {
                    ExprKind::Int(n) => n.clamp(1, 100),
                    _ => 1,
                });
                if self.unrolled > MAX_UNROLLED && outer <= MAX_UNROLLED {
                    self.report(
                        Diagnostic::error(
                            count.span,
                            format!(
                                "nested `unroll`s repeat this body {} times, more than the {MAX_UNROLLED} instructions the kernel loads",
                                self.unrolled
                            ),
                        )
                        .with_help("unroll fewer times, or use `while` or `for ($i : 0..N)`, which are not copied"),
                    );
                }
                self.block(body);
                self.unrolled = outer;
            }
            StmtKind::While { cond, body } => {
                self.int_expr(cond, "a loop condition");
                self.loop_body(body);
            }
            StmtKind::For { var, iterable, body, .. } => match &iterable.kind {
                ExprKind::Range { from, to } => {
                    self.int_expr(from, "a range bound");
                    self.int_expr(to, "a range bound");
                    self.define_var(var, Type::I64, iterable.span);
                    self.loop_body(body);
                }
                ExprKind::Map { name, keys } if keys.is_empty() => {
                    match self.env().map_entry(name, iterable.span) {
                        Ok(entry) => {
                            self.define_var(var, entry, iterable.span);
                            self.loop_body(body);
                        }
                        Err(diag) => self.report(diag),
                    }
                }
                ExprKind::Map { name, .. } => self.report(
                    Diagnostic::error(iterable.span, "`for` iterates over a whole map").with_help(format!(
                        "write `for ($kv : @{name})`; `$kv.0` is the key, `$kv.1` the value"
                    )),
                ),
                _ => match self.expr(iterable) {
                    Some(Type::Cpumask { .. }) => {
                        self.define_var(var, Type::I64, iterable.span);
                        self.loop_body(body);
                    }
                    Some(_) => self.report(
                        Diagnostic::error(iterable.span, "`for` goes over a map, a range or a cpumask")
                            .with_help(
                                "write `for ($kv : @map)`, `for ($i : 0..10)` or `for ($cpu : args.cpumask)`",
                            ),
                    ),
                    None => {}
                },
            },
            StmtKind::Break | StmtKind::Continue => {
                if self.loops == 0 {
                    self.report(Diagnostic::error(stmt.span, "`break` and `continue` only go inside a loop"));
                }
            }
            // An integer is the probe's return value (a test's verdict); anything else is computed for its
            // effects, and the probe returns 0.
            StmtKind::Return(Some(value)) => {
                if self.expr(value).is_some() {
                    self.statement_calls(value);
                }
            }
            StmtKind::Return(None) => {}
            StmtKind::Block(block) => self.block(block),
        }
    }

    /// Checks the statements of the block expressions in what `stmt` computes, before the statement
    /// itself: they define the variables their values read.
    /// `@n++` inside an expression (`if (@n++ == 3)`) gives a map its value as the statement `@n++` does.
    fn increments_inside(&mut self, stmt: &Stmt) {
        fn find<'a>(e: &'a Expr, found: &mut Vec<&'a Expr>) {
            if let ExprKind::Unary {
                op: UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec,
                operand,
            } = &e.kind
            {
                if matches!(operand.kind, ExprKind::Map { .. }) {
                    found.push(operand);
                }
            }
            crate::lang::walk::each_child(e, &mut |child| find(child, found));
        }
        let mut found = vec![];
        stmt.exprs().into_iter().for_each(|e| find(e, &mut found));
        for operand in found {
            let ExprKind::Map { name, .. } = &operand.kind else { continue };
            if self.maps.get(name).is_none() {
                let one = Expr { kind: ExprKind::Int(1), span: operand.span, id: ExprId::NONE };
                self.assign(operand, Some(BinOp::Add), &one, stmt.span);
            }
        }
    }

    fn inner_blocks_of(&mut self, stmt: &Stmt) {
        stmt.exprs().into_iter().for_each(|e| self.inner_blocks(e));
    }

    fn inner_blocks(&mut self, e: &Expr) {
        let mut blocks = vec![];
        e.blocks(&mut blocks);
        blocks.into_iter().for_each(|block| self.block(block));
    }

    fn loop_body(&mut self, body: &Block) {
        self.loops += 1;
        self.block(body);
        self.loops -= 1;
    }

    fn define_var(&mut self, name: &str, ty: Type, span: Span) {
        let ty = match struct_values::as_value(ty, span, self.kernel) {
            Ok(ty) => ty,
            Err(diag) => return self.report(diag),
        };
        if ty == Type::Void {
            self.report(Diagnostic::error(
                span,
                format!("`${}` cannot hold a value of type none", scope::shown(name)),
            ));
            return;
        }
        let merged = match self.vars.get(name) {
            None => Some(ty.clone()),
            Some(old) => old.unify(&ty),
        };
        match merged {
            Some(merged) => {
                self.vars.insert(name.to_string(), merged);
            }
            None => {
                let old = self.vars[name].clone();
                self.report(Diagnostic::error(
                    span,
                    format!("`${}` holds {old}, it cannot be given {ty}", scope::shown(name)),
                ));
            }
        }
    }

    fn assign(&mut self, target: &Expr, op: Option<BinOp>, value: &Expr, span: Span) {
        match &target.kind {
            ExprKind::Var(name) => {
                let Some(ty) = self.expr(value) else { return };
                if op.is_some() {
                    match self.vars.get(name) {
                        Some(old) if old.is_int() && ty.is_int() => {}
                        Some(old) => self.report(Diagnostic::error(
                            span,
                            format!("arithmetic assignment needs integers, but `${}` holds {old} and the value is {ty}", scope::shown(name)),
                        )),
                        None => self.report(Diagnostic::error(target.span, format!("`${}` is used before it is given a value", scope::shown(name)))),
                    }
                } else {
                    self.define_var(name, ty, span);
                }
            }
            ExprKind::Map { name, keys } => {
                let key = keys.iter().map(|k| self.key_part(k)).collect::<Option<Vec<_>>>();
                let value_kind = match (&value.kind, op) {
                    (ExprKind::Call { name: f, args, .. }, None) if is_aggregation(f) => {
                        self.aggregation(f, args, value.span).map(MapValue::Agg)
                    }
                    (_, None) => match self.expr(value) {
                        Some(Type::Void) => {
                            self.report(Diagnostic::error(value.span, "this gives no value to store"));
                            None
                        }
                        Some(ty) => match struct_values::as_value(ty, value.span, self.kernel) {
                            Ok(ty) => Some(MapValue::Plain(ty)),
                            Err(diag) => {
                                self.report(diag);
                                None
                            }
                        },
                        None => self.counter_from_itself(name, key.as_deref(), value).map(MapValue::Plain),
                    },
                    (_, Some(_)) => match self.expr(value) {
                        // `@p += 1` moves a pointer and keeps it one.
                        Some(ty) if ty.is_int() => match self.maps.get(name) {
                            Some((_, MapDecl { value: MapValue::Plain(p), .. })) if p.is_pointer() => {
                                Some(MapValue::Plain(p.clone()))
                            }
                            _ => Some(MapValue::Plain(Type::I64)),
                        },
                        Some(ty) => {
                            self.report(Diagnostic::error(
                                value.span,
                                format!("arithmetic assignment needs an integer, not {ty}"),
                            ));
                            None
                        }
                        None => None,
                    },
                };
                let (Some(key), Some(value)) = (key, value_kind) else { return };
                if matches!(value, MapValue::Agg(Agg::Tseries(_))) && key.iter().any(Type::holds_copied_stack)
                {
                    self.report(
                        Diagnostic::error(target.span, "a `tseries()` map cannot be keyed by `dw_ustack`")
                            .with_help(
                            "key it by `ustack` (frame pointers), or count with `count()` per `dw_ustack`",
                        ),
                    );
                    return;
                }
                let key_names = keys.iter().map(maps::key_name).collect();
                let cgroup_parts =
                    keys.iter().zip(&key).map(|(expr, ty)| maps::cgroup_part(expr, ty)).collect();
                let counter = matches!(op, Some(BinOp::Add | BinOp::Sub));
                let decl = MapDecl {
                    name: name.clone(),
                    key,
                    key_names,
                    cgroup_parts,
                    value,
                    span,
                    shared: false,
                    counter,
                };
                if let Err(existing) = self.maps.declare(decl.clone()) {
                    self.report(map_conflict(name, &existing, &decl, span));
                }
            }
            _ => self
                .report(Diagnostic::error(target.span, "only a `$variable` or an `@map` can be assigned to")),
        }
    }

    /// While learning declarations: `@n = @n + 1` where nothing else gives `@n` a value. A map reads as 0
    /// until it is set (as in bpftrace), so such a map is an integer map when its value, with the map taken
    /// as one, is an integer.
    fn counter_from_itself(&self, name: &str, key: Option<&[Type]>, value: &Expr) -> Option<Type> {
        let (true, None, Some(key)) = (self.diags.is_none(), self.maps.get(name), key) else { return None };
        if !reads_map(value, name) {
            return None;
        }
        let mut maps = self.maps.clone();
        let decl = MapDecl {
            name: name.to_string(),
            key: key.to_vec(),
            key_names: vec![],
            cgroup_parts: vec![],
            value: MapValue::Plain(Type::I64),
            span: value.span,
            shared: false,
            counter: false,
        };
        maps.declare(decl).ok()?;
        let env = Env {
            maps: &maps,
            vars: &self.vars,
            points: self.points,
            functions: self.functions,
            kernel: self.kernel,
            memo: None,
        };
        env.type_of(value).ok().filter(Type::is_int)
    }

    /// The type of one part of a map key (integers and strings, or a tuple of them).
    fn key_part(&mut self, key: &Expr) -> Option<Type> {
        let ty = self.expr(key)?;
        match ty {
            Type::Void => {
                self.report(Diagnostic::error(key.span, "this gives no value to use as a key"));
                None
            }
            ty => match struct_values::as_value(ty, key.span, self.kernel) {
                Ok(ty) => Some(ty),
                Err(diag) => {
                    self.report(diag);
                    None
                }
            },
        }
    }

    fn aggregation(&mut self, name: &str, args: &[Expr], span: Span) -> Option<Agg> {
        let arity = match name {
            "count" => 0..=0,
            "lhist" => 4..=4,
            "tseries" => 3..=4,
            "hist" => 1..=2,
            _ => 1..=1,
        };
        if !arity.contains(&args.len()) {
            let (min, max) = (arity.start(), arity.end());
            let wanted = if min == max { min.to_string() } else { format!("{min} or {max}") };
            self.report(Diagnostic::error(
                span,
                format!("`{name}()` takes {wanted} argument{}", if *max == 1 { "" } else { "s" }),
            ));
            return None;
        }
        let value_ty = match args.first() {
            Some(arg) => {
                let ty = self.expr(arg)?;
                if !ty.is_int() {
                    self.report(Diagnostic::error(
                        arg.span,
                        format!("`{name}()` counts integers, but this is {ty}"),
                    ));
                    return None;
                }
                Some(ty)
            }
            None => None,
        };
        Some(match name {
            "count" => Agg::Count,
            "sum" => Agg::Sum { signed: value_ty.is_some_and(|t| t.is_signed()) },
            "min" => Agg::Min,
            "max" => Agg::Max,
            "avg" => Agg::Avg,
            "stats" => Agg::Stats,
            "hist" => match args.get(1).map(|bits| (bits, constant(bits))) {
                None => Agg::Hist { bits: 0 },
                Some((_, Some(bits @ 0..=5))) => Agg::Hist { bits: bits as u32 },
                Some((bits, _)) => {
                    self.report(
                        Diagnostic::error(
                            bits.span,
                            "the second argument of `hist()` must be a constant from 0 to 5",
                        )
                        .with_help("it splits each power of 2 into 2^bits buckets, e.g. `hist($x, 2)`"),
                    );
                    return None;
                }
            },
            "tseries" => match tseries::check(args, value_ty.is_some_and(|t| t.is_signed())) {
                Ok(spec) => Agg::Tseries(spec),
                Err(diag) => {
                    self.report(diag);
                    return None;
                }
            },
            _ => {
                let mut bounds = [0i64; 3];
                for (bound, arg) in bounds.iter_mut().zip(&args[1..]) {
                    match constant(arg) {
                        Some(value) => *bound = value,
                        None => {
                            self.report(Diagnostic::error(
                                arg.span,
                                "the bounds and step of `lhist()` must be constant integers",
                            ));
                            return None;
                        }
                    }
                }
                let [min, max, step] = bounds;
                if min < 0 || max <= min || step <= 0 || (max - min) / step > 1000 {
                    self.report(
                        Diagnostic::error(span, "`lhist(value, min, max, step)` needs 0 <= min < max, step > 0 and at most 1000 buckets")
                            .with_help("for example `lhist($x, 0, 100, 10)`"),
                    );
                    return None;
                }
                Agg::Lhist { min, max, step }
            }
        })
    }

    fn int_expr(&mut self, e: &Expr, role: &str) {
        if let Some(ty) = self.expr(e) {
            if !ty.is_int() {
                self.report(Diagnostic::error(
                    e.span,
                    format!("{role} must be an integer, but this is {ty}"),
                ));
            }
        }
    }

    /// The type of `e`, or `None` after reporting why it has none.
    fn expr(&mut self, e: &Expr) -> Option<Type> {
        match self.env().type_of(e) {
            Ok(ty) => Some(ty),
            Err(diag) => {
                self.report(diag);
                None
            }
        }
    }

    /// The calls a statement makes as statements: itself, or the branches of a `?:` used as one
    /// (`c ? printf("a") : printf("b")`).
    fn statement_calls(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Call { name, args, .. } => self.call(e.span, name, args),
            ExprKind::Ternary { then, otherwise, .. } => {
                self.statement_calls(then);
                self.statement_calls(otherwise);
            }
            // A block's last call, as a macro of several statements ending in `printf(...)` leaves it.
            ExprKind::Block { value: Some(value), .. } => self.statement_calls(value),
            _ => {}
        }
    }

    /// Checks of calls used as statements, beyond their type.
    fn call(&mut self, span: Span, name: &str, args: &[Expr]) {
        if let Some(function) = self.functions.find(name) {
            let call = Call { name, args, span };
            for diag in self.functions.check_statement(function, &self.env(), &call) {
                self.report(diag);
            }
        }
    }
}

/// The end of the message for a variable read but typed nowhere (see `typing.rs`).
pub(crate) const NEVER_GIVEN: &str = " is read but never given a value";

/// The most times nested `unroll`s may repeat a body: a program of more would exceed the kernel's million
/// instructions, and an empty body would take the compiler seconds to find out (five nested `unroll(100)`).
const MAX_UNROLLED: u64 = 1_000_000;

fn map_conflict(name: &str, existing: &MapDecl, new: &MapDecl, span: Span) -> Diagnostic {
    let describe = |d: &MapDecl| {
        let key: Vec<String> = d.key.iter().map(Type::to_string).collect();
        if key.is_empty() {
            d.value.describe()
        } else {
            format!("[{}] -> {}", key.join(", "), d.value.describe())
        }
    };
    Diagnostic::error(
        span,
        format!("`@{name}` is used here as {}, but elsewhere as {}", describe(new), describe(existing)),
    )
    .with_help("a map keeps one key type and one value type for the whole script; use another map name")
}

/// A test or benchmark named twice: `--test` and `--bench` report them by name.
fn names_used_twice<'a>(points: impl Iterator<Item = &'a AttachPoint>) -> Vec<Diagnostic> {
    let mut seen = std::collections::HashSet::new();
    let mut diags = vec![];
    for point in points {
        if !point.provider.schedule().on_demand() {
            continue;
        }
        if !seen.insert(point.name.as_str()) {
            diags.push(
                Diagnostic::error(point.span, format!("`{}` names two probes", point.name))
                    .with_help("give each test and benchmark a name of its own"),
            );
        }
    }
    diags
}

/// An `iter:` probe runs alone, as in bpftrace (BEGIN and END aside): its iteration's end ends tracing.
fn iterators_alone<'a>(points: impl Iterator<Item = &'a AttachPoint> + Clone) -> Vec<Diagnostic> {
    use crate::probes::Schedule;
    let Some(iterator) = points.clone().find(|p| p.provider.iterates()) else { return vec![] };
    let others = points.filter(|p| {
        !std::ptr::eq(*p, iterator) && !matches!(p.provider.schedule(), Schedule::Begin | Schedule::End)
    });
    others
        .map(|other| {
            Diagnostic::error(other.span, format!("`{}` cannot run beside `{}`", other.name, iterator.name))
                .with_help("an iter probe runs alone (with BEGIN and END), and tracing ends when its iteration does: trace the rest in another run")
        })
        .collect()
}

/// `exit(CODE)` in a pinned iterator: its program runs whenever the pinned file is read, after steadytrace has
/// gone, so the code reaches nobody; `exit()` there only ends the call for the object at hand.
fn exit_codes_nobody_gets(program: &Program, points: &[Vec<AttachPoint>]) -> Vec<Diagnostic> {
    let mut found = vec![];
    for (probe, points) in program.probes.iter().zip(points) {
        let Some(pin) = points.iter().find_map(|p| p.provider.pinned_at()) else { continue };
        crate::lang::walk::each_expr(&probe.body, &mut |e| {
            if let ExprKind::Call { name, args, .. } = &e.kind {
                if name == "exit" && !args.is_empty() {
                    found.push(
                        Diagnostic::warning(e.span, "a pinned iterator's exit code reaches nobody")
                            .with_help(format!(
                                "its program runs when {} is read, after steadytrace has exited; `exit()` there ends the call for this object",
                                pin.display()
                            )),
                    );
                }
            }
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::kprobe::{Kprobe, KprobeMulti};
    use crate::probes::Func;

    /// `program` checked as if the kernel grouped its wildcards into kprobe_multi links on `do_nanosleep`
    /// and `hrtimer_nanosleep`; other attach points are kprobes on one function (this machine may have no
    /// kprobes).
    fn check_grouped(program: &str) -> Result<Checked, Vec<Diagnostic>> {
        let program = crate::lang::parse(program).expect("the test program parses");
        let points = program
            .probes
            .iter()
            .map(|probe| {
                probe
                    .attach_points
                    .iter()
                    .map(|text| {
                        let name = text.text.clone();
                        match text.text.strip_prefix("kprobe:") {
                            Some(function) if !function.contains('*') => {
                                AttachPoint::new(Kprobe::new(function.into(), 0, false), name, text.span)
                            }
                            _ => {
                                let functions = vec!["do_nanosleep".into(), "hrtimer_nanosleep".into()];
                                let multi = KprobeMulti::new("*nanosleep".into(), functions.into(), false);
                                AttachPoint::new(multi, name, text.span)
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let mut program = program.clone();
        let declarations: Vec<_> =
            program.probes.iter_mut().map(|p| scope::resolve(&mut p.predicate, &mut p.body).0).collect();
        let learn_only = vec![false; program.probes.len()];
        check_resolved(
            &program,
            &declarations,
            points,
            (&learn_only, &learn_only),
            vec![],
            &env::NoFunctions,
            &KernelTypes::none(),
        )
    }

    fn kinds(checked: &Checked) -> Vec<String> {
        checked.probes[0]
            .points
            .iter()
            .map(|p| match p.provider.context().func {
                Some(Func::Address | Func::Cookie(_)) => format!("multi {}", p.provider.describe()),
                Some(Func::Name(function)) => format!("{} {function}", p.name),
                None => format!("{:?}", p.provider),
            })
            .collect()
    }

    #[test]
    fn func_under_a_kprobe_multi_link_is_a_ksym() {
        let checked = check_grouped("kprobe:*nanosleep { @[func] = count(); }").unwrap();
        assert_eq!(kinds(&checked), ["multi runs on one kprobe_multi link on 2 functions"]);
        assert_eq!(checked.maps.decls[0].key, [Type::Symbol { user: false }]);
    }

    #[test]
    fn probe_or_func_as_a_string_gets_a_program_per_function() {
        let per_function = ["kprobe:do_nanosleep do_nanosleep", "kprobe:hrtimer_nanosleep hrtimer_nanosleep"];
        let checked = check_grouped("kprobe:*nanosleep { if (pid > 0) { @[probe] = count(); } }").unwrap();
        assert_eq!(kinds(&checked), per_function);
        let checked =
            check_grouped(r#"kprobe:*nanosleep /func == "do_nanosleep"/ { @ = count(); }"#).unwrap();
        assert_eq!(kinds(&checked), per_function);
        // With a kprobe on one function, whose `func` is a string, in the same probe.
        let checked = check_grouped("kprobe:*nanosleep, kprobe:vfs_read { @[func] = count(); }").unwrap();
        assert_eq!(kinds(&checked), [per_function[0], per_function[1], "kprobe:vfs_read vfs_read"]);
    }

    #[test]
    fn errors_are_those_of_the_program_per_function() {
        let diags = check_grouped("kprobe:*nanosleep { @x = func + 1; }").err().unwrap();
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].message, "`+` cannot combine string[64] and int8");
    }

    #[test]
    fn aggregations_read_in_expressions_are_shared_where_cpus_cannot_be_merged() {
        let shared = |script: &str, without: &[bpf::features::Feature]| {
            let program = crate::lang::parse(script).expect("parses");
            let present: Vec<_> =
                bpf::features::Feature::ALL.iter().copied().filter(|f| !without.contains(f)).collect();
            let features = Arc::new(Features::probing().given(&present));
            let kernel = KernelTypes::new(crate::kernel::Vmlinux::none(), features, program.c_types.clone());
            let checked = check(&program, &Default::default(), &env::NoFunctions, &kernel).expect("checks");
            let mut names: Vec<String> =
                checked.maps.decls.iter().filter(|d| d.shared).map(|d| d.name.clone()).collect();
            names.sort();
            names
        };
        use bpf::features::Feature::{Cmpxchg, PercpuLookup};
        let script = "BEGIN { @n = count(); @m = count(); @x = max(1); if (@n > 0 && @x > 0) { @v = 1; } \
                      @k[1] = count(); for ($kv : @k) { @w = 2; } }";
        assert_eq!(shared(script, &[PercpuLookup]), ["k", "n", "x"]);
        assert_eq!(shared(script, &[PercpuLookup, Cmpxchg]), ["k", "n"]);
        assert!(shared(script, &[]).is_empty());
    }
}
