//! `if comptime (COND)` and `fail(FORMAT, ...)`, as current bpftrace has them: the branch COND chooses when the
//! script is compiled is the only one kept (the other is never checked), and a `fail()` left in the program is an
//! error at compile time, its message formatted from literals. A plain `if` whose condition is known too (`if ($1
//! < 2)` once the positional parameters are written in) drops the `fail()` of the branch it never takes.
//!
//! steadytrace decides the conditions it can read before types are known: literals and positional parameters,
//! with arithmetic (past 128 bits an error, never an overflow), comparisons, `!`, `&&`, `||`, `?:`, `sizeof` of
//! an integer type and nested `comptime`. A condition on the types of values (`typeinfo($x)`, `is_integer($x)`)
//! is an error saying so.

use super::ast::{BinOp, Block, Expr, ExprKind, Program, StmtKind, UnOp};
use super::walk::{rewrite_children, Rewrite};
use super::{Diagnostic, Span};

/// How a `fail()` message is made from its format and values, as `printf` formats them (the caller knows how).
pub type Formatter<'a> = &'a dyn Fn(&str, Span, &[Known]) -> Result<String, Diagnostic>;

/// Keeps the branches the program's `if comptime` conditions choose; reports the `fail()` calls left, their
/// messages made by `format`.
pub fn decide(program: &mut Program, format: Formatter<'_>) -> Result<(), Diagnostic> {
    let mut pass = Decide { dead: 0, format };
    for probe in &mut program.probes {
        if let Some(predicate) = &mut probe.predicate {
            pass.expr(predicate)?;
        }
        pass.block(&mut probe.body)?;
    }
    Ok(())
}

/// A value known when compiling.
#[derive(Clone, Debug, PartialEq)]
pub enum Known {
    Int(i128),
    Str(String),
}

impl Known {
    fn truth(&self) -> bool {
        match self {
            Known::Int(n) => *n != 0,
            Known::Str(s) => !s.is_empty(),
        }
    }
}

struct Decide<'a> {
    /// How many enclosing branches of plain `if`s are known never to run: their `fail()` calls go.
    dead: usize,
    format: Formatter<'a>,
}

impl Decide<'_> {
    fn block(&mut self, block: &mut Block) -> Result<(), Diagnostic> {
        for stmt in &mut block.stmts {
            if let StmtKind::If { cond, then, otherwise } = &mut stmt.kind {
                if let Some(inner) = comptime_condition(cond) {
                    let taken = known(inner)?.truth();
                    let empty = Block { stmts: vec![], span: stmt.span };
                    let chosen = match taken {
                        true => std::mem::replace(then, empty),
                        false => otherwise.take().unwrap_or(empty),
                    };
                    stmt.kind = StmtKind::Block(chosen);
                }
            }
            if self.dead > 0 {
                if let StmtKind::Expr(e) = &stmt.kind {
                    if is_fail(e) {
                        stmt.kind = StmtKind::Block(Block { stmts: vec![], span: stmt.span });
                    }
                }
            }
            match &mut stmt.kind {
                StmtKind::Expr(e) | StmtKind::Return(Some(e)) => self.expr(e)?,
                StmtKind::Assign { target, value, .. } => {
                    self.expr(value)?;
                    self.expr(target)?;
                }
                StmtKind::Let { value, .. } => {
                    if let Some(value) = value {
                        self.expr(value)?;
                    }
                }
                StmtKind::If { cond, then, otherwise } => {
                    self.expr(cond)?;
                    let taken = known(cond).ok().map(|k| k.truth());
                    self.branch(then, taken == Some(false))?;
                    if let Some(otherwise) = otherwise {
                        self.branch(otherwise, taken == Some(true))?;
                    }
                }
                StmtKind::Unroll { count: e, body } | StmtKind::While { cond: e, body } => {
                    self.expr(e)?;
                    self.block(body)?;
                }
                StmtKind::For { iterable, body, .. } => {
                    self.expr(iterable)?;
                    self.block(body)?;
                }
                StmtKind::Block(body) => self.block(body)?,
                StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
            }
        }
        Ok(())
    }

    /// A plain `if`'s branch, `never` when its condition is known to skip it.
    fn branch(&mut self, block: &mut Block, never: bool) -> Result<(), Diagnostic> {
        self.dead += usize::from(never);
        let done = self.block(block);
        self.dead -= usize::from(never);
        done
    }
}

