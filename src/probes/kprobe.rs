//! `kprobe:FUNCTION[+OFFSET]` and `kretprobe:FUNCTION` (aliases `k:`, `kr:`): kernel functions, through
//! the perf kprobe event source. A wildcard (`kprobe:vfs_*`) is one probe on all matching functions
//! through a kprobe_multi link where the kernel has them, else one probe per matching function.
//!
//! Where perf kprobe events are closed to steadytrace (a rootless container with a BPF token: the kernel
//! opens them only for CAP_PERFMON in the host's user namespace), every kprobe goes through a kprobe_multi
//! link, which needs no perf event, a single function's too; an offset into a function, or a kernel without
//! kprobe_multi links, is then an error at the probe. There tracefs (the host root's) and the addresses of
//! `/proc/kallsyms` (zeros) are out of reach too: wildcards match the functions both `/proc/kallsyms` and the
//! kernel's BTF name, and `func` is the link's cookie, the index of the function that fired.

use super::Fields;
use super::{missing, Options, Provider};
use super::{
    tracefs, wildcard, Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context, Func, Retval,
};
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::features::{Feature, Features};
use bpf::kprobe::attach_multi;
use bpf::perf::{attach_trace_event, TraceEvent};
use bpf::{AttachMode, ProgType};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};

/// One kernel function, through a perf kprobe event.
#[derive(Debug)]
pub struct Kprobe {
    function: String,
    offset: u64,
    retprobe: bool,
    /// Whether the kernel has kprobe_multi links, for the error when perf kprobe events are refused.
    multi_available: bool,
}

/// Kernel functions matching a wildcard, all attached through one kprobe_multi link; or, where perf
/// kprobe events are closed, the one function a kprobe names (the pattern is then that name).
#[derive(Debug)]
pub struct KprobeMulti {
    /// The wildcard, as written.
    pattern: String,
    functions: Arc<[String]>,
    retprobe: bool,
    /// `func` is the link's cookie of the function that fired (its index in `functions`), not its
    /// address: where `/proc/kallsyms` shows no addresses, one could not be named.
    by_cookie: bool,
    /// Why there is a link for one function: perf kprobe events are closed to steadytrace.
    instead_of_perf: Option<String>,
}

impl Kprobe {
    pub fn new(function: String, offset: u64, retprobe: bool) -> Kprobe {
        Kprobe { function, offset, retprobe, multi_available: false }
    }
}

impl KprobeMulti {
    pub fn new(pattern: String, functions: Arc<[String]>, retprobe: bool) -> KprobeMulti {
        KprobeMulti { pattern, functions, retprobe, by_cookie: false, instead_of_perf: None }
    }

    /// A link on the one function `function`, for a kprobe where perf kprobe events are closed (`why`).
    fn one(function: &str, retprobe: bool, why: &str) -> KprobeMulti {
        KprobeMulti {
            pattern: function.to_string(),
            functions: vec![function.to_string()].into(),
            retprobe,
            by_cookie: false,
            instead_of_perf: Some(why.to_string()),
        }
    }

    /// Whether it stands for the one function a kprobe names, not for a wildcard.
    fn single(&self) -> bool {
        !wildcard::has_wildcard(&self.pattern)
    }

    /// A link on the functions at `indexes` (of `functions`), with their indexes as cookies when `func` is
    /// found by cookie.
    fn link(&self, program: BorrowedFd<'_>, indexes: &[usize]) -> std::io::Result<OwnedFd> {
        let names: Vec<&str> = indexes.iter().map(|&i| self.functions[i].as_str()).collect();
        let cookies: Vec<u64> =
            if self.by_cookie { indexes.iter().map(|&i| i as u64).collect() } else { vec![] };
        attach_multi(program, &names, &cookies, self.retprobe)
    }

    /// Attaches the functions at `indexes`, whose link the kernel refused as naming one it cannot trace:
    /// each half again, down to single functions, keeping the links of the halves it takes in `links` and
    /// the functions it refuses in `refused`. A refusal costs the kernel a pass over its symbols; only links
    /// it takes register functions with ftrace, each function once. At most `tries` link requests: past
    /// them, `Err(None)`.
    fn bisect(
        &self,
        program: BorrowedFd<'_>,
        indexes: &[usize],
        found: &mut Found,
    ) -> Result<(), Option<std::io::Error>> {
        let (first, second) = indexes.split_at(indexes.len() / 2);
        for half in [first, second] {
            found.tries = found.tries.checked_sub(1).ok_or(None)?;
            match self.link(program, half) {
                Ok(link) => found.links.push(link),
                Err(error) if untraceable(&error) && half.len() == 1 => found.refused.push(half[0]),
                Err(error) if untraceable(&error) => self.bisect(program, half, found)?,
                Err(error) => return Err(Some(error)),
            }
        }
        Ok(())
    }
}

