//! `kprobe:FUNCTION[+OFFSET]` and `kretprobe:FUNCTION` (aliases `k:`, `kr:`): kernel functions, through
//! the perf kprobe event source. A wildcard (`kprobe:vfs_*`) is one probe on all matching functions
//! through a kprobe_multi link where the kernel has them, else one probe per matching function.

use super::{missing, Options, Provider};
use super::{
    tracefs, wildcard, Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context, Func, Retval,
};
use crate::lang::{Diagnostic, Span};
use bpf::kprobe::attach_multi;
use bpf::perf::{attach_trace_event, TraceEvent};
use bpf::{AttachMode, ProgType};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, OnceLock};

/// One kernel function, through a perf kprobe event.
#[derive(Debug)]
pub struct Kprobe {
    function: String,
    offset: u64,
    retprobe: bool,
}

/// Kernel functions matching a wildcard, all attached through one kprobe_multi link.
#[derive(Debug)]
pub struct KprobeMulti {
    /// The wildcard, as written.
    pattern: String,
    functions: Arc<[String]>,
    retprobe: bool,
}

impl Kprobe {
    pub fn new(function: String, offset: u64, retprobe: bool) -> Kprobe {
        Kprobe { function, offset, retprobe }
    }
}

impl KprobeMulti {
    pub fn new(pattern: String, functions: Arc<[String]>, retprobe: bool) -> KprobeMulti {
        KprobeMulti { pattern, functions, retprobe }
    }
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
        let Kprobe { function, offset, retprobe } = self;
        let event = TraceEvent::Kprobe { function, offset: *offset, retprobe: *retprobe };
        let perf = attach_trace_event(program, event, target.cpu).map_err(|error| match error.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINVAL) => AttachError::Explained(format!(
                "cannot attach `{}:{function}`: the kernel has no function `{function}` that can be probed ({error})",
                provider_name(*retprobe)
            )),
            _ => AttachError::Os { what: format!("cannot attach `{}:{function}`", provider_name(*retprobe)), error },
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
        context(self.retprobe, Func::Address)
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let link = attach_multi(program, &self.functions, self.retprobe).map_err(|error| {
            let pattern = &self.pattern;
            let what = format!(
                "cannot attach `{}:{pattern}` to its {} functions through a kprobe_multi link",
                provider_name(self.retprobe),
                self.functions.len()
            );
            match error.raw_os_error() {
                Some(libc::ENOENT) => AttachError::Explained(format!(
                    "{what}: the kernel could not find or trace one of them ({error}); `steadytrace -l 'kprobe:{pattern}'` lists them"
                )),
                _ => AttachError::Os { what, error },
            }
        })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        let n = self.functions.len();
        format!("runs on one kprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
    }

    fn per_function(&self, span: Span) -> Option<Vec<AttachPoint>> {
        let points = self.functions.iter().map(|function| {
            let name = format!("{}:{function}", provider_name(self.retprobe));
            let probe = Kprobe { function: function.clone(), offset: 0, retprobe: self.retprobe };
            AttachPoint::new(probe, name, span)
        });
        Some(points.collect())
    }
}

/// Where the kernel announces its kprobe event source; absent without CONFIG_KPROBES.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe/type";

pub fn resolve(
    written: &str,
    rest: &str,
    span: Span,
    options: &Options,
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
    let functions = if wildcard::has_wildcard(function) {
        if offset != 0 {
            return Err(Diagnostic::error(span, "an offset goes with one function, not a wildcard"));
        }
        let found: Vec<String> =
            probeable_functions().into_iter().filter(|f| wildcard::matches(function, f)).collect();
        if found.is_empty() {
            let problem = Diagnostic::error(span, format!("no kernel function matches `{function}`"));
            return missing::skip_or_fail(problem, options);
        }
        if multi_link() {
            let multi = KprobeMulti { pattern: function.to_string(), functions: found.into(), retprobe };
            return Ok(vec![AttachPoint::new(multi, format!("{provider}:{function}"), span)]);
        }
        found
    } else {
        let known = probeable_functions();
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
    // One probe (and one perf kprobe event) per function.
    Ok(functions
        .into_iter()
        .map(|function| {
            AttachPoint::new(
                Kprobe { function: function.clone(), offset, retprobe },
                format!("{provider}:{function}"),
                span,
            )
        })
        .collect())
}

/// Whether wildcards attach through kprobe_multi links: where the kernel has them (asked once).
/// `STEADYTRACE_KPROBE_ATTACH=perf` takes the perf kprobe path on any kernel, so that tests cover it.
fn multi_link() -> bool {
    static MULTI: OnceLock<bool> = OnceLock::new();
    *MULTI.get_or_init(|| {
        let forced_perf = std::env::var("STEADYTRACE_KPROBE_ATTACH").is_ok_and(|v| v == "perf");
        !forced_perf && bpf::features::has(bpf::features::Feature::KprobeMulti)
    })
}

/// The kernel functions kprobes can be put on: tracefs's `available_filter_functions` where it can be
/// read, else the text symbols of `/proc/kallsyms` (some of which the kernel may refuse at attach).
pub(crate) fn probeable_functions() -> Vec<String> {
    let listed = tracefs::root()
        .ok()
        .and_then(|root| std::fs::read_to_string(root.join("available_filter_functions")).ok());
    let mut functions: Vec<String> = match listed {
        Some(text) => text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect(),
        None => std::fs::read_to_string("/proc/kallsyms")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                let (_address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
                // Module symbols carry a `[module]` field; both are fine.
                matches!(kind, "t" | "T").then(|| name.to_string())
            })
            .collect(),
    };
    functions.sort();
    functions.dedup();
    functions
}
