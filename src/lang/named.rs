//! Named program options: `getopt("name", default[, "description"])` reads `--name=value` given after
//! the script (`steadytrace script.bt -- --name=value`). The options are known before the script is
//! checked, so each call is written into the tree as its value: a bool (`getopt("name")`, or a
//! `true`/`false` default; `--name` alone is true), an integer (signed when the default is negative) or
//! a string, typed by the default as in bpftrace.

use super::ast::*;
use super::{Diagnostic, Span};
use std::collections::HashMap;

/// A word after the script is a named option when it starts with `--`.
pub fn is_option(word: &str) -> bool {
    word.starts_with("--")
}

/// What went wrong: at a `getopt` call, or on the command line.
#[derive(Debug)]
pub enum Error {
    At(Diagnostic),
    CommandLine(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Default {
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Str(String),
}

/// Replaces every `getopt` call of `program` by its option's value among `words` (the words after the
/// script; those not starting with `--` are positional parameters, left alone).
pub fn substitute(program: &mut Program, words: &[String]) -> Result<(), Error> {
    let given: HashMap<&str, Option<&str>> = words
        .iter()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|option| match option.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (option, None),
        })
        .collect();
    let mut defaults: Vec<(String, Default, Span)> = vec![];
    let mut error = None;
    for probe in &mut program.probes {
        let mut each = |e: &mut Expr| {
            if error.is_none() {
                if let Err(diag) = in_expr(e, &given, &mut defaults) {
                    error = Some(diag);
                }
            }
        };
        if let Some(predicate) = &mut probe.predicate {
            each(predicate);
        }
        super::walk::each_expr_mut(&mut probe.body, &mut each);
    }
    if let Some(diag) = error {
        return Err(Error::At(diag));
    }
    let unknown: Vec<String> = given
        .keys()
        .filter(|name| !defaults.iter().any(|(n, ..)| n == *name))
        .map(|n| format!("--{n}"))
        .collect();
    if !unknown.is_empty() {
        let mut unknown = unknown;
        unknown.sort();
        let known: Vec<String> = defaults.iter().map(|(name, ..)| format!("--{name}")).collect();
        let expected = match known.is_empty() {
            true => "the script reads no options (getopt)".to_string(),
            false => format!("the script's options: {}", known.join(", ")),
        };
        return Err(Error::CommandLine(format!(
            "unexpected program command line options: {} ({expected})",
            unknown.join(", ")
        )));
    }
    Ok(())
}

fn in_expr(
    e: &mut Expr,
    given: &HashMap<&str, Option<&str>>,
    defaults: &mut Vec<(String, Default, Span)>,
) -> Result<(), Diagnostic> {
    if let ExprKind::Call { name, args, .. } = &e.kind {
        if name == "getopt" {
            let (option, default) = call(args, e.span)?;
            match defaults.iter().find(|(n, ..)| *n == option) {
                Some((_, earlier, _)) if *earlier != default => {
                    return Err(Diagnostic::error(
                        e.span,
                        format!("option `{option}` needs the same default value everywhere it is read"),
                    )
                    .with_help("give each `getopt` of it the same default, or read it once into a variable"))
                }
                Some(_) => {}
                None => defaults.push((option.clone(), default.clone(), e.span)),
            }
            let value = match given.get(option.as_str()) {
                None => default,
                Some(text) => parse(&option, *text, &default, e.span)?,
            };
            e.kind = literal(value, e.span);
            return Ok(());
        }
    }
    let mut result = Ok(());
    super::walk::each_child_mut(e, &mut |child| {
        if result.is_ok() {
            result = in_expr(child, given, defaults);
        }
    });
    result
}

/// The option's name and default of `getopt(args)`.
fn call(args: &[Expr], span: Span) -> Result<(String, Default), Diagnostic> {
    let usage = "getopt(\"name\"), or getopt(\"name\", default[, \"description\"]) with a number, string or bool default";
    if args.is_empty() || args.len() > 3 {
        return Err(Diagnostic::error(span, "`getopt()` takes 1 to 3 arguments").with_help(usage));
    }
    let ExprKind::Str(name) = &args[0].kind else {
        return Err(
            Diagnostic::error(args[0].span, "the option's name must be a string literal").with_help(usage)
        );
    };
    if let Some(description) = args.get(2) {
        if !matches!(description.kind, ExprKind::Str(_)) {
            return Err(Diagnostic::error(
                description.span,
                "the option's description must be a string literal",
            )
            .with_help(usage));
        }
    }
    let default = match args.get(1).map(|a| &a.kind) {
        None => Default::Bool(false),
        Some(ExprKind::Ident(word)) if word == "true" || word == "false" => Default::Bool(word == "true"),
        Some(ExprKind::Int(n)) => Default::Unsigned(*n),
        Some(ExprKind::Str(text)) => Default::Str(text.clone()),
        Some(ExprKind::Unary { op: UnOp::Neg, operand }) if matches!(operand.kind, ExprKind::Int(_)) => {
            let ExprKind::Int(n) = operand.kind else { unreachable!("matched") };
            match i64::try_from(n) {
                Ok(n) => Default::Signed(-n),
                Err(_) => return Err(Diagnostic::error(args[1].span, "the default is out of range")),
            }
        }
        Some(_) => {
            return Err(Diagnostic::error(
                args[1].span,
                "the option's default must be a number, string or bool literal",
            )
            .with_help(usage))
        }
    };
    Ok((name.clone(), default))
}

