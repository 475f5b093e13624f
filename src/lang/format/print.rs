//! The tree of [`super::tree`] printed as bpftrace 0.27.1's `--fmt` prints it: two spaces of indent, a
//! probe's attach points, predicate and `{` on lines of their own, operands that are operations in
//! parentheses, and what does not fit in [`WIDTH`] columns broken (arguments aligned after the `(`).

use super::tree::*;

/// The widest line bpftrace lets stand.
const WIDTH: usize = 90;

pub fn program(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        trivia(&mut out, &item.before, 0);
        match &item.kind {
            ItemKind::Raw(text) => out.push_str(text),
            ItemKind::Config(settings) => {
                out.push_str("config = {\n");
                for (key, value) in settings {
                    out.push_str(&format!("  {key} = {value};\n"));
                }
                out.push('}');
            }
            ItemKind::MapDecl(name, value) => out.push_str(&format!("let {name} = {};", flat(value))),
            ItemKind::Macro { name, params, body } => {
                out.push_str(&format!("macro {name}({})\n", params.join(", ")));
                block(&mut out, body, 0, Semis::AsWritten);
            }
            ItemKind::Probe { points, predicate, body } => {
                out.push_str(&points.join(",\n"));
                out.push('\n');
                if let Some(p) = predicate {
                    out.push('/');
                    out.push_str(&layout(p, 1, 1, 0));
                    out.push_str("/\n");
                }
                block(&mut out, body, 0, Semis::Always);
            }
        }
        out.push('\n');
    }
    out
}

/// Whether the last statement of a block gets a `;` it was written without.
#[derive(Clone, Copy, PartialEq)]
enum Semis {
    Always,
    AsWritten,
}

fn trivia(out: &mut String, items: &[Trivia], indent: usize) {
    for t in items {
        match t {
            Trivia::Blank => out.push('\n'),
            Trivia::Comment(c) => {
                out.push_str(&" ".repeat(indent));
                out.push_str(c);
                out.push('\n');
            }
        }
    }
}

/// `{`, the statements one level in, `}` at `indent` (the `{` where `out` stands).
fn block(out: &mut String, b: &Block, indent: usize, semis: Semis) {
    if b.stmts.is_empty() && b.after.iter().all(|t| *t == Trivia::Blank) {
        out.push_str("{}");
        return;
    }
    out.push_str("{\n");
    let inner = indent + 2;
    for (i, s) in b.stmts.iter().enumerate() {
        trivia(out, &s.before, inner);
        out.push_str(&" ".repeat(inner));
        let last = i + 1 == b.stmts.len();
        let semi = s.semi || !last || semis == Semis::Always;
        stmt(out, &s.kind, inner, semi, last && semis == Semis::Always);
        if let Some(c) = &s.trailing {
            out.push(' ');
            out.push_str(c);
        }
        out.push('\n');
    }
    trivia(out, &b.after, inner);
    out.push_str(&" ".repeat(indent));
    out.push('}');
}

fn stmt(out: &mut String, s: &StmtKind, indent: usize, semi: bool, last_of_probe: bool) {
    let end = if semi { ";" } else { "" };
    let trail = end.len();
    match s {
        StmtKind::Expr(e) => {
            out.push_str(&layout(e, indent, trail, indent));
            out.push_str(end);
        }
        StmtKind::Assign(target, op, value) => {
            let t = flat(target);
            let head = if t.len() + indent > WIDTH { layout(target, indent, 0, indent) } else { t };
            let col = column_after(indent, &head) + op.len() + 2;
            out.push_str(&format!("{head} {op} {}", layout(value, col, trail, indent)));
            out.push_str(end);
        }
        StmtKind::Let(var, ty, value) => {
            out.push_str(&format!("let {var}"));
            if let Some(ty) = ty {
                out.push_str(&format!(" : {ty}"));
            }
            if let Some(v) = value {
                out.push_str(&format!(" = {}", flat(v)));
            }
            out.push_str(end);
        }
        StmtKind::If(chain) => {
            let semis = if chain.otherwise.is_none() || semi || last_of_probe {
                Semis::Always
            } else {
                Semis::AsWritten
            };
            if_chain(out, chain, indent, semis);
        }
        StmtKind::While(cond, body) => {
            out.push_str(&format!("while {} ", condition(cond)));
            block(out, body, indent, Semis::Always);
        }
        StmtKind::Unroll(count, body) => {
            out.push_str(&format!("unroll ({}) ", flat(count)));
            block(out, body, indent, Semis::Always);
        }
        StmtKind::For(var, iter, body) => {
            out.push_str(&format!("for {var} : {} ", flat(iter)));
            block(out, body, indent, Semis::Always);
        }
        StmtKind::Word(w) => {
            out.push_str(w);
            out.push_str(end);
        }
        StmtKind::Return(v) => {
            out.push_str("return");
            if let Some(v) = v {
                out.push(' ');
                out.push_str(&flat(v));
            }
            out.push_str(end);
        }
        StmtKind::Block(b) => block(out, b, indent, Semis::AsWritten),
    }
}