/// What [`KprobeMulti::bisect`] has found so far.
struct Found {
    links: Vec<OwnedFd>,
    /// Indexes of the functions the kernel cannot trace.
    refused: Vec<usize>,
    /// How many more link requests it may make.
    tries: u32,
}

/// How many link requests finding the functions of a wildcard that the kernel cannot trace may take: each
/// refused one costs the kernel a pass over its 200,000 symbols, and a wildcard matching many functions
/// it cannot trace (`kprobe:*` where tracefs is out of reach) would take minutes.
const MOST_TRIES: u32 = 256;

/// Whether a kprobe_multi link was refused because some function of it cannot be traced: ESRCH where
/// ftrace has no patch site of that name (no such function, a notrace one, an inlined one), ENOENT
/// where registering it failed.
fn untraceable(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
}

fn context(retprobe: bool, func: Func) -> Context {
    Context {
        arguments: (!retprobe).then_some(Arguments::Registers),
        retval: retprobe.then_some(Retval::REGISTER),
        func: Some(func),
        user_addresses: false,
        ctx_record: None,
    }
}

fn provider_name(retprobe: bool) -> &'static str {
    if retprobe {
        "kretprobe"
    } else {
        "kprobe"
    }
}

impl Provider for Kprobe {
    /// At a function's entry (not at an offset into it, nor at its return).
    fn overrides_return(&self) -> bool {
        !self.retprobe && self.offset == 0
    }

    fn kind(&self) -> &'static str {
        "kprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    /// libbpf's own names: a return probe's section says so, an offset follows a `+`.
    fn elf_section(&self) -> String {
        let kind = if self.retprobe { "kretprobe" } else { "kprobe" };
        match self.offset {
            0 => format!("{kind}/{}", self.function),
            offset => format!("{kind}/{}+{offset}", self.function),
        }
    }

    fn context(&self) -> Context {
        context(self.retprobe, Func::Name(self.function.clone()))
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let Kprobe { function, offset, retprobe, multi_available } = self;
        let event = TraceEvent::Kprobe { function, offset: *offset, retprobe: *retprobe };
        let provider = provider_name(*retprobe);
        let perf = attach_trace_event(program, event, target.cpu).map_err(|error| match error.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINVAL) => AttachError::Explained(format!(
                "cannot attach `{provider}:{function}`: the kernel has no function `{function}` that can be probed ({error})"
            )),
            // Not the BPF token's delegation: the perf kprobe event itself.
            Some(libc::EACCES) | Some(libc::EPERM) => AttachError::Explained(format!(
                "cannot attach `{provider}:{function}`: the kernel refused its perf kprobe event ({error}): it opens \
                 them only for CAP_PERFMON in the host's user namespace{}",
                if *multi_available {
                    ""
                } else {
                    "; a kernel with kprobe_multi links (Linux 5.18, CONFIG_FPROBE) needs none"
                }
            )),
            _ => AttachError::Os { what: format!("cannot attach `{provider}:{function}`"), error },
        })?;
        Ok(Some(Attachment::new(perf)))
    }

    fn describe(&self) -> String {
        "runs on a perf kprobe event".into()
    }
}

impl Provider for KprobeMulti {
    fn overrides_return(&self) -> bool {
        !self.retprobe
    }

