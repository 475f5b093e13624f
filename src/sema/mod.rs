//! Semantic analysis: attach points resolved by their providers, builtins and functions checked,
//! expression types computed. Every problem found is reported, not only the first.

pub mod builtins;
pub mod format;
pub mod types;

use crate::lang::ast::*;
use crate::lang::{Diagnostic, Span};
use crate::probes::{self, AttachPoint};
use builtins::Builtin;
use format::ConvKind;
use types::Type;

/// A program that passed every check.
pub struct Checked {
    pub probes: Vec<CheckedProbe>,
}

pub struct CheckedProbe {
    pub points: Vec<AttachPoint>,
    pub predicate: Option<Expr>,
    pub body: Block,
}

/// Functions of bpftrace that this version does not compile yet.
const FUNCTIONS_NOT_YET: &[&str] = &[
    "print",
    "clear",
    "zero",
    "delete",
    "has_key",
    "len",
    "time",
    "str",
    "ksym",
    "usym",
    "kaddr",
    "uaddr",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stats",
    "hist",
    "lhist",
    "join",
    "system",
    "cat",
    "signal",
    "strncmp",
    "strcontains",
    "buf",
    "ntop",
    "reg",
    "kstack",
    "ustack",
    "cgroupid",
    "macaddr",
    "override",
    "path",
    "sizeof",
    "offsetof",
    "strftime",
    "bswap",
    "skboutput",
    "pton",
    "debugf",
    "errorf",
    "warnf",
];

pub fn check(program: &Program) -> Result<Checked, Vec<Diagnostic>> {
    let mut diags = vec![];
    let mut probes_out = vec![];
    for probe in &program.probes {
        let mut points = vec![];
        for text in &probe.attach_points {
            match probes::resolve(&text.text, text.span) {
                Ok(point) => points.push(point),
                Err(diag) => diags.push(diag),
            }
        }
        let mut checker = Checker { diags: &mut diags };
        if let Some(predicate) = &probe.predicate {
            checker.int_expr(predicate, "a predicate");
        }
        checker.block(&probe.body);
        probes_out.push(CheckedProbe {
            points,
            predicate: probe.predicate.clone(),
            body: probe.body.clone(),
        });
    }
    if diags.is_empty() {
        Ok(Checked { probes: probes_out })
    } else {
        diags.sort_by_key(|d| d.span.start);
        Err(diags)
    }
}

fn not_yet(span: Span, what: &str) -> Diagnostic {
    Diagnostic::error(span, format!("{what} not supported yet"))
        .with_help("this version compiles probes, predicates, if/else, integer expressions, printf and exit")
}

struct Checker<'a> {
    diags: &'a mut Vec<Diagnostic>,
}

