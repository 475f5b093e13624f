//! `steadytrace -l [PATTERN]` and `-lv`: the attach points a script can name, one a line, as
//! bpftrace 0.17 prints them, so that `steadytrace -l | grep` and `bpftrace -l | grep` agree.
//!
//! ```text
//! hardware:cache-misses:           hardware and software events, aliases too (`hardware:cycles:`)
//! software:cpu-clock:
//! tracepoint:sched:sched_switch
//!     char prev_comm[16]           with -lv: the tracepoint's own fields, as its format file
//!     pid_t prev_pid               declares them (no `common_` fields, no `;`), four spaces in
//! kprobe:vfs_read                  with kprobe: in the pattern, or a wildcard probe type
//! uprobe:/bin/bash:readline        only with uprobe:FILE:FUNCTION in the pattern
//! ```
//!
//! A pattern is `TYPE:REST` with shell wildcards (`*`, `?`) anywhere (`*` crosses colons); without
//! a colon it means `*:PATTERN`, so `-l '*sched_switch*'` searches every type. A tracepoint REST
//! without a colon is a name in any category (`tracepoint:irq*` is `tracepoint:*:irq*`). A wildcard
//! type stands for the kernel types bpftrace lists (hardware, kprobe, software, tracepoint), and for
//! uprobe too when REST names a file with a `/`; an exact type or alias (`t:ipi:*`) names one type,
//! return probes (`kretprobe:`, `uretprobe:`) and `interval:`/`profile:` included. No pattern lists
//! everything but uprobes. Output is sorted by type, then byte order within a type, as bpftrace's is.
//!
//! Where steadytrace differs from bpftrace 0.17:
//! - software and hardware events are listed by name (`software:cpu-clock:`); bpftrace 0.17 prints
//!   the pattern itself (`software:*:`), a bug fixed in later versions, which print what we print.
//! - `?` is a wildcard; bpftrace 0.17 rejects it as a syntax error.
//! - `interval:*` and `profile:*` list the units (`interval:ms:`), as later bpftrace versions do;
//!   0.17 reports an error. `BEGIN` and `END` are listed by no version.
//! - `iter:`, `kfunc:` and `rawtracepoint:` probes are not listed: steadytrace has none.
//! - `tracepoint:NAME` means NAME in any category, as bpftrace 0.17 takes `tracepoint:irq*`;
//!   bpftrace 0.17 accepts it only when NAME has a wildcard, and rejects `tracepoint:sched_switch`.
//!   So `-l sched_switch` lists `tracepoint:sched:sched_switch`, where bpftrace 0.17 aborts. An
//!   unknown type (`-l 'sched:*'`) is an error, not an abort.
//! - `-lv` prints no DWARF parameters for uprobes (bpftrace does when the binary has them).
//! - kernel functions whose list cannot be read (`available_filter_functions` is unreadable under
//!   some lockdown settings) are left out quietly unless the pattern names `kprobe:`; bpftrace warns.

use super::{elf, events, syscall_formats, tracefs, wildcard};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The probe types that can be listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Hardware,
    Interval,
    Iter,
    Kprobe,
    Kretprobe,
    Profile,
    Software,
    Tracepoint,
    Uprobe,
    Uretprobe,
    Usdt,
}

/// (type, name, alias, listed for a wildcard type), in name order.
const TYPES: &[(Type, &str, &str, bool)] = &[
    (Type::Hardware, "hardware", "h", true),
    (Type::Interval, "interval", "i", false),
    (Type::Iter, "iter", "it", true),
    (Type::Kprobe, "kprobe", "k", true),
    (Type::Kretprobe, "kretprobe", "kr", false),
    (Type::Profile, "profile", "p", false),
    (Type::Software, "software", "s", true),
    (Type::Tracepoint, "tracepoint", "t", true),
    (Type::Uprobe, "uprobe", "u", false),
    (Type::Uretprobe, "uretprobe", "ur", false),
    (Type::Usdt, "usdt", "U", false),
];

/// Probe types steadytrace knows but cannot list.
const UNLISTED: &[&str] = &[
    "BEGIN",
    "begin",
    "END",
    "end",
    "rawtracepoint",
    "rt",
    "kfunc",
    "f",
    "fr",
    "fentry",
    "kretfunc",
    "fexit",
    "watchpoint",
    "w",
    "asyncwatchpoint",
];

