//! `uprobe:PATH:SYMBOL[+OFFSET]`, `uprobe:PATH:ADDRESS` and `uretprobe:` (aliases `u:`, `ur:`):
//! functions of a binary or library, found through its ELF symbols. PATH may be a library name
//! (`libc`) or a command (`bash`); SYMBOL may have wildcards.

use super::{elf, wildcard, AttachPoint, ProbeKind};
use crate::lang::{Diagnostic, Span};

pub fn parse(retprobe: bool, rest: &str, span: Span) -> Result<Vec<AttachPoint>, Diagnostic> {
    let provider = if retprobe { "uretprobe" } else { "uprobe" };
    let help = format!("write `{provider}:PATH:FUNCTION`, e.g. `{provider}:/usr/bin/bash:readline`");
    let Some((path, target)) = rest.rsplit_once(':') else {
        return Err(
            Diagnostic::error(span, format!("`{provider}` needs a binary and a function")).with_help(help)
        );
    };
    let path = elf::resolve_library(path).map_err(|e| Diagnostic::error(span, e).with_help(help.clone()))?;
    let point = |function: String, offset: u64| AttachPoint {
        name: format!("{provider}:{}:{function}", path.display()),
        kind: ProbeKind::Uprobe { path: path.clone(), offset, retprobe, function },
        span,
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
