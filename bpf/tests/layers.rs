//! The two halves of the bpf crate kept apart, checked on its sources: nothing under `src/code/` (the pure
//! half) names `src/sys/` (the system calls), the crate's public names in lib.rs (which lead to `sys/`), a
//! crate that reaches the kernel (libc, nix, libbpf-sys, libbpf-rs, any dependency of this crate), the
//! parts of `std` that reach the system (files, I/O, processes, threads, clocks, sockets), `syscall`,
//! `unsafe` or `extern`; and `src/sys/` reaches `code/` directly, not through lib.rs's public names, so
//! that no import runs in a circle. Paths are read from the tokens of the code, comments and string
//! literals left out: every `use` tree is flattened and every `a::b` path resolved (`crate`, `self`,
//! `super`, the file's inline modules).

use std::path::{Path, PathBuf};

/// Parts of `std` that reach the system; `std::env::consts` (constants of the build) is not one of them.
const SYSTEM_STD: &[&str] = &["fs", "io", "net", "os", "process", "thread", "time", "env"];
const PURE_STD: &[&[&str]] = &[&["std", "env", "consts"]];
/// Crates that make system calls, whether or not this crate depends on them today.
const SYSTEM_CRATES: &[&str] = &["libc", "nix", "libbpf_sys", "libbpf_rs"];
/// Macros that write to the process's standard streams.
const PRINTING: &[&str] = &["print", "println", "eprint", "eprintln", "dbg"];
/// Words no pure module needs: unsafe code, foreign functions, and the system call entry (as a function,
/// or a path's last segment: `libc::syscall`).
const FORBIDDEN_WORDS: &[&str] = &["unsafe", "extern", "syscall"];

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of Rust source: identifiers (keywords included) and punctuation; comments, string, char and
/// number literals and lifetimes dropped.
fn tokens(source: &str) -> Vec<Token> {
    let s: Vec<char> = source.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    let ident_start = |c: char| c.is_alphabetic() || c == '_';
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = string_literal_end(&s, i) {
            i = end;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a), dropped either way.
            if next == Some('\\') {
                i += 3;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < s.len() && ident_char(s[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < s.len() && ident_char(s[i]) {
                i += 1;
            }
        } else if ident_start(c) {
            let start = if c == 'r' && next == Some('#') { i + 2 } else { i };
            i = start;
            while i < s.len() && ident_char(s[i]) {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

/// Where the string literal starting at `i` ends (`"…"`, `b"…"`, `c"…"`, `r#"…"#`, `br"…"`), if one does.
fn string_literal_end(s: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(s[j], 'b' | 'c') {
        j += 1;
    }
    let raw = s.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let hashes = s[j..].iter().take_while(|&&c| c == '#').count();
    if !raw && hashes > 0 {
        return None;
    }
    j += hashes;
    if s.get(j) != Some(&'"') {
        return None;
    }
    // Not the end of an identifier (`rb"` is not a literal; `xr"` cannot be either).
    if i > 0 && (s[i - 1].is_alphanumeric() || s[i - 1] == '_') {
        return None;
    }
    j += 1;
    while j < s.len() {
        if !raw && s[j] == '\\' {
            j += 2;
            continue;
        }
        if s[j] == '"' && s[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

/// A path the code names, with the module it is named from.
#[derive(Debug)]
struct Named {
    path: Vec<String>,
    /// The module the path is named in (`["code", "arch"]`), inline modules included.
    module: Vec<String>,
}

/// Every path named in the tokens of the file of module `module`: `use` trees flattened, and the other
/// `a::b` paths. Single identifiers count where they are a macro (`println!`) or a forbidden word.
fn named_paths(tokens: &[Token], module: &[String]) -> Vec<Named> {
    let mut found = vec![];
    // The file's inline modules (`mod tests { … }`), with the brace depth each opened at.
    let mut inline: Vec<(String, usize)> = vec![];
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let here: Vec<String> = module.iter().cloned().chain(inline.iter().map(|(m, _)| m.clone())).collect();
        let after_path_sep = i > 0 && tokens[i - 1] == Token::PathSep;
        match &tokens[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth -= 1;
                if inline.last().is_some_and(|&(_, at)| at == depth) {
                    inline.pop();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let (Some(Token::Ident(name)), Some(Token::Punct('{'))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    inline.push((name.clone(), depth));
                }
            }
            Token::Ident(word) if word == "use" => {
                let end =
                    tokens[i..].iter().position(|t| *t == Token::Punct(';')).map_or(tokens.len(), |n| i + n);
                let mut trees = vec![];
                flatten(&tokens[i + 1..end], vec![], &mut trees);
                found.extend(trees.into_iter().map(|path| Named { path, module: here.clone() }));
                i = end + 1;
                continue;
            }
            Token::Ident(word) if FORBIDDEN_WORDS.contains(&word.as_str()) => {
                found.push(Named { path: vec![word.clone()], module: here.clone() });
            }
            Token::Ident(word) if !after_path_sep && tokens.get(i + 1) == Some(&Token::Punct('!')) => {
                found.push(Named { path: vec![word.clone()], module: here.clone() });
            }
            _ => {}
        }
        // A path starts at an identifier or a leading `::` that does not continue one.
        if !after_path_sep && matches!(tokens[i], Token::Ident(_) | Token::PathSep) {
            let mut path = vec![];
            let mut j = i;
            if tokens[j] == Token::PathSep {
                path.push(String::new()); // `::name`: a crate
                j += 1;
            }
            while let Some(Token::Ident(segment)) = tokens.get(j) {
                path.push(segment.clone());
                if tokens.get(j + 1) != Some(&Token::PathSep) {
                    break;
                }
                j += 2;
            }
            if path.len() > 1 {
                found.push(Named { path, module: here });
            }
        }
        i += 1;
    }
    found
}

/// The paths of a `use` tree (`a::{b, c::{d as e, *}}` gives `a::b`, `a::c::d`, `a::c::*`).
fn flatten(tree: &[Token], prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut i = 0;
    while i < tree.len() {
        match &tree[i] {
            Token::Ident(word) if word == "as" => break,
            Token::Ident(segment) => path.push(segment.clone()),
            Token::Punct('*') => path.push("*".into()),
            Token::PathSep if i == 0 && path.is_empty() => path.push(String::new()),
            Token::Punct('{') => {
                // Split the group at its top-level commas.
                let (mut level, mut start) = (0, i + 1);
                for j in i + 1..tree.len() {
                    match tree[j] {
                        Token::Punct('{') => level += 1,
                        Token::Punct('}') if level == 0 => {
                            if start < j {
                                flatten(&tree[start..j], path.clone(), out);
                            }
                            return;
                        }
                        Token::Punct('}') => level -= 1,
                        Token::Punct(',') if level == 0 => {
                            if start < j {
                                flatten(&tree[start..j], path.clone(), out);
                            }
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The path from the crate root that `path` (named in `module`) starts with, for `crate`, `self` and
/// `super` paths; `None` for the others (an extern crate or a name in scope).
fn from_root(path: &[String], module: &[String]) -> Option<Vec<String>> {
    match path.first().map(String::as_str) {
        Some("crate") => Some(path[1..].to_vec()),
        Some("self") | Some("super") => {
            let mut at = module.to_vec();
            let mut rest = path;
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        at.pop();
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
            at.extend(rest.iter().cloned());
            Some(at)
        }
        _ => None,
    }
}

/// What is wrong with a path a file of the pure half names, if anything.
fn pure_violation(named: &Named, system_crates: &[String]) -> Option<String> {
    let path = &named.path;
    let text = path.join("::");
    let first = path.first()?.as_str();
    if let Some(absolute) = from_root(path, &named.module) {
        return match absolute.first().map(String::as_str) {
            Some("code") => None,
            Some("sys") => Some(format!("`{text}` names the system-call half")),
            _ => Some(format!("`{text}` names the crate's public names (lib.rs), not `crate::code`")),
        };
    }
    // A crate named with a leading `::`, or as the first segment of a path.
    let krate = if first.is_empty() { path.get(1).map_or("", String::as_str) } else { first };
    if system_crates.iter().any(|c| c == krate) {
        return Some(format!("`{text}` names the crate {krate}, which reaches the kernel"));
    }
    if matches!(krate, "std" | "core" | "alloc") {
        let within = if first.is_empty() { &path[2..] } else { &path[1..] };
        let named = &path[usize::from(first.is_empty())..];
        let pure = PURE_STD
            .iter()
            .any(|p| named.len() >= p.len() && named[..p.len()].iter().zip(*p).all(|(a, b)| a == b));
        if within.first().is_some_and(|m| SYSTEM_STD.contains(&m.as_str())) && !pure {
            return Some(format!("`{text}` reaches the system"));
        }
    }
    let last = path.last()?.as_str();
    if last == "syscall" || path.len() == 1 && PRINTING.contains(&last) {
        return Some(format!("`{text}` makes a system call"));
    }
    if path.len() == 1 && FORBIDDEN_WORDS.contains(&last) {
        return Some(format!("`{last}` has no place in the pure half"));
    }
    None
}

/// What is wrong with a path a file of the system-call half names: only `crate::code` and `crate::sys`,
/// never lib.rs's public names, which lead back into `sys/`.
fn sys_violation(named: &Named) -> Option<String> {
    let absolute = from_root(&named.path, &named.module)?;
    match absolute.first().map(String::as_str) {
        Some("code") | Some("sys") => None,
        _ => Some(format!("`{}` goes through the crate's public names (lib.rs)", named.path.join("::"))),
    }
}

fn sources_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).expect("read the sources").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(sources_under(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// `src/code/arch/mod.rs` → `code::arch`; `src/code/insn.rs` → `code::insn`.
fn module_of(file: &Path, src: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src").with_extension("");
    let mut module: Vec<String> =
        relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if module.last().is_some_and(|m| m == "mod") {
        module.pop();
    }
    module
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The system crates, and every crate this one depends on (bpf/Cargo.toml's `[dependencies]`).
fn system_crates() -> Vec<String> {
    let manifest = std::fs::read_to_string(crate_dir().join("Cargo.toml")).expect("read Cargo.toml");
    let dependencies = manifest.split("\n[dependencies]\n").nth(1).expect("a [dependencies] section");
    let dependencies = dependencies.split("\n[").next().unwrap_or_default();
    let mut crates: Vec<String> = SYSTEM_CRATES.iter().map(|c| c.to_string()).collect();
    for line in dependencies.lines() {
        if let Some((name, _)) = line.split_once('=') {
            if !line.trim_start().starts_with('#') {
                crates.push(name.trim().replace('-', "_"));
            }
        }
    }
    crates
}

/// Every violation in the files of one half: `file: what`.
fn violations(half: &str, check: &dyn Fn(&Named) -> Option<String>) -> Vec<String> {
    let src = crate_dir().join("src");
    let files = sources_under(&src.join(half));
    assert!(files.len() > 3, "no sources found under src/{half}");
    let mut wrong = vec![];
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a source");
        let module = module_of(&file, &src);
        for named in named_paths(&tokens(&source), &module) {
            if let Some(what) = check(&named) {
                wrong.push(format!("{}: {what}", file.strip_prefix(crate_dir()).unwrap_or(&file).display()));
            }
        }
    }
    wrong
}

#[test]
fn the_pure_half_makes_no_system_call() {
    let crates = system_crates();
    let wrong = violations("code", &|named| pure_violation(named, &crates));
    assert!(wrong.is_empty(), "src/code/ reaches the system:\n{}", wrong.join("\n"));
}

#[test]
fn the_system_call_half_uses_the_pure_half_directly() {
    let wrong = violations("sys", &sys_violation);
    assert!(wrong.is_empty(), "src/sys/ goes round through lib.rs:\n{}", wrong.join("\n"));
}

/// The checks themselves, on lines they must refuse and lines they must let through.
#[test]
fn the_checks_catch_what_they_are_for() {
    let crates = system_crates();
    let check = |source: &str, module: &str| -> Vec<String> {
        let module: Vec<String> = module.split("::").map(String::from).collect();
        named_paths(&tokens(source), &module).iter().filter_map(|n| pure_violation(n, &crates)).collect()
    };
    let refused = [
        ("use crate::sys::prog::load;", "code::insn"),
        ("use crate::{code::insn::Asm, sys::map::Map};", "code::insn"),
        ("use crate::{Asm, Reg};", "code::insn"),
        ("use super::super::sys::perf;", "code::arch"),
        ("mod tests { use super::super::super::sys::token; }", "code::arch"),
        ("use libbpf_sys::bpf_func_info;", "code::btf"),
        ("fn f() { let page = ::libc::sysconf(30); }", "code::btf"),
        ("fn f() -> u32 { libc::geteuid() }", "code::btf"),
        ("use std::{fmt, fs::File};", "code::disasm"),
        ("fn f() { std::fs::read(\"/proc/self/maps\"); }", "code::disasm"),
        ("use std::os::fd::OwnedFd;", "code::disasm"),
        ("fn f() { let r = unsafe { g() }; }", "code::insn"),
        ("fn f() { syscall(1) }", "code::insn"),
        ("fn f() { println!(\"{}\", 1) }", "code::insn"),
        ("fn f() -> u32 { return libc::geteuid() }", "code::insn"),
        ("pub unsafe fn f() {}", "code::insn"),
        ("fn f() -> char { '\\'' } use crate::sys::token;", "code::insn"),
        ("use libbpf_rs::MapCore as _;", "code::map"),
    ];
    for (source, module) in refused {
        assert!(!check(source, module).is_empty(), "let through: {source}");
    }
    let allowed = [
        "use crate::code::insn::{Alu, Asm, Reg};",
        "use super::{Arch, UsdtSyntax};",
        "mod tests { use super::*; use crate::code::helper::Helper; }",
        "use std::fmt::Write;",
        "fn f() { std::env::consts::ARCH; }",
        "//! Loaded by `crate::sys::btf`, through libc::syscall.\nfn f() {}",
        "/* use crate::sys::prog; */ fn f() {}",
        "fn f() -> &'static str { \"libc::syscall(crate::sys)\" }",
        "fn f() -> &'static str { r#\"unsafe { libc::syscall() }\"# }",
        "fn f() -> char { '\"' } fn g() { Reg::R1; }",
        "pub(crate) fn f<'a>(x: &'a [u8]) -> Option<Alu> { Alu::from_code(x[0]) }",
    ];
    for source in allowed {
        assert_eq!(check(source, "code::arch"), Vec::<String>::new(), "refused: {source}");
    }
    let sys = |source: &str| {
        let module = vec!["sys".to_string(), "prog".to_string()];
        named_paths(&tokens(source), &module).iter().filter_map(sys_violation).count()
    };
    assert_eq!(sys("use crate::code::insn::Asm; use crate::sys::token; use super::map::Map;"), 0);
    assert_eq!(sys("fn f() { crate::load(\"x\", t, a, &c, &[]); }"), 1);
}