impl Checker<'_> {
    fn block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Expr(e) => {
                let _ = self.expr(e);
            }
            StmtKind::If { cond, then, otherwise } => {
                self.int_expr(cond, "a condition");
                self.block(then);
                if let Some(otherwise) = otherwise {
                    self.block(otherwise);
                }
            }
            StmtKind::Block(block) => self.block(block),
            StmtKind::Return => {}
            StmtKind::Assign { .. } | StmtKind::Let { .. } => {
                self.diags.push(not_yet(stmt.span, "variables and maps are"))
            }
            StmtKind::Unroll { .. } => self.diags.push(not_yet(stmt.span, "`unroll` is")),
            StmtKind::While { .. } | StmtKind::For { .. } | StmtKind::Break | StmtKind::Continue => {
                self.diags.push(not_yet(stmt.span, "loops are"))
            }
        }
    }

    fn int_expr(&mut self, e: &Expr, role: &str) {
        if let Some(ty) = self.expr(e) {
            if !matches!(ty, Type::Int { .. }) {
                self.diags
                    .push(Diagnostic::error(e.span, format!("{role} must be an integer, but this is {ty}")));
            }
        }
    }

    /// The type of `e`, or `None` after reporting why it has none.
    fn expr(&mut self, e: &Expr) -> Option<Type> {
        match type_of(e) {
            Ok(ty) => {
                if let ExprKind::Call { name, args, .. } = &e.kind {
                    self.call(e.span, name, args);
                }
                Some(ty)
            }
            Err(diag) => {
                self.diags.push(diag);
                None
            }
        }
    }

    fn call(&mut self, span: Span, name: &str, args: &[Expr]) {
        let arg_types: Vec<Option<Type>> = args.iter().map(|a| self.expr(a)).collect();
        match name {
            "printf" => self.printf(span, args, &arg_types),
            "exit" => {
                if args.len() > 1 {
                    self.diags
                        .push(Diagnostic::error(span, "`exit` takes at most one argument, the exit code"));
                } else if let (Some(arg), Some(Some(ty))) = (args.first(), arg_types.first()) {
                    if !matches!(ty, Type::Int { .. }) {
                        self.diags.push(Diagnostic::error(
                            arg.span,
                            format!("the exit code must be an integer, not {ty}"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    fn printf(&mut self, span: Span, args: &[Expr], types: &[Option<Type>]) {
        let Some(Expr { kind: ExprKind::Str(format), span: format_span }) = args.first() else {
            let at = args.first().map_or(span, |a| a.span);
            self.diags.push(Diagnostic::error(
                at,
                "the first argument of `printf` must be a format string literal",
            ));
            return;
        };
        let pieces = match format::parse(format, *format_span) {
            Ok(pieces) => pieces,
            Err(diag) => return self.diags.push(diag),
        };
        let convs: Vec<_> = format::conversions(&pieces).collect();
        if convs.len() != args.len() - 1 {
            self.diags.push(Diagnostic::error(
                span,
                format!(
                    "the format has {} conversions but {} arguments follow it",
                    convs.len(),
                    args.len() - 1
                ),
            ));
            return;
        }
        for ((conv, arg), ty) in convs.iter().zip(&args[1..]).zip(&types[1..]) {
            let Some(ty) = ty else { continue };
            let fits = match ty {
                Type::Str { .. } => conv.kind.takes_string(),
                Type::Int { .. } => !conv.kind.takes_string(),
                Type::Void => false,
            };
            if !fits {
                let wanted = if conv.kind == ConvKind::Str { "a string" } else { "an integer" };
                self.diags.push(Diagnostic::error(
                    arg.span,
                    format!("this conversion wants {wanted}, but the argument is {ty}"),
                ));
            }
        }
    }
}

/// The type of an expression; an error for what is unknown or not supported yet.
pub fn type_of(e: &Expr) -> Result<Type, Diagnostic> {
    Ok(match &e.kind {
        ExprKind::Int(n) => {
            if i64::try_from(*n).is_ok() {
                Type::I64
            } else {
                Type::U64
            }
        }
        ExprKind::Str(s) => Type::Str { size: s.len() + 1 },
        ExprKind::Ident(name) => match Builtin::from_name(name) {
            Some(builtin) => builtin.ty(),
            None if builtins::NOT_YET.contains(&name.as_str()) => return Err(not_yet(e.span, &format!("`{name}` is"))),
            None => {
                return Err(Diagnostic::error(e.span, format!("unknown identifier `{name}`"))
                    .with_help("builtins include pid, tid, comm, cpu, nsecs, elapsed and probe; variables start with `$`, maps with `@`"))
            }
        },
        ExprKind::Unary { op, operand } => {
            let ty = int_operand(operand)?;
            match op {
                UnOp::Neg => Type::I64,
                UnOp::Not => Type::U64,
                UnOp::BitNot => ty,
                _ => return Err(not_yet(e.span, "this operator is")),
            }
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (type_of(lhs)?, type_of(rhs)?);
            let (Type::Int { signed: sa }, Type::Int { signed: sb }) = (a, b) else {
                if matches!((a, b), (Type::Str { .. }, Type::Str { .. })) {
                    return Err(not_yet(e.span, "comparing strings is"));
                }
                return Err(Diagnostic::error(
                    e.span,
                    format!("`{}` needs two integers, but got {a} and {b}", op.symbol()),
                ));
            };
            match op {
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::And | BinOp::Or => Type::U64,
                _ => Type::Int { signed: sa && sb },
            }
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            int_operand(cond)?;
            let (a, b) = (type_of(then)?, type_of(otherwise)?);
            match (a, b) {
                (Type::Int { signed: sa }, Type::Int { signed: sb }) => Type::Int { signed: sa && sb },
                _ if a == b => return Err(not_yet(e.span, "a `?:` choosing between strings is")),
                _ => {
                    return Err(Diagnostic::error(e.span, format!("the branches of `?:` have different types, {a} and {b}")))
                }
            }
        }
        ExprKind::Call { name, name_span, .. } => match name.as_str() {
            "printf" | "exit" => Type::Void,
            _ if FUNCTIONS_NOT_YET.contains(&name.as_str()) => return Err(not_yet(*name_span, &format!("`{name}()` is"))),
            _ => return Err(Diagnostic::error(*name_span, format!("unknown function `{name}`"))),
        },
        ExprKind::Var(_) | ExprKind::Map { .. } => return Err(not_yet(e.span, "variables and maps are")),
        ExprKind::Field { .. } | ExprKind::Index { .. } => return Err(not_yet(e.span, "field and index access is")),
        ExprKind::Tuple(_) => return Err(not_yet(e.span, "tuples are")),
        ExprKind::Cast { .. } => return Err(not_yet(e.span, "casts are")),
        ExprKind::Range { .. } => return Err(Diagnostic::error(e.span, "a range `a..b` only goes in a `for` loop")),
    })
}

fn int_operand(e: &Expr) -> Result<Type, Diagnostic> {
    match type_of(e)? {
        ty @ Type::Int { .. } => Ok(ty),
        ty => Err(Diagnostic::error(e.span, format!("expected an integer, but this is {ty}"))),
    }
}
