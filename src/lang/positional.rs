//! Positional parameters: `$1`.. and `$#`, the words given after the script on the command line. They
//! are known before the script is checked, so they are written into the tree as literals, as bpftrace
//! reads them: a parameter that reads as a number (`42`, `0x2a`, `052`) is that number, any other a
//! string; `str($1)` is the parameter's text whatever it looks like, `str($1 + 2)` its text from the third
//! character. An unset parameter is `0`, or `""` in `str()`. In attach points `$1` is replaced by the
//! text (`interval:ms:$1`).

use super::ast::*;
use super::{Diagnostic, Span};

/// Replaces every positional parameter of `program` by its value among `params` (`$1` is `params[0]`).
pub fn substitute(program: &mut Program, params: &[String]) -> Result<(), Diagnostic> {
    let mut error = None;
    for probe in &mut program.probes {
        for point in &mut probe.attach_points {
            point.text = in_text(&point.text, params);
        }
        let mut each = |e: &mut Expr| {
            if error.is_none() {
                if let Err(diag) = in_expr(e, params) {
                    error = Some(diag);
                }
            }
        };
        if let Some(predicate) = &mut probe.predicate {
            each(predicate);
        }
        super::walk::each_expr_mut(&mut probe.body, &mut each);
    }
    error.map_or(Ok(()), Err)
}

/// The parameter `$N` names, if `name` is a number; `Some(None)` when it was not given.
fn parameter<'a>(name: &str, params: &'a [String]) -> Option<Option<&'a str>> {
    let n = name.parse::<usize>().ok()?;
    Some(n.checked_sub(1).and_then(|i| params.get(i)).map(String::as_str))
}

/// An attach point's text with `$N` replaced by the parameter's text (not inside double quotes, where `$1`
/// is written as it stands, as in bpftrace).
fn in_text(text: &str, params: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['$', '"']) {
        if rest[at..].starts_with('"') {
            // The quoted part, to its closing quote, as it is (a `\"` inside does not close it).
            let body = &rest[at + 1..];
            let mut close = body.len();
            let mut escaped = false;
            for (i, c) in body.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => {
                        close = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            out.push_str(&rest[..at + 1 + close]);
            rest = &rest[at + 1 + close..];
            continue;
        }
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - at - 1);
        match parameter(&rest[at + 1..at + 1 + digits], params) {
            Some(value) => out.push_str(value.unwrap_or("")),
            None => out.push('$'),
        }
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    out
}

fn in_expr(e: &mut Expr, params: &[String]) -> Result<(), Diagnostic> {
    if let Some(text) = as_string(e, params)? {
        e.kind = ExprKind::Str(text);
        return Ok(());
    }
    match &e.kind {
        ExprKind::Var(name) if name == "#" => e.kind = ExprKind::Int(params.len() as u64),
        ExprKind::Var(name) => {
            if let Some(value) = parameter(name, params) {
                e.kind = literal(value.unwrap_or("0"), e.span);
            }
        }
        _ => {}
    }
    let mut result = Ok(());
    super::walk::each_child_mut(e, &mut |child| {
        if result.is_ok() {
            result = in_expr(child, params);
        }
    });
    result
}

/// `str($N)` and `str($N + k)` (with or without a length): the parameter's text, from character `k`.
fn as_string(e: &mut Expr, params: &[String]) -> Result<Option<String>, Diagnostic> {
    let ExprKind::Call { name, args, .. } = &mut e.kind else { return Ok(None) };
    if name != "str" || args.is_empty() {
        return Ok(None);
    }
    let (var, skip) = match &args[0].kind {
        ExprKind::Var(var) => (var, 0),
        ExprKind::Binary { op: BinOp::Add, lhs, rhs } => match (&lhs.kind, &rhs.kind) {
            (ExprKind::Var(var), ExprKind::Int(k)) => (var, *k),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Some(value) = parameter(var, params) else { return Ok(None) };
    let given = value.is_some();
    let value = value.unwrap_or("");
    let Some(text) = usize::try_from(skip).ok().and_then(|k| value.get(k..)) else {
        let what =
            if given { format!("the parameter `{value}`") } else { format!("`${var}`, which was not given") };
        return Err(Diagnostic::error(args[0].span, format!("`${var} + {skip}` is past the end of {what}"))
            .with_help(format!("the offset may be at most its length, {}", value.len())));
    };
    if args.len() == 1 {
        return Ok(Some(text.to_string()));
    }
    // `str($1, n)`: the literal, cut by `str` itself.
    let span = args[0].span;
    args[0] = Expr { kind: ExprKind::Str(text.to_string()), span, id: ExprId::NONE };
    Ok(None)
}

/// A parameter's value as the script sees it: a number if it reads as one, else a string.
fn literal(text: &str, span: Span) -> ExprKind {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    let number = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()
    } else {
        digits.parse::<u64>().ok()
    };
    match number {
        Some(n) if negative => ExprKind::Unary {
            op: UnOp::Neg,
            operand: Box::new(Expr { kind: ExprKind::Int(n), span, id: ExprId::NONE }),
        },
        Some(n) => ExprKind::Int(n),
        None => ExprKind::Str(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn attach_points_take_the_text() {
        assert_eq!(in_text("i:ms:$1", &params(&["10"])), "i:ms:10");
        assert_eq!(in_text("BEG$1", &params(&["IN"])), "BEGIN");
        assert_eq!(in_text("$2", &params(&["a"])), "");
        assert_eq!(in_text("u:/a$b:f", &params(&[])), "u:/a$b:f");
        assert_eq!(in_text(r#"u:"/a/$1\"$1":$1"#, &params(&["f"])), r#"u:"/a/$1\"$1":f"#);
    }

    #[test]
    fn numbers_in_every_base_and_strings() {
        assert_eq!(literal("0x123", Span::new(0, 0)), ExprKind::Int(0x123));
        assert_eq!(literal("0775", Span::new(0, 0)), ExprKind::Int(0o775));
        assert_eq!(literal("0", Span::new(0, 0)), ExprKind::Int(0));
        assert_eq!(literal("p1", Span::new(0, 0)), ExprKind::Str("p1".into()));
        assert!(matches!(literal("-3", Span::new(0, 0)), ExprKind::Unary { op: UnOp::Neg, .. }));
    }
}