/// The units `interval:` and `profile:` take.
const INTERVAL_UNITS: &[&str] = &["hz", "ms", "s", "us"];

/// What `steadytrace -l [PATTERN]` (`-lv` with `verbose`) prints: one attach point a line, each
/// line ending in a newline; nothing when nothing matches.
pub fn list(pattern: Option<&str>, verbose: bool) -> Result<String, String> {
    render(pattern.unwrap_or("*"), verbose, &mut System::default())
}

/// Where the listed probes come from: the running system, or a fixed table in tests.
trait Catalog {
    /// Every tracepoint as `category:name`.
    fn tracepoints(&mut self) -> Result<Vec<String>, String>;
    /// A tracepoint's own fields, as their format file declares them.
    fn tracepoint_fields(&mut self, category: &str, name: &str) -> Result<Vec<String>, String>;
    /// The kernel functions a kprobe can attach to.
    fn kernel_functions(&mut self) -> Result<Vec<String>, String>;
    /// The file `target` means, and the functions it defines.
    fn functions(&mut self, target: &str) -> Result<(String, Vec<String>), String>;
    /// The file `target` means, and its USDT probes as `provider:name`.
    fn usdt_probes(&mut self, target: &str) -> Result<(String, Vec<String>), String>;
    /// The kernel's BPF iterators (`task`, `task_file`, ...).
    fn iterators(&mut self) -> Vec<String>;
}

#[derive(Default)]
struct System {
    tracefs: Option<PathBuf>,
}

impl System {
    fn tracefs(&mut self) -> Result<PathBuf, String> {
        if self.tracefs.is_none() {
            self.tracefs = Some(tracefs::root()?);
        }
        Ok(self.tracefs.clone().unwrap_or_default())
    }
}

impl Catalog for System {
    fn iterators(&mut self) -> Vec<String> {
        super::iter::available()
    }

    fn tracepoints(&mut self) -> Result<Vec<String>, String> {
        let root = self.tracefs()?;
        Ok(syscall_formats::all_tracepoints(&root)
            .into_iter()
            .map(|(category, name)| format!("{category}:{name}"))
            .collect())
    }

    fn tracepoint_fields(&mut self, category: &str, name: &str) -> Result<Vec<String>, String> {
        let root = self.tracefs()?;
        Ok(syscall_formats::read_format(&root, category, name)?
            .fields
            .into_iter()
            .map(|field| field.decl)
            .collect())
    }

    fn kernel_functions(&mut self) -> Result<Vec<String>, String> {
        let path = self.tracefs()?.join("available_filter_functions");
        let text = std::fs::read_to_string(&path).map_err(|err| {
            format!("cannot list kernel functions: could not read {}: {err}", path.display())
        })?;
        Ok(kernel_functions(&text))
    }

    fn functions(&mut self, target: &str) -> Result<(String, Vec<String>), String> {
        let path = elf::resolve_library(target)?;
        let names = elf::function_symbols(&path)?.into_iter().map(|symbol| symbol.name).collect();
        Ok((path.display().to_string(), names))
    }

    fn usdt_probes(&mut self, target: &str) -> Result<(String, Vec<String>), String> {
        let path = elf::resolve_library(target)?;
        let names =
            super::usdt::notes(&path)?.into_iter().map(|n| format!("{}:{}", n.provider, n.name)).collect();
        Ok((path.display().to_string(), names))
    }
}

/// The names in `available_filter_functions` (`name` or `name [module]` a line), without the
/// `__ftrace_invalid_address___N` placeholders of newer kernels.
fn kernel_functions(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| !name.starts_with("__ftrace_invalid_address__"))
        .map(str::to_string)
        .collect()
}

/// Splits a pattern into its type and the rest: `*sched*` is `*` and `*sched*`.
fn split(pattern: &str) -> (&str, &str) {
    pattern.split_once(':').unwrap_or(("*", pattern))
}