    fn kind(&self) -> &'static str {
        "kprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::KprobeMulti
    }

    fn context(&self) -> Context {
        let func = if self.single() {
            Func::Name(self.pattern.clone())
        } else if self.by_cookie {
            Func::Cookie(self.functions.clone())
        } else {
            Func::Address
        };
        context(self.retprobe, func)
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let (provider, pattern) = (provider_name(self.retprobe), &self.pattern);
        let all: Vec<usize> = (0..self.functions.len()).collect();
        let error = match self.link(program, &all) {
            Ok(link) => return Ok(Some(Attachment::new(link))),
            Err(error) => error,
        };
        if self.single() {
            let what = format!("cannot attach `{provider}:{pattern}`");
            return Err(match untraceable(&error) {
                true => AttachError::Explained(format!(
                    "{what}: the kernel has no function `{pattern}` that it can trace ({error})"
                )),
                false => AttachError::Os { what: format!("{what} through a kprobe_multi link"), error },
            });
        }
        let what = format!(
            "cannot attach `{provider}:{pattern}` to its {} functions through a kprobe_multi link",
            self.functions.len()
        );
        if !untraceable(&error) {
            return Err(AttachError::Os { what, error });
        }
        // Some function cannot be traced: which, the kernel does not say (where tracefs's list of the
        // traceable ones cannot be read, the functions are those of kallsyms and BTF).
        let mut found = Found { links: vec![], refused: vec![], tries: MOST_TRIES };
        match self.bisect(program, &all, &mut found) {
            Ok(()) => {}
            Err(Some(error)) => return Err(AttachError::Os { what, error }),
            Err(None) => {
                let mut named: Vec<&str> =
                    found.refused.iter().take(10).map(|&i| self.functions[i].as_str()).collect();
                let more = format!("{} more", found.refused.len().saturating_sub(named.len()));
                if found.refused.len() > named.len() {
                    named.push(&more);
                }
                return Err(AttachError::Explained(format!(
                    "{what}: the kernel cannot trace some of them ({error}), and does not say which: {} \
                     tries named {} ({}), with more to go: narrow the wildcard",
                    MOST_TRIES + 1,
                    found.refused.len(),
                    named.join(", ")
                )));
            }
        }
        if found.refused.is_empty() {
            return Ok(Some(Attachment::new(found.links)));
        }
        let reason = "the kernel cannot trace it";
        Err(AttachError::Refused {
            functions: found
                .refused
                .iter()
                .map(|&i| (self.functions[i].clone(), reason.to_string()))
                .collect(),
            attached: (!found.links.is_empty()).then(|| Attachment::new(found.links)),
        })
    }

    fn describe(&self) -> String {
        if let (true, Some(why)) = (self.single(), &self.instead_of_perf) {
            return format!("runs on a kprobe_multi link, as perf kprobe events are closed here: {why}");
        }
        let n = self.functions.len();
        format!("runs on one kprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
    }

    fn per_function(&self, span: Span) -> Option<Vec<AttachPoint>> {
        if self.single() {
            return None;
        }
        let points = self.functions.iter().map(|function| {
            let name = format!("{}:{function}", provider_name(self.retprobe));
            match &self.instead_of_perf {
                Some(why) => AttachPoint::new(KprobeMulti::one(function, self.retprobe, why), name, span),
                None => {
                    let probe = Kprobe {
                        function: function.clone(),
                        offset: 0,
                        retprobe: self.retprobe,
                        multi_available: true,
                    };
                    AttachPoint::new(probe, name, span)
                }
            }
        });
        Some(points.collect())
    }
}

/// Where the kernel announces its kprobe event source; absent without CONFIG_KPROBES.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let rest: &str = rest;
    let retprobe = matches!(written, "kretprobe" | "kr");
    let provider = provider_name(retprobe);
    if !std::path::Path::new(KPROBE_PMU).exists() {
        return Err(Diagnostic::error(
            span,
            "kprobes are not available on this kernel (CONFIG_KPROBES is not set)",
        )
        .with_help(
            "use a tracepoint or a raw tracepoint instead: `steadytrace -l 'tracepoint:*'` lists them",
        ));
    }
    let (function, offset) = match rest.split_once('+') {
        Some((function, offset)) => {
            let offset = super::numbers::attach_number(offset)
                .ok_or_else(|| Diagnostic::error(span, format!("`{offset}` is not an offset")))?;
            (function, offset)
        }
        None => (rest, 0),
    };
    if function.is_empty() {
        return Err(Diagnostic::error(span, format!("`{provider}` needs a kernel function"))
            .with_help(format!("for example `{provider}:do_nanosleep`")));
    }
    let denied = perf_kprobes_denied();
    if let Some(why) = &denied {
        if let Some(problem) = without_perf_kprobes(provider, rest, offset, why, span, &kernel.features) {
            return Err(problem);
        }
    }
    let functions = if wildcard::has_wildcard(function) {
        if offset != 0 {
            return Err(Diagnostic::error(span, "an offset goes with one function, not a wildcard"));
        }
        let found: Vec<String> = probeable_functions(&kernel.vmlinux)
            .iter()
            .filter(|f| wildcard::matches(function, f))
            .cloned()
            .collect();
        if found.is_empty() {
            let problem = Diagnostic::error(span, format!("no kernel function matches `{function}`"));
            return missing::skip_or_fail(problem, options);
        }
        if multi_link(&kernel.features) {
            let multi = KprobeMulti {
                pattern: function.to_string(),
                functions: found.into(),
                retprobe,
                by_cookie: !kallsyms_addresses_shown(),
                instead_of_perf: denied,
            };
            return Ok(vec![AttachPoint::new(multi, format!("{provider}:{function}"), span)]);
        }
        found
    } else {
        let known = probeable_functions(&kernel.vmlinux);
        // Where the kernel lists no functions, attaching finds out.
        if !known.is_empty() && known.binary_search_by(|f| f.as_str().cmp(function)).is_err() {
            let near = crate::lang::suggest::closest(function, known.iter().map(String::as_str));
            let near = near.map(|near| format!(" (did you mean `{provider}:{near}`?)")).unwrap_or_default();
            let problem =
                Diagnostic::error(span, format!("the kernel has no function `{function}` to probe{near}"));
            return missing::skip_or_fail(problem, options);
        }
        vec![function.to_string()]
    };
    if let (Some(why), [function]) = (&denied, functions.as_slice()) {
        let multi = KprobeMulti::one(function, retprobe, why);
        return Ok(vec![AttachPoint::new(multi, format!("{provider}:{function}"), span)]);
    }
    // One probe (and one perf kprobe event) per function.
    Ok(functions
        .into_iter()
        .map(|function| {
            AttachPoint::new(
                Kprobe {
                    function: function.clone(),
                    offset,
                    retprobe,
                    multi_available: kernel.features.has(Feature::KprobeMulti),
                },
                format!("{provider}:{function}"),
                span,
            )
        })
        .collect())
}

