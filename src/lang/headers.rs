//! The integer constants a script's `#include`d C headers define. bpftrace reads the headers with clang;
//! steadytrace takes kernel types from BTF and runs no C preprocessor, so it reads a header's object-like
//! `#define NAME VALUE` lines whose value is a constant expression of numbers and names defined before
//! (`#define EWOULDBLOCK EAGAIN`, `#define O_TMPFILE (__O_TMPFILE | O_DIRECTORY)`), following the headers it
//! includes and the `#if`s it can decide, from the system's include directories. Where a header is not installed
//! (no libc or kernel headers on the machine), its constants come from built-in tables: the kernel's uapi headers'
//! generated from Debian's linux-libc-dev by `scripts/header-constants` ([`header_tables`]), and a few of the
//! kernel's own typed by hand ([`kernel`]); they also fill in what an installed header leaves to the kernel
//! (`TASK_RUNNING` is not in the user-space `<linux/sched.h>`). Known only to scripts that include the header, as
//! the C preprocessor would make them.

use super::header_tables;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The linux-libc-dev version the generated uapi tables come from.
pub const UAPI_VERSION: &str = header_tables::VERSION;

/// What the command line adds: `-I DIR` (searched first) and `--include FILE` (read before the script).
#[derive(Default)]
pub struct CommandLine {
    pub dirs: Vec<PathBuf>,
    pub includes: Vec<String>,
}

impl CommandLine {
    /// The `--include` files that are neither a file nor a header in the include directories.
    pub fn missing_includes(&self) -> Vec<String> {
        self.includes
            .iter()
            .filter(|name| !Path::new(name).is_file() && !self.exists(name))
            .cloned()
            .collect()
    }

    /// Whether header `path` is in the include directories or has a built-in table.
    pub fn exists(&self, path: &str) -> bool {
        self.installed(path) || !builtin(path).is_empty()
    }

    /// Whether header `path` is known only from the built-in tables: not in the include directories.
    pub fn built_in_only(&self, path: &str) -> bool {
        !self.installed(path) && !builtin(path).is_empty()
    }

    fn installed(&self, path: &str) -> bool {
        self.include_dirs().iter().any(|dir| dir.join(path).is_file())
    }

    /// The constants of the `--include` files (each a path, or a name in the include directories).
    pub fn forced_constants(&self) -> Vec<(String, i64)> {
        self.includes.iter().flat_map(|file| self.constants(file)).collect()
    }

    /// The constants header `path` (as written between `<>` or `""`) defines: those of the installed header and
    /// of the headers it includes, then those of the built-in tables for it that the header left undefined.
    pub fn constants(&self, path: &str) -> Vec<(String, i64)> {
        let mut reader = Reader::new(self);
        reader.defined.extend(PREDEFINED.iter().map(|s| s.to_string()));
        reader.read(path, 0);
        let mut found = reader.found;
        for (name, value) in builtin(path) {
            if !found.iter().any(|(n, _)| n == name) && !reader.ambiguous.contains(name) {
                found.push((name.to_string(), value));
            }
        }
        found
    }

    /// Where headers are looked for, in order: the `-I` directories, then the system's (the architecture's
    /// own directory holds `asm/`).
    fn include_dirs(&self) -> Vec<PathBuf> {
        let arch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
        let system = ["/usr/local/include", &arch, "/usr/include"].map(PathBuf::from);
        self.dirs.iter().cloned().chain(system).collect()
    }
}

/// Kernel-internal constants: in the kernel's own headers (Linux 6.1), not in its uapi, so not in Debian's
/// linux-libc-dev nor in [`header_tables`]. Typed by hand, each table with the file it was read from.
mod kernel {
    /// Address families: the kernel's `include/linux/socket.h` (the uapi `<linux/socket.h>` has none); glibc's
    /// `<bits/socket.h>` (2.36) agrees.
    pub const SOCKET: &[(&str, i64)] = &[
        ("AF_UNSPEC", 0),
        ("AF_UNIX", 1),
        ("AF_LOCAL", 1),
        ("AF_INET", 2),
        ("AF_INET6", 10),
        ("AF_NETLINK", 16),
        ("AF_PACKET", 17),
        ("PF_UNSPEC", 0),
        ("PF_UNIX", 1),
        ("PF_INET", 2),
        ("PF_INET6", 10),
    ];

