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
//! - `rawtracepoint:vmlinux:NAME` and `fentry:vmlinux:NAME` come from the kernel's BTF, as current bpftrace lists
//!   them (0.17 lists neither); `-lv` prints their arguments. `fexit:` is listed when named.
//! - `tracepoint:NAME` means NAME in any category, as bpftrace 0.17 takes `tracepoint:irq*`;
//!   bpftrace 0.17 accepts it only when NAME has a wildcard, and rejects `tracepoint:sched_switch`.
//!   So `-l sched_switch` lists `tracepoint:sched:sched_switch`, where bpftrace 0.17 aborts. An
//!   unknown type (`-l 'sched:*'`) is an error, not an abort.
//! - `-lv` prints no DWARF parameters for uprobes (bpftrace does when the binary has them).
//! - kernel functions whose list cannot be read (`available_filter_functions` is unreadable under
//!   some lockdown settings, and in a rootless container) come from the kernel's BTF, with a note on
//!   stderr that some of them may refuse a probe; bpftrace warns and lists none.
//! - where tracefs cannot be read (a rootless container), `tracepoint:syscalls:*` is listed from the
//!   built-in system call signatures and the other tracepoints are left out, with a note naming
//!   `rawtracepoint:`, which lists them all from BTF.

use super::{elf, events, syscall_formats, tracefs, wildcard};
use crate::kernel::traceable::{self, TraceableFunction};
use crate::kernel::Vmlinux;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The probe types that can be listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Fentry,
    Fexit,
    Hardware,
    Interval,
    Iter,
    Kprobe,
    Kretprobe,
    Profile,
    RawTracepoint,
    Software,
    Tracepoint,
    Uprobe,
    Uretprobe,
    Usdt,
}

/// (type, name, alias, listed for a wildcard type), in name order.
const TYPES: &[(Type, &str, &str, bool)] = &[
    (Type::Fentry, "fentry", "f", true),
    (Type::Fexit, "fexit", "fr", false),
    (Type::Hardware, "hardware", "h", true),
    (Type::Interval, "interval", "i", false),
    (Type::Iter, "iter", "it", true),
    (Type::Kprobe, "kprobe", "k", true),
    (Type::Kretprobe, "kretprobe", "kr", false),
    (Type::Profile, "profile", "p", false),
    (Type::RawTracepoint, "rawtracepoint", "rt", true),
    (Type::Software, "software", "s", true),
    (Type::Tracepoint, "tracepoint", "t", true),
    (Type::Uprobe, "uprobe", "u", false),
    (Type::Uretprobe, "uretprobe", "ur", false),
    (Type::Usdt, "usdt", "U", false),
];

/// Probe types steadytrace knows but cannot list.
const UNLISTED: &[&str] = &["BEGIN", "begin", "END", "end", "watchpoint", "w", "asyncwatchpoint"];

/// The units `interval:` and `profile:` take.
const INTERVAL_UNITS: &[&str] = &["hz", "ms", "s", "us"];

/// What `steadytrace -l [PATTERN]` (`-lv` with `verbose`) prints.
pub struct Listing {
    /// One attach point a line, each line ending in a newline; empty when nothing matches.
    pub text: String,
    /// What could not be listed here and why, a sentence each, for stderr.
    pub notes: Vec<String>,
}

/// The attach points that match `pattern` (all of them when none).
pub fn list(pattern: Option<&str>, verbose: bool) -> Result<Listing, String> {
    let mut system = System { tracefs: None, notes: vec![], kernel: Vmlinux::running() };
    let text = render(pattern.unwrap_or("*"), verbose, &mut system)?;
    Ok(Listing { text, notes: system.notes })
}

