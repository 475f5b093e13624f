//! The kernel functions a probe can be put on, each with the module it belongs to: tracefs's
//! `available_filter_functions` (or `--traceable-functions`' copy of it) writes a module's functions as
//! `NAME [MODULE]`, `/proc/kallsyms` as `ADDRESS TYPE NAME\t[MODULE]`.

/// A kernel function, and the module it is in (`None`: the kernel itself, which probes call `vmlinux`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TraceableFunction {
    pub name: String,
    pub module: Option<String>,
}

/// What probes call the kernel itself where they name a module.
pub const KERNEL: &str = "vmlinux";

impl TraceableFunction {
    pub fn new(name: &str, module: Option<&str>) -> TraceableFunction {
        TraceableFunction { name: name.to_string(), module: module.map(str::to_string) }
    }

    /// The module's name, `vmlinux` for the kernel's own functions.
    pub fn module_name(&self) -> &str {
        self.module.as_deref().unwrap_or(KERNEL)
    }

    /// One line of `available_filter_functions`: `NAME` or `NAME [MODULE]`.
    pub fn from_filter_line(line: &str) -> Option<TraceableFunction> {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        let module = words.next().and_then(|m| m.strip_prefix('[')).and_then(|m| m.strip_suffix(']'));
        Some(TraceableFunction::new(name, module))
    }
}

/// Sorts `functions` by name (the kernel's own before a module's of the same name) and drops repeats, so that
/// [`named`] can search them.
pub fn sorted(mut functions: Vec<TraceableFunction>) -> Vec<TraceableFunction> {
    functions.sort();
    functions.dedup();
    functions
}

/// The functions of `sorted` (as [`sorted`] leaves them) called `name`, in any module.
pub fn named<'a>(sorted: &'a [TraceableFunction], name: &str) -> &'a [TraceableFunction] {
    let start = sorted.partition_point(|f| f.name.as_str() < name);
    let end = start + sorted[start..].partition_point(|f| f.name == name);
    &sorted[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_lines_name_the_module_in_brackets() {
        assert_eq!(
            TraceableFunction::from_filter_line("vfs_read"),
            Some(TraceableFunction::new("vfs_read", None))
        );
        let tun = TraceableFunction::from_filter_line("tun_chr_open [tun]").unwrap();
        assert_eq!((tun.name.as_str(), tun.module_name()), ("tun_chr_open", "tun"));
        assert_eq!(TraceableFunction::from_filter_line("  "), None);
    }

    #[test]
    fn named_finds_every_module_with_the_name() {
        let all = sorted(vec![
            TraceableFunction::new("b", Some("m2")),
            TraceableFunction::new("b", None),
            TraceableFunction::new("a", None),
            TraceableFunction::new("b", Some("m1")),
            TraceableFunction::new("c", None),
            TraceableFunction::new("b", None),
        ]);
        let modules: Vec<&str> = named(&all, "b").iter().map(TraceableFunction::module_name).collect();
        assert_eq!(modules, ["vmlinux", "m1", "m2"]);
        assert!(named(&all, "bb").is_empty());
        assert_eq!(named(&all, "c").len(), 1);
    }
}
