//! Block scope of scratch variables. A `$x` lives from its first assignment (or `let $x`) to the end
//! of the block holding it, as in current bpftrace. This pass gives every declared variable a name of
//! its own (`x#1`, `x#2`, ...), so that the checker and code generator, which know one set of variables
//! per probe, see two variables where two blocks declare the same name. A use that no declaration in
//! scope covers keeps its plain name, which no declared variable has: the checker reports it.

use crate::lang::ast::*;
use crate::lang::Diagnostic;
use std::collections::HashMap;

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

/// Renames the variables of one probe by their scopes; reports loop variables that would hide a
/// variable in scope and `let` declaring a name twice in one block.
///
/// bpftrace 0.17 scoped variables to the whole probe, and its tools read variables outside the block
/// that assigns them (tcpconnect's `$daddr`, set in both branches of an `if`). Such a variable is
/// declared at the top of the probe, with a warning suggesting `let`.
pub fn resolve(predicate: &mut Option<Expr>, body: &mut Block) -> (Declarations, Vec<Diagnostic>) {
    let mut trial = Scopes::default();
    trial.probe(&mut predicate.clone(), &mut body.clone());
    let mut scopes = Scopes::default();
    for (name, span) in trial.uncovered {
        if trial.declared.contains_key(&name) && !scopes.probe_wide.contains(&name) {
            scopes.diags.push(
                Diagnostic::warning(span, format!("`${name}` is read outside the block that assigns it"))
                    .with_help(format!(
                        "bpftrace 0.17 let a variable live for the whole probe; declare it before that block: `let ${name};`"
                    )),
            );
            scopes.probe_wide.push(name);
        }
    }
    scopes.probe(predicate, body);
    (scopes.declarations, scopes.diags)
}

#[derive(Default)]
struct Scopes {
    /// Innermost last: the block's span start, and source name to internal name.
    stack: Vec<(usize, HashMap<String, String>)>,
    declarations: Declarations,
    /// Declarations made so far of each source name, for fresh internal names.
    declared: HashMap<String, usize>,
    diags: Vec<Diagnostic>,
    /// Uses no declaration in scope covers, in order.
    uncovered: Vec<(String, crate::lang::Span)>,
    /// Names declared for the whole probe (bpftrace 0.17's scope), at the top of its body.
    probe_wide: Vec<String>,
}

impl Scopes {
    fn lookup(&self, name: &str) -> Option<&String> {
        self.stack.iter().rev().find_map(|(_, scope)| scope.get(name))
    }

    fn declare(&mut self, name: &mut String) {
        let count = self.declared.entry(name.clone()).or_default();
        *count += 1;
        let internal = format!("{name}#{count}");
        if self.stack.is_empty() {
            self.stack.push((0, HashMap::new()));
        }
        let (block, scope) = self.stack.last_mut().expect("a scope");
        scope.insert(name.clone(), internal.clone());
        self.declarations.entry(*block).or_default().push(internal.clone());
        *name = internal;
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
            for mut name in self.probe_wide.clone() {
                self.declare(&mut name);
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
                        Some(internal) => *name = internal.clone(),
                        None => self.declare(name),
                    },
                    _ => self.expr(target),
                }
            }
            StmtKind::Let { name, value } => {
                if let Some(value) = value {
                    self.expr(value);
                }
                if self.stack.last().is_some_and(|(_, scope)| scope.contains_key(name.as_str())) {
                    self.diags.push(
                        Diagnostic::error(stmt.span, format!("`${name}` is already declared in this block"))
                            .with_help(format!("assign it instead: `${name} = ...`")),
                    );
                }
                self.declare(name);
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
                if self.lookup(var).is_some() {
                    self.diags.push(
                        Diagnostic::error(
                            *var_span,
                            format!("the loop variable `${var}` hides a variable of the same name"),
                        )
                        .with_help("give the loop variable a name of its own"),
                    );
                }
                self.stack.push((body.span.start, HashMap::new()));
                self.declare(var);
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
                Some(internal) => *name = internal.clone(),
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

    #[test]
    fn let_shadows_an_outer_variable_but_not_one_of_its_own_block() {
        let (_, diags) = names("BEGIN { $x = 1; { let $x = 2; } let $y; let $y; }");
        assert_eq!(diags, ["`$y` is already declared in this block"]);
    }

    #[test]
    fn a_loop_variable_may_not_hide_another() {
        let (_, diags) =
            names("BEGIN { $i = 0; for ($i : 0..3) { } for ($j : 0..3) { } for ($j : 0..3) { } }");
        assert_eq!(diags, ["the loop variable `$i` hides a variable of the same name"]);
    }
}