impl Rewrite for Decide<'_> {
    fn expr(&mut self, e: &mut Expr) -> Result<(), Diagnostic> {
        // `if comptime c { a } else { b }` as a value.
        if let ExprKind::Ternary { cond, then, otherwise } = &mut e.kind {
            if let Some(inner) = comptime_condition(cond) {
                let chosen = if known(inner)?.truth() { then } else { otherwise };
                let placeholder = Expr { kind: ExprKind::Int(0), span: chosen.span, id: chosen.id };
                *e = std::mem::replace(&mut **chosen, placeholder);
                return self.expr(e);
            }
        }
        match &mut e.kind {
            ExprKind::Block { block, value } => {
                self.block(block)?;
                match value {
                    Some(value) => self.expr(value),
                    None => Ok(()),
                }
            }
            ExprKind::Call { name, .. } if name == "comptime" => Err(Diagnostic::error(
                e.span,
                "`comptime` decides an `if` when the script is compiled: it is written `if comptime (COND)`",
            )),
            ExprKind::Call { name, args, .. } if name == "fail" => match self.dead {
                0 => Err(self.failure(args, e.span)),
                _ => {
                    e.kind = ExprKind::Int(0);
                    Ok(())
                }
            },
            _ => rewrite_children(e, self),
        }
    }
}

fn is_fail(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Call { name, .. } if name == "fail")
}

/// The condition of `if comptime (COND)`, which the parser writes as the call `comptime(COND)`.
fn comptime_condition(cond: &Expr) -> Option<&Expr> {
    match &cond.kind {
        ExprKind::Call { name, args, .. } if name == "comptime" && args.len() == 1 => Some(&args[0]),
        _ => None,
    }
}

/// The value of `e`, known when compiling.
fn known(e: &Expr) -> Result<Known, Diagnostic> {
    let unknown = || {
        Diagnostic::error(e.span, "steadytrace cannot decide this `comptime` condition when compiling")
            .with_help("it decides conditions of literals and positional parameters (`$1 < 2`); the types of values (`typeinfo($x)`, `is_integer($x)`) are not known yet then: use a plain `if`")
    };
    Ok(match &e.kind {
        ExprKind::Int(n) => Known::Int(i128::from(*n)),
        ExprKind::Str(s) => Known::Str(s.clone()),
        ExprKind::Ident(name) if name == "true" => Known::Int(1),
        ExprKind::Ident(name) if name == "false" => Known::Int(0),
        ExprKind::Block { block, value: Some(value) } if block.stmts.is_empty() => known(value)?,
        ExprKind::Call { name, args, .. } if name == "comptime" && args.len() == 1 => known(&args[0])?,
        ExprKind::Ternary { cond, then, otherwise } => match known(cond)?.truth() {
            true => known(then)?,
            false => known(otherwise)?,
        },
        // The size of an integer type named (`sizeof(int)`, `sizeof(uint64_t)`).
        ExprKind::Call { name, args, .. } if name == "sizeof" && args.len() == 1 => match &args[0].kind {
            ExprKind::Ident(ty) => {
                Known::Int(super::type_name::integer_bytes(ty).ok_or_else(unknown)? as i128)
            }
            _ => return Err(unknown()),
        },
        ExprKind::Unary { op: UnOp::Not, operand } => Known::Int(i128::from(!known(operand)?.truth())),
        ExprKind::Unary { op: UnOp::Neg, operand } => match known(operand)? {
            Known::Int(n) => Known::Int(n.checked_neg().ok_or_else(unknown)?),
            Known::Str(_) => return Err(unknown()),
        },
        ExprKind::Binary { op: BinOp::And, lhs, rhs } => {
            Known::Int(i128::from(known(lhs)?.truth() && known(rhs)?.truth()))
        }
        ExprKind::Binary { op: BinOp::Or, lhs, rhs } => {
            Known::Int(i128::from(known(lhs)?.truth() || known(rhs)?.truth()))
        }
        ExprKind::Binary { op, lhs, rhs } => match (known(lhs)?, known(rhs)?) {
            (Known::Int(a), Known::Int(b)) => Known::Int(arithmetic(*op, a, b).ok_or_else(unknown)?),
            (Known::Str(a), Known::Str(b)) => Known::Int(match op {
                BinOp::Eq => i128::from(a == b),
                BinOp::Ne => i128::from(a != b),
                _ => return Err(unknown()),
            }),
            _ => return Err(unknown()),
        },
        _ => return Err(unknown()),
    })
}

