//! `fentry:bpf:[ID:]FUNCTION` and `fexit:bpf:...`: a trampoline on a loaded BPF program, or on one of its
//! callbacks, found by the name its BTF gives the function (bpftrace names a program's function after its
//! probe, `interval_us_100000_1`, and so does steadytrace); ID narrows it to one program. Only programs
//! loaded with BTF function information can be traced. `args` are not offered, as in bpftrace; `retval` of
//! fexit is the function's 64-bit return value.

use super::{missing, wildcard, Options, Provider};
use super::{AttachError, AttachPoint, AttachTarget, Attachment, Context, Func, Retval};
use crate::lang::{Diagnostic, Span};
use bpf::prog::{loaded_functions, LoadedFunction, TrampolineTarget};
use bpf::{AttachMode, ProgType};
use std::os::fd::BorrowedFd;

/// Where fexit finds the return value: the kernel's trampoline saves a BPF program's function as one of
/// unknown arguments (its BTF counts for nothing there: measured on 6.12), the 5 argument registers, then the
/// return value.
const RETVAL: i16 = 8 * 5;

/// A function of a loaded BPF program, at its entry or its exit.
#[derive(Debug)]
pub struct FentryBpf {
    function: LoadedFunction,
    exit: bool,
}

/// Reads `[ID:]FUNCTION` (what follows `fentry:bpf:`) and finds the functions it names.
pub fn resolve(
    provider: &'static str,
    rest: &str,
    span: Span,
    options: &Options,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let exit = provider == "fexit";
    let (program, function) = match rest.split_once(':') {
        Some((id, function)) => {
            let id = id.parse::<u32>().map_err(|_| {
                Diagnostic::error(span, format!("`{id}` is not a BPF program's id"))
                    .with_help(format!("write `{provider}:bpf:FUNCTION` or `{provider}:bpf:ID:FUNCTION`"))
            })?;
            (Some(id), function)
        }
        None => (None, rest),
    };
    if function.is_empty() {
        return Err(Diagnostic::error(span, format!("`{provider}:bpf` needs a BPF program's function"))
            .with_help(format!(
                "`steadytrace -l '{provider}:bpf:*'` lists the functions of the loaded programs"
            )));
    }
    let loaded = loaded_functions().map_err(|e| {
        Diagnostic::error(span, format!("cannot list the loaded BPF programs ({e})"))
            .with_help("listing BPF programs needs CAP_SYS_ADMIN")
    })?;
    let found: Vec<LoadedFunction> = loaded
        .into_iter()
        .filter(|f| program.is_none_or(|id| f.program_id == id) && wildcard::matches(function, &f.name))
        .collect();
    if found.is_empty() {
        let problem = Diagnostic::error(span, format!("no loaded BPF program has a function `{function}`"))
            .with_help(format!(
                "`steadytrace -l '{provider}:bpf:*'` lists them; only programs loaded with BTF function information can be traced"
            ));
        return missing::skip_or_fail(problem, options);
    }
    Ok(found
        .into_iter()
        .map(|function| {
            let name = format!("{provider}:bpf:{}:{}", function.program_id, function.name);
            AttachPoint::new(FentryBpf { function, exit }, name, span)
        })
        .collect())
}

/// `fentry:bpf:ID:FUNCTION` of every function of the loaded programs, for `-l`.
pub fn listed() -> Vec<String> {
    loaded_functions()
        .unwrap_or_default()
        .into_iter()
        .map(|f| format!("bpf:{}:{}", f.program_id, f.name))
        .collect()
}

impl Provider for FentryBpf {
    fn on_trampoline(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        if self.exit {
            "fexit"
        } else {
            "fentry"
        }
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Tracing
    }

    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(&self.function.name))
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::Trampoline {
            btf_id: self.function.btf_id,
            exit: self.exit,
            target: TrampolineTarget::Program(self.function.program_id),
        }
    }

    fn context(&self) -> Context {
        Context {
            arguments: None,
            retval: self.exit.then_some(Retval { offset: RETVAL, size: 8, signed: true }),
            func: Some(Func::Name(self.function.name.clone())),
            user_addresses: false,
            ctx_record: None,
        }
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let what = format!(
            "cannot attach `{}:bpf:{}:{}`",
            self.kind(),
            self.function.program_id,
            self.function.name
        );
        let link =
            bpf::trampoline::attach(program, self.exit).map_err(|error| AttachError::Os { what, error })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        format!(
            "runs on a BPF trampoline at the {} of BPF program {}'s function {}",
            if self.exit { "exit" } else { "entry" },
            self.function.program_id,
            self.function.name
        )
    }
}