/// Where the listed probes come from: the running system, or a fixed table in tests.
trait Catalog {
    /// Every tracepoint as `category:name`.
    fn tracepoints(&mut self) -> Result<Vec<String>, String>;
    /// A tracepoint's own fields, as their format file declares them.
    fn tracepoint_fields(&mut self, category: &str, name: &str) -> Result<Vec<String>, String>;
    /// The kernel functions a kprobe can attach to; `named` when the pattern names the probe type.
    fn kernel_functions(&mut self, named: bool) -> Result<Vec<String>, String>;
    /// The file `target` means, and the functions it defines.
    fn functions(&mut self, target: &str) -> Result<(String, Vec<String>), String>;
    /// The file `target` means, and its USDT probes as `provider:name`.
    fn usdt_probes(&mut self, target: &str) -> Result<(String, Vec<String>), String>;
    /// The kernel's BPF iterators (`task`, `task_file`, ...).
    fn iterators(&mut self) -> Vec<String>;
    /// The kernel's raw tracepoints.
    fn raw_tracepoints(&mut self) -> Vec<String>;
    /// The kernel functions fentry and fexit can attach to; `named` as for [`Catalog::kernel_functions`].
    fn traceable_functions(&mut self, named: bool) -> Result<Vec<String>, String>;
    /// The functions of the loaded BPF programs, as `bpf:ID:FUNCTION`.
    fn bpf_functions(&mut self) -> Vec<String>;
    /// The arguments of a raw tracepoint (`raw_tracepoint`) or a kernel function, declared as in C.
    fn arguments(&mut self, raw_tracepoint: bool, name: &str) -> Result<Vec<String>, String>;
}

struct System {
    tracefs: Option<Result<PathBuf, String>>,
    notes: Vec<String>,
    kernel: Vmlinux,
}

impl System {
    fn tracefs(&mut self) -> Result<PathBuf, String> {
        self.tracefs.get_or_insert_with(tracefs::root).clone()
    }

    fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// `available_filter_functions`' names, or why it cannot be read.
    fn filter_functions(&mut self) -> Result<Vec<String>, String> {
        let path = match super::kernel_functions::traceable_functions_file() {
            Some(file) => file.to_path_buf(),
            None => self.tracefs().map_err(|why| short(&why))?.join("available_filter_functions"),
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|err| format!("could not read {}: {err}", path.display()))?;
        Ok(kernel_functions(&text))
    }

    /// Kernel functions for when `available_filter_functions` cannot be read (`why`): for kprobes those
    /// kprobe wildcards attach to (`/proc/kallsyms`' names the kernel's BTF describes, and modules'), for
    /// fentry the BTF's; when the pattern names the type, or in a rootless container, where that file is
    /// never readable; otherwise (a wildcard type under lockdown) none, as bpftrace lists none.
    fn fallback_functions(&mut self, kprobes: bool, named: bool, why: String) -> Result<Vec<String>, String> {
        if !named && crate::privilege::initial_user_namespace() {
            return Err(why);
        }
        let (functions, source) = match kprobes {
            true => (
                super::kernel_functions::probeable_functions(&self.kernel)
                    .iter()
                    .map(qualified)
                    .collect::<Vec<_>>(),
                "/proc/kallsyms and the kernel's BTF",
            ),
            false => (
                self.kernel
                    .kernel_function_names()
                    .iter()
                    .map(|f| format!("{}:{f}", traceable::KERNEL))
                    .collect(),
                "the kernel's BTF",
            ),
        };
        if functions.is_empty() {
            return Err(format!(
                "{why}, and the kernel has no BTF (CONFIG_DEBUG_INFO_BTF) to list them from"
            ));
        }
        self.note(format!(
            "kernel functions are listed from {source} ({why}): some of them may refuse a probe (inlined, or \
             not traceable)"
        ));
        Ok(functions)
    }
}

impl Catalog for System {
    fn iterators(&mut self) -> Vec<String> {
        super::iter::available(&self.kernel)
    }

    fn tracepoints(&mut self) -> Result<Vec<String>, String> {
        let all = match self.tracefs() {
            Ok(root) => syscall_formats::all_tracepoints(&root),
            // A rootless container: the system call tracepoints need no tracefs.
            Err(why) if !crate::privilege::initial_user_namespace() => {
                self.note(format!(
                    "only tracepoint:syscalls:* is listed: {}; `steadytrace -l 'rawtracepoint:*'` lists every \
                     tracepoint from the kernel's BTF",
                    short(&why)
                ));
                syscall_formats::made_up_tracepoints().collect()
            }
            Err(why) => return Err(why),
        };
        Ok(all.into_iter().map(|(category, name)| format!("{category}:{name}")).collect())
    }

