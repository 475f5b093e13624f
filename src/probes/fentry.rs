//! `fentry:FUNCTION` and `fexit:FUNCTION` (aliases `kfunc:`, `kretfunc:`; `fentry:vmlinux:FUNCTION`): a
//! kernel function's entry and return through a BPF trampoline, the function found in the kernel's BTF.
//! `args.NAME` are its parameters, typed by its BTF prototype (a struct pointer reads members with
//! `->`); `retval` in fexit has the return type's width and sign. The context is an array of 64-bit
//! words: the arguments, then (fexit) the return value. A wildcard is one probe per matching function.

use super::Fields;
use super::{kernel_functions, missing, tracefs, wildcard, Options, Provider};
use super::{AttachError, AttachPoint, AttachTarget, Attachment, Context, Func, Retval};
use crate::kernel::traceable;
use crate::kernel::tracefs::FieldKind;
use crate::kernel::KernelFunction;
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{Diagnostic, Span};
use bpf::prog::TrampolineTarget;
use bpf::{AttachMode, ProgType};
use std::os::fd::BorrowedFd;
use std::sync::OnceLock;

/// Linux's internal "operation not supported" (errno 524), which reaches user space from arm64's trampolines.
const ENOTSUPP: i32 = bpf::uprobe::ENOTSUPP;

/// One kernel function, at its entry or its exit.
#[derive(Debug)]
pub struct Fentry {
    name: String,
    function: KernelFunction,
    /// The kernel module the function is in (its BTF holds `function`'s id), not `vmlinux`.
    module: Option<&'static str>,
    exit: bool,
    /// Matched by a wildcard: a function the kernel cannot patch is skipped with a warning, not an error.
    /// Where tracefs's list of the functions ftrace can patch cannot be read (a rootless container), the
    /// wildcard matches every function of the kernel's BTF that `/proc/kallsyms` names, a sixth of which
    /// (`__init` and notrace functions) cannot be patched.
    matched: bool,
}

fn provider_name(exit: bool) -> &'static str {
    if exit {
        "fexit"
    } else {
        "fentry"
    }
}

pub fn resolve(
    written: &str,
    rest: &Fields,
    span: Span,
    options: &Options,
    kernel: &KernelTypes,
) -> Result<Vec<AttachPoint>, Diagnostic> {
    let exit = matches!(written, "fexit" | "fr" | "kretfunc");
    let provider = provider_name(exit);
    let (module, function) = match rest.split_once(':') {
        Some(("bpf", program)) => {
            check_supported(provider, span)?;
            return super::fentry_bpf::resolve(provider, program, span, options);
        }
        Some((traceable::KERNEL, function)) => (None, function),
        Some((module, function)) => (Some(module), function),
        None => (None, &**rest),
    };
    if function.is_empty() {
        return Err(Diagnostic::error(span, format!("`{provider}` needs a kernel function"))
            .with_help(format!("for example `{provider}:do_nanosleep`")));
    }
    let module_types;
    let (types, module) = match module {
        None => (&kernel.vmlinux, None),
        Some(module) => {
            if wildcard::has_wildcard(module) {
                return Err(Diagnostic::error(
                    span,
                    format!("`{provider}` names one module, not a wildcard (`{module}`)"),
                )
                .with_help(format!(
                    "`steadytrace -l '{provider}:{module}:*'` lists the functions of the modules it matches"
                )));
            }
            if !kernel_functions::module_loaded(module) {
                let problem = Diagnostic::error(span, format!("module `{module}` is not loaded"))
                    .with_help(format!("load it first (`modprobe {module}`); `lsmod` lists the loaded ones"));
                return missing::skip_or_fail(problem, options);
            }
            module_types = Vmlinux::module(module).map_err(|why| {
                let kprobe = if provider == "fexit" { "kretprobe" } else { "kprobe" };
                Diagnostic::error(span, why)
                    .with_help(format!("`{kprobe}:{module}:FUNCTION` needs no BTF of the module"))
            })?;
            // Named in the program's attach mode, which is copied freely: one leak per module and process.
            let module: &'static str = Box::leak(module.to_string().into_boxed_str());
            (&module_types, Some(module))
        }
    };
    let matched = wildcard::has_wildcard(function);
    let names = if matched {
        // Only functions ftrace can patch have a trampoline; where it lists none, attaching finds out.
        let traceable = kernel_functions::probeable_functions(&kernel.vmlinux);
        let patchable =
            |f: &String| traceable::named(traceable, f).iter().any(|f| f.module.as_deref() == module);
        // A module's BTF read with the kernel's: the module's functions come after the kernel's types.
        let first_id = module.map_or(0, |_| kernel.vmlinux.last_type_id());
        let mut found: Vec<String> = types
            .kernel_function_names_from(first_id)
            .into_iter()
            .filter(|f| wildcard::matches(function, f))
            .filter(|f| traceable.is_empty() || patchable(f))
            .collect();
        found.sort();
        found.dedup();
        if found.is_empty() {
            let problem = Diagnostic::error(span, format!("no kernel function matches `{}`", &**rest));
            return missing::skip_or_fail(problem, options);
        }
        found
    } else {
        vec![function.to_string()]
    };
    let mut points = vec![];
    for name in names {
        let mut function = match types.kernel_function(&name) {
            Ok(function) => function,
            Err(e) => return missing::skip_or_fail(Diagnostic::error(span, e), options),
        };
        if module.is_some() {
            // The module's own structs are not among the kernel's types that reads look up: plain pointers.
            let kernel_types = kernel.vmlinux.last_type_id();
            for parameter in &mut function.parameters {
                if matches!(parameter.kind, FieldKind::RecordPointer { to } if to > kernel_types) {
                    parameter.kind = FieldKind::Pointer;
                }
            }
        }
        check_supported(provider, span)?;
        let written = module.map(|m| format!("{m}:{name}")).unwrap_or_else(|| name.clone());
        points.push(AttachPoint::new(
            Fentry { name: name.clone(), function, module, exit, matched },
            format!("{provider}:{written}"),
            span,
        ));
    }
    Ok(points)
}

