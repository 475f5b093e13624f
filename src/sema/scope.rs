//! Block scope of scratch variables. A `$x` lives from its first assignment (or `let $x`) to the end
//! of the block holding it, as in current bpftrace. This pass gives every declared variable a name of
//! its own (`x#1`, `x#2`, ...), so that the checker and code generator, which know one set of variables
//! per probe, see two variables where two blocks declare the same name. A use that no declaration in
//! scope covers keeps its plain name, which no declared variable has: the checker reports it.

use crate::lang::ast::*;
use crate::lang::{Diagnostic, Span};
use std::collections::{HashMap, HashSet};

/// The name `$x` is shown as in messages: the internal suffix stripped.
pub fn shown(name: &str) -> &str {
    name.split('#').next().unwrap_or(name)
}

/// Whether this pass renamed `name`, declared in some scope (`x#1`).
pub fn declared(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, count)| count.parse::<u32>().is_ok())
}

/// Whether a variable name is a positional parameter (`$1`), which is no scratch variable.
fn positional(name: &str) -> bool {
    name.parse::<u32>().is_ok()
}

/// The variables each block declares (by the start of the block's span), in order: variables of blocks
/// that are never open at the same time can share stack. A loop's variable belongs to the loop's body.
pub type Declarations = HashMap<usize, Vec<String>>;

/// Whether a statement ends its block: nothing after it runs.
fn ends_the_block(stmt: &Stmt) -> bool {
    match &stmt.kind {
        StmtKind::Break | StmtKind::Continue | StmtKind::Return(_) => true,
        StmtKind::Expr(Expr { kind: ExprKind::Call { name, .. }, .. }) => name == "exit",
        _ => false,
    }
}

/// How a variable in scope was introduced, and where: what an error about hiding it points back at.
#[derive(Clone, Copy)]
enum Origin {
    /// `let $x`
    Declaration(Span),
    /// The assignment statement that first gave it a value.
    Assignment(Span),
    /// `$x` of `for ($x : ...)`
    LoopVariable(Span),
}

impl Origin {
    fn note(self) -> (Span, &'static str) {
        match self {
            Origin::Declaration(span) => (span, "This is the initial declaration."),
            Origin::Assignment(span) => (span, "This is the initial assignment."),
            Origin::LoopVariable(span) => (span, "This is the loop variable."),
        }
    }
}

/// Renames the variables of one probe by their scopes; reports a `let` or a loop variable that would
/// hide a variable in scope (bpftrace 0.27.1 allows no shadowing), pointing back at what it hides.
///
/// bpftrace 0.17 scoped variables to the whole probe, and its tools read variables outside the block
/// that assigns them (tcpconnect's `$daddr`, set in both branches of an `if`). Such a variable is
/// declared at the top of the probe, with a warning suggesting `let`. Those tools knew neither `let` nor
/// `for`, so a name a script declares either way is scoped as current bpftrace scopes it.
pub fn resolve(predicate: &mut Option<Expr>, body: &mut Block) -> (Declarations, Vec<Diagnostic>) {
    let mut trial = Scopes::default();
    trial.probe(&mut predicate.clone(), &mut body.clone());
    let mut scopes = Scopes::default();
    for (name, span) in trial.uncovered {
        let Some(&origin) = trial.first.get(&name) else { continue };
        if trial.block_scoped.contains(&name) || scopes.probe_wide.iter().any(|(n, _)| *n == name) {
            continue;
        }
        scopes.diags.push(
            Diagnostic::warning(span, format!("`${name}` is read outside the block that assigns it")).with_help(
                format!("bpftrace 0.17 let a variable live for the whole probe; declare it before that block: `let ${name};`"),
            ),
        );
        scopes.probe_wide.push((name, origin));
    }
    scopes.probe(predicate, body);
    (scopes.declarations, scopes.diags)
}

/// A block's variables: source name to internal name and origin.
type Scope = HashMap<String, (String, Origin)>;

