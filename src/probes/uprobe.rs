//! `uprobe:PATH:SYMBOL[+OFFSET]`, `uprobe:PATH:ADDRESS` and `uretprobe:` (aliases `u:`, `ur:`):
//! functions of a binary or library, found through its ELF symbols. PATH may be a library name
//! (`libc`), a command (`bash`) or a library inside an Android APK (`base.apk!/lib/arm64-v8a/libfoo.so`,
//! probed in the APK file); SYMBOL may have wildcards. A wildcard is one probe on all matching
//! functions through a uprobe_multi link where the kernel has them, else one probe per function.
//! `uprobe:PATH@FILE:LINE[:COLUMN]` is a source line, found through the DWARF line table
//! (`source_line.rs`).

use super::source_line::{self, SourceLine};
use super::Fields;
use super::{elf, trigger, wildcard, Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context};
use super::{missing, Func, Options, Provider, Retval, UserBinary};
use crate::kernel::KernelTypes;
use crate::lang::{Diagnostic, Span};
use bpf::uprobe::{refusal_reason, refuses_offset, MultiTarget};
use bpf::{AttachMode, ProgType, UprobeTarget};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A function at `offset` in the file `path` (`function` names it, for `func` and `probe`).
#[derive(Debug)]
pub struct Uprobe {
    path: PathBuf,
    offset: u64,
    retprobe: bool,
    function: String,
    /// How far into the function symbol `function` the probe is, where `function` is a symbol's name
    /// (not an address, nor a source line in no function).
    into_function: Option<u64>,
    /// A uprobe_multi link or a perf uprobe event, as the kernel allows (chosen when resolved).
    mode: AttachMode,
}

/// Functions of the file `path` matching a wildcard, all attached through one uprobe_multi link; the
/// link's cookie of each offset is its index in `functions`.
#[derive(Debug)]
pub struct UprobeMulti {
    path: PathBuf,
    /// The pattern of the functions' names, and how far into each function the probe is.
    pattern: String,
    extra: u64,
    functions: Arc<[String]>,
    offsets: Arc<[u64]>,
    retprobe: bool,
}

/// The section of an `--emit-elf` object libbpf attaches a program in by itself (`SEC("uprobe/PATH:FUNCTION")`):
/// `KIND/PATH:TARGET`, where libbpf can read that back (no `:` in the path); else bare `KIND`, which libbpf
/// loads but does not attach.
fn elf_section(kind: &str, path: &Path, target: Option<String>) -> String {
    let path = path.display().to_string();
    match target {
        Some(target) if !path.contains(':') => format!("{kind}/{path}:{target}"),
        _ => kind.to_string(),
    }
}

fn provider_name(retprobe: bool) -> &'static str {
    if retprobe {
        "uretprobe"
    } else {
        "uprobe"
    }
}

fn context(retprobe: bool, func: Func) -> Context {
    Context {
        arguments: (!retprobe).then_some(Arguments::Registers),
        retval: retprobe.then_some(Retval::REGISTER),
        func: Some(func),
        user_addresses: true,
        ctx_record: None,
    }
}

impl Provider for Uprobe {
    fn user_binary(&self) -> Option<UserBinary<'_>> {
        Some(UserBinary { path: &self.path, function: Some(&self.function) })
    }

    fn kind(&self) -> &'static str {
        "uprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        self.mode
    }

    fn context(&self) -> Context {
        context(self.retprobe, Func::Name(self.function.clone()))
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let uprobe = UprobeTarget {
            path: crate::apk::file_on_disk(&self.path),
            offset: self.offset,
            retprobe: self.retprobe,
            pid: target.pid,
            cpu: target.cpu,
            ref_ctr_offset: 0,
        };
        match bpf::Uprobe::attach(program, self.mode, &uprobe) {
            Ok(attached) => Ok(Some(Attachment::new(attached))),
            Err(error) if refuses_offset(&error) => Err(AttachError::Refused {
                functions: vec![(self.function.clone(), refusal_reason(&error))],
                attached: None,
            }),
            Err(error) => Err(AttachError::Os {
                what: format!("cannot attach a uprobe to `{}` in {}", self.function, self.path.display()),
                error,
            }),
        }
    }

    fn describe(&self) -> String {
        match self.mode {
            AttachMode::UprobeMulti => "runs on a uprobe_multi link".into(),
            _ => "runs on a perf uprobe event".into(),
        }
    }

    /// libbpf's names, saying the binary and function: `uprobe/PATH:FUNCTION[+OFFSET]` (`uretprobe/`, which
    /// libbpf takes without an offset) for a perf uprobe, `uprobe.multi/PATH:FUNCTION` (`uretprobe.multi/`,
    /// no offset) on a uprobe_multi link; bare where no function's name finds the probe.
    fn elf_section(&self) -> String {
        let multi = self.mode == AttachMode::UprobeMulti;
        let kind = match (multi, self.retprobe) {
            (false, false) => "uprobe",
            (false, true) => "uretprobe",
            (true, false) => "uprobe.multi",
            (true, true) => "uretprobe.multi",
        };
        let target = match self.into_function {
            Some(0) => Some(self.function.clone()),
            Some(offset) if !multi && !self.retprobe => Some(format!("{}+{offset}", self.function)),
            _ => None,
        };
        elf_section(kind, &self.path, target)
    }
}

