//! Putting a compiled script into the kernel: maps created, programs loaded (with the verifier's
//! reasons pointed back at the script), the program array filled, the dispatcher attached.

use super::plan::Plan;
use super::{system, Failure};
use crate::codegen::{Compiled, FixedMap, ProgramCode};
use crate::lang::Diagnostic;
use crate::probes::{trigger, Schedule};
use bpf::{AttachMode, Map, ProgType, Program, Uprobe};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

/// How a loaded probe is made to run; cloned into the timer thread for interval probes.
#[derive(Clone)]
pub enum Firing {
    /// `BPF_PROG_TEST_RUN`: the program runs in the calling thread when asked.
    OnRequest(Arc<Program>),
    /// A call of the trigger function with this slot; the program sits in the program array.
    Trigger(u64),
    /// The kernel fires it: the program is attached to perf events (see `PerfProbes`), a tracepoint, a
    /// uprobe or a kprobe (see `attach`).
    Kernel(Arc<Program>),
}

/// Everything the kernel holds for a running script; dropping it detaches and frees it all.
pub struct Loaded {
    pub maps: Vec<Map>,
    /// One per compiled program, in the same order.
    pub firings: Vec<Firing>,
    /// The uprobe mechanism, when any probe fires through the trigger.
    pub uprobe_mode: Option<AttachMode>,
    /// Programs in the program array: kept so their slots stay valid for the whole run.
    _in_array: Vec<Program>,
    /// The one uprobe; dropped last, when the run is over.
    _dispatcher: Option<Uprobe>,
}

impl Firing {
    /// Runs the probe now, in the calling thread.
    pub fn fire(&self) -> io::Result<()> {
        match self {
            // The raw tracepoint context is an array of arguments; these probes have none.
            Firing::OnRequest(program) => program.run(8).map(drop),
            Firing::Trigger(slot) => {
                ::trigger::fire(*slot);
                Ok(())
            }
            Firing::Kernel(_) => Ok(()),
        }
    }

    /// The program, when it runs on request: only then is its return value known.
    pub fn on_request(&self) -> Option<&Program> {
        match self {
            Firing::OnRequest(program) => Some(program),
            _ => None,
        }
    }
}

impl Loaded {
    /// Runs every probe of `schedule` (BEGIN, END, SIGUSR1's), in script order.
    pub fn fire(&self, compiled: &Compiled, plan: &Plan, schedule: Schedule) -> Result<(), Failure> {
        for index in plan.programs(schedule) {
            let name = &compiled.programs[index].point.name;
            self.firings[index].fire().map_err(|e| system(&format!("cannot run {name}"), e))?;
        }
        Ok(())
    }
}

