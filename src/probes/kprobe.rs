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

use super::kernel_functions;
use super::kprobe_session::SessionPart;
use super::Fields;
use super::{missing, Options, Provider};
use super::{wildcard, Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context, Func, Retval};
use crate::kernel::traceable::{self, TraceableFunction};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::features::{Feature, Features};
use bpf::kprobe::{attach_multi, MultiKind};
use bpf::perf::{attach_trace_event, TraceEvent};
use bpf::{AttachMode, ProgType};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};

/// One kernel function (or a bare address), through a perf kprobe event.
#[derive(Debug)]
pub struct Kprobe {
    /// The function's name, what `func` is.
    function: String,
    /// The module the script named it in (`kprobe:MODULE:FUNCTION`), not `vmlinux`: the kernel looks the
    /// function up as `MODULE:FUNCTION`.
    module: Option<String>,
    /// `kprobe:0xADDRESS` (with `--unsafe`): the kernel address, `function` the symbol it is in.
    address: Option<u64>,
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
        Kprobe { function, module: None, address: None, offset, retprobe, multi_available: false }
    }

    /// The function as the kernel's symbol lookup takes it, and as messages name it.
    fn symbol(&self) -> String {
        match (&self.address, &self.module) {
            (Some(address), _) => format!("{address:#x}"),
            (None, Some(module)) => format!("{module}:{}", self.function),
            (None, None) => self.function.clone(),
        }
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
        let kind = if self.retprobe { MultiKind::Return } else { MultiKind::Entry };
        attach_multi(program, &names, &cookies, kind)
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
            0 => format!("{kind}/{}", self.symbol()),
            offset => format!("{kind}/{}+{offset}", self.symbol()),
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
        let Kprobe { offset, retprobe, multi_available, .. } = self;
        let function = self.symbol();
        let event = match self.address {
            Some(address) => TraceEvent::KprobeAddress { address: address + offset, retprobe: *retprobe },
            None => TraceEvent::Kprobe { function: &function, offset: *offset, retprobe: *retprobe },
        };
        let provider = provider_name(*retprobe);
        let perf = attach_trace_event(program, event, target.cpu).map_err(|error| match error.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINVAL) => AttachError::Explained(match self.address {
                Some(_) => format!(
                    "cannot attach `{provider}:{function}`: the kernel cannot put a kprobe at {function} ({error}): \
                     it must be an instruction's first byte in kernel text that kprobes may patch"
                ),
                None => format!(
                    "cannot attach `{provider}:{function}`: the kernel has no function `{function}` that can be probed ({error})"
                ),
            }),
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

    /// At a named function's entry or return: not at an offset into it nor at a bare address.
    fn session_part(&self) -> Option<SessionPart> {
        (self.address.is_none() && self.offset == 0 && !forced_perf())
            .then(|| SessionPart { function: self.function.clone(), retprobe: self.retprobe })
    }

    fn describe(&self) -> String {
        match self.address {
            Some(address) => format!("runs on a perf kprobe event at {address:#x} (in {})", self.function),
            None => "runs on a perf kprobe event".into(),
        }
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

    /// The one function a kprobe names where perf kprobe events are closed; a wildcard's link keeps finding
    /// out which functions the kernel refuses, which a session link cannot.
    fn session_part(&self) -> Option<SessionPart> {
        self.single().then(|| SessionPart { function: self.pattern.clone(), retprobe: self.retprobe })
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
                    let probe =
                        Kprobe { multi_available: true, ..Kprobe::new(function.clone(), 0, self.retprobe) };
                    AttachPoint::new(probe, name, span)
                }
            }
        });
        Some(points.collect())
    }
}

/// Where the kernel announces its kprobe event source; absent without CONFIG_KPROBES.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

/// What a kprobe's attach point names, read from the text after `kprobe:`.
#[derive(Debug, PartialEq)]
enum Target<'a> {
    /// `FUNCTION` (a function of the kernel or of any module) or `MODULE:FUNCTION`; either may be a wildcard.
    Functions { module: Option<&'a str>, function: &'a str },
    /// `0xADDRESS` (or a decimal one), with `--unsafe`.
    Address(u64),
}

