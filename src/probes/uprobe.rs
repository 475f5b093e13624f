//! `uprobe:PATH:SYMBOL[+OFFSET]`, `uprobe:PATH:ADDRESS` and `uretprobe:` (aliases `u:`, `ur:`):
//! functions of a binary or library, found through its ELF symbols. PATH may be a library name
//! (`libc`) or a command (`bash`); SYMBOL may have wildcards.

use super::{elf, wildcard, Arguments, AttachError, AttachPoint, AttachTarget, Attachment, Context, Func};
use super::{Options, Provider};
use crate::lang::{Diagnostic, Span};
use bpf::{AttachMode, ProgType, UprobeTarget};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::sync::OnceLock;

/// A function at `offset` in the file `path` (`function` names it, for `func` and `probe`).
#[derive(Debug)]
pub struct Uprobe {
    path: PathBuf,
    offset: u64,
    retprobe: bool,
    function: String,
}

/// How the script's uprobes attach: uprobe_multi links where the kernel has them (asked once).
fn attach_mode() -> AttachMode {
    static MODE: OnceLock<AttachMode> = OnceLock::new();
    *MODE.get_or_init(super::trigger::attach_mode)
}

impl Provider for Uprobe {
    fn kind(&self) -> &'static str {
        "uprobe"
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Kprobe
    }

    fn attach_mode(&self) -> AttachMode {
        attach_mode()
    }

    fn context(&self) -> Context {
        Context {
            arguments: (!self.retprobe).then_some(Arguments::Registers),
            retval: self.retprobe,
            func: Some(Func::Name(self.function.clone())),
            user_addresses: true,
        }
    }

    fn attach(
        &self,
        program: BorrowedFd<'_>,
        target: &AttachTarget,
    ) -> Result<Option<Attachment>, AttachError> {
        let uprobe = UprobeTarget {
            path: &self.path,
            offset: self.offset,
            retprobe: self.retprobe,
            pid: target.pid,
            cpu: target.cpu,
        };
        let attached =
            bpf::Uprobe::attach(program, attach_mode(), &uprobe).map_err(|error| AttachError::Os {
                what: format!("cannot attach a uprobe to `{}` in {}", self.function, self.path.display()),
                error,
            })?;
        Ok(Some(Attachment::new(attached)))
    }

    fn describe(&self) -> String {
        match attach_mode() {
            AttachMode::UprobeMulti => "runs on a uprobe_multi link".into(),
            _ => "runs on a perf uprobe event".into(),
        }
    }
}

pub fn resolve(written: &str, rest: &str, span: Span, _: &Options) -> Result<Vec<AttachPoint>, Diagnostic> {
    let retprobe = matches!(written, "uretprobe" | "ur");
    let provider = if retprobe { "uretprobe" } else { "uprobe" };
    let help = format!("write `{provider}:PATH:FUNCTION`, e.g. `{provider}:/usr/bin/bash:readline`");
    let Some((path, target)) = rest.rsplit_once(':') else {
        return Err(
            Diagnostic::error(span, format!("`{provider}` needs a binary and a function")).with_help(help)
        );
    };
    let path = elf::resolve_library(path).map_err(|e| Diagnostic::error(span, e).with_help(help.clone()))?;
    let point = |function: String, offset: u64| {
        let name = format!("{provider}:{}:{function}", path.display());
        AttachPoint::new(Uprobe { path: path.clone(), offset, retprobe, function }, name, span)
    };
    // A bare address: `uprobe:/bin/x:0x1234` (for stripped binaries).
    if let Some(hex) = target.strip_prefix("0x") {
        let address = u64::from_str_radix(hex, 16)
            .map_err(|_| Diagnostic::error(span, format!("`{target}` is not an address")))?;
        let offset = elf::file_offset(&path, address).map_err(|e| Diagnostic::error(span, e))?;
        return Ok(vec![point(target.to_string(), offset)]);
    }
    let (pattern, extra) = match target.split_once('+') {
        Some((symbol, offset)) => {
            let extra = parse_number(offset)
                .ok_or_else(|| Diagnostic::error(span, format!("`{offset}` is not an offset")))?;
            (symbol, extra)
        }
        None => (target, 0),
    };
    let symbols = elf::function_symbols(&path).map_err(|e| Diagnostic::error(span, e))?;
    let mut points = vec![];
    for symbol in symbols.iter().filter(|s| wildcard::matches(pattern, &s.name)) {
        let offset = elf::file_offset(&path, symbol.address).map_err(|e| Diagnostic::error(span, e))?;
        points.push(point(symbol.name.clone(), offset + extra));
        if !wildcard::has_wildcard(pattern) {
            break;
        }
    }
    if points.is_empty() {
        return Err(Diagnostic::error(span, format!("{} has no function `{pattern}`", path.display()))
            .with_help(format!(
                "list its functions with `steadytrace -l '{provider}:{}:*'`",
                path.display()
            )));
    }
    Ok(points)
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}
