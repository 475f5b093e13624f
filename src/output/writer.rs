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