#[derive(Default)]
struct Scopes {
    /// Innermost last: the block's span start, and its variables.
    stack: Vec<(usize, Scope)>,
    declarations: Declarations,
    /// Declarations made so far of each source name, for fresh internal names.
    declared: HashMap<String, usize>,
    /// The first declaration of each source name.
    first: HashMap<String, Origin>,
    /// Names declared by `let` or as a loop variable somewhere: never probe-wide.
    block_scoped: HashSet<String>,
    diags: Vec<Diagnostic>,
    /// Uses no declaration in scope covers, in order.
    uncovered: Vec<(String, Span)>,
    /// Names declared for the whole probe (bpftrace 0.17's scope), at the top of its body.
    probe_wide: Vec<(String, Origin)>,
}

impl Scopes {
    fn lookup(&self, name: &str) -> Option<&(String, Origin)> {
        self.stack.iter().rev().find_map(|(_, scope)| scope.get(name))
    }

    fn declare(&mut self, name: &mut String, origin: Origin) {
        let count = self.declared.entry(name.clone()).or_default();
        *count += 1;
        let internal = format!("{name}#{count}");
        self.first.entry(name.clone()).or_insert(origin);
        if !matches!(origin, Origin::Assignment(_)) {
            self.block_scoped.insert(name.clone());
        }
        if self.stack.is_empty() {
            self.stack.push((0, HashMap::new()));
        }
        let (block, scope) = self.stack.last_mut().expect("a scope");
        scope.insert(name.clone(), (internal.clone(), origin));
        self.declarations.entry(*block).or_default().push(internal.clone());
        *name = internal;
    }

    /// `message` at `span` if `name` is in scope already, with a note at what it would hide; the origin
    /// the new declaration should keep: the hidden one's, so that a third declaration points at the first.
    fn refuse_shadowing(
        &mut self,
        name: &str,
        span: Span,
        message: String,
        help: &str,
        origin: Origin,
    ) -> Origin {
        let Some(&(_, hidden)) = self.lookup(name) else { return origin };
        let (at, note) = hidden.note();
        self.diags.push(Diagnostic::error(span, message).with_help(help).with_note(at, note));
        hidden
    }

    fn probe(&mut self, predicate: &mut Option<Expr>, body: &mut Block) {
        if let Some(predicate) = predicate {
            self.expr(predicate);
        }
        self.block(body);
    }