    /// Task states: the kernel's `include/linux/sched.h` (the uapi `<linux/sched.h>` has `CLONE_*` and `SCHED_*`).
    pub const SCHED: &[(&str, i64)] = &[
        ("TASK_RUNNING", 0),
        ("TASK_INTERRUPTIBLE", 1),
        ("TASK_UNINTERRUPTIBLE", 2),
        ("__TASK_STOPPED", 4),
        ("__TASK_TRACED", 8),
        ("EXIT_DEAD", 16),
        ("EXIT_ZOMBIE", 32),
    ];

    /// File types of `struct dirent`'s `d_type`: the kernel's `include/linux/fs_types.h` (which its
    /// `<linux/fs.h>` includes); glibc's `<dirent.h>` (2.36, an enum there) agrees; bpftrace 0.27.1 with
    /// Debian's 6.12 kernel headers printed DT_FIFO 1 and DT_REG 8.
    pub const DIRENT: &[(&str, i64)] = &[
        ("DT_UNKNOWN", 0),
        ("DT_FIFO", 1),
        ("DT_CHR", 2),
        ("DT_DIR", 4),
        ("DT_BLK", 6),
        ("DT_REG", 8),
        ("DT_LNK", 10),
        ("DT_SOCK", 12),
        ("DT_WHT", 14),
    ];
}

/// Headers followed at most this deep through their own `#include`s.
const MAX_DEPTH: usize = 8;
/// A header longer than this is not read (no real one is).
const MAX_HEADER_BYTES: u64 = 4 << 20;

/// What the compiler defines before any header on this machine (what `#ifdef` tests most often).
const PREDEFINED: &[&str] = bpf::arch::HOST.predefined_macros;

/// The generated uapi table of header `path` ([`header_tables`], from linux-libc-dev) for the architecture
/// steadytrace traces: the values x86-64 and arm64 share, then this one's own (`O_DIRECT`, `MAP_32BIT`).
fn uapi(path: &str) -> impl Iterator<Item = (&'static str, i64)> {
    let header = header_tables::HEADERS.iter().find(|header| header.path == path);
    let own = |header: &'static header_tables::Header| match bpf::arch::HOST.name {
        "aarch64" => &header.aarch64,
        _ => &header.x86_64,
    };
    header.into_iter().flat_map(move |header| header.common.iter().chain(own(header).iter()))
}

/// The built-in constants of header `path`, for where it is not installed or leaves a name undefined. A uapi
/// header gives its generated table. A kernel-internal header gives what its include chain gives in the
/// kernel's tree, as bpftrace 0.27.1 read it with Debian's 6.12 kernel headers (`<linux/socket.h>` and
/// `<linux/in.h>`: EPERM 1, AF_INET 2; `<linux/fs.h>`: EPERM 1, DT_FIFO 1, DT_REG 8, O_TMPFILE 4259840;
/// `<net/netfilter/nf_conntrack.h>`: all of these and IPPROTO_ICMPV6 58), where the uapi header of that name
/// gives less (no `AF_*`, no errno). A C library's header (`<signal.h>`, `<errno.h>`, `<sys/socket.h>`) gives
/// only the names it shares with the kernel's: its `SIGRTMIN` and `NSIG` are its own.
fn builtin(path: &str) -> Vec<(&'static str, i64)> {
    let errno = || uapi("asm-generic/errno.h");
    let signals =
        || uapi("asm/signal.h").filter(|&(name, value)| name.starts_with("SIG") && (1..32).contains(&value));
    let socket = || kernel::SOCKET.iter().copied();
    match path {
        "linux/socket.h" | "linux/in.h" => uapi(path).chain(errno()).chain(socket()).collect(),
        "sys/socket.h" | "net/sock.h" | "netinet/in.h" => socket().collect(),
        "linux/sched.h" => uapi(path).chain(kernel::SCHED.iter().copied()).collect(),
        // `<asm-generic/errno-base.h>` has only 1 to 34; the table of the other errno headers, as before.
        "errno.h" | "sys/errno.h" | "asm-generic/errno-base.h" => errno().collect(),
        "signal.h" | "sys/signal.h" | "asm-generic/signal.h" => signals().collect(),
        "linux/fs.h" => uapi(path)
            .chain(uapi("linux/fcntl.h"))
            .chain(errno())
            .chain(kernel::DIRENT.iter().copied())
            .collect(),
        "net/netfilter/nf_conntrack.h" => uapi("linux/netfilter.h")
            .chain(uapi("linux/fcntl.h"))
            .chain(errno())
            .chain(socket())
            .chain(kernel::DIRENT.iter().copied())
            .collect(),
        _ => uapi(path).collect(),
    }
}

/// One `#if` ... `#endif` group being read: whether its current branch is read, and whether an earlier branch
/// was (known to be) taken or could not be decided.
#[derive(Clone, Copy)]
struct Group {
    reading: bool,
    taken: bool,
    undecided: bool,
}