/// Why perf kprobe events are closed to steadytrace, if they are (found out once): the kernel opens them
/// only for CAP_PERFMON (or CAP_SYS_ADMIN) in the host's user namespace, and only where perf_event_open is
/// allowed at all. `None` with `STEADYTRACE_KPROBE_ATTACH=perf`, which takes the perf path regardless.
fn perf_kprobes_denied() -> Option<String> {
    use crate::privilege::{has_capability, initial_user_namespace, CAP_PERFMON, CAP_SYS_ADMIN};
    static DENIED: OnceLock<Option<String>> = OnceLock::new();
    DENIED
        .get_or_init(|| {
            if std::env::var("STEADYTRACE_KPROBE_ATTACH").is_ok_and(|v| v == "perf") {
                return None;
            }
            if !initial_user_namespace() {
                return Some(
                    "steadytrace runs in a user namespace other than the host's (a rootless container), whose \
                     capabilities count for nothing with perf events, and a BPF token does not cover them"
                        .into(),
                );
            }
            if !has_capability(CAP_PERFMON) && !has_capability(CAP_SYS_ADMIN) {
                return Some("steadytrace lacks CAP_PERFMON".into());
            }
            crate::privilege::perf_event_open_denied().map(|error| format!("perf_event_open is refused ({error})"))
        })
        .clone()
}

/// The error for a kprobe (`provider:rest`, at `span`) that cannot work where perf kprobe events are closed
/// (`why`): one at an offset into a function, which kprobe_multi links cannot attach, or any on a kernel
/// without kprobe_multi links. `None` when a kprobe_multi link can serve it.
fn without_perf_kprobes(
    provider: &str,
    rest: &str,
    offset: u64,
    why: &str,
    span: Span,
    features: &Features,
) -> Option<Diagnostic> {
    let function = rest.split_once('+').map_or(rest, |(function, _)| function);
    let fentry = if provider == "kretprobe" { "fexit" } else { "fentry" };
    let trampolines = features.has(Feature::Fentry);
    let instead = if trampolines {
        format!(
            "use `{fentry}:{function}` instead: BPF trampolines need no perf event (`args.NAME` are the function's parameters{})",
            if fentry == "fexit" { ", `retval` its return value" } else { "" }
        )
    } else {
        "probe the event through `rawtracepoint:NAME` (`steadytrace -l 'rawtracepoint:*'` lists them) or `tracepoint:syscalls:*`, which need no perf event".to_string()
    };
    if offset != 0 {
        return Some(
            Diagnostic::error(
                span,
                format!(
                    "`{provider}:{rest}` needs a perf kprobe event (kprobe_multi links attach only at a function's \
                     entry), and perf kprobe events are closed here: {why}"
                ),
            )
            .with_help(format!("probe the function's entry, `{provider}:{function}`, or {instead}")),
        );
    }
    if multi_link(features) {
        return None;
    }
    let feature = bpf::features::Feature::KprobeMulti;
    Some(
        Diagnostic::error(
            span,
            format!(
                "`{provider}:{rest}` needs a perf kprobe event on this kernel ({}), which has no {} (Linux {}, in \
                 kernels built with CONFIG_FPROBE), and perf kprobe events are closed here: {why}",
                crate::kernel::release(),
                feature.what(),
                feature.since()
            ),
        )
        .with_help(instead),
    )
}

