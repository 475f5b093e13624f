//! Current bpftrace's macros, `macro name(params) { body }`, expanded in the syntax tree before scoping.
//!
//! A call `name(args)` (or a bare `name` for a macro without parameters) becomes the macro's body as a
//! block expression. The body is hygienic: its own `$variables` get names of their own (`$y` becomes
//! `y#m3`, shown as `$y` in messages), it reaches the caller's variables and maps only through `$x` and
//! `@m` parameters, which name the caller's variable and map, and a plain parameter `x` stands for the
//! argument expression wherever it is used. Spans keep pointing into the script: the body's nodes at the
//! macro's text, the expansion as a whole at the call.

use super::ast::*;
use super::diag::Diagnostic;
use super::span::Span;
use super::walk::{rewrite_block, rewrite_children, Rewrite};

/// `macro name(params) body` as written.
#[derive(Clone, Debug)]
pub struct MacroDef {
    pub name: String,
    /// `macro name`.
    pub span: Span,
    pub params: Vec<(Param, Span)>,
    /// The body as a block expression.
    pub body: Expr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// `$x`: the caller passes a variable, which the body reads and may assign.
    Var(String),
    /// `@m`: the caller passes a whole map.
    Map(String),
    /// `x`: the caller passes any expression, evaluated wherever the body uses `x`.
    Expr(String),
}

impl Param {
    fn describe(&self) -> String {
        match self {
            Param::Var(name) => format!("`${name}`"),
            Param::Map(name) => format!("`@{name}`"),
            Param::Expr(name) => format!("`{name}`"),
        }
    }
}

/// Replaces every call of a macro in `program` by the macro's body.
pub fn expand(program: &mut Program, macros: &[MacroDef]) -> Result<(), Diagnostic> {
    for (i, def) in macros.iter().enumerate() {
        if macros[..i].iter().any(|d| d.name == def.name && d.params.len() == def.params.len()) {
            return Err(Diagnostic::error(
                def.span,
                format!("a second macro `{}` with {} parameters", def.name, def.params.len()),
            )
            .with_help("give one of them another name"));
        }
    }
    if macros.is_empty() {
        return Ok(());
    }
    let mut expander = Expander { macros, expanding: vec![], expansions: 0 };
    for probe in &mut program.probes {
        if let Some(predicate) = &mut probe.predicate {
            expander.expr(predicate)?;
        }
        rewrite_block(&mut probe.body, &mut expander)?;
    }
    Ok(())
}

/// The deepest chain of macros calling macros.
const MAX_NESTING: usize = 100;

struct Expander<'a> {
    macros: &'a [MacroDef],
    /// The macros being expanded, innermost last: a macro reaching itself again is an error.
    expanding: Vec<&'a str>,
    /// Expansions so far, numbering the variables of each.
    expansions: usize,
}

impl<'a> Expander<'a> {
    fn find(&self, name: &str, arity: usize) -> Option<&'a MacroDef> {
        self.macros.iter().find(|def| def.name == name && def.params.len() == arity)
    }

    fn instantiate(&mut self, def: &'a MacroDef, args: Vec<Expr>, span: Span) -> Result<Expr, Diagnostic> {
        if self.expanding.contains(&def.name.as_str()) {
            return Err(Diagnostic::error(
                span,
                format!("the macro `{}` expands to a call of itself", def.name),
            )
            .with_help("a macro may call other macros, but not itself, directly or through others"));
        }
        if self.expanding.len() >= MAX_NESTING {
            return Err(Diagnostic::error(
                span,
                format!("macros call macros more than {MAX_NESTING} levels deep"),
            ));
        }
        for ((param, _), arg) in def.params.iter().zip(&args) {
            let fits = match param {
                Param::Var(_) => matches!(arg.kind, ExprKind::Var(_)),
                Param::Map(_) => matches!(&arg.kind, ExprKind::Map { keys, .. } if keys.is_empty()),
                Param::Expr(_) => true,
            };
            if !fits {
                let wanted = match param {
                    Param::Var(_) => "a `$variable`",
                    _ => "a whole `@map`",
                };
                return Err(Diagnostic::error(
                    arg.span,
                    format!("the macro `{}` takes {wanted} as {}", def.name, param.describe()),
                )
                .with_help("a parameter written without `$` or `@` takes any expression"));
            }
        }
        self.expansions += 1;
        let mut body = def.body.clone();
        Hygiene { def, args: &args, suffix: self.expansions }.expr(&mut body)?;
        self.expanding.push(&def.name);
        let expanded = self.expr(&mut body);
        self.expanding.pop();
        expanded?;
        CalledAt(span).expr(&mut body)?;
        // A block expansion is at the call; a body that is one expression (`{ errorf("...") }`) keeps its place
        // in the macro, as bpftrace names the macro's text for what happens in it.
        if matches!(body.kind, ExprKind::Block { .. }) {
            body.span = span;
        }
        Ok(body)
    }
}