/// Reads headers as far as it can decide their conditionals: lines under a condition it cannot evaluate
/// (`#if __BITS_PER_LONG == 64`) are skipped, never guessed, and a name given two values is dropped.
struct Reader<'c> {
    line: &'c CommandLine,
    found: Vec<(String, i64)>,
    /// Every name `#define`d so far (with a value or without, as include guards are).
    defined: HashSet<String>,
    ambiguous: HashSet<String>,
    seen: HashSet<PathBuf>,
}

impl<'c> Reader<'c> {
    fn new(line: &'c CommandLine) -> Self {
        Reader {
            line,
            found: vec![],
            defined: HashSet::new(),
            ambiguous: HashSet::new(),
            seen: HashSet::new(),
        }
    }

    fn read(&mut self, path: &str, depth: usize) {
        // A relative path of plain names, inside an include directory; or a file the command line's
        // `--include` names (as the compiler's `-include` takes it: a path, else a name in those directories).
        let plain = Path::new(path).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        let forced = depth == 0 && self.line.includes.iter().any(|f| f == path) && Path::new(path).is_file();
        if depth > MAX_DEPTH || !(plain || forced) {
            return;
        }
        let found = match forced {
            true => Some(PathBuf::from(path)),
            false => self.line.include_dirs().into_iter().map(|d| d.join(path)).find(|p| p.is_file()),
        };
        let Some(file) = found else {
            return;
        };
        if !self.seen.insert(file.clone()) {
            return;
        }
        if let Some(text) = read_small(&file) {
            self.read_text(&text, depth);
        }
    }

    /// The lines of one header.
    fn read_text(&mut self, text: &str, depth: usize) {
        let mut groups: Vec<Group> = vec![];
        for line in text.lines() {
            let Some(directive) = line.trim_start().strip_prefix('#') else { continue };
            let directive = directive.trim_start();
            let (word, argument) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
            let argument = argument.split("/*").next().unwrap_or("").trim();
            let reading = groups.iter().all(|g| g.reading);
            match word {
                "ifdef" | "ifndef" | "if" => {
                    let decided = match word {
                        "ifdef" => Some(self.defined.contains(argument)),
                        "ifndef" => Some(!self.defined.contains(argument)),
                        _ => self.condition(argument),
                    };
                    groups.push(match (reading, decided) {
                        (false, _) => Group { reading: false, taken: true, undecided: false },
                        (true, Some(yes)) => Group { reading: yes, taken: yes, undecided: false },
                        (true, None) => Group { reading: false, taken: false, undecided: true },
                    });
                }
                "elif" | "else" => {
                    let decided = if word == "else" { Some(true) } else { self.condition(argument) };
                    if let Some(group) = groups.last_mut() {
                        let next = match (group.taken, group.undecided, decided) {
                            (true, ..) => Group { reading: false, ..*group },
                            (false, true, _) | (false, false, None) => {
                                Group { reading: false, taken: false, undecided: true }
                            }
                            (false, false, Some(yes)) => Group { reading: yes, taken: yes, undecided: false },
                        };
                        *group = next;
                    }
                }
                "endif" => {
                    groups.pop();
                }
                _ if !reading => {}
                "include" => {
                    if let Some(inner) = argument.strip_prefix('<').and_then(|h| h.split('>').next()) {
                        self.read(inner, depth + 1);
                    }
                }
                "undef" => {
                    self.defined.remove(argument);
                    self.found.retain(|(n, _)| n != argument);
                }
                "define" => self.define(directive.strip_prefix("define").unwrap_or("")),
                _ => {}
            }
        }
    }

    /// An `#if` over numbers, `defined(X)` and the values found so far (`#if __UAPI_DEF_IPPROTO_V6`, which
    /// `<linux/libc-compat.h>` sets to 1 where glibc is not in play); `None` where a name's value is unknown.
    fn condition(&self, text: &str) -> Option<bool> {
        let scope = Scope { found: &self.found, defined: Some(&self.defined) };
        Some(Evaluator::new(text, scope)?.whole()? != 0)
    }

    fn define(&mut self, definition: &str) {
        let name: String =
            definition.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            return;
        }
        self.defined.insert(name.clone());
        let Some((name, value)) = object_macro(definition, &self.found) else { return };
        if self.ambiguous.contains(&name) {
            return;
        }
        match self.found.iter().position(|(n, _)| *n == name) {
            Some(at) if self.found[at].1 != value => {
                self.found.remove(at);
                self.ambiguous.insert(name);
            }
            Some(_) => {}
            None => self.found.push((name, value)),
        }
    }
}