impl Provider for UprobeMulti {
    fn user_binary(&self) -> Option<UserBinary<'_>> {
        Some(UserBinary { path: &self.path, function: None })
    }

    fn kind(&self) -> &'static str {
        "uprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::UprobeMulti
    }

    fn context(&self) -> Context {
        context(self.retprobe, Func::Cookie(self.functions.clone()))
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let multi = MultiTarget {
            path: crate::apk::file_on_disk(&self.path),
            offsets: &self.offsets,
            retprobe: self.retprobe,
            pid: target.pid,
        };
        let attached = bpf::uprobe::attach_multi(program, &multi).map_err(|error| AttachError::Os {
            what: format!(
                "cannot attach uprobes to {} functions of {}",
                self.functions.len(),
                self.path.display()
            ),
            error,
        })?;
        if attached.refused.is_empty() {
            return Ok(Some(Attachment::new(attached.links)));
        }
        let functions = attached
            .refused
            .iter()
            .map(|(index, error)| (self.functions[*index].clone(), refusal_reason(error)))
            .collect();
        let attached = (!attached.links.is_empty()).then(|| Attachment::new(attached.links));
        Err(AttachError::Refused { functions, attached })
    }

    /// `uprobe.multi/PATH:PATTERN` (`uretprobe.multi/`), libbpf matching the pattern as steadytrace does
    /// (`*`, `?`); bare for a probe into the functions (`PATTERN+OFFSET`), which libbpf cannot say.
    fn elf_section(&self) -> String {
        let kind = if self.retprobe { "uretprobe.multi" } else { "uprobe.multi" };
        elf_section(kind, &self.path, (self.extra == 0).then(|| self.pattern.clone()))
    }

    fn describe(&self) -> String {
        let n = self.functions.len();
        format!("runs on one uprobe_multi link on {n} function{}", if n == 1 { "" } else { "s" })
    }

    fn per_function(&self, span: Span) -> Option<Vec<AttachPoint>> {
        let points = self.functions.iter().zip(self.offsets.iter()).map(|(function, &offset)| {
            let function = (function.clone(), Some(self.extra));
            one_function(&self.path, function, offset, self.retprobe, AttachMode::UprobeMulti, span)
        });
        Some(points.collect())
    }
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let retprobe = matches!(written, "uretprobe" | "ur");
    let provider = provider_name(retprobe);
    // `PATH@FILE:LINE`: the `@` before any `:` (a versioned symbol, `libc:memcpy@GLIBC_2.14`, has it after).
    if let Some((binary, source)) = rest.split_once('@').filter(|(binary, _)| !binary.contains(':')) {
        return resolve_source_line(binary, source, retprobe, span, options, kernel);
    }
    let help = format!("write `{provider}:PATH:FUNCTION`, e.g. `{provider}:/usr/bin/bash:readline`");
    let Some((path, target)) = rest.split_last() else {
        return Err(
            Diagnostic::error(span, format!("`{provider}` needs a binary and a function")).with_help(help)
        );
    };
    let path = match elf::resolve_library(path) {
        Ok(path) => path,
        Err(e) => return missing::skip_or_fail(Diagnostic::error(span, e).with_help(help), options),
    };
    let file = elf::load(&path, &options.debug_dirs).map_err(|e| Diagnostic::error(span, e))?;
    let offset_of = |address: u64| {
        file.file_offset(address).ok_or_else(|| {
            Diagnostic::error(
                span,
                format!("address {address:#x} is in no loadable segment of {}", path.display()),
            )
        })
    };
    // A bare address: `uprobe:/bin/x:0x1234` (for stripped binaries).
    if let Some(hex) = target.strip_prefix("0x") {
        let address = u64::from_str_radix(hex, 16)
            .map_err(|_| Diagnostic::error(span, format!("`{target}` is not an address")))?;
        let offset = offset_of(address)?;
        refuse_misread(&path, target, offset, span)?;
        let mode = trigger::attach_mode(&kernel.features);
        let function = (target.to_string(), None);
        return Ok(vec![one_function(&path, function, offset, retprobe, mode, span)]);
    }
    let (pattern, extra) = match target.split_once('+') {
        Some((symbol, offset)) => {
            let extra = super::numbers::attach_number(offset)
                .ok_or_else(|| Diagnostic::error(span, format!("`{offset}` is not an offset")))?;
            (symbol, extra)
        }
        None => (target, 0),
    };
    let mut functions = vec![];
    let mut offsets = vec![];
    for symbol in file.functions().iter().filter(|s| wildcard::matches(pattern, &s.name)) {
        functions.push(symbol.name.clone());
        offsets.push(offset_of(symbol.address)? + extra);
        if !wildcard::has_wildcard(pattern) {
            break;
        }
    }
    if functions.is_empty() {
        let near = match wildcard::has_wildcard(pattern) {
            false => crate::lang::suggest::closest(pattern, file.functions().iter().map(|s| s.name.as_str())),
            true => None,
        };
        let near = near.map(|near| format!(" (did you mean `{near}`?)")).unwrap_or_default();
        let problem =
            Diagnostic::error(span, format!("{} has no function `{pattern}`{near}", path.display()))
                .with_help(format!(
                    "list its functions with `steadytrace -l '{provider}:{}:*'`",
                    path.display()
                ));
        return missing::skip_or_fail(problem, options);
    }
    if let ([function], [offset]) = (&functions[..], &offsets[..]) {
        if !wildcard::has_wildcard(pattern) {
            refuse_misread(&path, function, *offset, span)?;
        }
    }
    // How uprobes attach: uprobe_multi links where the kernel has them (`trigger::attach_mode`).
    let mode = trigger::attach_mode(&kernel.features);
    if wildcard::has_wildcard(pattern) && mode == AttachMode::UprobeMulti {
        let name = format!("{provider}:{}:{target}", path.display());
        let pattern = pattern.to_string();
        let (functions, offsets) = (functions.into(), offsets.into());
        let multi = UprobeMulti { path, pattern, extra, functions, offsets, retprobe };
        return Ok(vec![AttachPoint::new(multi, name, span)]);
    }
    Ok(functions
        .into_iter()
        .zip(offsets)
        .map(|(function, offset)| one_function(&path, (function, Some(extra)), offset, retprobe, mode, span))
        .collect())
}

