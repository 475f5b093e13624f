//! The integer constants a script's `#include`d C headers define. bpftrace reads the headers with clang;
//! steadytrace takes kernel types from BTF and runs no C preprocessor, so it reads a header's object-like
//! `#define NAME VALUE` lines whose value is a number (or a name defined before, `#define EWOULDBLOCK EAGAIN`),
//! following the headers it includes, from the system's include directories. Where a header is not installed
//! (no libc or kernel headers on the machine), the constants scripts use most come from the tables below, and
//! they also fill in what an installed header leaves to the kernel (`TASK_RUNNING` is not in the user-space
//! `<linux/sched.h>`). Known only to scripts that include the header, as the C preprocessor would make them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What the command line adds: `-I DIR` (searched first) and `--include FILE` (read before the script).
#[derive(Default)]
pub struct CommandLine {
    pub dirs: Vec<PathBuf>,
    pub includes: Vec<String>,
}

impl CommandLine {
    /// The `--include` files that are neither a file nor a header in the include directories.
    pub fn missing_includes(&self) -> Vec<String> {
        let found = |name: &str| {
            Path::new(name).is_file()
                || self.include_dirs().iter().any(|dir| dir.join(name).is_file())
                || !builtin(name).is_empty()
        };
        self.includes.iter().filter(|name| !found(name)).cloned().collect()
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
        for &(name, value) in builtin(path) {
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

/// Address families, from `<linux/socket.h>` (and `<sys/socket.h>`, `<net/sock.h>` which include it).
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

/// Task states, from `<linux/sched.h>`.
const SCHED: &[(&str, i64)] = &[
    ("TASK_RUNNING", 0),
    ("TASK_INTERRUPTIBLE", 1),
    ("TASK_UNINTERRUPTIBLE", 2),
    ("__TASK_STOPPED", 4),
    ("__TASK_TRACED", 8),
    ("EXIT_DEAD", 16),
    ("EXIT_ZOMBIE", 32),
];

/// Error numbers, from `<asm-generic/errno-base.h>` and `<asm-generic/errno.h>` (the common ones).
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

/// Signal numbers, from `<asm/signal.h>` (x86-64 and arm64 agree).
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

/// Headers followed at most this deep through their own `#include`s.
const MAX_DEPTH: usize = 8;
/// A header longer than this is not read (no real one is).
const MAX_HEADER_BYTES: u64 = 4 << 20;

/// What the compiler defines before any header on this machine (what `#ifdef` tests most often).
const PREDEFINED: &[&str] = bpf::arch::HOST.predefined_macros;

/// The built-in constants of header `path`.
fn builtin(path: &str) -> &'static [(&'static str, i64)] {
    match path {
        "linux/socket.h" | "sys/socket.h" | "net/sock.h" | "linux/in.h" | "netinet/in.h" => SOCKET,
        "linux/sched.h" => SCHED,
        "errno.h"
        | "linux/errno.h"
        | "asm/errno.h"
        | "asm-generic/errno.h"
        | "asm-generic/errno-base.h"
        | "sys/errno.h" => ERRNO,
        "signal.h" | "linux/signal.h" | "asm/signal.h" | "sys/signal.h" | "asm-generic/signal.h" => SIGNALS,
        _ => &[],
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

    /// `#if 0`, `#if 1`, `#if defined(X)`, `#if !defined X`; `None` for anything else.
    fn condition(&self, text: &str) -> Option<bool> {
        let (negated, text) = match text.strip_prefix('!') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, text),
        };
        let value = match text {
            "0" => false,
            "1" => true,
            _ => {
                let name = text.strip_prefix("defined")?.trim();
                let name = name.strip_prefix('(').and_then(|n| n.strip_suffix(')')).unwrap_or(name).trim();
                let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                plain.then(|| self.defined.contains(name))?
            }
        };
        Some(value != negated)
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

/// `NAME VALUE` of an object-like `#define` whose value is a number or a name already found.
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
    let value = rest.split("/*").next()?.split("//").next()?.trim();
    let value = value.strip_prefix('(').and_then(|v| v.strip_suffix(')')).unwrap_or(value).trim();
    let number = match value.strip_prefix('-') {
        Some(negative) => integer(negative.trim()).map(|n| -n),
        None => integer(value),
    };
    let value = number.or_else(|| found.iter().find(|(n, _)| n == value).map(|&(_, v)| v))?;
    Some((name.to_string(), value))
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
        assert_eq!(object_macro(" EXPR (1 << 3)", &found), None);
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
}
