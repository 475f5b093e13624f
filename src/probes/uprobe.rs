//! `uprobe:PATH:SYMBOL[+OFFSET]`, `uprobe:PATH:ADDRESS` and `uretprobe:` (aliases `u:`, `ur:`):
//! functions of a binary or library, found through its ELF symbols. PATH may be a library name
//! (`libc`) or a command (`bash`); SYMBOL may have wildcards. A wildcard is one probe on all matching
//! functions through a uprobe_multi link where the kernel has them, else one probe per function.

use super::{elf, trigger, wildcard, AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};
use bpf::AttachMode;
use std::path::Path;
use std::sync::OnceLock;

pub fn parse(retprobe: bool, rest: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    let provider = if retprobe { "uretprobe" } else { "uprobe" };
    let help = format!("write `{provider}:PATH:FUNCTION`, e.g. `{provider}:/usr/bin/bash:readline`");
    let Some((path, target)) = rest.rsplit_once(':') else {
        return Err(
            Diagnostic::error(span, format!("`{provider}` needs a binary and a function")).with_help(help)
        );
    };
    let path = elf::resolve_library(path).map_err(|e| Diagnostic::error(span, e).with_help(help.clone()))?;
    let file = elf::load(&path).map_err(|e| Diagnostic::error(span, e))?;
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
        return Ok(vec![one_function(&path, target.to_string(), offset_of(address)?, retprobe, span)]);
    }
    let (pattern, extra) = match target.split_once('+') {
        Some((symbol, offset)) => {
            let extra = parse_number(offset)
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
        return Err(Diagnostic::error(span, format!("{} has no function `{pattern}`", path.display()))
            .with_help(format!(
                "list its functions with `steadytrace -l '{provider}:{}:*'`",
                path.display()
            )));
    }
    if wildcard::has_wildcard(pattern) && multi_link() {
        return Ok(vec![AttachPoint {
            name: format!("{provider}:{}:{target}", path.display()),
            kind: ProbeKind::UprobeMulti {
                path,
                functions: functions.into(),
                offsets: offsets.into(),
                retprobe,
            },
            span,
        }]);
    }
    Ok(functions
        .into_iter()
        .zip(offsets)
        .map(|(function, offset)| one_function(&path, function, offset, retprobe, span))
        .collect())
}

/// A probe on one function (or address) of `path`.
fn one_function(path: &Path, function: String, offset: u64, retprobe: bool, span: Span) -> AttachPoint {
    let provider = if retprobe { "uretprobe" } else { "uprobe" };
    AttachPoint {
        name: format!("{provider}:{}:{function}", path.display()),
        kind: ProbeKind::Uprobe { path: path.to_path_buf(), offset, retprobe, function },
        span,
    }
}

/// The points with each uprobe_multi point replaced by one probe per function: see
/// [`super::per_function`].
pub fn per_function(points: Vec<AttachPoint>) -> Vec<AttachPoint> {
    points
        .into_iter()
        .flat_map(|point| match &point.kind {
            ProbeKind::UprobeMulti { path, functions, offsets, retprobe } => functions
                .iter()
                .zip(offsets.iter())
                .map(|(function, &offset)| {
                    one_function(path, function.clone(), offset, *retprobe, point.span)
                })
                .collect(),
            _ => vec![point],
        })
        .collect()
}

/// Whether wildcards attach through uprobe_multi links: where the kernel has them (asked once), unless
/// `STEADYTRACE_UPROBE_ATTACH=perf` (see [`trigger::attach_mode`]).
fn multi_link() -> bool {
    static MULTI: OnceLock<bool> = OnceLock::new();
    *MULTI.get_or_init(|| trigger::attach_mode() == AttachMode::UprobeMulti)
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}
