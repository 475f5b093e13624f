//! The kernel functions kprobes and trampolines can be put on, with their modules: `--traceable-functions`'
//! file, or tracefs's `available_filter_functions` where it can be read, else (a rootless container: tracefs
//! is the host root's, mode 0700) the text symbols of `/proc/kallsyms` that could be.

use crate::kernel::traceable::{self, TraceableFunction};
use crate::kernel::Vmlinux;
use std::sync::OnceLock;

/// `--traceable-functions FILE`: the file read instead of tracefs's `available_filter_functions`, the same for
/// the whole process (set once by `main.rs`).
static TRACEABLE_FUNCTIONS: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Reads the traceable kernel functions from `path` (`--traceable-functions`) rather than from tracefs.
pub fn read_traceable_functions_from(path: std::path::PathBuf) {
    let _ = TRACEABLE_FUNCTIONS.set(path);
}

/// The file `--traceable-functions` named, if any.
pub(crate) fn traceable_functions_file() -> Option<&'static std::path::Path> {
    TRACEABLE_FUNCTIONS.get().map(|path| path.as_path())
}

/// The kernel functions kprobes can be put on. From `/proc/kallsyms`: of the kernel's own, those its BTF
/// describes as functions (none of the padding symbols `__pfx_NAME` and `__cfi_NAME`, nor the assembly ftrace
/// cannot patch); every function of a module. A function of this list that the kernel still refuses is
/// found at attach time. Sorted by name ([`traceable::named`] searches it), read once per compilation (for
/// each kprobe and fentry wildcard of a script it took seconds under emulation).
pub(crate) fn probeable_functions(kernel: &Vmlinux) -> &[TraceableFunction] {
    kernel.traceable_functions(|kernel| {
        let listed = match TRACEABLE_FUNCTIONS.get() {
            Some(path) => std::fs::read_to_string(path).ok(),
            None => crate::kernel::tracefs::root()
                .ok()
                .and_then(|root| std::fs::read_to_string(root.join("available_filter_functions")).ok()),
        };
        let functions = match listed {
            Some(text) => text.lines().filter_map(TraceableFunction::from_filter_line).collect(),
            None => kallsyms_functions(kernel),
        };
        traceable::sorted(functions)
    })
}

/// Whether module `name` is loaded (`vmlinux`, the kernel itself, always is).
pub(crate) fn module_loaded(name: &str) -> bool {
    name == traceable::KERNEL || std::path::Path::new("/sys/module").join(name).join("sections").exists()
}

/// The functions of `/proc/kallsyms` that may be traced, for [`probeable_functions`]; names only, which
/// it shows to anyone.
fn kallsyms_functions(kernel: &Vmlinux) -> Vec<TraceableFunction> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    traceable_in_kallsyms(&text, kernel.kernel_function_names())
}

/// Of the text symbols in `kallsyms` (`/proc/kallsyms`'s format), the kernel's own that are among `described`
/// (the functions of its BTF; all of them where it has none), and every function of a module, named once each
/// (in no order); never a padding symbol (`__pfx_NAME`, `__cfi_NAME`) nor a static call's trampoline.
fn traceable_in_kallsyms(kallsyms: &str, described: Vec<String>) -> Vec<TraceableFunction> {
    // A line is `ADDRESS TYPE NAME`, then a tab and `[MODULE]` for a module's symbols: 200,000 of them, read
    // without splitting each into its fields (seconds in a guest under emulation).
    let mut kernel: Vec<&str> = vec![];
    let mut functions = vec![];
    for line in kallsyms.lines() {
        let Some((_address, rest)) = line.split_once(' ') else { continue };
        let Some(name) = rest.strip_prefix("t ").or_else(|| rest.strip_prefix("T ")) else { continue };
        let (name, module) = match name.split_once('\t') {
            Some((name, module)) => (name, module.strip_prefix('[').and_then(|m| m.strip_suffix(']'))),
            None => (name, None),
        };
        // Padding before functions, and static calls' trampolines (`__SCT__NAME`): no functions.
        if ["__pfx_", "__cfi_", "__SCT__"].iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        match module {
            Some(module) => functions.push(TraceableFunction::new(name, Some(module))),
            None => kernel.push(name),
        }
    }
    kernel.sort_unstable();
    kernel.dedup();
    let own = |name: &str| TraceableFunction::new(name, None);
    if described.is_empty() {
        functions.extend(kernel.into_iter().map(own));
    } else {
        functions
            .extend(described.iter().filter(|f| kernel.binary_search(&f.as_str()).is_ok()).map(|f| own(f)));
    }
    functions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tracefs_functions_are_those_of_kallsyms_that_btf_describes_and_modules() {
        let kallsyms = "0000000000000000 T __pfx_do_nanosleep
0000000000000000 t do_nanosleep
0000000000000000 T vfs_read
0000000000000000 t vfs_read
0000000000000000 T _text
0000000000000000 D jiffies
0000000000000000 t __cfi_vfs_read
0000000000000000 t ext4_read_folio\t[ext4]
0000000000000000 t __pfx_ext4_read_folio\t[ext4]
0000000000000000 t __SCT__tp_func_ext4_writepages\t[ext4]
";
        let described = ["do_nanosleep", "vfs_read", "not_in_kallsyms", "jiffies"].map(String::from).to_vec();
        let names = |found: Vec<TraceableFunction>| -> Vec<String> {
            traceable::sorted(found).iter().map(|f| format!("{}:{}", f.module_name(), f.name)).collect()
        };
        assert_eq!(
            names(traceable_in_kallsyms(kallsyms, described)),
            ["vmlinux:do_nanosleep", "ext4:ext4_read_folio", "vmlinux:vfs_read"]
        );
        assert_eq!(
            names(traceable_in_kallsyms(kallsyms, vec![])),
            ["vmlinux:_text", "vmlinux:do_nanosleep", "ext4:ext4_read_folio", "vmlinux:vfs_read"]
        );
    }
}
