// The C runtime calls `main` below directly: see there.
#![no_main]
#![deny(unsafe_code)]

use clap::Parser;
use std::io::{self, Write};
use std::os::fd::AsFd;
use steadytrace::cli::Cli;
use steadytrace::lang::Source;
use steadytrace::symbols::DebugDirs;
use steadytrace::{codegen, runtime, sema};

/// The process's entry, called by the C runtime. steadytrace goes without Rust's own start-up (`fn main`),
/// which found the main thread's stack by reading /proc/self/maps through sscanf, and mapped an alternate signal
/// stack for its stack-overflow message: ten system calls, and the code and data they touch, in a start of
/// well under a millisecond (docs/BENCHMARKS.md, "Against the floor"). What steadytrace needs of it,
/// [`steadytrace::prepare_process`] does.
#[allow(unsafe_code)] // the C symbol `main`
#[no_mangle]
extern "C" fn main(_argc: std::ffi::c_int, _argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    steadytrace::prepare_process();
    let code = start();
    // Returning would skip Rust's clean-up, which flushes stdout: exit does it.
    std::process::exit(code)
}

fn start() -> i32 {
    // An internal error is reported as one sentence, never as a backtrace.
    std::panic::set_hook(Box::new(|info| {
        steadytrace::stderr!(
            "steadytrace: internal error: {info}\nPlease report this with the script that caused it."
        );
    }));
    // `steadytrace bench|completions|manpage ...` have command lines of their own, recognised by the
    // first argument only; the tracer's stays as it is (a script file of such a name runs as `./NAME`).
    let features = |absent: &[bpf::features::Feature]| {
        steadytrace::kernel::features::from_env(absent).map(std::sync::Arc::new)
    };
    let args = || std::env::args_os().skip(1);
    match std::env::args_os().nth(1).as_ref().and_then(|first| first.to_str()) {
        Some("bench") => return exit(features(&[]).and_then(|f| steadytrace::bench::main(args(), &f))),
        Some("completions") => return exit(steadytrace::completions::main(args())),
        Some("manpage") => return exit(steadytrace::manpage::main(args())),
        _ => {}
    }
    let cli = Cli::parse();
    let absent: Vec<_> = cli.no_feature.iter().map(|name| name.0).collect();
    exit(features(&absent).and_then(|features| run(&cli, &features)))
}

/// The process's exit status (as the shell sees it: the low 8 bits), the error said first.
fn exit(result: Result<i32, String>) -> i32 {
    match result {
        Ok(code) => i32::from(code as u8),
        Err(message) => {
            let _ = io::stderr().write_all(message.as_bytes());
            1
        }
    }
}

/// What bpftrace's flags ask that steadytrace cannot do, said before anything else is done.
fn refused(cli: &Cli) -> Option<String> {
    if cli.mode.as_deref() == Some("compiler-bench") {
        return Some("--mode compiler-bench: timing each compiler pass is not in steadytrace yet (`time steadytrace --dry-run FILE` times the whole compilation)".into());
    }
    let why = match cli.debug.as_deref()? {
        "codegen" | "dis" | "all" => return None,
        "parse" => "it traces bpftrace's own parser (its C++ functions, by source line); steadytrace's parser is another: --fmt prints the script as parsed",
        "ast" | "types" => "it prints bpftrace's syntax tree after each of its own compiler passes (types: lowered, with its internal declarations); steadytrace's passes are others: --fmt prints the script as parsed, -d dis the programs made of it",
        "codegen-opt" => "it is LLVM's optimised IR, and steadytrace emits BPF instructions without LLVM: -d dis prints them, there is no later form",
        "libbpf" => "steadytrace loads its programs with the bpf() system call itself, not through libbpf's object loader, so libbpf has nothing to say; -v prints the verifier's log when it rejects a program",
        _ => "steadytrace prints the verifier's log when the verifier rejects a program, with -v; a program it accepts has no log kept",
    };
    Some(format!("-d {}: {why}", cli.debug.as_deref()?))
}

/// `--metrics-web-config FILE` read (plain HTTP without it); a problem in the file stops steadytrace.
fn metrics_web_config(
    path: Option<&std::path::Path>,
) -> Result<std::sync::Arc<steadytrace::metrics::web_config::WebConfig>, String> {
    use steadytrace::metrics::web_config::WebConfig;
    let Some(path) = path else { return Ok(std::sync::Arc::new(WebConfig::open())) };
    let config = WebConfig::load(path).map_err(|e| format!("{e}\n"))?;
    if config.passwords_in_clear() {
        steadytrace::stderr!(
            "steadytrace: --metrics-web-config {}: basic_auth_users without tls_server_config: passwords cross the network in the clear",
            path.display()
        );
    }
    Ok(std::sync::Arc::new(config))
}

