//! The C preprocessor lines bpftrace's own tools carry: `#include` (bpftrace reads C headers for struct
//! definitions; steadytrace takes kernel types from BTF, so they are not needed), object-like `#define NAME
//! value` (and `#undef`), and `#ifdef`, `#ifndef`, `#if defined(...)`, `#else`, `#endif` around them, with
//! `BPFTRACE_HAVE_BTF` defined when the kernel has BTF. A defined name is not replaced in the text: the
//! parser reads its value where the name stands as an expression, so spans stay in the script. Directive lines and the lines of branches not taken become blanks of the same length, so every
//! offset, and so every diagnostic's line and column, stays what it was in the script.

use super::surroundings::Surroundings;
use super::{Diagnostic, Span};
use std::collections::HashMap;

/// What the preprocessor leaves for the parser.
#[derive(Debug)]
pub struct Preprocessed {
    /// The script with its preprocessor lines blanked out.
    pub text: String,
    /// The constants its `#include` lines define (see [`super::headers`]).
    pub constants: HashMap<String, i64>,
    /// `#define NAME value`: each name's value as written, comments removed.
    pub defines: HashMap<String, String>,
    /// The `#include`d headers found nowhere, each with its line.
    pub missing_headers: Vec<(String, Span)>,
    /// The `#include`d headers not installed whose constants come from the built-in tables alone.
    pub built_in_headers: Vec<String>,
}

pub fn preprocess(text: &str, around: &Surroundings<'_>) -> Result<Preprocessed, Diagnostic> {
    let btf = around.kernel_btf;
    let mut constants: HashMap<String, i64> = around.headers.forced_constants().into_iter().collect();
    let mut defines = HashMap::new();
    let mut missing_headers = vec![];
    let mut built_in_headers = vec![];
    if !text.lines().any(|line| line.trim_start().starts_with('#')) {
        return Ok(Preprocessed {
            text: text.to_string(),
            constants,
            defines,
            missing_headers,
            built_in_headers,
        });
    }
    let mut out = String::with_capacity(text.len());
    // One entry per open `#if`: (whether its current branch is taken, whether an earlier one was, whether
    // its `#else` came, its span).
    let mut open: Vec<(bool, bool, bool, Span)> = vec![];
    let mut at = 0;
    let mut in_comment = false;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        let span = Span::new(at, at + line.trim_end().len());
        at += line.len();
        let directive = line.trim_start();
        let active = open.iter().all(|&(taken, ..)| taken);
        let defined = |name: &str| (name == "BPFTRACE_HAVE_BTF" && btf) || defines.contains_key(name);
        // A `#` inside a `/* ... */` comment starts no directive.
        let commented = in_comment;
        in_comment = ends_in_comment(line, in_comment);
        let keep = if (number == 0 && directive.starts_with("#!")) || commented {
            active
        } else if let Some(rest) = directive.strip_prefix('#') {
            let rest = rest.trim_start();
            let (word, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let argument = argument.trim();
            match word {
                "include" if active => {
                    let header = argument.trim_matches(|c| matches!(c, '<' | '>' | '"'));
                    if !around.headers.exists(header) {
                        missing_headers.push((header.to_string(), span));
                    } else if around.headers.built_in_only(header) {
                        built_in_headers.push(header.to_string());
                    }
                    constants.extend(around.headers.constants(header));
                }
                "include" => {}
                "define" if active => {
                    let (name, value) = definition(argument, span)?;
                    defines.insert(name, value);
                }
                "undef" if active => {
                    defines.remove(argument);
                }
                // Inside a branch not taken, a nested `#if` is only counted, never evaluated.
                "ifdef" | "ifndef" | "if" if !active => open.push((false, true, false, span)),
                "ifdef" | "ifndef" | "if" => {
                    let name = match word {
                        "if" => condition(argument).ok_or_else(|| {
                            Diagnostic::error(span, "only `#if defined(NAME)` and `#if !defined(NAME)` are understood")
                        })?,
                        _ => (argument, false),
                    };
                    let taken = defined(name.0) != (word == "ifndef" || name.1);
                    open.push((taken, taken, false, span));
                }
                "else" => match open.last_mut() {
                    Some((_, _, true, _)) => {
                        return Err(Diagnostic::error(span, "a second `#else` for one `#if`"));
                    }
                    Some((taken, seen, had_else, _)) => {
                        *taken = !*seen;
                        *seen = true;
                        *had_else = true;
                    }
                    None => return Err(Diagnostic::error(span, "`#else` without `#if`")),
                },
                "endif" => {
                    if open.pop().is_none() {
                        return Err(Diagnostic::error(span, "`#endif` without `#if`"));
                    }
                }
                _ if !active => {}
                _ => {
                    return Err(Diagnostic::error(span, format!("the preprocessor directive `#{word}` is not supported"))
                        .with_help("steadytrace understands #include (ignored: kernel types come from BTF), #define NAME value, #undef, #ifdef, #ifndef, #if defined(...), #else and #endif"))
                }
            }
            false
        } else {
            active
        };
        if keep {
            out.push_str(line);
        } else {
            // One space per byte, so that every byte offset after it is the same as in the script.
            out.extend(line.bytes().map(|b| if b == b'\n' { '\n' } else { ' ' }));
        }
    }
    if let Some(&(.., span)) = open.last() {
        return Err(Diagnostic::error(span, "this `#if` is never closed").with_help("end it with `#endif`"));
    }
    Ok(Preprocessed { text: out, constants, defines, missing_headers, built_in_headers })
}