/// Whether the kernel loads fentry programs at all, asked once (on the function the kernel keeps for testing
/// trampolines, not on one of the script's, which may be one no trampoline can patch): some kernels refuse
/// them with EPERM even to root, and a clear error beats a verifier message per probe.
fn check_supported(provider: &str, span: Span) -> Result<(), Diagnostic> {
    static SUPPORTED: OnceLock<Result<(), String>> = OnceLock::new();
    let answer = SUPPORTED.get_or_init(|| bpf::features::fentry().map_err(|e| e.to_string()));
    answer.clone().map_err(|error| {
        let (arch, since) = (bpf::arch::HOST.name, bpf::features::Feature::Fentry.since());
        Diagnostic::error(
            span,
            format!(
                "this kernel ({} on {arch}) refuses `{provider}` programs ({error}): its BPF trampolines cannot patch its functions",
                crate::kernel::release()
            ),
        )
        .with_help(format!("use `kprobe:FUNCTION` or `kretprobe:FUNCTION` (or a tracepoint: `steadytrace -l 'tracepoint:*'` lists them); {arch} kernels run `{provider}` probes from Linux {since}, where built with BPF trampolines"))
    })
}

impl Provider for Fentry {
    fn on_trampoline(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        provider_name(self.exit)
    }

    fn prog_type(&self) -> ProgType {
        ProgType::Tracing
    }

    /// libbpf finds the function's BTF id by the name the section gives.
    fn elf_section(&self) -> String {
        bpf::elf::section(self.prog_type(), self.attach_mode(), Some(&self.name))
    }

    fn attach_mode(&self) -> AttachMode {
        AttachMode::Trampoline {
            btf_id: self.function.btf_id,
            exit: self.exit,
            target: self.module.map_or(TrampolineTarget::Kernel, TrampolineTarget::Module),
        }
    }

    fn context(&self) -> Context {
        let after_arguments = 8 * self.function.parameters.len() as i16;
        let retval = self.function.returns.map(|(size, signed)| Retval {
            offset: after_arguments,
            size: size as u8,
            signed,
        });
        Context {
            arguments: None,
            // A void function has no return value to read.
            retval: retval.filter(|_| self.exit),
            func: Some(Func::Name(self.name.clone())),
            user_addresses: false,
            ctx_record: None,
        }
    }

    fn fields(&self, _: &Vmlinux) -> Option<Result<Vec<tracefs::Field>, String>> {
        Some(Ok(self.function.parameters.clone()))
    }

    fn fires_in_any_process(&self) -> bool {
        true
    }

    fn attach(&self, program: BorrowedFd<'_>, _: &AttachTarget) -> Result<Option<Attachment>, AttachError> {
        let what = format!("cannot attach `{}:{}`", provider_name(self.exit), self.name);
        let link = bpf::trampoline::attach(program, self.exit).map_err(|error| {
            // The C library has no name for the kernel-internal ENOTSUPP.
            let text = match error.raw_os_error() {
                Some(ENOTSUPP) => "operation not supported (ENOTSUPP, errno 524)".to_string(),
                _ => error.to_string(),
            };
            // Not the token's delegation nor a capability: the function (an `__init` one, freed after boot, or
            // one ftrace does not patch): x86_64 says EINVAL (no patch site for the trampoline's call), arm64
            // ENOTSUPP, where the kernel runs trampolines at all (`check_supported`). One the script named is
            // an error; a wildcard's is skipped.
            match error.raw_os_error() {
                Some(libc::EINVAL | libc::EBUSY | libc::ENOENT | libc::ESRCH | ENOTSUPP) if self.matched => {
                    let reason = format!("no trampoline can patch it: {text}");
                    AttachError::Refused { functions: vec![(self.name.clone(), reason)], attached: None }
                }
                Some(libc::EINVAL | libc::EBUSY | ENOTSUPP) => AttachError::Explained(format!(
                    "{what}: the kernel cannot patch `{}` with a trampoline ({text}): it may be an `__init` \
                     function (freed after boot) or one ftrace does not trace",
                    self.name
                )),
                _ => AttachError::Os { what, error },
            }
        })?;
        Ok(Some(Attachment::new(link)))
    }

    fn describe(&self) -> String {
        format!(
            "runs on a BPF trampoline at the {} of {}",
            if self.exit { "exit" } else { "entry" },
            self.name
        )
    }
}