fn if_chain(out: &mut String, chain: &IfChain, indent: usize, semis: Semis) {
    let col = column_after(indent, out) + 3;
    out.push_str(&format!("if {} ", condition_at(&chain.cond, col)));
    block(out, &chain.then, indent, semis);
    match &chain.otherwise {
        None => {}
        Some(Else::If(next)) => {
            out.push_str(" else ");
            if_chain(out, next, indent, semis);
        }
        Some(Else::Block(b)) => {
            out.push_str(" else ");
            block(out, b, indent, semis);
        }
    }
}

/// The column after `text` is printed from `col`.
fn column_after(col: usize, text: &str) -> usize {
    match text.rfind('\n') {
        Some(p) => text.len() - p - 1,
        None => col + text.len(),
    }
}

/// A condition of `if` or `while`: an operation in parentheses.
fn condition(e: &Expr) -> String {
    operand(e, needs_parens(e, None))
}

/// `if COND {` from column `col`, the condition broken when the line would not fit.
fn condition_at(e: &Expr, col: usize) -> String {
    let one = condition(e);
    if col + one.len() + 2 <= WIDTH || !needs_parens(e, None) {
        return one;
    }
    format!("({})", layout(e, col + 1, 3, col))
}

fn is_comparison(op: &str) -> bool {
    matches!(op, "==" | "!=" | "<" | "<=" | ">" | ">=")
}

/// Whether `child` is printed in parentheses as an operand of `parent` (a binary operator, or `None` for
/// the operands of `?:`, unary operators, casts and field accesses).
fn needs_parens(child: &Expr, parent: Option<&str>) -> bool {
    match child {
        Expr::Binary("..", ..) => false,
        Expr::Binary(op, ..) => match parent {
            Some(p) => {
                let logical_chain = (p == "&&" || p == "||") && p == *op;
                !(logical_chain || (is_comparison(op) && (is_comparison(p) || p == "&&" || p == "||")))
            }
            None => true,
        },
        Expr::Unary(..) | Expr::Ternary(..) | Expr::Cast(..) => true,
        _ => false,
    }
}

fn operand(e: &Expr, parens: bool) -> String {
    if parens {
        format!("({})", flat(e))
    } else {
        flat(e)
    }
}

fn list(items: &[Expr]) -> String {
    items.iter().map(flat).collect::<Vec<_>>().join(", ")
}

/// The expression on one line.
pub fn flat(e: &Expr) -> String {
    match e {
        Expr::Atom(a) => a.clone(),
        Expr::Call(name, args) => format!("{name}({})", list(args)),
        Expr::Map(name, keys) if keys.is_empty() => name.clone(),
        Expr::Map(name, keys) => format!("{name}[{}]", list(keys)),
        Expr::Unary(op, x) => {
            format!("{op}{}", operand(x, matches!(**x, Expr::Binary(..) | Expr::Ternary(..))))
        }
        Expr::Postfix(op, x) => format!("{}{op}", operand(x, needs_parens(x, None))),
        Expr::Binary("..", a, b) => {
            format!("{}..{}", operand(a, needs_parens(a, None)), operand(b, needs_parens(b, None)))
        }
        Expr::Binary(op, a, b) => format!(
            "{} {op} {}",
            operand(a, needs_parens(a, Some(op))),
            operand(b, needs_parens(b, Some(op)) || same_chain_right(op, b))
        ),
        Expr::Ternary(c, t, o) => match t {
            Some(t) => format!(
                "{} ? {} : {}",
                operand(c, needs_parens(c, None)),
                operand(t, needs_parens(t, None)),
                operand(o, needs_parens(o, None))
            ),
            None => format!("{} ?: {}", operand(c, needs_parens(c, None)), operand(o, needs_parens(o, None))),
        },
        Expr::Field(base, field) => format!("{}.{field}", operand(base, needs_parens(base, None))),
        Expr::Index(base, index) => format!("{}[{}]", operand(base, needs_parens(base, None)), flat(index)),
        Expr::Tuple(items) => format!("({})", list(items)),
        Expr::Record(fields) => {
            let parts: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={}", flat(v))).collect();
            format!("({})", parts.join(", "))
        }
        Expr::Cast(ty, x) => {
            format!("({ty}){}", operand(x, matches!(**x, Expr::Binary(..) | Expr::Ternary(..))))
        }
        Expr::Block(b) => {
            let mut out = String::new();
            block(&mut out, b, 0, Semis::AsWritten);
            out
        }
        Expr::If(chain) => {
            let mut out = format!("if {} {}", condition(&chain.cond), inline_block(&chain.then));
            let mut next = &chain.otherwise;
            while let Some(e) = next {
                match e {
                    Else::If(c) => {
                        out.push_str(&format!(" else if {} {}", condition(&c.cond), inline_block(&c.then)));
                        next = &c.otherwise;
                    }
                    Else::Block(b) => {
                        out.push_str(&format!(" else {}", inline_block(b)));
                        next = &None;
                    }
                }
            }
            out
        }
    }
}