impl Rewrite for Expander<'_> {
    fn expr(&mut self, e: &mut Expr) -> Result<(), Diagnostic> {
        rewrite_children(e, self)?;
        let def = match &e.kind {
            ExprKind::Call { name, args, .. } => self.find(name, args.len()),
            ExprKind::Ident(name) => self.find(name, 0),
            _ => None,
        };
        if let Some(def) = def {
            let args = match &mut e.kind {
                ExprKind::Call { args, .. } => std::mem::take(args),
                _ => vec![],
            };
            *e = self.instantiate(def, args, e.span)?;
        }
        Ok(())
    }
}

/// Adds the place of the macro call being expanded to the `errorf`/`warnf` calls of its expanded body (after the
/// places of the macro calls inside it that brought them).
struct CalledAt(Span);

impl Rewrite for CalledAt {
    fn expr(&mut self, e: &mut Expr) -> Result<(), Diagnostic> {
        rewrite_children(e, self)?;
        if let ExprKind::Call { name, expanded_from, .. } = &mut e.kind {
            if name == "errorf" || name == "warnf" {
                expanded_from.push(self.0);
            }
        }
        Ok(())
    }
}

/// One expansion's copy of a macro body: parameters replaced by the arguments, the body's own variables
/// renamed.
struct Hygiene<'a> {
    def: &'a MacroDef,
    args: &'a [Expr],
    suffix: usize,
}

impl Hygiene<'_> {
    fn arg(&self, wanted: &Param) -> Option<&Expr> {
        self.def.params.iter().position(|(param, _)| param == wanted).map(|i| &self.args[i])
    }

    fn rename(&self, name: &mut String) {
        if name.parse::<u32>().is_ok() {
            return; // `$1`: a positional parameter, the same everywhere
        }
        match self.arg(&Param::Var(name.clone())).map(|arg| &arg.kind) {
            Some(ExprKind::Var(caller)) => *name = caller.clone(),
            _ => *name = format!("{name}#m{}", self.suffix),
        }
    }
}

impl Hygiene<'_> {
    /// `ty` (a type's canonical spelling) with a parameter at its base replaced by the type its argument
    /// names: `t *` given `typeof(uint8)` is `uint8 *`. `None` when no parameter is at its base.
    fn type_with_argument(&self, ty: &str, span: Span) -> Result<Option<String>, Diagnostic> {
        let base_len = ty.find([' ', '*', '[']).unwrap_or(ty.len());
        let (base, rest) = ty.split_at(base_len);
        let Some(arg) = self.arg(&Param::Expr(base.to_string())) else { return Ok(None) };
        let Some(named) = type_written(arg) else {
            return Err(Diagnostic::error(
                span,
                format!(
                    "`{base}` stands for a type here, but the macro `{}` was given a value for it",
                    self.def.name
                ),
            )
            .with_help(format!("pass a type: `{}(typeof(uint8))`", self.def.name)));
        };
        let rest = rest.trim_start();
        Ok(Some(match rest.strip_prefix('*') {
            Some(_) if named.ends_with('*') => format!("{named}{rest}"),
            Some(_) => format!("{named} {rest}"),
            None => format!("{named}{rest}"),
        }))
    }
}

impl Hygiene<'_> {
    /// `t[N]`, read as a type in `sizeof(t[N])`, of a parameter `t` given a value: its element `N`.
    fn element_of_value(&self, written: &str, span: Span) -> Option<Expr> {
        let (base, index) = written.strip_suffix(']')?.split_once('[')?;
        let arg = self.arg(&Param::Expr(base.to_string()))?;
        if type_written(arg).is_some() {
            return None;
        }
        let index = Expr { id: ExprId::NONE, kind: ExprKind::Int(index.parse().ok()?), span };
        let kind = ExprKind::Index { base: Box::new(arg.clone()), index: Box::new(index) };
        Some(Expr { id: ExprId::NONE, kind, span })
    }
}

/// The type an argument names: `typeof(TYPE)`, also of a parameter that stood for one (`typeof(typeof(T))`).
fn type_written(arg: &Expr) -> Option<String> {
    match &arg.kind {
        ExprKind::Call { name, args, .. } if name == "typeof" && args.len() == 1 => match &args[0].kind {
            ExprKind::Ident(ty) if super::type_name::is_type(ty) => Some(ty.clone()),
            _ => type_written(&args[0]),
        },
        _ => None,
    }
}