/// `NAME value` of `#define`: the name and its value without comments.
fn definition(argument: &str, span: Span) -> Result<(String, String), Diagnostic> {
    let name_len =
        argument.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(argument.len());
    let name = &argument[..name_len];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(Diagnostic::error(span, "`#define` needs a name").with_help("write `#define NAME value`"));
    }
    if argument[name_len..].starts_with('(') {
        return Err(Diagnostic::error(
            span,
            format!("`{name}(...)`: macros with arguments are not supported"),
        )
        .with_help("write `#define NAME value`, or a bpftrace `macro NAME(...) { ... }`"));
    }
    let mut value = argument[name_len..].to_string();
    // A comment after the value is not part of it (outside strings: a value with `"` keeps the rest).
    if !value.contains('"') {
        if let Some(at) = value.find("//") {
            value.truncate(at);
        }
        while let (Some(from), Some(to)) = (value.find("/*"), value.find("*/")) {
            if to < from {
                break;
            }
            value.replace_range(from..to + 2, " ");
        }
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// Whether a `/* ... */` comment is still open at the end of `line` (open at its start when `open`).
fn ends_in_comment(line: &str, open: bool) -> bool {
    let (mut open, mut in_string) = (open, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (open, in_string, c, chars.peek()) {
            (true, _, '*', Some('/')) => {
                chars.next();
                open = false;
            }
            (true, ..) => {}
            (false, true, '\\', _) => {
                chars.next();
            }
            (false, _, '"', _) => in_string = !in_string,
            (false, false, '/', Some('*')) => {
                chars.next();
                open = true;
            }
            (false, false, '/', Some('/')) => break,
            _ => {}
        }
    }
    open
}

/// `defined(NAME)` or `!defined(NAME)`: the name, and whether it is negated.
fn condition(text: &str) -> Option<(&str, bool)> {
    let (negated, text) = match text.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, text),
    };
    let name = text.strip_prefix("defined")?.trim_start().strip_prefix('(')?.strip_suffix(')')?.trim();
    Some((name, negated))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` on a kernel with BTF or without.
    fn preprocess(text: &str, btf: bool) -> Result<Preprocessed, Diagnostic> {
        super::preprocess(text, &Surroundings { kernel_btf: btf, ..Surroundings::nothing() })
    }

    const TOOL: &str = "#!/usr/bin/env bpftrace\n#ifndef BPFTRACE_HAVE_BTF\n#include <linux/sched.h>\nstruct x { int a; };\n#else\n#include <sys/socket.h>\n#endif\nBEGIN { }\n";

    #[test]
    fn directives_and_branches_not_taken_become_blanks_of_the_same_length() {
        let with_btf = preprocess(TOOL, true).unwrap().text;
        assert_eq!(with_btf.len(), TOOL.len());
        assert_eq!(
            with_btf.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>(),
            ["#!/usr/bin/env bpftrace", "BEGIN { }"]
        );
        let without = preprocess(TOOL, false).unwrap().text;
        assert!(without.contains("struct x { int a; };"));
        assert_eq!(without.find("BEGIN"), TOOL.find("BEGIN"));
    }

    #[test]
    fn a_hash_inside_a_comment_is_no_directive() {
        let text = "/*\n # need modifications\n */\nBEGIN { printf(\"/*\"); }\n# not in a comment\n";
        let err = preprocess(text, true).unwrap_err();
        assert_eq!(err.message, "the preprocessor directive `#not` is not supported");
    }

    #[test]
    fn an_included_header_defines_its_constants() {
        let constants =
            preprocess("#include <linux/socket.h>\n#ifdef X\n#include <linux/sched.h>\n#endif\n", true)
                .unwrap()
                .constants;
        assert_eq!(constants.get("AF_INET6"), Some(&10));
        assert_eq!(constants.get("TASK_RUNNING"), None);
    }

    #[test]
    fn a_second_else_is_an_error_and_an_if_not_taken_is_not_evaluated() {
        let err = preprocess("#ifdef X\n#else\n#else\n#endif\n", true).unwrap_err();
        assert_eq!(err.message, "a second `#else` for one `#if`");
        assert!(preprocess("#ifdef X\n#if 1 + 1\n#endif\n#endif\nBEGIN { }\n", true).is_ok());
    }

    #[test]
    fn an_unclosed_if_is_an_error() {
        let err = preprocess("#ifdef X\nBEGIN { }\n", true).unwrap_err();
        assert_eq!(err.message, "this `#if` is never closed");
    }

    #[test]
    fn defines_keep_their_values_without_comments_and_count_for_ifdef() {
        let text = "#define AF_INET   2 /* IPv4 */\n#define RED \"\\033[31m\"\n#define GONE 1\n#undef GONE\n#ifdef AF_INET\nyes\n#endif\n";
        let out = preprocess(text, true).unwrap();
        assert_eq!(out.defines.get("AF_INET").map(String::as_str), Some("2"));
        assert_eq!(out.defines.get("RED").map(String::as_str), Some("\"\\033[31m\""));
        assert!(!out.defines.contains_key("GONE"));
        assert!(out.text.contains("yes"));
        let err = preprocess("#define F(x) x\n", true).unwrap_err();
        assert_eq!(err.message, "`F(...)`: macros with arguments are not supported");
    }

    #[test]
    fn if_defined_is_understood() {
        let text = "#if !defined(BPFTRACE_HAVE_BTF)\nold\n#endif\nBEGIN { }\n";
        assert!(!preprocess(text, true).unwrap().text.contains("old"));
        assert!(preprocess(text, false).unwrap().text.contains("old"));
    }
}
