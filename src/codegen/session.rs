//! Kprobe sessions (Linux 6.10): a kprobe and a kretprobe of the same function, compiled apart, joined into one
//! program on one kprobe session link (`bpf::session::join`). The kretprobe keeps its place among the
//! programs (maps and firings are counted per place) with a program that does nothing and attaches nowhere.

use super::{Compiled, ProgramCode};
use crate::probes::kprobe_session::{KprobeSession, SessionPart, SessionReturn};
use bpf::{Asm, Reg};
use std::sync::Arc;

/// Joins each kprobe with a kretprobe of the same function, where `is_return` gives the BTF id of the kernel
/// function `bpf_session_is_return` (asked only when some pair is found; `None`: the kernel has no kprobe
/// sessions). Returns how many pairs were joined.
pub fn pair(compiled: &mut Compiled, is_return: impl FnOnce() -> Option<u32>) -> usize {
    let parts: Vec<Option<SessionPart>> =
        compiled.programs.iter().map(|p| p.point.provider.session_part()).collect();
    let mut pairs = vec![];
    let mut taken = vec![false; parts.len()];
    for (entry, part) in parts.iter().enumerate() {
        let Some(part) = part.as_ref().filter(|p| !p.retprobe) else { continue };
        let partner = (0..parts.len()).find(|&exit| {
            !taken[exit] && parts[exit].as_ref().is_some_and(|p| p.retprobe && p.function == part.function)
        });
        if let Some(exit) = partner {
            taken[exit] = true;
            pairs.push((entry, exit, part.function.clone()));
        }
    }
    if pairs.is_empty() {
        return 0;
    }
    let Some(is_return) = is_return() else { return 0 };
    let mut joined = 0;
    for (entry, exit, function) in pairs {
        let programs = &mut compiled.programs;
        let Some(code) = bpf::session::join(&programs[entry].code, &programs[exit].code, is_return) else {
            continue;
        };
        let exit_at = bpf::session::ENTRY_AT + programs[entry].code.insns.len();
        let mut spans = moved(&programs[entry], bpf::session::ENTRY_AT);
        spans.extend(moved(&programs[exit], exit_at));
        let (entry_name, exit_name) = (programs[entry].point.name.clone(), programs[exit].point.name.clone());
        let session = KprobeSession { function, entry: entry_name.clone(), exit: exit_name };
        programs[entry].point.provider = Arc::new(session);
        programs[entry].code = code;
        programs[entry].spans = spans;
        programs[exit].point.provider = Arc::new(SessionReturn { entry: entry_name });
        programs[exit].code = nothing();
        programs[exit].spans = vec![];
        joined += 1;
    }
    joined
}

/// `program`'s statement spans with their instructions `by` further on.
fn moved(program: &ProgramCode, by: usize) -> Vec<(usize, crate::lang::Span)> {
    program.spans.iter().map(|&(at, span)| (at + by, span)).collect()
}

/// A program that returns at once.
fn nothing() -> bpf::Code {
    let mut asm = Asm::new();
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    asm.finish().expect("two instructions assemble")
}