impl Rewrite for Hygiene<'_> {
    fn expr(&mut self, e: &mut Expr) -> Result<(), Diagnostic> {
        match &mut e.kind {
            ExprKind::Var(name) => self.rename(name),
            ExprKind::Ident(name) => {
                if let Some(arg) = self.arg(&Param::Expr(name.clone())) {
                    *e = arg.clone();
                } else if let Some(element) = self.element_of_value(name, e.span) {
                    *e = element;
                } else if let Some(ty) = self.type_with_argument(name, e.span)? {
                    *name = ty;
                }
            }
            ExprKind::Cast { ty, .. } => {
                if let Some(with_argument) = self.type_with_argument(ty, e.span)? {
                    *ty = with_argument;
                }
                rewrite_children(e, self)?;
            }
            ExprKind::Map { name, .. } => {
                match self.arg(&Param::Map(name.clone())).map(|arg| &arg.kind) {
                    Some(ExprKind::Map { name: caller, .. }) => *name = caller.clone(),
                    _ => {
                        return Err(Diagnostic::error(
                            e.span,
                            format!("the macro `{}` uses `@{name}`, which is not passed to it", self.def.name),
                        )
                        .with_help(format!(
                            "a macro reaches only the maps passed to it: add a parameter `@{name}` and pass the map"
                        )))
                    }
                }
                rewrite_children(e, self)?;
            }
            _ => rewrite_children(e, self)?,
        }
        Ok(())
    }

    fn declared(&mut self, name: &mut String) {
        self.rename(name);
    }
}

#[cfg(test)]
mod tests {
    use crate::lang::ast::*;

    fn first_stmt(text: &str) -> StmtKind {
        crate::lang::parse(text).expect("parses").probes[0].body.stmts[0].kind.clone()
    }

    #[test]
    fn a_call_becomes_the_body_with_the_argument_in_place() {
        // A body of one expression keeps its place in the macro; a block is at the call.
        let StmtKind::Expr(e) = first_stmt("macro twice(x) { x * 2 } BEGIN { twice(pid) }") else { panic!() };
        assert_eq!(e.span, crate::lang::Span::new(17, 22));
        let ExprKind::Binary { lhs, .. } = e.kind else { panic!("{e:?}") };
        assert_eq!(lhs.kind, ExprKind::Ident("pid".into()));
        let StmtKind::Expr(e) = first_stmt("macro two(x) { $y = x; $y } BEGIN { two(pid) }") else {
            panic!()
        };
        assert_eq!(e.span, crate::lang::Span::new(36, 44));
    }

    #[test]
    fn the_bodys_variables_are_its_own_and_parameters_name_the_callers() {
        let text = "macro inc($x) { $y = 1; $x += $y; } BEGIN { inc($a) }";
        let StmtKind::Expr(Expr { kind: ExprKind::Block { block, .. }, .. }) = first_stmt(text) else {
            panic!()
        };
        let StmtKind::Assign { target, .. } = &block.stmts[0].kind else { panic!() };
        assert_eq!(target.kind, ExprKind::Var("y#m1".into()));
        let StmtKind::Assign { target, .. } = &block.stmts[1].kind else { panic!() };
        assert_eq!(target.kind, ExprKind::Var("a".into()));
    }

    #[test]
    fn a_macro_with_another_number_of_arguments_is_not_called() {
        let StmtKind::Expr(e) = first_stmt("macro cpu(x) { x } BEGIN { cpu() }") else { panic!() };
        assert!(matches!(e.kind, ExprKind::Call { .. }));
    }

    #[test]
    fn a_parameter_given_a_type_stands_for_it_in_casts_and_sizeof() {
        let StmtKind::Expr(e) = first_stmt("macro p(t) { (t *)0 } BEGIN { p(typeof(uint64 *)) }") else {
            panic!()
        };
        let ExprKind::Cast { ty, .. } = e.kind else { panic!("{e:?}") };
        assert_eq!(ty, "uint64 **");
        let StmtKind::Expr(e) = first_stmt("macro s(t) { sizeof(t[4]) } BEGIN { s(typeof(struct x)) }")
        else {
            panic!()
        };
        let ExprKind::Call { args, .. } = e.kind else { panic!("{e:?}") };
        assert_eq!(args[0].kind, ExprKind::Ident("struct x[4]".into()));
        // ... and given a value, `t[4]` is its element.
        let StmtKind::Expr(e) = first_stmt("macro s(t) { sizeof(t[4]) } BEGIN { s($a) }") else { panic!() };
        let ExprKind::Call { args, .. } = e.kind else { panic!("{e:?}") };
        let ExprKind::Index { base, .. } = &args[0].kind else { panic!("{args:?}") };
        assert_eq!(base.kind, ExprKind::Var("a".into()));
        // Without `*` a parenthesised parameter is the argument, not a cast.
        let StmtKind::Expr(e) = first_stmt("macro twice(x) { (x) * 2 } BEGIN { twice(3) }") else { panic!() };
        assert!(matches!(e.kind, ExprKind::Binary { .. }), "{e:?}");
    }

    #[test]
    fn two_macros_of_one_name_and_arity_are_an_error() {
        let err = crate::lang::parse("macro a() { 1 } macro a() { 2 } BEGIN { }").unwrap_err();
        assert_eq!(err.message, "a second macro `a` with 0 parameters");
    }
}