/// Reads `[MODULE:]FUNCTION[+OFFSET]` or `ADDRESS[+OFFSET]`.
fn read_target<'a>(rest: &'a Fields, provider: &str, span: Span) -> Result<(Target<'a>, u64), Diagnostic> {
    let (module, function) = match rest.fields()[..] {
        [function] => (None, function),
        [module, function] => (Some(module), function),
        _ => {
            return Err(Diagnostic::error(span, format!("`{provider}:{}` has too many parts", &**rest))
                .with_help(format!("write `{provider}:FUNCTION` or `{provider}:MODULE:FUNCTION`")))
        }
    };
    let (function, offset) = match function.split_once('+') {
        Some((function, offset)) => {
            let offset = super::numbers::attach_number(offset)
                .ok_or_else(|| Diagnostic::error(span, format!("`{offset}` is not an offset")))?;
            (function, offset)
        }
        None => (function, 0),
    };
    if function.is_empty() || module.is_some_and(str::is_empty) {
        return Err(Diagnostic::error(span, format!("`{provider}` needs a kernel function"))
            .with_help(format!("for example `{provider}:do_nanosleep`")));
    }
    if module.is_none() && function.starts_with(|c: char| c.is_ascii_digit()) {
        let address = super::numbers::attach_number(function).ok_or_else(|| {
            Diagnostic::error(span, format!("`{function}` is neither a function nor an address"))
        })?;
        return Ok((Target::Address(address), offset));
    }
    Ok((Target::Functions { module, function }, offset))
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
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
    let (target, offset) = read_target(rest, provider, span)?;
    let denied = perf_kprobes_denied();
    if let Some(why) = &denied {
        if let Some(problem) = without_perf_kprobes(provider, rest, offset, why, span, &kernel.features) {
            return Err(problem);
        }
    }
    let (module, function) = match target {
        Target::Address(address) => return at_address(address, offset, retprobe, span, options),
        Target::Functions { module, function } => (module, function),
    };
    if let Some(module) = module.filter(|m| !wildcard::has_wildcard(m) && !kernel_functions::module_loaded(m))
    {
        let problem = Diagnostic::error(span, format!("module `{module}` is not loaded"))
            .with_help(format!("load it first (`modprobe {module}`); `lsmod` lists the loaded ones"));
        return missing::skip_or_fail(problem, options);
    }
    let known = kernel_functions::probeable_functions(&kernel.vmlinux);
    let in_module = |f: &&TraceableFunction| module.is_none_or(|m| wildcard::matches(m, f.module_name()));
    // The script's own words for a function: with its module where it named one.
    let written_as = |f: &TraceableFunction| match module {
        Some(_) => format!("{}:{}", f.module_name(), f.name),
        None => f.name.clone(),
    };
    let functions: Vec<&TraceableFunction> = if wildcard::has_wildcard(function)
        || module.is_some_and(wildcard::has_wildcard)
    {
        if offset != 0 {
            return Err(Diagnostic::error(span, "an offset goes with one function, not a wildcard"));
        }
        let found: Vec<&TraceableFunction> =
            known.iter().filter(|f| wildcard::matches(function, &f.name)).filter(in_module).collect();
        if found.is_empty() {
            let problem = Diagnostic::error(span, format!("no kernel function matches `{}`", &**rest));
            return missing::skip_or_fail(problem, options);
        }
        if multi_link(&kernel.features) {
            // The link looks each name up among the kernel's functions, then the modules'.
            let mut names: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
            names.dedup();
            let multi = KprobeMulti {
                pattern: rest.to_string(),
                functions: names.into(),
                retprobe,
                by_cookie: !kallsyms_addresses_shown(),
                instead_of_perf: denied,
            };
            return Ok(vec![AttachPoint::new(multi, format!("{provider}:{}", &**rest), span)]);
        }
        found
    } else if known.is_empty() {
        // Where the kernel lists no functions, attaching finds out.
        return Ok(vec![one_function(provider, module, function, offset, retprobe, denied, kernel, span)]);
    } else {
        let found: Vec<&TraceableFunction> =
            traceable::named(known, function).iter().filter(in_module).collect();
        let Some(first) = found.first() else {
            let near = match module {
                None => crate::lang::suggest::closest(function, known.iter().map(|f| f.name.as_str())),
                Some(m) => crate::lang::suggest::closest(
                    function,
                    known.iter().filter(|f| f.module_name() == m).map(|f| f.name.as_str()),
                ),
            };
            let near = near
                .map(|near| {
                    format!(
                        " (did you mean `{provider}:{}{near}`?)",
                        module.map(|m| format!("{m}:")).unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            let whose = module.map(|m| format!(" in module `{m}`")).unwrap_or_default();
            let problem = Diagnostic::error(
                span,
                format!("the kernel has no function `{function}`{whose} to probe{near}"),
            );
            return missing::skip_or_fail(problem, options);
        };
        vec![*first]
    };
    Ok(functions
        .into_iter()
        .map(|f| {
            let module = module.map(|_| f.module_name()).filter(|m| *m != traceable::KERNEL);
            let mut point =
                one_function(provider, module, &f.name, offset, retprobe, denied.clone(), kernel, span);
            point.name = format!("{provider}:{}", written_as(f));
            point
        })
        .collect())
}

/// The attach point for one function: a perf kprobe event, or a kprobe_multi link on it where perf kprobe
/// events are closed (`denied`).
#[allow(clippy::too_many_arguments)]
fn one_function(
    provider: &str,
    module: Option<&str>,
    function: &str,
    offset: u64,
    retprobe: bool,
    denied: Option<String>,
    kernel: &KernelTypes,
    span: Span,
) -> AttachPoint {
    let module = module.filter(|m| *m != traceable::KERNEL);
    let name = format!("{provider}:{}{function}", module.map(|m| format!("{m}:")).unwrap_or_default());
    if let Some(why) = denied {
        return AttachPoint::new(KprobeMulti::one(function, retprobe, &why), name, span);
    }
    let probe = Kprobe {
        module: module.map(str::to_string),
        multi_available: kernel.features.has(Feature::KprobeMulti),
        ..Kprobe::new(function.to_string(), offset, retprobe)
    };
    AttachPoint::new(probe, name, span)
}

/// `kprobe:ADDRESS[+OFFSET]`: a perf kprobe event at a bare kernel address, which `--unsafe` must allow (a
/// kprobe in the middle of an instruction would crash the kernel, were it not refused). `func` is the
/// symbol the address is in, `probe` the address in decimal, as bpftrace writes it.
fn at_address(
    address: u64,
    offset: u64,
    retprobe: bool,
    span: Span,
    options: &Options,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let provider = provider_name(retprobe);
    if !options.allow_unsafe {
        return Err(Diagnostic::error(span, format!("`{provider}` at an address needs `--unsafe`"))
            .with_help("a kprobe on a bare address is not checked to be a function's; run with `--unsafe` if it is meant"));
    }
    let symbols = crate::symbols::kernel::KernelSymbols::load();
    let function = match symbols.resolve(address) {
        Some((symbol, 0)) => symbol.to_string(),
        Some((symbol, into)) => format!("{symbol}+{into}"),
        None => format!("{address:#x}"),
    };
    let probe = Kprobe { address: Some(address), ..Kprobe::new(function, offset, retprobe) };
    let name = match offset {
        0 => format!("{provider}:{address}"),
        offset => format!("{provider}:{address}+{offset}"),
    };
    Ok(vec![AttachPoint::new(probe, name, span)])
}

/// Why perf kprobe events are closed to steadytrace, if they are (found out once): the kernel opens them
/// only for CAP_PERFMON (or CAP_SYS_ADMIN) in the host's user namespace, and only where perf_event_open is
/// allowed at all. `None` with `STEADYTRACE_KPROBE_ATTACH=perf`, which takes the perf path regardless.
fn perf_kprobes_denied() -> Option<String> {
    use crate::privilege::{has_capability, initial_user_namespace, CAP_PERFMON, CAP_SYS_ADMIN};
    static DENIED: OnceLock<Option<String>> = OnceLock::new();
    DENIED
        .get_or_init(|| {
            if forced_perf() {
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
    !forced_perf() && features.has(Feature::KprobeMulti)
}

/// `STEADYTRACE_KPROBE_ATTACH=perf`: every kprobe on a perf kprobe event of its own (no kprobe_multi link, no
/// kprobe session), so that tests cover that path on any kernel.
fn forced_perf() -> bool {
    std::env::var("STEADYTRACE_KPROBE_ATTACH").is_ok_and(|v| v == "perf")
}
