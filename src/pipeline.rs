//! The front end as one call: a script's text to compiled programs, or its diagnostics rendered for a
//! terminal. `main.rs` and the fuzzer both go through here.
//!
//! The passes, in the order [`compile`] runs them, with what each reads and what it adds:
//!
//! | # | pass | reads | adds |
//! |---|------|-------|------|
//! | 1 | `Vmlinux::running` | nothing yet (the kernel's BTF is read when first asked) | the kernel's types |
//! | 2 | `lang::load` | the script, its imports, `-I`/`--include` headers, whether the kernel has BTF, the kernel's struct sizes (`lang::Surroundings`) | the program: probes, C types, macros expanded |
//! | 3 | `lang::named::substitute` | `--name=value` words | named parameters as values |
//! | 4 | `lang::positional::substitute` | the other words | `$1`, `$#`, `str($1)` as values |
//! | 5 | `lang::comptime::decide` | the program | `if comptime` decided, `fail()` reported |
//! | 6 | `functions::stacks::unwind_ustack_with_dwarf` | `--dwarf-ustack` | `ustack` as `dw_ustack` |
//! | 7 | `config::read`, `config::override_from_env` | the config block, `BPFTRACE_*` | the run's config, its warnings |
//! | 8 | `KernelTypes::new` | the kernel's types and features, the program's C types | every type name's meaning |
//! | 9 | `sema::check` (its own passes: `sema/mod.rs`) | the program, probe options, functions, kernel types | attach points, a type for each expression, what names resolved to |
//! | 10 | `codegen::compile` | the checked program, run options | programs, maps, output records (in one pass) |
//! | 10b | `codegen::session::pair` | the programs, whether the kernel has kprobe sessions and `bpf_session_is_return`'s BTF id | a kprobe and a kretprobe of one function as one program |
//! | 11 | `Records::locate_logs`, `render_warnings` | the sources | where each `errorf` is, warnings rendered |
//!
//! Below sema nothing looks a kernel type up: `KernelTypes` goes to sema alone, and codegen reads what sema
//! recorded (`tests/architecture.rs` checks it by import).

use crate::config::Config;
use crate::kernel::{KernelTypes, Vmlinux};
use crate::lang::{self, Diagnostic, Source, Sources, Surroundings};
use crate::{codegen, functions, probes, sema};
use bpf::features::{Feature, Features};
use std::sync::Arc;

/// The stack the compiler runs on. It recurses over the script's tree, whose depth the parser bounds
/// (100 levels of nesting, 1000 `else if` branches); the main thread's 8 MiB would not hold the deepest
/// accepted script. Only the pages used are ever touched.
const COMPILER_STACK: usize = 1 << 30;

/// A compiled script, with the script's config block (overridden by the `BPFTRACE_*` environment
/// variables), its warnings, rendered, and its files (to render what the kernel says of its programs).
pub struct Compilation {
    pub compiled: codegen::Compiled,
    pub config: Config,
    pub warnings: Vec<String>,
    pub sources: Sources,
}

/// Parses (with the files it imports), checks and compiles `source`; an error is the rendered diagnostics. The config block's
/// `missing_probes` replaces `probe_options`'. `params` are the words after the script: the named options
/// (`--name=value`, read by `getopt`) and the positional parameters.
pub fn compile(
    source: &Source<'_>,
    params: &[String],
    headers: &lang::headers::CommandLine,
    features: &Arc<Features>,
    probe_options: &probes::Options,
    options: &codegen::Options,
) -> Result<Compilation, String> {
    on_a_deep_stack(|| {
        // 1-2
        let vmlinux = Vmlinux::running();
        // A script's struct may hold the kernel's by value: the kernel's BTF sizes it.
        let record_sizes = |union: bool, name: &str| vmlinux.record_size_align(union, name);
        let around = Surroundings { headers, kernel_btf: vmlinux.exists(), record_sizes: &record_sizes };
        let mut sources = Sources::new(source);
        let loaded = lang::load(&mut sources, &around);
        let render_all =
            |diags: &[Diagnostic]| diags.iter().map(|d| sources.render(d)).collect::<Vec<_>>().join("\n");
        let mut program = loaded.map_err(|d| render_all(&[d]))?;
        // 3-6
        lang::named::substitute(&mut program, params).map_err(|e| match e {
            lang::named::Error::At(diag) => render_all(&[diag]),
            lang::named::Error::CommandLine(message) => format!("steadytrace: {message}\n"),
        })?;
        let positional: Vec<String> = params.iter().filter(|w| !lang::named::is_option(w)).cloned().collect();
        lang::positional::substitute(&mut program, &positional).map_err(|d| render_all(&[d]))?;
        lang::comptime::decide(&mut program, &fail_message).map_err(|d| render_all(&[d]))?;
        if probe_options.dwarf_ustack {
            crate::functions::stacks::unwind_ustack_with_dwarf(&mut program);
        }
        // 7
        let (mut config, mut warnings) =
            crate::config::read(&program.config).map_err(|d| render_all(&[d]))?;
        crate::config::override_from_env(&mut config, &|name| std::env::var(name).ok())
            .map_err(|e| format!("steadytrace: {e}\n"))?;
        let probe_options = probes::Options {
            missing_probes: config.missing_probes.unwrap_or(probe_options.missing_probes),
            ..probe_options.clone()
        };
        // 8-10
        let kernel = KernelTypes::new(vmlinux, features.clone(), program.c_types.clone());
        let checked = sema::check(&program, &probe_options, &functions::TABLE, &kernel)
            .map_err(|diags| render_all(&diags))?;
        let mut compiled =
            codegen::compile(&checked, options, &functions::TABLE).map_err(|e| render_all(&e.0))?;
        // 10b
        codegen::session::pair(&mut compiled, || {
            let sessions = features.has(Feature::KprobeSession);
            sessions
                .then(|| kernel.vmlinux.kernel_function("bpf_session_is_return").ok())
                .flatten()
                .map(|f| f.btf_id)
        });
        // 11
        compiled.records.locate_logs(&sources);
        compiled.records.render_warnings(&|d| sources.render(d));
        warnings.extend(checked.warnings);
        let warnings = warnings.iter().map(|w| sources.render(w)).collect();
        Ok(Compilation { compiled, config, warnings, sources })
    })
}

/// Runs `compile` on a stack deep enough for any script the parser accepts: mapped for the call, on this thread
/// (a thread of its own cost 66 µs of a start of 0.7 ms, for its clone, its malloc arena and its join).
fn on_a_deep_stack<T>(compile: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    stacker::grow(COMPILER_STACK, compile)
}

/// A `fail()` message: its format and literal values, formatted as `printf` formats them.
fn fail_message(
    format: &str,
    span: lang::Span,
    values: &[lang::comptime::Known],
) -> Result<String, Diagnostic> {
    use crate::output::printf::Value;
    let pieces = crate::sema::format::parse(format, span)?;
    let values: Vec<Value<'_>> = values
        .iter()
        .map(|value| match value {
            lang::comptime::Known::Int(n) => Value::Int { value: *n as u64, signed: *n < 0 },
            lang::comptime::Known::Str(s) => Value::Str(s.as_bytes()),
        })
        .collect();
    Ok(String::from_utf8_lossy(&crate::output::printf::format(&pieces, &values)).into_owned())
}