/// The file's text, unless it is longer than [`MAX_HEADER_BYTES`] (also for files whose size is not known
/// beforehand, as those of /proc).
fn read_small(file: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(file).ok()?.take(MAX_HEADER_BYTES + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_HEADER_BYTES).then_some(text)
}

/// `NAME VALUE` of an object-like `#define` whose value is a constant expression over numbers and names already
/// found.
fn object_macro(definition: &str, found: &[(String, i64)]) -> Option<(String, i64)> {
    if !definition.starts_with(char::is_whitespace) {
        return None;
    }
    let definition = definition.trim_start();
    let name_end =
        definition.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(definition.len());
    let (name, rest) = definition.split_at(name_end);
    // A function-like macro (`NAME(` with no space) is no constant.
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) || rest.starts_with('(') {
        return None;
    }
    let value = rest.split("/*").next()?.split("//").next()?;
    let value = Evaluator::new(value, Scope { found, defined: None })?.whole()?;
    Some((name.to_string(), value))
}

/// What names stand for in a constant expression: the values found so far, and (in `#if`) which names are
/// defined at all.
#[derive(Clone, Copy)]
struct Scope<'s> {
    found: &'s [(String, i64)],
    defined: Option<&'s HashSet<String>>,
}

/// The preprocessor's arithmetic over one line: integer literals, names of [`Scope`], `defined`, parentheses,
/// unary `- + ~ !` and C's binary operators from `*` down to `||`. Anything else (a cast, a call, a string, a
/// name whose value is not known) makes the whole expression unknown, so nothing is guessed.
struct Evaluator<'s> {
    tokens: Vec<&'s str>,
    at: usize,
    scope: Scope<'s>,
    /// Operands being read inside one another: a line of a header may nest without end, the stack may not.
    depth: usize,
}

/// Operands nested deeper than this (parentheses, unary operators) give no constant; no header nests near it.
const MAX_NESTING: usize = 200;

/// Binary operators by precedence, loosest first.
const BINARY: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*"],
];

impl<'s> Evaluator<'s> {
    fn new(text: &'s str, scope: Scope<'s>) -> Option<Self> {
        let mut tokens = vec![];
        let mut rest = text.trim_start();
        while let Some(c) = rest.chars().next() {
            let len = if c.is_ascii_alphanumeric() || c == '_' {
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len())
            } else if ["<<", ">>", "==", "!=", "<=", ">=", "&&", "||"].iter().any(|op| rest.starts_with(op)) {
                2
            } else if "()|^&<>+-*~!".contains(c) {
                1
            } else {
                return None;
            };
            tokens.push(&rest[..len]);
            rest = rest[len..].trim_start();
        }
        Some(Evaluator { tokens, at: 0, scope, depth: 0 })
    }

    /// The value of all the tokens, or `None` when they are not one expression this evaluator knows.
    fn whole(&mut self) -> Option<i64> {
        let value = self.binary(0);
        (self.at == self.tokens.len()).then_some(value?)
    }

    fn peek(&self) -> Option<&'s str> {
        self.tokens.get(self.at).copied()
    }

    fn next(&mut self) -> Option<&'s str> {
        let token = self.peek()?;
        self.at += 1;
        Some(token)
    }

    /// The operands of `&&` and `||` are both read, the value decided by one side where the other is unknown
    /// (`defined(X) && X > 2` with no `X` is 0), as the preprocessor skips the side it does not need.
    fn binary(&mut self, level: usize) -> Option<i64> {
        let Some(&ops) = BINARY.get(level) else { return self.unary() };
        let mut left = self.binary(level + 1);
        while let Some(op) = self.peek().filter(|t| ops.contains(t)) {
            self.at += 1;
            let right = self.binary(level + 1);
            left = match (op, left, right) {
                ("||", Some(a), _) | ("||", _, Some(a)) if a != 0 => Some(1),
                ("&&", Some(0), _) | ("&&", _, Some(0)) => Some(0),
                (_, Some(a), Some(b)) => apply(op, a, b),
                _ => None,
            };
        }
        left
    }

    fn unary(&mut self) -> Option<i64> {
        if self.depth >= MAX_NESTING {
            return None;
        }
        self.depth += 1;
        let value = self.operand();
        self.depth -= 1;
        value
    }

    fn operand(&mut self) -> Option<i64> {
        let token = self.next()?;
        match token {
            "-" => self.unary()?.checked_neg(),
            "+" => self.unary(),
            "~" => Some(!self.unary()?),
            "!" => Some((self.unary()? == 0) as i64),
            "(" => {
                let value = self.binary(0);
                (self.next()? == ")").then_some(value?)
            }
            "defined" => {
                let defined = self.scope.defined?;
                let parenthesized = self.peek() == Some("(");
                if parenthesized {
                    self.at += 1;
                }
                let name = self.next()?;
                if parenthesized && self.next()? != ")" {
                    return None;
                }
                Some(defined.contains(name) as i64)
            }
            _ if token.starts_with(|c: char| c.is_ascii_digit()) => integer(token),
            _ => self.scope.found.iter().find(|(n, _)| n == token).map(|&(_, v)| v),
        }
    }
}