    fn tracepoint_fields(&mut self, category: &str, name: &str) -> Result<Vec<String>, String> {
        let format = match self.tracefs() {
            Ok(root) => syscall_formats::read_format(&root, category, name)?,
            Err(why) => syscall_formats::format(name).filter(|_| category == "syscalls").ok_or(why)?,
        };
        Ok(format.fields.into_iter().map(|field| field.decl).collect())
    }

    fn kernel_functions(&mut self, named: bool) -> Result<Vec<String>, String> {
        match self.filter_functions() {
            Ok(functions) => Ok(functions),
            Err(why) => self.fallback_functions(true, named, why),
        }
    }

    fn raw_tracepoints(&mut self) -> Vec<String> {
        self.kernel.raw_tracepoint_names()
    }

    fn bpf_functions(&mut self) -> Vec<String> {
        super::fentry_bpf::listed()
    }

    fn traceable_functions(&mut self, named: bool) -> Result<Vec<String>, String> {
        match self.filter_functions() {
            // A trampoline attaches only where ftrace can patch: BTF functions ftrace also lists.
            Ok(filtered) => {
                // And the functions of modules that have BTF (CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11).
                let with_btf = |f: &String| {
                    f.split_once(':').is_some_and(|(module, _)| {
                        module != traceable::KERNEL && crate::kernel::module_btf::path(module).exists()
                    })
                };
                let modules: Vec<String> = filtered.iter().filter(|f| with_btf(f)).cloned().collect();
                let filtered: std::collections::HashSet<String> = filtered.into_iter().collect();
                Ok(self
                    .kernel
                    .kernel_function_names()
                    .into_iter()
                    .map(|name| format!("{}:{name}", traceable::KERNEL))
                    .filter(|name| filtered.contains(name))
                    .chain(modules)
                    .collect())
            }
            Err(why) => self.fallback_functions(false, named, why),
        }
    }