fn run(cli: &Cli, features: &std::sync::Arc<bpf::features::Features>) -> Result<i32, String> {
    if let Some(why) = refused(cli) {
        return Err(format!("steadytrace: {why}\n"));
    }
    steadytrace::bpf_token::set_up(cli.bpf_token.as_deref())?;
    if cli.info {
        let items = steadytrace::info::gather(features);
        let report = match cli.format {
            steadytrace::output::writer::Format::Json => steadytrace::info::json(&items),
            _ => steadytrace::info::text(&items),
        };
        let _ = io::stdout().lock().write_all(report.as_bytes());
        return Ok(0);
    }
    if let Some(path) = &cli.traceable_functions {
        if let Err(error) = std::fs::File::open(path) {
            return Err(format!("steadytrace: --traceable-functions {}: {error}\n", path.display()));
        }
        steadytrace::probes::kernel_functions::read_traceable_functions_from(path.clone());
    }
    if cli.list {
        let pattern = cli.file.as_ref().map(|p| p.to_string_lossy().into_owned());
        let listing = steadytrace::probes::listing::list(pattern.as_deref(), cli.verbose)
            .map_err(|e| format!("steadytrace: {e}\n"))?;
        let _ = io::stdout().lock().write_all(listing.text.as_bytes());
        for note in listing.notes {
            let _ = writeln!(io::stderr(), "steadytrace: note: {note}");
        }
        return Ok(0);
    }
    // As the compiler takes it: a directory that is not there is passed over, here with a word.
    for dir in cli.include_dirs.iter().filter(|dir| !cli.no_warnings && !dir.is_dir()) {
        let _ =
            writeln!(io::stderr(), "steadytrace: warning: -I {}: there is no such directory", dir.display());
    }
    let headers = steadytrace::lang::headers::CommandLine {
        dirs: cli.include_dirs.clone(),
        includes: cli.includes.clone(),
    };
    if let Some(missing) = headers.missing_includes().first() {
        return Err(format!(
            "steadytrace: --include {missing}: no such file, nor a header in the include directories (-I DIR adds one)\n"
        ));
    }
    let (name, text) = match (&cli.program, &cli.file) {
        (Some(program), _) => ("stdin".to_string(), program.clone()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("steadytrace: cannot read {}: {e}\n", path.display()))?;
            (path.display().to_string(), text)
        }
        (None, None) => return Err("steadytrace: give a script file or -e PROGRAM\n".into()),
    };
    let source = Source { name: &name, text: &text };
    if cli.fmt || cli.mode.as_deref() == Some("format") {
        let formatted =
            steadytrace::lang::format::format(&source).map_err(|e| format!("{}\n", e.trim_end()))?;
        let _ = io::stdout().lock().write_all(formatted.as_bytes());
        return Ok(0);
    }

    // Started first (held before exec) so that `cpid` is known to the compiler.
    let mut child = match &cli.command {
        Some(command) => {
            Some(runtime::child::Child::spawn_held(command).map_err(|e| format!("steadytrace: -c: {e}\n"))?)
        }
        None => None,
    };
    if let Some(pid) = cli.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(format!("steadytrace: -p {pid}: there is no process {pid}\n"));
        }
    }
    if let Some(path) = &cli.kallsyms {
        if let Err(error) = std::fs::File::open(path) {
            return Err(format!("steadytrace: --kallsyms {}: {error}\n", path.display()));
        }
        steadytrace::symbols::kernel::read_from(path.clone());
    }
    let debug_dirs = cli.debuginfo.as_deref().map(DebugDirs::parse).unwrap_or_default();
    let probe_options = steadytrace::probes::Options {
        interval_engine: cli.interval_engine,
        dwarf_ustack: cli.unwind == "dwarf",
        target_process: cli.pid.is_some() || child.is_some(),
        no_warnings: cli.no_warnings,
        probe_filter: cli.probe_filter.clone(),
        allow_unsafe: cli.allow_unsafe,
        debug_dirs: debug_dirs.clone(),
        ..Default::default()
    };
    let options = codegen::Options {
        start_ns: runtime::timer::monotonic_ns(),
        ncpus: runtime::cpus::online().map_or(1, |cpus| cpus.len() as u64),
        possible_cpus: sema::types::possible_cpus() as u32,
        filter_pid: cli.pid,
        cpid: child.as_ref().map(|c| c.pid),
        allow_unsafe: cli.allow_unsafe,
        pid_namespace: runtime::namespaces::own_pid_namespace(),
        namespace_only: match cli.scope.as_deref() {
            Some(scope) => scope == "namespace",
            None => !steadytrace::privilege::initial_user_namespace(),
        },
        read_warnings: cli.warnings,
    };
    let steadytrace::pipeline::Compilation { compiled, config, warnings, sources } =
        steadytrace::pipeline::compile(
            &source,
            &cli.positional(),
            &headers,
            features,
            &probe_options,
            &options,
        )?;
    for warning in warnings.iter().filter(|_| !cli.no_warnings) {
        steadytrace::stderr!("{}", warning.trim_end());
    }
    if cli.debug.is_some() {
        let names: Vec<String> = compiled.maps.iter().map(|m| m.name.clone()).collect();
        let stdout = &mut io::stdout().lock();
        for program in &compiled.programs {
            let _ = writeln!(stdout, "{}:", program.point.name);
            let _ = write!(stdout, "{}", bpf::disasm::disassemble(&program.code, &|i| names[i].clone()));
        }
    }
    // As bpftrace 0.27.1: the object is written, then the script runs.
    if let Some(path) = &cli.emit_elf {
        let object = codegen::elf_object(&compiled)
            .map_err(|why| format!("steadytrace: --emit-elf {}: {why}\n", path.display()))?;
        std::fs::write(path, object)
            .map_err(|e| format!("steadytrace: cannot write {}: {e}\n", path.display()))?;
    }
    if cli.dry_run || cli.mode.as_deref() == Some("codegen") {
        return Ok(0);
    }
    let settings = runtime::Settings {
        format: cli.format,
        quiet: cli.quiet,
        verbose: cli.verbose,
        timer_priority: cli.timer_priority,
        metrics: match cli.metrics {
            Some(address) => Some(runtime::MetricsSettings {
                address,
                max_keys: cli.metrics_max_keys as usize,
                web: metrics_web_config(cli.metrics_web_config.as_deref())?,
            }),
            None => None,
        },
        interval_cpu: cli.interval_cpu,
        uprobe_pid: cli.pid.or(child.as_ref().map(|c| c.pid)),
        print_maps_on_exit: config.print_maps_on_exit,
        max_cat_bytes: config.max_cat_bytes,
        mode: match (cli.test, cli.bench, cli.mode.as_deref()) {
            (true, ..) | (_, _, Some("test")) => runtime::Mode::Test,
            (_, true, _) | (_, _, Some("bench")) => runtime::Mode::Bench,
            _ => runtime::Mode::Trace,
        },
        colour: cli.output.is_none() && io::IsTerminal::is_terminal(&io::stdout()),
        ring_pages: config.ring_pages,
        warnings: !cli.no_warnings,
        debug_dirs,
    };
    let file = match &cli.output {
        Some(path) => std::fs::File::create(path)
            .map_err(|e| format!("steadytrace: cannot write {}: {e}\n", path.display()))?,
        None => io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(std::fs::File::from)
            .map_err(|e| format!("steadytrace: cannot write the standard output: {e}\n"))?,
    };
    let mut out: Box<dyn Write> = match cli.buffering.as_deref() {
        Some("none") => Box::new(file),
        Some("line") => Box::new(UnflushedBy(io::LineWriter::new(file))),
        Some(_) => Box::new(UnflushedBy(io::BufWriter::new(file))),
        // Written when each batch of events has been read: the runtime flushes then.
        None => Box::new(io::BufWriter::new(file)),
    };
    match runtime::run(&compiled, &settings, &mut out, child.as_mut()) {
        Ok(outcome) => Ok(outcome.exit_code),
        Err(runtime::Failure::Rejected { diagnostic, log }) => {
            let mut message = sources.render(&diagnostic);
            if cli.verbose {
                message.push_str("\nThe verifier's log:\n");
                message.push_str(&log);
            }
            Err(message)
        }
        Err(failure) => Err(format!("steadytrace: {failure}\n")),
    }
}

/// `-B line` and `-B full`: the output written when a line is complete or the buffer fills (and at exit, the
/// writer's drop), as the writer decides; not when the runtime flushes after each batch of events.
struct UnflushedBy<W: Write>(W);

impl<W: Write> Write for UnflushedBy<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