/// Whether `/proc/kallsyms` shows this process the kernel's addresses (not to root of a user namespace, nor
/// to a process without CAP_SYSLOG under `kernel.kptr_restrict`): some address among its first lines is
/// not zero. Asked once.
fn kallsyms_addresses_shown() -> bool {
    use std::io::BufRead;
    static SHOWN: OnceLock<bool> = OnceLock::new();
    *SHOWN.get_or_init(|| {
        let Ok(file) = std::fs::File::open("/proc/kallsyms") else { return false };
        std::io::BufReader::new(file)
            .lines()
            .take(1000)
            .map_while(Result::ok)
            .any(|line| line.split_whitespace().next().is_some_and(|a| a.bytes().any(|b| b != b'0')))
    })
}

/// Whether wildcards attach through kprobe_multi links: where the kernel has them.
/// `STEADYTRACE_KPROBE_ATTACH=perf` takes the perf kprobe path on any kernel, so that tests cover it.
fn multi_link(features: &Features) -> bool {
    let forced_perf = std::env::var("STEADYTRACE_KPROBE_ATTACH").is_ok_and(|v| v == "perf");
    !forced_perf && features.has(Feature::KprobeMulti)
}

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

/// The kernel functions kprobes can be put on: `--traceable-functions`' file, or tracefs's `available_filter_functions` where it can be
/// read, else (a rootless container: tracefs is the host root's, mode 0700) the text symbols of
/// `/proc/kallsyms` that could be: of the kernel's own, those its BTF describes as functions (none of the
/// padding symbols `__pfx_NAME` and `__cfi_NAME`, nor the assembly ftrace cannot patch); every function of a
/// module. A function of this list that the kernel still refuses is found at attach time.
/// Sorted, read once per compilation (for each kprobe and fentry wildcard of a script it took seconds under
/// emulation).
pub(crate) fn probeable_functions(kernel: &Vmlinux) -> &[String] {
    kernel.traceable_functions(|kernel| {
        let listed = match TRACEABLE_FUNCTIONS.get() {
            Some(path) => std::fs::read_to_string(path).ok(),
            None => tracefs::root()
                .ok()
                .and_then(|root| std::fs::read_to_string(root.join("available_filter_functions")).ok()),
        };
        let mut functions: Vec<String> = match listed {
            Some(text) => {
                text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
            }
            None => kallsyms_functions(kernel),
        };
        functions.sort();
        functions.dedup();
        functions
    })
}

/// The functions of `/proc/kallsyms` that may be traced, for [`probeable_functions`]; names only, which
/// it shows to anyone.
fn kallsyms_functions(kernel: &Vmlinux) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    traceable_in_kallsyms(&text, kernel.kernel_function_names())
}

/// Of the text symbols in `kallsyms` (`/proc/kallsyms`'s format), the kernel's own that are among `described`
/// (the functions of its BTF; all of them where it has none), and every function of a module, named once each
/// (in no order); never a padding symbol (`__pfx_NAME`, `__cfi_NAME`) nor a static call's trampoline.
fn traceable_in_kallsyms(kallsyms: &str, described: Vec<String>) -> Vec<String> {
    // A line is `ADDRESS TYPE NAME`, then a tab and `[MODULE]` for a module's symbols: 200,000 of them, read
    // without splitting each into its fields (seconds in a guest under emulation).
    let mut kernel: Vec<&str> = vec![];
    let mut functions = vec![];
    for line in kallsyms.lines() {
        let Some((_address, rest)) = line.split_once(' ') else { continue };
        let Some(name) = rest.strip_prefix("t ").or_else(|| rest.strip_prefix("T ")) else { continue };
        let (name, in_module) = name.split_once('\t').map_or((name, false), |(name, _module)| (name, true));
        // Padding before functions, and static calls' trampolines (`__SCT__NAME`): no functions.
        if ["__pfx_", "__cfi_", "__SCT__"].iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        match in_module {
            true => functions.push(name.to_string()),
            false => kernel.push(name),
        }
    }
    kernel.sort_unstable();
    kernel.dedup();
    if described.is_empty() {
        functions.extend(kernel.into_iter().map(str::to_string));
    } else {
        functions.extend(described.into_iter().filter(|f| kernel.binary_search(&f.as_str()).is_ok()));
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
        let mut found = traceable_in_kallsyms(kallsyms, described);
        found.sort();
        assert_eq!(found, ["do_nanosleep", "ext4_read_folio", "vfs_read"]);
        let mut without_btf = traceable_in_kallsyms(kallsyms, vec![]);
        without_btf.sort();
        assert_eq!(without_btf, ["_text", "do_nanosleep", "ext4_read_folio", "vfs_read"]);
    }
}