/// The types a pattern's type part names, in listing order.
fn types(type_pattern: &str, rest: &str) -> Result<Vec<(Type, &'static str)>, String> {
    if wildcard::has_wildcard(type_pattern) {
        let names_a_file = rest.split(':').next().is_some_and(|target| target.contains('/'));
        return Ok(TYPES
            .iter()
            .filter(|&&(type_, name, _, listed)| {
                (listed || (type_ == Type::Uprobe && names_a_file)) && wildcard::matches(type_pattern, name)
            })
            .map(|&(type_, name, ..)| (type_, name))
            .collect());
    }
    if let Some(&(type_, name, ..)) =
        TYPES.iter().find(|&&(_, name, alias, _)| type_pattern == name || type_pattern == alias)
    {
        return Ok(vec![(type_, name)]);
    }
    if UNLISTED.contains(&type_pattern) {
        return Err(format!("cannot list `{type_pattern}` probes"));
    }
    let known: Vec<&str> = TYPES.iter().map(|&(_, name, ..)| name).collect();
    Err(format!(
        "unknown probe type `{type_pattern}`: a pattern with a colon starts with a probe type ({}), \
         or with `*` to search them all",
        known.join(", ")
    ))
}

fn event_names(table: &[(&[&str], u64, u64)]) -> Vec<String> {
    table.iter().flat_map(|(names, ..)| names.iter().map(|name| format!("{name}:"))).collect()
}