    fn block(&mut self, block: &mut Block) {
        let outermost = self.stack.iter().all(|(start, _)| *start == 0);
        self.stack.push((block.span.start, HashMap::new()));
        if outermost {
            for (mut name, origin) in self.probe_wide.clone() {
                self.declare(&mut name, origin);
            }
        }
        // What follows `exit()`, `return`, `break` or `continue` never runs: bpftrace warns and drops it.
        if let Some(end) = block.stmts.iter().position(ends_the_block) {
            if let Some(unreachable) = block.stmts.get(end + 1) {
                self.diags.push(
                    Diagnostic::warning(unreachable.span, "Unreachable statement")
                        .with_help("it never runs: remove it, or move it before what ends the block"),
                );
                block.stmts.truncate(end + 1);
            }
        }
        for stmt in &mut block.stmts {
            self.stmt(stmt);
        }
        self.stack.pop();
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        match &mut stmt.kind {
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Assign { target, op, value } => {
                self.expr(value);
                match &mut target.kind {
                    ExprKind::Var(name) if op.is_none() && !positional(name) => match self.lookup(name) {
                        Some((internal, _)) => *name = internal.clone(),
                        None => self.declare(name, Origin::Assignment(stmt.span)),
                    },
                    _ => self.expr(target),
                }
            }
            StmtKind::Let { name, decl_span, value } => {
                if let Some(value) = value {
                    self.expr(value);
                }
                let message =
                    format!("Variable ${name} was already declared. Variable shadowing is not allowed.");
                let help =
                    format!("assign it instead (`${name} = ...`), or give the new one a name of its own");
                let origin =
                    self.refuse_shadowing(name, *decl_span, message, &help, Origin::Declaration(*decl_span));
                self.declare(name, origin);
            }
            StmtKind::If { cond, then, otherwise } => {
                self.expr(cond);
                self.block(then);
                if let Some(otherwise) = otherwise {
                    self.block(otherwise);
                }
            }
            StmtKind::Unroll { count, body } => {
                self.expr(count);
                self.block(body);
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.block(body);
            }
            StmtKind::For { var, var_span, iterable, body } => {
                self.expr(iterable);
                let message = format!("Loop declaration shadows existing variable: ${var}");
                let help = "give the loop variable a name of its own";
                let origin =
                    self.refuse_shadowing(var, *var_span, message, help, Origin::LoopVariable(*var_span));
                self.stack.push((body.span.start, HashMap::new()));
                self.declare(var, origin);
                self.block(body);
                self.stack.pop();
            }
            StmtKind::Block(block) => self.block(block),
            StmtKind::Return(Some(value)) => self.expr(value),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }

    fn expr(&mut self, e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Var(name) => match self.lookup(name) {
                Some((internal, _)) => *name = internal.clone(),
                None if !positional(name) => self.uncovered.push((name.clone(), e.span)),
                None => {}
            },
            ExprKind::Block { block, value } => {
                self.stack.push((block.span.start, HashMap::new()));
                for stmt in &mut block.stmts {
                    self.stmt(stmt);
                }
                if let Some(value) = value {
                    self.expr(value);
                }
                self.stack.pop();
            }
            // A block expression opens a scope (above); every other expression only holds expressions.
            _ => crate::lang::walk::each_child_mut(e, &mut |child| self.expr(child)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(script: &str) -> (Vec<String>, Vec<String>) {
        let mut program = crate::lang::parse(script).expect("parses");
        let probe = &mut program.probes[0];
        let (_, diags) = resolve(&mut probe.predicate, &mut probe.body);
        let mut found = vec![];
        collect(&probe.body, &mut found);
        (found, diags.into_iter().map(|d| d.message).collect())
    }

    fn collect(block: &Block, out: &mut Vec<String>) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Assign { target: Expr { kind: ExprKind::Var(n), .. }, value, .. } => {
                    if let ExprKind::Var(v) = &value.kind {
                        out.push(v.clone());
                    }
                    out.push(n.clone());
                }
                StmtKind::Expr(Expr { kind: ExprKind::Call { args, .. }, .. }) => {
                    for arg in args {
                        if let ExprKind::Var(v) = &arg.kind {
                            out.push(v.clone());
                        }
                    }
                }
                StmtKind::If { then, .. } => collect(then, out),
                StmtKind::Block(b) | StmtKind::For { body: b, .. } => collect(b, out),
                _ => {}
            }
        }
    }

    #[test]
    fn a_variable_read_after_its_block_lives_for_the_whole_probe_with_a_warning() {
        let (found, diags) = names("BEGIN { if (1) { $x = 1; } print($x); }");
        assert_eq!(found, ["x#1", "x#1"]);
        assert_eq!(diags, ["`$x` is read outside the block that assigns it"]);
    }

    #[test]
    fn a_variable_never_assigned_stays_undeclared() {
        let (found, diags) = names("BEGIN { if (1) { $x = 1; } print($y); }");
        assert_eq!(found, ["x#1", "y"]);
        assert!(diags.is_empty());
    }

    #[test]
    fn blocks_declaring_the_same_name_get_two_variables() {
        let (found, _) = names("BEGIN { { $x = 1; } { $x = \"a\"; } }");
        assert_eq!(found, ["x#1", "x#2"]);
    }

    #[test]
    fn an_inner_block_sees_and_assigns_the_outer_variable() {
        let (found, _) = names("BEGIN { $x = 1; { $x = 2; $y = $x; } print($x); }");
        assert_eq!(found, ["x#1", "x#1", "x#1", "y#1", "x#1"]);
    }

    /// The diagnostics of `script`, each as `marked text: message` and its note's the same way.
    fn shadowing(script: &str) -> Vec<String> {
        let mut program = crate::lang::parse(script).expect("parses");
        let probe = &mut program.probes[0];
        let (_, diags) = resolve(&mut probe.predicate, &mut probe.body);
        let at = |span: Span| format!("{}@{}", &script[span.start..span.end], span.start);
        let shown = |d: Diagnostic| match d.note.map(|note| *note) {
            Some((span, note)) => format!("{}: {} / {}: {note}", at(d.span), d.message, at(span)),
            None => format!("{}: {}", at(d.span), d.message),
        };
        diags.into_iter().map(shown).collect()
    }