    fn arguments(&mut self, raw_tracepoint: bool, name: &str) -> Result<Vec<String>, String> {
        let fields = match raw_tracepoint {
            true => self.kernel.raw_tracepoint_args(name)?,
            false => self.kernel.kernel_function(name)?.parameters,
        };
        Ok(fields.into_iter().map(|field| field.decl).collect())
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

/// Why tracefs cannot be read, in a few words for a note: in a rootless container, that it is the host's.
fn short(why: &str) -> String {
    match crate::privilege::initial_user_namespace() {
        true => why.to_string(),
        false => "tracefs is the host's, readable by no user of this user namespace".into(),
    }
}

/// The names in `available_filter_functions` (`name` or `name [module]` a line), without the
/// `__ftrace_invalid_address___N` placeholders of newer kernels.
fn kernel_functions(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(TraceableFunction::from_filter_line)
        .filter(|f| !f.name.starts_with("__ftrace_invalid_address__"))
        .map(|f| qualified(&f))
        .collect()
}

/// `MODULE:FUNCTION`, `vmlinux:FUNCTION` for the kernel's own: how the catalog names kernel functions.
fn qualified(function: &TraceableFunction) -> String {
    format!("{}:{}", function.module_name(), function.name)
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
    // bpftrace's older names of fentry and fexit.
    let type_pattern = match type_pattern {
        "kfunc" => "fentry",
        "kretfunc" => "fexit",
        other => other,
    };
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
            // `rawtracepoint:vmlinux:sched_switch` as bpftrace names them; `rawtracepoint:sched_sw*` means any module.
            Type::RawTracepoint | Type::Fentry | Type::Fexit => {
                let names = match type_ {
                    Type::RawTracepoint => catalog.raw_tracepoints(),
                    // `fentry:bpf:ID:FUNCTION`: the functions of the loaded BPF programs.
                    _ if rest.starts_with("bpf:") => catalog.bpf_functions(),
                    _ => match catalog.traceable_functions(!wildcard_type) {
                        Ok(names) => names,
                        Err(_) if wildcard_type => continue,
                        Err(err) => return Err(format!("cannot list kernel functions: {err}")),
                    },
                };
                let search = if rest.contains(':') { rest.to_string() } else { format!("*:{rest}") };
                let names = match type_ {
                    Type::RawTracepoint => names.into_iter().map(|name| format!("vmlinux:{name}")).collect(),
                    _ => names,
                };
                (search, names)
            }
            // Listed as `FUNCTION`, or as `MODULE:FUNCTION` where the pattern names a module (as bpftrace).
            Type::Kprobe | Type::Kretprobe => match catalog.kernel_functions(!wildcard_type) {
                Ok(functions) if rest.contains(':') => (rest.to_string(), functions),
                Ok(functions) => {
                    let names = functions.iter().filter_map(|f| f.split_once(':')).map(|(_, name)| name);
                    (rest.to_string(), names.map(str::to_string).collect())
                }
                Err(_) if wildcard_type => continue,
                Err(err) => return Err(format!("cannot list kernel functions: {err}")),
            },
            Type::Uprobe | Type::Uretprobe | Type::Usdt => {
                // A quoted binary may hold `:`s (`uprobe:"/opt/my:app":*`), as in a script.
                let fields = super::Fields::read(rest);
                let (target, function) = fields.split_first().unwrap_or((&fields, "*"));
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
                // Listed so that a line can be pasted into a script: a binary with a `:` quoted.
                let path = if path.contains(':') { format!("\"{path}\"") } else { path };
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
            if !verbose {
                continue;
            }
            let (category, name) = entry.split_once(':').unwrap_or_default();
            let decls = match type_ {
                Type::Tracepoint => catalog.tracepoint_fields(category, name)?,
                Type::RawTracepoint => catalog.arguments(true, name)?,
                Type::Fentry | Type::Fexit => catalog.arguments(false, name)?,
                _ => vec![],
            };
            for decl in decls {
                out.push_str(&format!("    {decl}\n"));
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

        fn kernel_functions(&mut self, _: bool) -> Result<Vec<String>, String> {
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

        fn raw_tracepoints(&mut self) -> Vec<String> {
            vec!["sched_switch".into(), "ipi_send_cpu".into()]
        }

        fn bpf_functions(&mut self) -> Vec<String> {
            vec!["bpf:7:interval_us_100000_1".into(), "bpf:9:main".into()]
        }

        fn traceable_functions(&mut self, _: bool) -> Result<Vec<String>, String> {
            Ok(vec!["vmlinux:vfs_read".into(), "vmlinux:vfs_write".into(), "tun:tun_chr_open".into()])
        }

        fn arguments(&mut self, raw_tracepoint: bool, name: &str) -> Result<Vec<String>, String> {
            match raw_tracepoint {
                true => Ok(vec![format!("bool preempt_{name}"), "struct task_struct * prev".into()]),
                false => Ok(vec![format!("struct file * file_{name}")]),
            }
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
            [
                "kprobe:ipi_send_mask",
                "rawtracepoint:vmlinux:ipi_send_cpu",
                "tracepoint:ipi:ipi_send_cpu",
                "tracepoint:ipi:ipi_send_cpumask"
            ]
        );
        assert_eq!(lines("*:ipi:*"), lines("tracepoint:ipi:*"), "events match their first part only");
        assert_eq!(
            lines("*cpu-c*"),
            ["hardware:cpu-cycles:", "software:cpu-clock:"],
            "`*:*cpu-c*` searches the event names"
        );
        assert_eq!(
            lines("sched_switch"),
            ["rawtracepoint:vmlinux:sched_switch", "tracepoint:sched:sched_switch"]
        );
        assert!(lines("sched").is_empty(), "no wildcard: the whole name must match");
    }

    #[test]
    fn kprobes_are_listed_with_their_module_where_the_pattern_names_one() {
        assert_eq!(lines("kprobe:ipi_*"), ["kprobe:ipi_send_mask"]);
        assert_eq!(lines("kprobe:kvm:*"), ["kprobe:kvm:ipi_send_mask"]);
        assert_eq!(lines("kprobe:*:vfs_read"), ["kprobe:vmlinux:vfs_read"]);
        assert_eq!(lines("kretprobe:vmlinux:vfs_w*"), ["kretprobe:vmlinux:vfs_write"]);
    }

    #[test]
    fn lists_everything_but_user_functions() {
        let all = lines("*");
        assert_eq!(all, lines("*:*"));
        assert_eq!(all[0], "fentry:tun:tun_chr_open");
        assert!(all.contains(&"hardware:branch-instructions:".to_string()));
        assert!(all.contains(&"rawtracepoint:vmlinux:sched_switch".to_string()));
        assert!(!all.iter().any(|line| line.starts_with("fexit")), "fexit is listed when named");
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
        let mut locked = Fixed { kernel_functions: Err("no BTF".into()) };
        assert_eq!(render("k:*", false, &mut locked), Err("cannot list kernel functions: no BTF".into()));
        assert_eq!(lines_with("k*:*vfs*", &mut locked), Vec::<String>::new(), "left out for a wildcard type");
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
    fn a_quoted_file_is_one_part_and_listed_quoted_when_it_holds_a_colon() {
        assert_eq!(
            lines(r#"uprobe:"/opt/my:app":read*"#),
            [r#"uprobe:"/opt/my:app":read_history"#, r#"uprobe:"/opt/my:app":readline"#]
        );
        assert_eq!(lines(r#"usdt:"/opt/my:app":*:stop"#), [r#"usdt:"/opt/my:app":app:stop"#]);
        assert_eq!(lines(r#"uprobe:"/bin/bash":main"#), ["uprobe:/bin/bash:main"]);
        assert_eq!(lines(r#"uprobe:"/opt/my:app""#).len(), 3, "no function means all");
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
    fn lists_raw_tracepoints_and_functions_from_btf_as_bpftrace_names_them() {
        assert_eq!(lines("rawtracepoint:sched_*"), ["rawtracepoint:vmlinux:sched_switch"]);
        assert_eq!(lines("rt:vmlinux:ipi*"), ["rawtracepoint:vmlinux:ipi_send_cpu"]);
        assert_eq!(lines("fentry:vfs_r*"), ["fentry:vmlinux:vfs_read"]);
        assert_eq!(lines("kfunc:vfs_r*"), ["fentry:vmlinux:vfs_read"], "bpftrace's older name");
        assert_eq!(lines("fr:vfs_write"), ["fexit:vmlinux:vfs_write"]);
        assert_eq!(lines("kretfunc:vfs_write"), ["fexit:vmlinux:vfs_write"]);
        assert_eq!(lines("fentry:*tun*"), ["fentry:tun:tun_chr_open"], "a module's function with its module");
        assert_eq!(lines("fentry:bpf:*interval*"), ["fentry:bpf:7:interval_us_100000_1"]);
        assert_eq!(lines("fexit:bpf:9:*"), ["fexit:bpf:9:main"]);
        assert_eq!(
            lines("*sched_switch"),
            ["rawtracepoint:vmlinux:sched_switch", "tracepoint:sched:sched_switch"]
        );
        let text = render("rt:sched_switch", true, &mut Fixed::default()).unwrap();
        assert_eq!(
            text,
            "rawtracepoint:vmlinux:sched_switch\n    bool preempt_sched_switch\n    struct task_struct * prev\n"
        );
        let text = render("fentry:vfs_read", true, &mut Fixed::default()).unwrap();
        assert_eq!(text, "fentry:vmlinux:vfs_read\n    struct file * file_vfs_read\n");
    }

    #[test]
    fn reports_unknown_and_unlisted_types() {
        let err = list_fixed(Some("sched:*")).unwrap_err();
        assert!(err.starts_with("unknown probe type `sched`"), "{err}");
        assert_eq!(list_fixed(Some("watchpoint:*")).unwrap_err(), "cannot list `watchpoint` probes");
        assert_eq!(list_fixed(Some("BEGIN")), Ok(String::new()));
    }

    #[test]
    fn lists_the_real_system() {
        if !nix::unistd::geteuid().is_root() {
            bpf::testing::skip("lists_the_real_system", "needs root (tracefs is readable only by root)");
            return;
        }
        let switch = list(Some("tracepoint:sched:sched_switch"), true).unwrap().text;
        assert!(switch.starts_with("tracepoint:sched:sched_switch\n    char prev_comm[16]\n"), "{switch}");
        let all = list(None, false).unwrap().text;
        assert!(all.contains("\ntracepoint:syscalls:sys_enter_openat\n"));
        assert!(all.contains("\nsoftware:cpu-clock:\n"));
        let libc = list(Some("uprobe:libc:malloc"), false).unwrap().text;
        assert!(libc.starts_with("uprobe:/") && libc.ends_with("libc.so.6:malloc\n"), "{libc}");
    }
}