/// `a && (b && c)` keeps its parentheses: only a chain to the left reads without them.
fn same_chain_right(op: &str, rhs: &Expr) -> bool {
    matches!(rhs, Expr::Binary(r, ..) if *r == op && (op == "&&" || op == "||"))
}

fn inline_block(b: &Block) -> String {
    match b.stmts.as_slice() {
        [] => "{}".into(),
        [s] if matches!(s.kind, StmtKind::Expr(_)) && !s.semi => {
            let StmtKind::Expr(e) = &s.kind else { unreachable!() };
            format!("{{ {} }}", flat(e))
        }
        _ => {
            let mut out = String::new();
            block(&mut out, b, 0, Semis::AsWritten);
            out
        }
    }
}

/// The expression printed from column `col`, with `trail` characters to follow it on its last line,
/// broken where it does not fit; `indent` is the statement's.
fn layout(e: &Expr, col: usize, trail: usize, indent: usize) -> String {
    let one = flat(e);
    if col + one.len() + trail <= WIDTH || one.contains('\n') {
        return one;
    }
    match e {
        Expr::Call(name, args) if !args.is_empty() => {
            let at = col + name.len() + 1;
            format!(
                "{name}({})",
                fill_backwards(&args.iter().map(flat).collect::<Vec<_>>(), ",", at, trail + 1)
            )
        }
        Expr::Map(name, keys) if !keys.is_empty() => {
            let pad = " ".repeat(indent + 2);
            format!("{name}[\n{pad}{}\n{}]", list(keys), " ".repeat(indent))
        }
        Expr::Binary(op, ..) if *op == "&&" || *op == "||" => {
            let mut items = vec![];
            chain_items(e, op, &mut items);
            fill_backwards(&items, &format!(" {op}"), col, trail)
        }
        Expr::Binary(op, a, b) if *op != ".." => {
            let (pa, pb) = (needs_parens(a, Some(op)), needs_parens(b, Some(op)));
            let lhs = if pa {
                format!("({})", layout(a, col + 1, op.len() + 2, indent))
            } else {
                layout(a, col, op.len() + 1, indent)
            };
            let rhs = if pb {
                format!("({})", layout(b, col + 1, trail + 1, indent))
            } else {
                layout(b, col, trail, indent)
            };
            format!("{lhs} {op}\n{}{rhs}", " ".repeat(col))
        }
        _ => one,
    }
}

/// The operands of a chain of one logical operator, left to right.
fn chain_items(e: &Expr, op: &str, items: &mut Vec<String>) {
    match e {
        Expr::Binary(o, a, b) if *o == op => {
            chain_items(a, op, items);
            items.push(operand(b, needs_parens(b, Some(op)) || same_chain_right(op, b)));
        }
        _ => items.push(operand(e, needs_parens(e, Some(op)))),
    }
}

/// `items` separated by `sep` and a space, in lines aligned at `col`: the last lines filled first, from
/// the end, as full as they go; what is left stands on the first line.
fn fill_backwards(items: &[String], sep: &str, col: usize, trail: usize) -> String {
    let mut lines: Vec<Vec<&String>> = vec![];
    let mut current: Vec<&String> = vec![];
    let mut width = 0;
    for (i, item) in items.iter().enumerate().rev() {
        let own = item.len() + if i + 1 == items.len() { trail } else { sep.len() };
        let needed = if current.is_empty() { own } else { own + 1 };
        if !current.is_empty() && col + width + needed > WIDTH {
            lines.push(std::mem::take(&mut current));
            width = 0;
            current.push(item);
            width += own;
            continue;
        }
        current.push(item);
        width += needed;
    }
    lines.push(current);
    let pad = " ".repeat(col);
    let mut out = String::new();
    let count = items.len();
    let mut index = 0;
    for (n, line) in lines.iter().rev().enumerate() {
        if n > 0 {
            out.push('\n');
            out.push_str(&pad);
        }
        for (k, item) in line.iter().rev().enumerate() {
            if k > 0 {
                out.push(' ');
            }
            out.push_str(item);
            index += 1;
            if index < count {
                out.push_str(sep);
            }
        }
    }
    out
}
