//! A check on the runtime's own source: no function in `src/runtime/` is longer than [`MAX_LINES`], so that
//! each reads as one step (`runtime::run` as its stages). Lengths are counted from the line of `fn` to that of
//! the body's closing brace, with strings, characters and comments set aside.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 120;

/// Each function's name, the line its `fn` is on (from 1) and its length in lines.
fn function_lengths(source: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(source);
    let bytes = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = vec![];
    let mut at = 0;
    while let Some(offset) = code[at..].find("fn ") {
        let start = at + offset;
        at = start + 3;
        if start > 0 && is_ident(bytes[start - 1]) {
            continue;
        }
        let name: String =
            code[at..].trim_start().chars().take_while(|&c| c == '_' || c.is_alphanumeric()).collect();
        let Some(open) = code[at..].find(['{', ';']).map(|o| at + o) else { break };
        if name.is_empty() || bytes[open] == b';' {
            continue;
        }
        let mut depth = 0;
        let close = (open..bytes.len()).find(|&i| {
            depth += i32::from(bytes[i] == b'{') - i32::from(bytes[i] == b'}');
            depth == 0
        });
        let close = close.unwrap_or(bytes.len() - 1);
        found.push((name, line_of(start), line_of(close) - line_of(start) + 1));
    }
    found
}

/// `source` with the insides of strings, character literals and comments blanked (lines kept), so that
/// their braces are not counted.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let rest = &chars[i..];
        let end = match rest {
            ['/', '/', ..] => rest.iter().position(|&c| c == '\n').unwrap_or(rest.len()),
            ['/', '*', ..] => rest.windows(2).position(|w| w == ['*', '/']).map_or(rest.len(), |p| p + 2),
            ['r', '#' | '"', ..] if i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') => {
                let hashes = rest[1..].iter().take_while(|&&c| c == '#').count();
                if rest.get(1 + hashes) != Some(&'"') {
                    0
                } else {
                    let closing: Vec<char> =
                        std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                    let body = 2 + hashes;
                    rest[body..]
                        .windows(closing.len())
                        .position(|w| w == closing)
                        .map_or(rest.len(), |p| body + p + closing.len())
                }
            }
            ['"', ..] => {
                let mut j = 1;
                while j < rest.len() && rest[j] != '"' {
                    j += if rest[j] == '\\' { 2 } else { 1 };
                }
                j + 1
            }
            ['\'', '\\', ..] => rest[2..].iter().position(|&c| c == '\'').map_or(rest.len(), |p| p + 3),
            ['\'', _, '\'', ..] => 3,
            _ => 0,
        };
        match end {
            0 => {
                out.push(chars[i]);
                i += 1;
            }
            n => {
                let n = n.min(rest.len());
                out.extend(rest[..n].iter().map(|&c| blank(c)));
                i += n;
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/runtime is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_function_of_the_runtime_is_longer_than_120_lines() {
    let mut files = vec![];
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime"), &mut files);
    assert!(files.len() > 20, "the runtime's files were not found");
    let mut long = vec![];
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a source file is readable");
        for (name, line, lines) in function_lengths(&source) {
            if lines > MAX_LINES {
                long.push(format!("{}:{line}: {name} is {lines} lines", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "longer than {MAX_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn a_function_is_measured_from_fn_to_its_closing_brace() {
    let source = "/// fn not_this() {\nfn a() {\n    let s = \"}\";\n    let c = '{';\n    let r = r#\"}\"#;\n}\n\n\
                  fn b<'x>(v: &'x str) -> &'x str { v }\ntrait T {\n    fn c(&self);\n    fn d(&self) {\n    }\n}\n";
    let expected =
        [("a", 2, 5), ("b", 8, 1), ("d", 11, 2)].map(|(name, at, lines)| (name.to_string(), at, lines));
    assert_eq!(function_lengths(source), expected);
}
