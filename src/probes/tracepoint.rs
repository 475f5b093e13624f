//! `tracepoint:CATEGORY:NAME` (alias `t:`), wildcards in both parts: the kernel's static tracepoints,
//! with their record fields (`args.FIELD`) read from tracefs `format` files.

use super::Fields;
use super::{
    missing, syscall, syscall_formats, tracefs, wildcard, AttachError, AttachPoint, AttachTarget, Attachment,
    Options, Provider,
};
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::perf::{attach_trace_event, TraceEvent};
use bpf::ProgType;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, OnceLock};

pub fn resolve(
    _: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let Some((category, name)) = rest.split_once(':') else {
        return Err(Diagnostic::error(span, "a tracepoint is named `tracepoint:CATEGORY:NAME`")
            .with_help("list them with `steadytrace -l 'tracepoint:*'`"));
    };
    let root = match tracefs::root() {
        Ok(root) => root,
        // A rootless container cannot read tracefs; system calls are still there, through raw_syscalls.
        Err(error) if category == "syscalls" => return syscalls_without_tracefs(name, span, options, error),
        Err(_) if !crate::privilege::initial_user_namespace() => {
            return raw_tracepoint_instead(category, name, span, &kernel.vmlinux)
        }
        Err(error) => return Err(Diagnostic::error(span, error)),
    };
    let chosen: Vec<(String, String)> = if wildcard::has_wildcard(category) || wildcard::has_wildcard(name) {
        syscall_formats::all_tracepoints(&root)
            .into_iter()
            .filter(|(c, n)| wildcard::matches(category, c) && wildcard::matches(name, n))
            .collect()
    } else {
        vec![(category.to_string(), name.to_string())]
    };
    let exact = !(wildcard::has_wildcard(category) || wildcard::has_wildcard(name));
    let problem = if chosen.is_empty() {
        Some(format!("no tracepoint matches `{category}:{name}`"))
    } else if exact && !exists(&root, category, name) {
        let all: Vec<String> =
            syscall_formats::all_tracepoints(&root).into_iter().map(|(c, n)| format!("{c}:{n}")).collect();
        let near = crate::lang::suggest::closest(rest, all.iter().map(String::as_str));
        let near = near.map(|near| format!(" (did you mean `tracepoint:{near}`?)")).unwrap_or_default();
        Some(format!("there is no tracepoint `{category}:{name}`{near}"))
    } else {
        None
    };
    if let Some(problem) = problem {
        let problem =
            Diagnostic::error(span, problem).with_help("list them with `steadytrace -l 'tracepoint:*'`");
        return missing::skip_or_fail(problem, options);
    }
    chosen
        .into_iter()
        .map(|(category, name)| {
            let format = syscall_formats::read_format(&root, &category, &name).map_err(|e| {
                Diagnostic::error(span, e)
                    .with_help("list the tracepoints with `steadytrace -l 'tracepoint:*'`")
            })?;
            let format = Arc::new(format);
            let written = format!("tracepoint:{category}:{name}");
            if category == "syscalls" {
                if syscall_formats::made_up(&root) {
                    let point = syscall::RawSyscall::new(format.clone(), syscall_formats::REASON.into())
                        .ok_or_else(|| {
                            Diagnostic::error(span, format!("there is no system call `{name}` here"))
                        })?;
                    return Ok(AttachPoint::new(point, written, span));
                }
                if let (syscall::Attach::Raw, reason) = syscall_attach() {
                    if let Some(point) = syscall::RawSyscall::new(format.clone(), reason) {
                        return Ok(AttachPoint::new(point, written, span));
                    }
                }
            }
            Ok(AttachPoint::new(Tracepoint { format }, written, span))
        })
        .collect()
}

/// `tracepoint:syscalls:NAME` where tracefs cannot be read: each system call through the raw_syscalls raw
/// tracepoints, its record made up from the built-in signatures ([`syscall_formats::format`]).
/// `tracepoint:CATEGORY:NAME` where tracefs cannot be read (a rootless container): the raw tracepoint of the
/// same event, when the kernel's BTF has it. Its `args` are the tracepoint's arguments; a script reading a
/// record field they lack gets an error there. Categories live only in tracefs: wildcards cannot be expanded.
fn raw_tracepoint_instead(
    category: &str,
    name: &str,
    span: Span,
    kernel: &Vmlinux,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    const WHY: &str = "tracefs is the host's, readable by no user of this user namespace";
    if wildcard::has_wildcard(category) || wildcard::has_wildcard(name) {
        return Err(Diagnostic::error(
            span,
            format!("the tracepoints a wildcard names cannot be known here: {WHY}, and only tracefs has their categories"),
        )
        .with_help("name one tracepoint (`tracepoint:sched:sched_switch`); `steadytrace -l 'rawtracepoint:*'` lists them"));
    }
    if let Err(why) = kernel.raw_tracepoint_args(name) {
        return Err(Diagnostic::error(span, format!("there is no tracepoint `{name}`: {why} ({WHY})"))
            .with_help("`steadytrace -l 'rawtracepoint:*'` lists them"));
    }
    let point = super::rawtracepoint::RawTracepoint::for_tracepoint(name);
    Ok(vec![AttachPoint::new(point, format!("tracepoint:{category}:{name}"), span)])
}