/// `uprobe:BINARY@SOURCE`: one probe at the address of the line's code. Named `uprobe:PATH:ADDRESS`
/// with the address in decimal, and `func` is the function holding the line, as in bpftrace 0.27.1.
fn resolve_source_line(
    binary: &str,
    source: &str,
    retprobe: bool,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let help = "write `uprobe:BINARY@FILE:LINE[:COLUMN]`, e.g. `uprobe:/usr/bin/bash@readline.c:362`";
    if retprobe {
        return Err(Diagnostic::error(
            span,
            "a uretprobe cannot be on a source line: it fires where a function returns",
        )
        .with_help(help));
    }
    let source = SourceLine::parse(source).map_err(|e| Diagnostic::error(span, e).with_help(help))?;
    let path = match elf::resolve_library(binary) {
        Ok(path) => path,
        Err(e) => return missing::skip_or_fail(Diagnostic::error(span, e).with_help(help), options),
    };
    let file = elf::load(&path, &options.debug_dirs).map_err(|e| Diagnostic::error(span, e))?;
    let address =
        source_line::address(&path, &source, &options.debug_dirs).map_err(|e| Diagnostic::error(span, e))?;
    let offset = file.file_offset(address).ok_or_else(|| {
        Diagnostic::error(
            span,
            format!("{source} is at {address:#x}, in no loadable segment of {}", path.display()),
        )
    })?;
    refuse_misread(&path, &source.to_string(), offset, span)?;
    let (function, into_function) = file
        .functions()
        .iter()
        .filter(|f| f.address <= address && address - f.address < f.size)
        .min_by_key(|f| f.size)
        .map_or_else(|| (format!("{address:#x}"), None), |f| (f.name.clone(), Some(address - f.address)));
    let name = format!("uprobe:{}:{address}", path.display());
    let mode = trigger::attach_mode(&kernel.features);
    let uprobe = Uprobe { path, offset, retprobe, function, into_function, mode };
    Ok(vec![AttachPoint::new(uprobe, name, span)])
}

/// A function (or address) named alone whose first instruction the kernel would misread
/// (`bpf::uprobe::misread_at`) is an error at its attach point; a wildcard only skips it, with a warning.
fn refuse_misread(path: &Path, what: &str, offset: u64, span: Span) -> Result<(), Diagnostic> {
    if !bpf::uprobe::misread_at(crate::apk::file_on_disk(path), offset) {
        return Ok(());
    }
    Err(Diagnostic::error(
        span,
        format!(
            "`{what}` starts with an AVX (VEX/EVEX-encoded) instruction, which the kernel's uprobes take for \
             another one: a uprobe there would run wrongly in every process that runs it"
        ),
    )
    .with_help(format!("probe an instruction further in (`{what}+OFFSET`), or the functions that call it")))
}

/// A probe on one function (or address) of `path`, `function` with how far into its symbol the probe is
/// (`None` for an address).
fn one_function(
    path: &Path,
    (function, into_function): (String, Option<u64>),
    offset: u64,
    retprobe: bool,
    mode: AttachMode,
    span: Span,
) -> AttachPoint {
    let name = format!("{}:{}:{function}", provider_name(retprobe), path.display());
    let path = path.to_path_buf();
    AttachPoint::new(Uprobe { path, offset, retprobe, function, into_function, mode }, name, span)
}
