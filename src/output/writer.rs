//! The two output formats, behind one interface: bpftrace's text, and its `-f json` lines.

use super::value::{MapSnapshot, Value};
use super::{json, text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// Text, except that maps keyed by one stack print as folded lines for flame-graph tools
    /// (`root;caller;callee count`, offsets dropped so that samples of one function merge).
    Folded,
}

impl Format {
    pub fn printf(self, message: &[u8]) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => message.to_vec(),
            Format::Json => json::message(json::MessageKind::Printf, message),
        }
    }

    /// `errorf()`/`warnf()`: in text `file:line:col-endcol: ERROR: message` for stderr (one trailing
    /// newline of the message dropped), in JSON a record of the output; `(bytes, for stderr)`.
    pub fn log(self, log: &crate::codegen::record::Log, message: &[u8]) -> (Vec<u8>, bool) {
        match self {
            Format::Text | Format::Folded => {
                let message = message.strip_suffix(b"\n").unwrap_or(message);
                let severity = if log.error { "ERROR" } else { "WARNING" };
                let head = format!("{}: {severity}: ", log.location.text);
                ([head.as_bytes(), message, b"\n", log.expansions.as_bytes()].concat(), true)
            }
            Format::Json => (json::log(log, message), false),
        }
    }

    /// With `-k`, a probe read that failed, returning `ret`: in text bpftrace 0.27.1's warning for stderr
    /// (`stdin:1:77-80: WARNING: Bad address`, `Additional Info - helper: probe_read_kernel, retcode: -14`,
    /// the line and `~` under the expression), in JSON its `helper_error` record of the output;
    /// `(bytes, for stderr)`.
    pub fn read_failed(self, read: &crate::codegen::record::ReadFailure, ret: i64) -> (Vec<u8>, bool) {
        let reason = error_text(ret);
        match self {
            Format::Text | Format::Folded => {
                let text = format!(
                    "{}: WARNING: {reason}\nAdditional Info - helper: {}, retcode: {ret}\n{}",
                    read.location.text, read.helper, read.marked
                );
                (text.into_bytes(), true)
            }
            Format::Json => (json::helper_error(read, &reason, ret), false),
        }
    }

    /// Records lost since the last report: in JSON a record of the output; in text `None`, for current
    /// bpftrace writes `Lost N events` to stderr.
    pub fn lost_events(self, lost: u64) -> Option<Vec<u8>> {
        match self {
            Format::Json => Some(super::json::lost_events(lost)),
            Format::Text | Format::Folded => None,
        }
    }

    /// `cat()`: the file's contents as they are; `{"type": "cat", "data": ...}` in JSON.
    pub fn cat(self, contents: &[u8]) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => contents.to_vec(),
            Format::Json => json::message(json::MessageKind::Cat, contents),
        }
    }

    /// `system()`: what the command printed, as it printed it in text; `{"type": "syscall", "data": ...}`
    /// in JSON.
    pub fn system(self, output: &[u8]) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => output.to_vec(),
            Format::Json => json::message(json::MessageKind::Syscall, output),
        }
    }

    /// `join()`: the joined strings, a line of their own in text; `{"type": "join", "data": ...}` in JSON.
    pub fn join(self, joined: &[u8]) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => [joined, b"\n"].concat(),
            Format::Json => json::message(json::MessageKind::Join, joined),
        }
    }

    pub fn time(self, message: &[u8]) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => message.to_vec(),
            Format::Json => json::message(json::MessageKind::Time, message),
        }
    }

    pub fn map(self, map: &MapSnapshot, top: Option<usize>, div: Option<u64>) -> Vec<u8> {
        match self {
            Format::Text => text::print_map(map, top, div),
            Format::Json => json::print_map(map, top, div),
            Format::Folded => folded(map).unwrap_or_else(|| text::print_map(map, top, div)),
        }
    }

    pub fn maps_at_exit(self, maps: &[MapSnapshot]) -> Vec<u8> {
        match self {
            Format::Text => text::print_maps_at_exit(maps),
            Format::Json => json::print_maps_at_exit(maps),
            Format::Folded => {
                let (stacks, others): (Vec<_>, Vec<_>) =
                    maps.iter().cloned().partition(|m| folded(m).is_some());
                let mut out: Vec<u8> = stacks.iter().filter_map(folded).flatten().collect();
                if !others.is_empty() {
                    out.extend(text::print_maps_at_exit(&others));
                }
                out
            }
        }
    }

    pub fn value(self, value: &Value) -> Vec<u8> {
        match self {
            Format::Text | Format::Folded => text::print_value(value),
            Format::Json => json::print_value(value),
        }
    }
}

/// A stack-keyed map as folded lines, offsets dropped and the lines that become equal merged (samples at
/// different offsets of the same functions are one stack in a flame graph).
fn folded(map: &MapSnapshot) -> Option<Vec<u8>> {
    let lines = text::folded(map, true)?;
    let mut merged: std::collections::BTreeMap<Vec<u8>, u64> = std::collections::BTreeMap::new();
    for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let at = line.iter().rposition(|&b| b == b' ')?;
        let count: u64 = std::str::from_utf8(&line[at + 1..]).ok()?.parse().ok()?;
        *merged.entry(line[..at].to_vec()).or_default() += count;
    }
    let mut out = Vec::new();
    for (stack, count) in merged {
        out.extend_from_slice(&stack);
        out.extend_from_slice(format!(" {count}\n").as_bytes());
    }
    Some(out)
}

/// The C library's text for the error a helper returned (`-14`: `Bad address`), as bpftrace's `strerror`.
fn error_text(ret: i64) -> String {
    let code = i32::try_from(-ret).unwrap_or(i32::MAX);
    let text = std::io::Error::from_raw_os_error(code).to_string();
    match text.strip_suffix(&format!(" (os error {code})")) {
        Some(text) => text.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::record::{Location, ReadFailure};

    fn failure() -> ReadFailure {
        ReadFailure {
            helper: "probe_read_kernel",
            span: crate::lang::Span::new(15, 18),
            location: Location { file: "stdin".into(), line: 1, column: 16, text: "stdin:1:16-19".into() },
            marked: "BEGIN { print(*$p); }\n              ~~~\n".into(),
        }
    }

    #[test]
    fn a_failed_read_is_warned_of_as_bpftrace_does() {
        let (text, for_stderr) = Format::Text.read_failed(&failure(), -34);
        assert!(for_stderr);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "stdin:1:16-19: WARNING: Numerical result out of range\n\
             Additional Info - helper: probe_read_kernel, retcode: -34\n\
             BEGIN { print(*$p); }\n              ~~~\n"
        );
        let (json, for_stderr) = Format::Json.read_failed(&failure(), -14);
        assert!(!for_stderr);
        assert_eq!(
            String::from_utf8(json).unwrap(),
            "{\"type\": \"helper_error\", \"msg\": \"Bad address\", \"helper\": \"probe_read_kernel\", \
             \"retcode\": -14, \"filename\": \"stdin\", \"line\": 1, \"col\": 16}\n"
        );
    }
}