    const SHADOWS: &str = "Variable $x was already declared. Variable shadowing is not allowed.";

    #[test]
    fn let_may_hide_no_variable_in_scope_as_in_bpftrace_0_27() {
        for (script, first, note) in [
            ("BEGIN { let $x = 1; let $x = 2; }", "let $x", "This is the initial declaration."),
            ("BEGIN { let $x = 1; if (1) { let $x = 2; } }", "let $x", "This is the initial declaration."),
            (
                "BEGIN { let $x = 1; if (1) { if (1) { let $x = 2; } } }",
                "let $x",
                "This is the initial declaration.",
            ),
            (
                "BEGIN { let $x = 1; for ($i : 0..2) { let $x = 2; } }",
                "let $x",
                "This is the initial declaration.",
            ),
            (
                "BEGIN { let $x = 1; for ($kv : @m) { let $x = 2; } }",
                "let $x",
                "This is the initial declaration.",
            ),
            ("BEGIN { let $x = 1; while (1) { let $x = 2; } }", "let $x", "This is the initial declaration."),
            ("BEGIN { let $x = 1; unroll(2) { let $x = 2; } }", "let $x", "This is the initial declaration."),
            ("BEGIN { let $x = 1; $y = { let $x = 2; $x }; }", "let $x", "This is the initial declaration."),
            ("BEGIN { let $x: int64 = 1; let $x: int64 = 2; }", "let $x", "This is the initial declaration."),
            ("BEGIN { $x = 1; let $x = 2; }", "$x = 1", "This is the initial assignment."),
            ("BEGIN { $x = 1; $x = 2; { let $x = 3; } }", "$x = 1", "This is the initial assignment."),
            (
                "BEGIN { if (1) { $x = 1; if (1) { let $x = 2; } } }",
                "$x = 1",
                "This is the initial assignment.",
            ),
        ] {
            let error = format!("let $x@{}: {SHADOWS}", script.rfind("let $x").unwrap());
            let note = format!("{first}@{}: {note}", script.find(first).unwrap());
            assert_eq!(shadowing(script), [format!("{error} / {note}")], "{script}");
        }
    }

    #[test]
    fn every_let_hiding_a_variable_is_reported_pointing_at_the_first() {
        assert_eq!(
            shadowing("BEGIN { let $x = 1; let $x = 2; let $x = 3; }"),
            [20, 32].map(|at| format!("let $x@{at}: {SHADOWS} / let $x@8: This is the initial declaration."))
        );
    }

    #[test]
    fn let_may_hide_no_loop_variable() {
        assert_eq!(
            shadowing("BEGIN { for ($i : 0..2) { for ($j : 0..2) { let $i = 2; } } }"),
            [concat!(
                "let $i@44: Variable $i was already declared. Variable shadowing is not allowed.",
                " / $i@13: This is the loop variable."
            )]
        );
    }

    #[test]
    fn let_may_reuse_a_name_whose_scope_has_ended() {
        for script in [
            "BEGIN { if (1) { let $x = 1; } else { let $x = 2; } }",
            "BEGIN { if (1) { let $x = 1; } let $x = 2; }",
            "BEGIN { if (1) { $x = 1; } let $x = 2; }",
            "BEGIN { if (1) { let $x = 1; } if (1) { $x = 2; } let $x = 3; }",
            "BEGIN { for ($i : 0..2) { } let $i = 1; }",
            "BEGIN { for ($i : 0..2) { $y = 1; } let $y = 3; }",
        ] {
            assert!(shadowing(script).is_empty(), "{script}");
        }
    }

    #[test]
    fn a_loop_variable_may_not_hide_another() {
        assert_eq!(
            shadowing("BEGIN { $i = 0; for ($i : 0..3) { } for ($j : 0..3) { } for ($j : 0..3) { } }"),
            ["$i@21: Loop declaration shadows existing variable: $i / $i = 0@8: This is the initial assignment."]
        );
    }

    #[test]
    fn a_name_declared_with_let_is_never_probe_wide() {
        let (found, diags) = names("BEGIN { if (1) { let $x = 1; } print($x); }");
        assert_eq!(found, ["x"]);
        assert!(diags.is_empty());
    }
}