fn syscalls_without_tracefs(
    name: &str,
    span: Span,
    options: &Options,
    tracefs_error: String,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let names: Vec<String> = match wildcard::has_wildcard(name) {
        true => syscall_formats::made_up_tracepoints()
            .map(|(_, n)| n)
            .filter(|n| wildcard::matches(name, n))
            .collect(),
        false => vec![name.to_string()],
    };
    let reason =
        format!("tracefs cannot be read ({tracefs_error}): records made up from system call signatures");
    let points: Vec<AttachPoint> = names
        .iter()
        .filter_map(|n| {
            Some((n, syscall::RawSyscall::new(Arc::new(syscall_formats::format(n)?), reason.clone())?))
        })
        .map(|(n, point)| AttachPoint::new(point, format!("tracepoint:syscalls:{n}"), span))
        .collect();
    if points.is_empty() {
        let problem =
            Diagnostic::error(span, format!("there is no system call tracepoint `syscalls:{name}`"))
                .with_help("list them with `steadytrace -l 'tracepoint:syscalls:*'`");
        return missing::skip_or_fail(problem, options);
    }
    Ok(points)
}

/// Whether tracepoint `category:name` exists (or is made up, see [`syscall_formats`]).
fn exists(root: &std::path::Path, category: &str, name: &str) -> bool {
    if category == "syscalls" && syscall_formats::made_up(root) {
        return syscall_formats::format(name).is_some();
    }
    root.join("events").join(category).join(name).is_dir()
}

/// How syscall tracepoints attach in this run, decided once.
fn syscall_attach() -> (syscall::Attach, String) {
    static CHOSEN: OnceLock<(syscall::Attach, String)> = OnceLock::new();
    CHOSEN.get_or_init(syscall::chosen).clone()
}

#[derive(Debug)]
pub struct Tracepoint {
    format: Arc<tracefs::Format>,
}

impl Provider for Tracepoint {
    fn kind(&self) -> &'static str {
        "tracepoint"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Tracepoint
    }

    fn elf_section(&self) -> String {
        let target = format!("{}/{}", self.format.category, self.format.name);
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(&target))
    }

    fn fields(&self, _: &Vmlinux) -> Option<Result<Vec<tracefs::Field>, String>> {
        Some(Ok(self.format.fields.clone()))
    }

    fn fields_point_to_user(&self) -> bool {
        self.format.category == "syscalls"
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    /// On one perf event: the kernel runs a trace event's programs on whatever CPU it fires.
    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let event = TraceEvent::Tracepoint { id: self.format.id.into() };
        let (category, name) = (&self.format.category, &self.format.name);
        let perf = attach_trace_event(program, event, target.cpu).map_err(|error| {
            let probe = format!("tracepoint:{category}:{name}");
            match error.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => AttachError::Explained(
                    crate::privilege::perf_event_denied(&probe, &error, &self.alternative()),
                ),
                _ => AttachError::Os { what: format!("cannot attach `{probe}`"), error },
            }
        })?;
        Ok(Some(Attachment::new(perf)))
    }

    fn describe(&self) -> String {
        "runs on a tracepoint perf event".into()
    }
}

impl Tracepoint {
    /// What serves the same event without perf_event_open, said for the error: the raw tracepoint, and
    /// how its `args` differ from the record's fields.
    fn alternative(&self) -> String {
        let name = &self.format.name;
        // An error message after the compilation: the kernel's types are read again for it.
        let Ok(raw) = Vmlinux::running().raw_tracepoint_args(name) else {
            return String::new();
        };
        let record: Vec<&str> = self.format.fields.iter().map(|f| f.name.as_str()).collect();
        let raw: Vec<&str> = raw.iter().map(|f| f.name.as_str()).collect();
        let only_record: Vec<&str> = record.iter().copied().filter(|f| !raw.contains(f)).collect();
        let only_raw: Vec<&str> = raw.iter().copied().filter(|f| !record.contains(f)).collect();
        let mut text =
            format!(" Or try `rawtracepoint:{name}`: it serves the same event without perf_event_open");
        if only_record.is_empty() && only_raw.is_empty() {
            text.push_str(", with the same `args` fields.");
        } else {
            text.push_str(&format!(
                "; its `args` are the kernel function's arguments ({}), not the record's fields ({}).",
                if raw.is_empty() { "none".to_string() } else { raw.join(", ") },
                record.join(", ")
            ));
        }
        text
    }
}