fn arithmetic(op: BinOp, a: i128, b: i128) -> Option<i128> {
    Some(match op {
        BinOp::Add => a.checked_add(b)?,
        BinOp::Sub => a.checked_sub(b)?,
        BinOp::Mul => a.checked_mul(b)?,
        BinOp::Div => a.checked_div(b)?,
        BinOp::Mod => a.checked_rem(b)?,
        BinOp::Eq => i128::from(a == b),
        BinOp::Ne => i128::from(a != b),
        BinOp::Lt => i128::from(a < b),
        BinOp::Le => i128::from(a <= b),
        BinOp::Gt => i128::from(a > b),
        BinOp::Ge => i128::from(a >= b),
        _ => return None,
    })
}

impl Decide<'_> {
    /// The error `fail(FORMAT, args...)` makes: the format with its arguments, literals, written in.
    fn failure(&self, args: &[Expr], span: Span) -> Diagnostic {
        let Some(Expr { kind: ExprKind::Str(format), span: format_span, .. }) = args.first() else {
            return Diagnostic::error(span, "`fail()` takes a format string, then literals");
        };
        let values: Result<Vec<Known>, Diagnostic> = args[1..]
            .iter()
            .map(|arg| {
                known(arg).map_err(|_| {
                    Diagnostic::error(arg.span, "`fail()`'s arguments are literals and positional parameters")
                        .with_help("its message is made when the script is compiled, before anything runs")
                })
            })
            .collect();
        match values.and_then(|values| (self.format)(format, *format_span, &values)) {
            Ok(message) => Diagnostic::error(span, message),
            Err(diag) => diag,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values written after the format, for the tests (the pipeline formats as `printf`).
    fn listed(format: &str, _: Span, values: &[Known]) -> Result<String, Diagnostic> {
        let values: Vec<String> = values
            .iter()
            .map(|v| match v {
                Known::Int(n) => n.to_string(),
                Known::Str(s) => s.clone(),
            })
            .collect();
        Ok(format!("{format} | {}", values.join(", ")))
    }

    fn decided(text: &str) -> Result<Program, Diagnostic> {
        let mut program = crate::lang::parse(text)?;
        decide(&mut program, &listed)?;
        Ok(program)
    }

    #[test]
    fn the_branch_chosen_is_the_only_one_kept() {
        let program =
            decided("BEGIN { if comptime (1 + 1 == 2) { @a = 1; } else { @b = undefined(); } }").unwrap();
        assert!(!format!("{:?}", program.probes[0].body).contains("undefined"));
        let program =
            decided("BEGIN { $v = { if comptime \"a\" == \"b\" { fail(\"no\") } else { 5 } }; }").unwrap();
        assert!(!format!("{:?}", program.probes[0].body).contains("fail"));
    }

    #[test]
    fn fail_is_an_error_where_it_is_kept_with_its_message() {
        let err =
            decided("BEGIN { if comptime (2 < 3) { fail(\"got %d, wanted %s: 100%%\", 7, \"more\"); } }")
                .unwrap_err();
        assert_eq!(err.message, "got %d, wanted %s: 100%% | 7, more");
        // A plain `if` known never to run its branch drops the `fail()` there.
        assert!(decided("BEGIN { if (5 < 2) { fail(\"small\"); } }").is_ok());
        assert!(decided("BEGIN { if (5 > 2) { fail(\"big\"); } }").is_err());
    }

    #[test]
    fn conditions_on_types_are_said_to_be_undecidable() {
        let err =
            decided("BEGIN { $x = 1; if comptime (typeinfo($x).base_type == \"int\") { } }").unwrap_err();
        assert!(err.message.contains("cannot decide"), "{}", err.message);
        // Past i128 is no number known: an error, never an overflow.
        let huge = "18446744073709551615";
        let product = [huge; 3].join(" * ");
        assert!(decided(&format!("BEGIN {{ if comptime ({product} > 0) {{ }} }}")).is_err());
        let square = "9223372036854775808 * 9223372036854775808";
        let sum = format!("{square} + {square}");
        assert!(decided(&format!("BEGIN {{ if comptime ({sum} > 0) {{ }} }}")).is_err());
    }
}