fn render(pattern: &str, verbose: bool, catalog: &mut dyn Catalog) -> Result<String, String> {
    let (type_pattern, rest) = split(pattern);
    let wildcard_type = wildcard::has_wildcard(type_pattern);
    let mut out = String::new();
    for (type_, type_name) in types(type_pattern, rest)? {
        // Events and interval units match their first part only: `software:cpu*:1000` lists
        // `software:cpu-clock:`, as bpftrace does.
        let first_part = || format!("{}:", rest.split(':').next().unwrap_or_default());
        let (search, entries) = match type_ {
            Type::Hardware => (first_part(), event_names(events::HARDWARE)),
            Type::Software => (first_part(), event_names(events::SOFTWARE)),
            Type::Iter => (rest.to_string(), catalog.iterators()),
            Type::Interval | Type::Profile => {
                (first_part(), INTERVAL_UNITS.iter().map(|unit| format!("{unit}:")).collect())
            }
            // `tracepoint:sched_sw*` means a tracepoint of any category.
            Type::Tracepoint if !rest.contains(':') => (format!("*:{rest}"), catalog.tracepoints()?),
            Type::Tracepoint => (rest.to_string(), catalog.tracepoints()?),
            Type::Kprobe | Type::Kretprobe => match catalog.kernel_functions() {
                Ok(functions) => (rest.to_string(), functions),
                Err(_) if wildcard_type => continue,
                Err(err) => return Err(err),
            },
            Type::Uprobe | Type::Uretprobe | Type::Usdt => {
                let (target, function) = rest.split_once(':').unwrap_or((rest, "*"));
                if target.is_empty() {
                    return Err(format!("write `{type_name}:FILE:FUNCTION` to list a file's functions"));
                }
                if wildcard::has_wildcard(target) {
                    return Err(format!(
                        "`{target}` has a wildcard: name one file to list its functions \
                         (`{type_name}:/bin/bash:*`)"
                    ));
                }
                let (path, names) = if type_ == Type::Usdt {
                    catalog.usdt_probes(target)?
                } else {
                    catalog.functions(target)?
                };
                let names = names.into_iter().map(|name| format!("{path}:{name}")).collect();
                (format!("{path}:{function}"), names)
            }
        };
        // bpftrace leaves out the compiler's `.part.N` pieces of functions, of every type.
        let matched: BTreeSet<String> = entries
            .into_iter()
            .filter(|entry| !entry.contains(".part.") && wildcard::matches(&search, entry))
            .collect();
        for entry in matched {
            out.push_str(&format!("{type_name}:{entry}\n"));
            if verbose && type_ == Type::Tracepoint {
                let (category, name) = entry.split_once(':').unwrap_or_default();
                for decl in catalog.tracepoint_fields(category, name)? {
                    out.push_str(&format!("    {decl}\n"));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small fixed system.
    struct Fixed {
        kernel_functions: Result<Vec<String>, String>,
    }

    impl Default for Fixed {
        fn default() -> Self {
            let functions =
                "vfs_read\nvfs_write\nipi_send_mask [kvm]\nfoo.part.0\n__ftrace_invalid_address___64\n";
            Fixed { kernel_functions: Ok(kernel_functions(functions)) }
        }
    }

    impl Catalog for Fixed {
        fn iterators(&mut self) -> Vec<String> {
            vec!["task".into(), "task_file".into()]
        }

        fn tracepoints(&mut self) -> Result<Vec<String>, String> {
            let list =
                ["sched:sched_switch", "ipi:ipi_send_cpumask", "ipi:ipi_send_cpu", "irq:softirq_entry"];
            Ok(list.iter().map(|s| s.to_string()).collect())
        }

        fn tracepoint_fields(&mut self, category: &str, name: &str) -> Result<Vec<String>, String> {
            Ok(vec![format!("int {category}_{name}"), "__data_loc char[] filename".to_string()])
        }

        fn kernel_functions(&mut self) -> Result<Vec<String>, String> {
            self.kernel_functions.clone()
        }

        fn functions(&mut self, target: &str) -> Result<(String, Vec<String>), String> {
            let path = if target == "bash" { "/usr/bin/bash" } else { target };
            let names = ["readline", "main", "read_history", "main", "helper.part.0"];
            Ok((path.to_string(), names.iter().map(|name| name.to_string()).collect()))
        }

        fn usdt_probes(&mut self, target: &str) -> Result<(String, Vec<String>), String> {
            Ok((target.to_string(), vec!["app:start".to_string(), "app:stop".to_string()]))
        }
    }

    fn lines(pattern: &str) -> Vec<String> {
        lines_with(pattern, &mut Fixed::default())
    }

    fn lines_with(pattern: &str, catalog: &mut Fixed) -> Vec<String> {
        render(pattern, false, catalog).unwrap().lines().map(str::to_string).collect()
    }

    #[test]
    fn lists_tracepoints_by_category_and_name() {
        assert_eq!(
            lines("tracepoint:ipi:*"),
            ["tracepoint:ipi:ipi_send_cpu", "tracepoint:ipi:ipi_send_cpumask"]
        );
        assert_eq!(lines("t:ipi:*"), lines("tracepoint:ipi:*"));
        assert_eq!(lines("tracepoint:*:sched_switch"), ["tracepoint:sched:sched_switch"]);
        assert_eq!(lines("tracepoint:ipi_*"), lines("tracepoint:ipi:*"), "a name in any category");
        assert_eq!(lines("tracepoint:*irq*"), ["tracepoint:irq:softirq_entry"]);
        assert_eq!(lines("tracepoint:irq*"), Vec::<String>::new());
        assert_eq!(lines("tracepoint:sched_switch"), ["tracepoint:sched:sched_switch"]);
        assert_eq!(lines("tracepoint:ipi:ipi_send_cpu"), ["tracepoint:ipi:ipi_send_cpu"]);
        assert_eq!(lines("tracepoint:ipi:ipi_send_cp?"), ["tracepoint:ipi:ipi_send_cpu"]);
        assert!(lines("tracepoint:nope:*").is_empty());
    }

    #[test]
    fn a_pattern_without_a_type_searches_every_kernel_type() {
        assert_eq!(
            lines("*ipi*"),
            ["kprobe:ipi_send_mask", "tracepoint:ipi:ipi_send_cpu", "tracepoint:ipi:ipi_send_cpumask"]
        );
        assert_eq!(lines("*:ipi:*"), lines("tracepoint:ipi:*"), "events match their first part only");
        assert_eq!(
            lines("*cpu-c*"),
            ["hardware:cpu-cycles:", "software:cpu-clock:"],
            "`*:*cpu-c*` searches the event names"
        );
        assert_eq!(lines("sched_switch"), ["tracepoint:sched:sched_switch"]);
        assert!(lines("sched").is_empty(), "no wildcard: the whole name must match");
    }

    #[test]
    fn lists_everything_but_user_functions() {
        let all = lines("*");
        assert_eq!(all, lines("*:*"));
        assert_eq!(all[0], "hardware:branch-instructions:");
        assert!(all.contains(&"hardware:cycles:".to_string()), "aliases are listed");
        assert!(all.contains(&"software:faults:".to_string()));
        assert!(all.contains(&"kprobe:vfs_read".to_string()));
        assert!(!all.iter().any(|line| line.contains(".part.") || line.contains("invalid_address")));
        assert!(!all.iter().any(|line| line.starts_with("uprobe") || line.starts_with("interval")));
        assert_eq!(all.last().map(String::as_str), Some("tracepoint:sched:sched_switch"));
        let types: Vec<&str> = all.iter().map(|line| line.split(':').next().unwrap()).collect();
        assert!(types.windows(2).all(|pair| pair[0] <= pair[1]), "sorted by type");
    }

    fn list_fixed(pattern: Option<&str>) -> Result<String, String> {
        render(pattern.unwrap_or("*"), false, &mut Fixed::default())
    }

    #[test]
    fn lists_events_with_their_aliases() {
        assert_eq!(lines("s:cpu*"), ["software:cpu-clock:", "software:cpu-migrations:", "software:cpu:"]);
        assert_eq!(lines("software:cs:1000"), ["software:cs:"]);
        let count =
            |table: &[(&[&str], u64, u64)]| table.iter().map(|(names, ..)| names.len()).sum::<usize>();
        assert_eq!(lines("h:*").len(), count(events::HARDWARE));
        assert_eq!(lines("s*:*").len(), count(events::SOFTWARE));
        assert_eq!(lines("interval:*"), ["interval:hz:", "interval:ms:", "interval:s:", "interval:us:"]);
        assert_eq!(lines("p:h*"), ["profile:hz:"]);
    }

    #[test]
    fn lists_kernel_functions() {
        assert_eq!(lines("kprobe:vfs_*"), ["kprobe:vfs_read", "kprobe:vfs_write"]);
        assert_eq!(lines("kr:vfs_read"), ["kretprobe:vfs_read"]);
        let mut locked = Fixed { kernel_functions: Err("cannot list kernel functions".into()) };
        assert_eq!(render("k:*", false, &mut locked), Err("cannot list kernel functions".into()));
        assert_eq!(lines_with("*vfs*", &mut locked), Vec::<String>::new(), "left out for a wildcard type");
    }

    #[test]
    fn lists_the_functions_of_a_file() {
        assert_eq!(
            lines("uprobe:bash:read*"),
            ["uprobe:/usr/bin/bash:read_history", "uprobe:/usr/bin/bash:readline"]
        );
        assert_eq!(lines("ur:/bin/bash:main"), ["uretprobe:/bin/bash:main"], "listed once");
        assert_eq!(lines("uprobe:/bin/bash").len(), 3, "no function means all");
        assert_eq!(lines("usdt:/bin/app:*"), ["usdt:/bin/app:app:start", "usdt:/bin/app:app:stop"]);
        assert_eq!(lines("U:/bin/app:*:stop"), ["usdt:/bin/app:app:stop"]);
        assert_eq!(lines("u*:/bin/bash:readline"), ["uprobe:/bin/bash:readline"]);
        assert_eq!(lines("*:/bin/bash:readline"), ["uprobe:/bin/bash:readline"]);
        assert!(lines("*:bash:readline").is_empty(), "a wildcard type means uprobe only for a path");
        let err = list_fixed(Some("uprobe:/usr/lib/*:malloc")).unwrap_err();
        assert!(err.contains("has a wildcard"), "{err}");
        assert!(list_fixed(Some("uprobe:")).unwrap_err().contains("uprobe:FILE:FUNCTION"));
    }

    #[test]
    fn verbose_lists_tracepoint_fields() {
        let text = render("tracepoint:sched:*", true, &mut Fixed::default()).unwrap();
        assert_eq!(
            text,
            "tracepoint:sched:sched_switch\n    int sched_sched_switch\n    __data_loc char[] filename\n"
        );
        let text = render("s:cs", true, &mut Fixed::default()).unwrap();
        assert_eq!(text, "software:cs:\n");
    }

    #[test]
    fn reports_unknown_and_unlisted_types() {
        let err = list_fixed(Some("sched:*")).unwrap_err();
        assert!(err.starts_with("unknown probe type `sched`"), "{err}");
        assert_eq!(list_fixed(Some("fentry:*")).unwrap_err(), "cannot list `fentry` probes");
        assert_eq!(list_fixed(Some("BEGIN")), Ok(String::new()));
    }

    #[test]
    fn lists_the_real_system() {
        if !nix::unistd::geteuid().is_root() {
            bpf::testing::skip("lists_the_real_system", "needs root (tracefs is readable only by root)");
            return;
        }
        let switch = list(Some("tracepoint:sched:sched_switch"), true).unwrap();
        assert!(switch.starts_with("tracepoint:sched:sched_switch\n    char prev_comm[16]\n"), "{switch}");
        let all = list(None, false).unwrap();
        assert!(all.contains("\ntracepoint:syscalls:sys_enter_openat\n"));
        assert!(all.contains("\nsoftware:cpu-clock:\n"));
        let libc = list(Some("uprobe:libc:malloc"), false).unwrap();
        assert!(libc.starts_with("uprobe:/") && libc.ends_with("libc.so.6:malloc\n"), "{libc}");
    }
}