/// The value `--option[=text]` gives, of the default's type.
fn parse(option: &str, text: Option<&str>, default: &Default, span: Span) -> Result<Default, Diagnostic> {
    let bad = |what: &str| {
        let given = text.map_or(format!("--{option}"), |t| format!("--{option}={t}"));
        Err(Diagnostic::error(span, format!("program command line option {given}: {what}")))
    };
    let Some(text) = text else {
        return match default {
            Default::Bool(_) => Ok(Default::Bool(true)),
            Default::Str(_) => bad("expects a string (`--{option}=TEXT`)"),
            _ => bad("expects an integer"),
        };
    };
    match default {
        Default::Bool(_) => match text.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Default::Bool(true)),
            "false" | "0" => Ok(Default::Bool(false)),
            _ => bad("expects a boolean (true, false, 1 or 0)"),
        },
        Default::Unsigned(_) => match number(text) {
            Some((false, n)) => Ok(Default::Unsigned(n)),
            _ => bad("expects a non-negative integer"),
        },
        Default::Signed(_) => match number(text) {
            Some((negative, n)) => match i64::try_from(n) {
                Ok(n) => Ok(Default::Signed(if negative { -n } else { n })),
                Err(_) => bad("value is out of range"),
            },
            None => bad("expects an integer"),
        },
        Default::Str(_) => Ok(Default::Str(text.to_string())),
    }
}

/// `[-]digits`, `[-]0xHEX`: the sign and the magnitude.
fn number(text: &str) -> Option<(bool, u64)> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let n = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some((negative, n))
}

fn literal(value: Default, span: Span) -> ExprKind {
    let int = |n: u64| Box::new(Expr { kind: ExprKind::Int(n), span, id: ExprId::NONE });
    match value {
        Default::Bool(b) => ExprKind::Ident(if b { "true" } else { "false" }.to_string()),
        Default::Unsigned(n) => ExprKind::Cast { ty: "uint64".into(), operand: int(n) },
        Default::Signed(n) if n < 0 => ExprKind::Unary { op: UnOp::Neg, operand: int(n.unsigned_abs()) },
        Default::Signed(n) => ExprKind::Cast { ty: "int64".into(), operand: int(n as u64) },
        Default::Str(text) => ExprKind::Str(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    fn substituted(script: &str, args: &[&str]) -> Result<Program, Error> {
        let mut program = crate::lang::parse(script).expect("parses");
        substitute(&mut program, &words(args)).map(|()| program)
    }

    #[test]
    fn values_take_the_defaults_type() {
        let program = substituted(
            r#"BEGIN { print((getopt("a", 1), getopt("b", -1), getopt("c"), getopt("d", "x"), getopt("e", true))); }"#,
            &["--a=0x10", "--b=5", "--c", "--d=y", "--e=False", "pos"],
        )
        .unwrap();
        let body = format!("{:?}", program.probes[0].body);
        assert!(body.contains("Int(16)") && body.contains("Int(5)") && body.contains("Str(\"y\")"), "{body}");
        assert!(body.contains("Ident(\"true\")") && body.contains("Ident(\"false\")"), "{body}");
    }

    #[test]
    fn bad_values_and_unknown_options_are_errors() {
        let script = r#"BEGIN { print(getopt("aa", 10)); }"#;
        assert!(matches!(substituted(script, &["--aa=False"]), Err(Error::At(_))));
        assert!(matches!(substituted(script, &["--aa"]), Err(Error::At(_))));
        let Err(Error::CommandLine(message)) = substituted(script, &["--bb"]) else {
            panic!("accepted --bb")
        };
        assert_eq!(message, "unexpected program command line options: --bb (the script's options: --aa)");
        let twice = r#"BEGIN { print((getopt("aa", 10), getopt("aa", 11))); }"#;
        assert!(matches!(substituted(twice, &[]), Err(Error::At(_))));
    }
}