/// Creates the maps (the ring buffer of `ring_bytes`) and loads the programs of `compiled`. BEGIN, END and
/// interval probes are fired by steadytrace itself (unless the perf interval engine makes the kernel fire
/// intervals), as `plan` says; every other probe is fired by the kernel.
pub fn load(compiled: &Compiled, plan: &Plan, ring_bytes: u32) -> Result<Loaded, Failure> {
    let maps = compiled
        .maps
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            let sized;
            let spec = match index == FixedMap::Events.index() {
                true => {
                    sized = bpf::MapSpec { max_entries: ring_bytes, ..spec.clone() };
                    &sized
                }
                false => spec,
            };
            Map::create(spec).map_err(|e| match token_refusal(&e) {
                Some(delegates) => Failure::Other(format!(
                    "cannot create the BPF map `{}`: the BPF token does not delegate `{}` maps: the host must \
                     add it to delegate_maps (the token has {delegates}; docs/CONTAINERS.md lists what each \
                     probe needs)",
                    spec.name,
                    spec.kind.delegation_name()
                )),
                None => system(&format!("cannot create the BPF map `{}`", spec.name), e),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let fds: Vec<BorrowedFd<'_>> = maps.iter().map(|m| m.as_fd()).collect();

    let on_request = trigger::on_request_supported(&compiled.features);
    let uprobe_mode =
        (!on_request && plan.fires_while_tracing()).then(|| trigger::attach_mode(&compiled.features));

    let mut firings = Vec::with_capacity(compiled.programs.len());
    let mut in_array = vec![];
    for (slot, code) in compiled.programs.iter().enumerate() {
        if !plan.fired_by_us(slot) {
            let program = load_one(code, slot, code.prog_type, code.point.provider.attach_mode(), &fds)?;
            firings.push(Firing::Kernel(Arc::new(program)));
            continue;
        }
        match (code.prog_type, uprobe_mode) {
            // A test's verdict is its return value, which only a run on request hands back.
            (ProgType::RawTracepoint, _) if on_request || plan.on_demand(slot) => {
                let program = load_one(code, slot, code.prog_type, AttachMode::PerfEvent, &fds)?;
                firings.push(Firing::OnRequest(Arc::new(program)));
            }
            // These probes never read their context, so their code also loads as a uprobe program.
            (_, Some(mode)) => {
                let program = load_one(code, slot, ProgType::Kprobe, mode, &fds)?;
                maps[FixedMap::Programs.index()]
                    .update(&(slot as u32).to_ne_bytes(), &program.as_fd().as_raw_fd().to_ne_bytes())
                    .map_err(|e| system("cannot fill the program array", e))?;
                in_array.push(program);
                firings.push(Firing::Trigger(slot as u64));
            }
            (_, None) => unreachable!("a program not run on request makes the trigger needed"),
        }
    }

    let dispatcher = match uprobe_mode {
        Some(mode) => {
            let program =
                bpf::load("dispatch", ProgType::Kprobe, mode, &compiled.dispatcher, &fds).map_err(|e| {
                    Failure::Other(format!(
                        "the kernel refused steadytrace's dispatcher program: {}\n{}",
                        e.reason, e.log
                    ))
                })?;
            Some(
                trigger::attach(program.as_fd(), mode)
                    .map_err(|e| system("cannot attach a uprobe to steadytrace's trigger function", e))?,
            )
        }
        None => None,
    };
    Ok(Loaded { maps, firings, uprobe_mode, _in_array: in_array, _dispatcher: dispatcher })
}

/// What the BPF token delegates, when the kernel refused a call (EPERM) that it did not cover.
fn token_refusal(error: &io::Error) -> Option<&'static str> {
    // libbpf-rs's map errors keep the kind, not the errno.
    let refused =
        error.raw_os_error() == Some(libc::EPERM) || error.kind() == io::ErrorKind::PermissionDenied;
    match (refused, crate::bpf_token::state()) {
        (true, crate::bpf_token::Token::InUse { delegates, .. }) => Some(delegates),
        _ => None,
    }
}

/// The name a program's function goes by in its BTF, as bpftrace names them: the probe's name with `_` for
/// each character a C name cannot hold, then its place among the programs (`interval_us_100000_1`).
/// `fentry:bpf:NAME` finds the program by it.
fn function_name(probe: &str, slot: usize) -> String {
    let name: String =
        probe.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(100).collect();
    format!("{name}_{}", slot + 1)
}

fn load_one(
    code: &ProgramCode,
    slot: usize,
    prog_type: ProgType,
    mode: AttachMode,
    maps: &[BorrowedFd<'_>],
) -> Result<Program, Failure> {
    let function = function_name(&code.point.name, slot);
    bpf::load_named(code.point.provider.kind(), &function, prog_type, mode, &code.code, maps).map_err(|e| {
        // A token's refusal comes before the verifier runs: no log.
        if let (Some(delegates), true) = (token_refusal(&e.error), e.log.trim().is_empty()) {
            let diagnostic = Diagnostic::error(
                code.point.span,
                format!(
                    "the BPF token does not let this probe's program load: it needs `{}` in the host's \
                     delegate_progs and `{}` in its delegate_attachs (the token has {delegates})",
                    prog_type.delegation_name(),
                    mode.delegation_name()
                ),
            )
            .with_help("docs/CONTAINERS.md lists what each probe needs; =any delegates everything");
            return Failure::Rejected { diagnostic, log: e.log };
        }
        let span = e.insn.and_then(|i| code.span_of(i)).unwrap_or(code.point.span);
        let diagnostic =
            Diagnostic::error(span, format!("the kernel's BPF verifier rejected this: {}", e.reason))
                .with_help(format!(
                    "({}) run with -v to see the verifier's whole log, or -d for the instructions",
                    e.error
                ));
        Failure::Rejected { diagnostic, log: e.log }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_named_after_their_probe_as_bpftrace_names_them() {
        assert_eq!(function_name("interval:us:100000", 0), "interval_us_100000_1");
        assert_eq!(function_name("uprobe:./t/u:f", 2), "uprobe___t_u_f_3");
    }
}