/// `a op b` as C computes it on 64 bits; `None` where C leaves it undefined (overflow, a shift too far).
fn apply(op: &str, a: i64, b: i64) -> Option<i64> {
    let shift = || u32::try_from(b).ok().filter(|&b| b < 64);
    Some(match op {
        "||" => (a != 0 || b != 0) as i64,
        "&&" => (a != 0 && b != 0) as i64,
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => (a == b) as i64,
        "!=" => (a != b) as i64,
        "<" => (a < b) as i64,
        ">" => (a > b) as i64,
        "<=" => (a <= b) as i64,
        ">=" => (a >= b) as i64,
        "<<" => a.checked_shl(shift()?)?,
        ">>" => a >> shift()?,
        "+" => a.checked_add(b)?,
        "-" => a.checked_sub(b)?,
        "*" => a.checked_mul(b)?,
        _ => return None,
    })
}

/// A C integer literal: decimal, `0x` hex or `0` octal, with `u`/`l` suffixes.
fn integer(text: &str) -> Option<i64> {
    let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        return i64::from_str_radix(hex, 16).ok();
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return i64::from_str_radix(&digits[1..], 8).ok();
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_like_macros_of_numbers_and_names_are_constants() {
        let found = vec![("EAGAIN".to_string(), 11)];
        assert_eq!(object_macro("\tEPERM\t\t 1\t/* Operation */", &found), Some(("EPERM".into(), 1)));
        assert_eq!(object_macro(" EWOULDBLOCK EAGAIN", &found), Some(("EWOULDBLOCK".into(), 11)));
        assert_eq!(object_macro(" MASK 0x1fUL", &found), Some(("MASK".into(), 0x1f)));
        assert_eq!(object_macro(" MODE 0755", &found), Some(("MODE".into(), 0o755)));
        assert_eq!(object_macro(" NEG (-22)", &found), Some(("NEG".into(), -22)));
        assert_eq!(object_macro(" F(x) ((x) + 1)", &found), None);
        assert_eq!(object_macro(" GUARD_H", &found), None);
        assert_eq!(object_macro(" STR \"x\"", &found), None);
        assert_eq!(object_macro(" CAST ((int)1)", &found), None);
        assert_eq!(object_macro(" SELF SELF", &found), None);
    }

    #[test]
    fn nesting_without_end_gives_no_constant_and_no_crash() {
        let deep = format!(" DEEP {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(object_macro(&deep, &[]), None);
        assert_eq!(object_macro(&format!(" NEG {}1", "-".repeat(100_000)), &[]), None);
        let fine = format!(" FINE {}7{}", "(".repeat(50), ")".repeat(50));
        assert_eq!(object_macro(&fine, &[]), Some(("FINE".into(), 7)));
    }

    #[test]
    fn object_like_macros_of_constant_expressions_are_evaluated() {
        let found = vec![("__O_TMPFILE".to_string(), 0o20000000), ("O_DIRECTORY".to_string(), 0o200000)];
        let value = |text: &str| object_macro(text, &found).map(|(_, v)| v);
        // asm-generic/fcntl.h's, and glibc's spelling of it.
        assert_eq!(value(" O_TMPFILE (__O_TMPFILE | O_DIRECTORY)"), Some(4259840));
        assert_eq!(value(" O_TMPFILE\t(020000000 | O_DIRECTORY)"), Some(4259840));
        assert_eq!(value(" EXPR (1 << 3)"), Some(8));
        assert_eq!(value(" SUM (2 + 3 * 4 - 1)"), Some(13));
        assert_eq!(value(" INV (~0x0fU & 0xff)"), Some(0xf0));
        assert_eq!(value(" NEG -(O_DIRECTORY)"), Some(-0o200000));
        assert_eq!(value(" UNKNOWN (O_DIRECTORY | NOPE)"), None);
        assert_eq!(value(" OPEN (1 | 2"), None);
        assert_eq!(value(" FAR (1 << 64)"), None);
        assert_eq!(value(" CALL _IOR('x', 1, int)"), None);
    }

    #[test]
    fn if_is_decided_from_the_values_found_and_undecided_without_them() {
        let line = CommandLine::default();
        let mut reader = Reader::new(&line);
        reader.read_text("#define V6 1\n#define ZERO 0\n#define FLAG\n", 0);
        let decide = |text| reader.condition(text);
        assert_eq!(decide("V6"), Some(true));
        assert_eq!(decide("ZERO"), Some(false));
        assert_eq!(decide("V6 == 1 && !ZERO"), Some(true));
        assert_eq!(decide("defined(FLAG) && !defined NOPE"), Some(true));
        assert_eq!(decide("defined(NOPE) && NOPE > 2"), Some(false));
        assert_eq!(decide("V6 || NOPE"), Some(true));
        assert_eq!(decide("FLAG"), None);
        assert_eq!(decide("NOPE"), None);
        assert_eq!(decide("__BITS_PER_LONG == 64"), None);
    }

    #[test]
    fn conditionals_are_followed_where_decided_and_skipped_where_not() {
        let dir = std::env::temp_dir().join(format!("steadytrace-headers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text =
            "#ifndef GUARD\n#define GUARD\n#ifdef __linux__\n#define A 1\n#else\n#define A 2\n#endif\n\
                    #if __BITS_PER_LONG == 64\n#define B 64\n#else\n#define B 32\n#endif\n\
                    #if defined(NOPE)\n#define C 1\n#elif !defined(NOPE)\n#define C 2\n#endif\n\
                    #define D 4\n#define D 5\n#define E 6\n#undef E\n#endif\n";
        std::fs::write(dir.join("t.h"), text).unwrap();
        let line = CommandLine::default();
        let mut reader = Reader::new(&line);
        reader.defined.extend(PREDEFINED.iter().map(|s| s.to_string()));
        reader.read_text(&read_small(&dir.join("t.h")).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
        let get = |name: &str| reader.found.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
        assert_eq!((get("A"), get("B"), get("C"), get("D"), get("E")), (Some(1), None, Some(2), None, None));
    }

    #[test]
    fn paths_outside_the_include_directories_are_not_read() {
        let constants = |path| CommandLine::default().constants(path);
        assert!(constants("/proc/kmsg").is_empty());
        assert!(constants("../../etc/passwd").is_empty());
    }

    #[test]
    fn errno_and_signals_are_known_with_or_without_the_headers() {
        let constants = |path| CommandLine::default().constants(path);
        let errno = constants("asm-generic/errno.h");
        assert!(errno.contains(&("EPERM".to_string(), 1)), "{errno:?}");
        assert!(errno.contains(&("EWOULDBLOCK".to_string(), 11)), "{errno:?}");
        assert!(constants("signal.h").contains(&("SIGKILL".to_string(), 9)));
        assert!(constants("linux/sched.h").contains(&("TASK_RUNNING".to_string(), 0)));
        assert!(constants("no/such/header.h").is_empty());
    }

    /// The tables typed by hand before the uapi ones were generated (`git show fab5754:src/lang/headers.rs`):
    /// every header they covered still gives each of their names, with the same value.
    const SOCKET: &[(&str, i64)] = &[
        ("AF_UNSPEC", 0),
        ("AF_UNIX", 1),
        ("AF_LOCAL", 1),
        ("AF_INET", 2),
        ("AF_INET6", 10),
        ("AF_NETLINK", 16),
        ("AF_PACKET", 17),
        ("PF_UNSPEC", 0),
        ("PF_UNIX", 1),
        ("PF_INET", 2),
        ("PF_INET6", 10),
    ];
    const SCHED: &[(&str, i64)] = &[
        ("TASK_RUNNING", 0),
        ("TASK_INTERRUPTIBLE", 1),
        ("TASK_UNINTERRUPTIBLE", 2),
        ("__TASK_STOPPED", 4),
        ("__TASK_TRACED", 8),
        ("EXIT_DEAD", 16),
        ("EXIT_ZOMBIE", 32),
    ];
    const ERRNO: &[(&str, i64)] = &[
        ("EPERM", 1),
        ("ENOENT", 2),
        ("ESRCH", 3),
        ("EINTR", 4),
        ("EIO", 5),
        ("ENXIO", 6),
        ("E2BIG", 7),
        ("ENOEXEC", 8),
        ("EBADF", 9),
        ("ECHILD", 10),
        ("EAGAIN", 11),
        ("EWOULDBLOCK", 11),
        ("ENOMEM", 12),
        ("EACCES", 13),
        ("EFAULT", 14),
        ("EBUSY", 16),
        ("EEXIST", 17),
        ("EXDEV", 18),
        ("ENODEV", 19),
        ("ENOTDIR", 20),
        ("EISDIR", 21),
        ("EINVAL", 22),
        ("ENFILE", 23),
        ("EMFILE", 24),
        ("ENOTTY", 25),
        ("EFBIG", 27),
        ("ENOSPC", 28),
        ("ESPIPE", 29),
        ("EROFS", 30),
        ("EMLINK", 31),
        ("EPIPE", 32),
        ("EDOM", 33),
        ("ERANGE", 34),
        ("EDEADLK", 35),
        ("ENAMETOOLONG", 36),
        ("ENOLCK", 37),
        ("ENOSYS", 38),
        ("ENOTEMPTY", 39),
        ("ELOOP", 40),
        ("ENOTSOCK", 88),
        ("EOPNOTSUPP", 95),
        ("EADDRINUSE", 98),
        ("EADDRNOTAVAIL", 99),
        ("ENETUNREACH", 101),
        ("ECONNABORTED", 103),
        ("ECONNRESET", 104),
        ("ENOBUFS", 105),
        ("ETIMEDOUT", 110),
        ("ECONNREFUSED", 111),
        ("EHOSTUNREACH", 113),
        ("EALREADY", 114),
        ("EINPROGRESS", 115),
    ];
    const SIGNALS: &[(&str, i64)] = &[
        ("SIGHUP", 1),
        ("SIGINT", 2),
        ("SIGQUIT", 3),
        ("SIGILL", 4),
        ("SIGTRAP", 5),
        ("SIGABRT", 6),
        ("SIGBUS", 7),
        ("SIGFPE", 8),
        ("SIGKILL", 9),
        ("SIGUSR1", 10),
        ("SIGSEGV", 11),
        ("SIGUSR2", 12),
        ("SIGPIPE", 13),
        ("SIGALRM", 14),
        ("SIGTERM", 15),
        ("SIGCHLD", 17),
        ("SIGCONT", 18),
        ("SIGSTOP", 19),
        ("SIGTSTP", 20),
        ("SIGTTIN", 21),
        ("SIGTTOU", 22),
        ("SIGURG", 23),
        ("SIGXCPU", 24),
        ("SIGXFSZ", 25),
        ("SIGVTALRM", 26),
        ("SIGPROF", 27),
        ("SIGWINCH", 28),
        ("SIGIO", 29),
        ("SIGPWR", 30),
        ("SIGSYS", 31),
    ];
    const DIRENT: &[(&str, i64)] = &[
        ("DT_UNKNOWN", 0),
        ("DT_FIFO", 1),
        ("DT_CHR", 2),
        ("DT_DIR", 4),
        ("DT_BLK", 6),
        ("DT_REG", 8),
        ("DT_LNK", 10),
        ("DT_SOCK", 12),
        ("DT_WHT", 14),
    ];
    const FCNTL: &[(&str, i64)] = &[
        ("O_ACCMODE", 0o3),
        ("O_RDONLY", 0o0),
        ("O_WRONLY", 0o1),
        ("O_RDWR", 0o2),
        ("O_CREAT", 0o100),
        ("O_EXCL", 0o200),
        ("O_NOCTTY", 0o400),
        ("O_TRUNC", 0o1000),
        ("O_APPEND", 0o2000),
        ("O_NONBLOCK", 0o4000),
        ("O_NDELAY", 0o4000),
        ("O_DSYNC", 0o10000),
        ("FASYNC", 0o20000),
        ("O_NOATIME", 0o1000000),
        ("O_CLOEXEC", 0o2000000),
        ("__O_SYNC", 0o4000000),
        ("O_SYNC", 0o4010000),
        ("O_PATH", 0o10000000),
        ("__O_TMPFILE", 0o20000000),
    ];
    const IN6: &[(&str, i64)] = &[
        ("IPPROTO_HOPOPTS", 0),
        ("IPPROTO_ROUTING", 43),
        ("IPPROTO_FRAGMENT", 44),
        ("IPPROTO_ICMPV6", 58),
        ("IPPROTO_NONE", 59),
        ("IPPROTO_DSTOPTS", 60),
        ("IPPROTO_MH", 135),
    ];

    #[test]
    fn generated_tables_keep_every_value_the_hand_typed_ones_had() {
        let open = bpf::arch::HOST.open_flags;
        type Table = &'static [(&'static str, i64)];
        let cases: &[(&[&str], &[Table])] = &[
            (&["linux/socket.h", "linux/in.h"], &[SOCKET, ERRNO]),
            (&["sys/socket.h", "net/sock.h", "netinet/in.h"], &[SOCKET]),
            (&["linux/sched.h"], &[SCHED]),
            (
                &[
                    "errno.h",
                    "linux/errno.h",
                    "asm/errno.h",
                    "asm-generic/errno.h",
                    "asm-generic/errno-base.h",
                ],
                &[ERRNO],
            ),
            (&["sys/errno.h"], &[ERRNO]),
            (
                &["signal.h", "linux/signal.h", "asm/signal.h", "sys/signal.h", "asm-generic/signal.h"],
                &[SIGNALS],
            ),
            (&["linux/fs.h"], &[ERRNO, DIRENT, FCNTL, open]),
            (&["net/netfilter/nf_conntrack.h"], &[ERRNO, SOCKET, IN6, DIRENT, FCNTL, open]),
        ];
        for (paths, tables) in cases {
            for path in *paths {
                let now = builtin(path);
                for (name, value) in tables.iter().flat_map(|table| table.iter()) {
                    let got = now.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
                    assert_eq!(got, Some(*value), "{name} of <{path}>");
                }
            }
        }
    }

    /// Where a uapi header is installed, the generated tables agree with it; and with `bpf::arch`'s open flags.
    #[test]
    fn tables_agree_with_the_installed_uapi_headers() {
        let line = CommandLine::default();
        let read = |path| {
            let mut reader = Reader::new(&line);
            reader.defined.extend(PREDEFINED.iter().map(|s| s.to_string()));
            reader.read(path, 0);
            reader.found
        };
        for header in header_tables::HEADERS {
            let installed = read(header.path);
            for (name, value) in uapi(header.path) {
                // The reader computes on 64 bits, the compiler `1 << 31` on an `int` (`MS_NOUSER`).
                if let Some(&(_, got)) = installed.iter().find(|(n, _)| n == name) {
                    assert!(
                        got == value || got as i32 as i64 == value,
                        "{name} in <{}>: {got}, {value}",
                        header.path
                    );
                }
            }
        }
        // The open(2) flags of each architecture, as `bpf::arch` has them for its code.
        let fcntl = &header_tables::LINUX_FCNTL_H;
        for (arch, own) in [(&bpf::arch::X86_64, &fcntl.x86_64), (&bpf::arch::AARCH64, &fcntl.aarch64)] {
            for &(name, value) in arch.open_flags {
                let got = fcntl.common.iter().chain(own.iter()).find(|(n, _)| *n == name).map(|(_, v)| v);
                assert_eq!(got, Some(value), "{name} on {}", arch.name);
            }
        }
        if line.include_dirs().iter().any(|dir| dir.join("linux/in6.h").is_file()) {
            // Read through `#if __UAPI_DEF_IPPROTO_V6`, and `(__O_TMPFILE | O_DIRECTORY)` evaluated.
            assert!(read("linux/in6.h").contains(&("IPPROTO_ICMPV6".to_string(), 58)));
            assert!(read("linux/fcntl.h").contains(&("O_TMPFILE".to_string(), 0o20000000 | 0o200000)));
        }
    }

    #[test]
    fn kernel_headers_give_what_their_include_chains_give() {
        let constants = |path| CommandLine::default().constants(path);
        let get = |path, name: &str| constants(path).iter().find(|(n, _)| n == name).map(|&(_, v)| v);
        let names = ["EPERM", "AF_INET", "IPPROTO_ICMPV6", "DT_FIFO", "DT_REG", "O_TMPFILE"];
        let row = |path| names.map(|name| get(path, name));
        let o_tmpfile = bpf::arch::HOST.open_flags.iter().find(|(n, _)| *n == "O_TMPFILE").map(|&(_, v)| v);
        // bpftrace 0.27.1's rows (parity39.md, section 9c).
        assert_eq!(
            row("net/netfilter/nf_conntrack.h"),
            [Some(1), Some(2), Some(58), Some(1), Some(8), o_tmpfile]
        );
        assert_eq!(row("linux/fs.h"), [Some(1), None, None, Some(1), Some(8), o_tmpfile]);
        assert_eq!(row("linux/in.h"), [Some(1), Some(2), None, None, None, None]);
        assert_eq!(row("linux/socket.h"), [Some(1), Some(2), None, None, None, None]);
        assert!(CommandLine::default().exists("net/netfilter/nf_conntrack.h"));
        assert!(!CommandLine::default().exists("no/such/header.h"));
    }
}
