//! Watchpoints (`watchpoint:ADDRESS:LENGTH:MODE`) on real hardware breakpoints: in a process (`-c`, `-p`), in
//! the threads it has and creates, on code (`x`), on a kernel address on every CPU (also after cpu1 went
//! offline and came back), and `unwatch()`. The program watched is tests/watchpoint/watched.c, built by `cc`.
//! Every process a test starts is held by `Reaped`, so that a failing test leaves none behind.

mod common;

use bpf::perf::{PerfEvent, PerfEventSpec, Sample, TYPE_BREAKPOINT};
use common::*;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `command` with its output piped and returns the output, within `limit`; a command still running then
/// is killed with its whole process group (a tracer's `-c` command too) as the test fails.
fn run_reaped(command: &mut Command, limit: Duration) -> Output {
    let mut child =
        Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).expect("start the command");
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = vec![];
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("stdout piped")));
    let stderr = read(Box::new(child.stderr.take().expect("stderr piped")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "{command:?} did not finish within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: stdout.join().expect("stdout"), stderr: stderr.join().expect("stderr") }
}

/// [`run_reaped`] of the tracer with `args`.
fn run_tracer(args: &[&str], limit: Duration) -> Output {
    run_reaped(&mut tracer(args), limit)
}

/// Whether this kernel grants a write breakpoint on kernel `address` (hex), asked as steadytrace's own check
/// does: a disabled event on this thread, closed at once. Err holds the kernel's error.
fn kernel_breakpoint(address: &str) -> std::io::Result<()> {
    let spec = PerfEventSpec {
        type_: TYPE_BREAKPOINT,
        config: 0,
        config1: u64::from_str_radix(address, 16).expect("a hex address"),
        config2: 8,
        sample: Sample::Period(1),
        bp_type: 2, // HW_BREAKPOINT_W
        inherit: false,
    };
    PerfEvent::open(&spec, 0, -1).map(drop)
}

/// tests/watchpoint/watched.c, built once into the target directory; `None` (after SKIPPED) when the test
/// cannot trace or there is no C compiler.
fn watched(test: &str) -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    if !can_trace(test) {
        return None;
    }
    let built = BUILT.get_or_init(|| {
        let binary = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("watched");
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/watchpoint/watched.c");
        let mut cc = Command::new("cc");
        cc.args(["-O1", "-pthread", "-o"]).arg(&binary).arg(source);
        let status = Reaped::spawn(&mut cc).and_then(|mut cc| cc.wait());
        status.is_ok_and(|s| s.success()).then_some(binary)
    });
    if built.is_none() {
        skip(test, "needs a C compiler (cc)");
    }
    built.clone()
}

fn command(program: &std::path::Path, args: &str) -> String {
    format!("{} {args}", program.display())
}

/// The value of `@name: N` in the tracer's output.
fn count(output: &str, name: &str) -> Option<u64> {
    output.lines().find_map(|line| line.strip_prefix(&format!("@{name}: "))?.trim().parse().ok())
}

#[test]
fn each_write_of_the_command_fires_the_watchpoint_once() {
    let Some(program) = watched("each_write_of_the_command_fires_the_watchpoint_once") else { return };
    let script = r#"w:0x10000000:8:w { @writes = count(); @probe[probe] = count(); }"#;
    let output = run_tracer(&["-c", &command(&program, "write 5"), "-e", script], Duration::from_secs(20));
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(count(&text, "writes"), Some(5), "five writes, five hits:\n{text}");
    assert!(
        text.contains("@probe[watchpoint:0x10000000:8:w]: 5"),
        "the probe's name as bpftrace gives it:\n{text}"
    );
}

#[test]
fn a_thread_the_command_creates_inherits_the_watchpoint() {
    let Some(program) = watched("a_thread_the_command_creates_inherits_the_watchpoint") else { return };
    let script = r#"watchpoint:0x10000000:8:w { @[tid == pid ? "main" : "thread"] = count(); }"#;
    let output = run_tracer(&["-c", &command(&program, "thread 4"), "-e", script], Duration::from_secs(20));
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(text.contains("@[thread]: 4"), "the created thread's four writes:\n{text}");
    assert!(!text.contains("@[main]"), "the main thread wrote nothing:\n{text}");
}

#[test]
fn dash_p_watches_the_threads_a_process_already_has() {
    let Some(program) = watched("dash_p_watches_the_threads_a_process_already_has") else { return };
    let process = Reaped::spawn(Command::new(&program).arg("forever")).expect("start the program");
    // Its writing thread exists before the tracer starts.
    while std::fs::read_dir(format!("/proc/{}/task", process.id())).map_or(0, |d| d.count()) < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = process.id().to_string();
    let script = r#"watchpoint:0x10000000:8:w /tid != pid/ { @hits = count(); if (@hits == 3) { exit(); } }"#;
    let output = run_tracer(&["-p", &pid, "-e", script], Duration::from_secs(20));
    drop(process);
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(count(&text, "hits"), Some(3), "{text}");
}

#[test]
fn an_execution_breakpoint_fires_at_each_call() {
    let Some(program) = watched("an_execution_breakpoint_fires_at_each_call") else { return };
    let output = run_tracer(
        &["-c", &command(&program, "exec 3"), "-e", "watchpoint:0x10000000:1:x { @calls = count(); }"],
        Duration::from_secs(20),
    );
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(count(&text, "calls"), Some(3), "{text}");
}

#[test]
fn unwatch_removes_the_watchpoint_of_a_process() {
    let Some(program) = watched("unwatch_removes_the_watchpoint_of_a_process") else { return };
    // 20 writes 20 ms apart; the watchpoint goes after the third (asynchronously: a write may slip in).
    let script =
        r#"watchpoint:0x10000000:8:w { @hits = count(); @n++; if (@n == 3) { unwatch(0x10000000); } }"#;
    let output = run_tracer(&["-c", &command(&program, "write 20"), "-e", script], Duration::from_secs(20));
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let hits = count(&text, "hits").expect("hits counted");
    assert!((3..=5).contains(&hits), "{hits} hits of 20 writes, unwatched after the third:\n{text}");
}

#[test]
fn a_user_address_without_a_process_is_refused_at_its_attach_point() {
    let output = run_tracer(&["--dry-run", "-e", "watchpoint:0x10000000:8:w { }"], Duration::from_secs(10));
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(err.contains("stdin:1:1: ERROR: 0x10000000 is a user address"), "{err}");
    assert!(err.contains("-p PID") && err.contains("-c COMMAND"), "{err}");
}

/// The address of `nvcsw` (its count of voluntary context switches) in the task of `pid`, which the kernel
/// writes on the CPU the task sleeps on: a kernel address that is written often, found without kallsyms.
fn nvcsw_address(pid: u32) -> String {
    let script = format!(
        "tracepoint:sched:sched_switch /args.prev_pid == {pid}/ {{ printf(\"%lx\\n\", (uint64)curtask + offsetof(struct task_struct, nvcsw)); exit(); }}"
    );
    let output = run_tracer(&["-q", "-e", &script], Duration::from_secs(10));
    let address = stdout(&output).trim().to_string();
    assert!(address.starts_with("ffff"), "no kernel address found: {address:?} {}", stderr(&output));
    address
}

#[test]
fn a_kernel_watchpoint_fires_on_cpu1_again_after_it_came_back_and_unwatch_ends_it() {
    let test = "a_kernel_watchpoint_fires_on_cpu1_again_after_it_came_back_and_unwatch_ends_it";
    let Some(program) = watched(test) else { return };
    // Sleeps over and over on cpu1, pinning itself there again after cpu1 comes back.
    let sleeper =
        Reaped::spawn(Command::new(&program).arg("sleep").stdout(Stdio::null())).expect("start the sleeper");
    let address = nvcsw_address(sleeper.id());
    if let Err(error) = kernel_breakpoint(&address) {
        return skip(
            test,
            &format!(
                "this kernel refuses hardware breakpoints on kernel addresses even to root (perf_event_open: {error}); the case runs in the 6.12 guest (tests/guest.rs, fentry_and_fexit_count_exactly_with_typed_args_and_retval)"
            ),
        );
    }
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else { return };
    // Each write on cpu1 prints a time; a SIGUSR1 has the script unwatch the address.
    let script = format!(
        "watchpoint:0x{address}:8:w /cpu == 1/ {{ printf(\"%lu\\n\", nsecs); }} self:signal:SIGUSR1 {{ unwatch(0x{address}); }}"
    );
    let mut child = Reaped::spawn(tracer(&["-e", &script]).stdout(Stdio::piped()).stderr(Stdio::piped()))
        .expect("start the tracer");
    let _stderr = wait_for_stderr_line(&mut child, "Attached");
    let lines = collect_lines(&mut child);
    std::thread::sleep(Duration::from_millis(300));
    let offline_at = monotonic_ns();
    hotplug.set_online(1, false);
    std::thread::sleep(Duration::from_millis(300));
    hotplug.set_online(1, true);
    let back_at = monotonic_ns();
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill with a valid pid and signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(300));
    let unwatched_by = monotonic_ns();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    drop(sleeper);
    drop(hotplug);
    let times: Vec<u64> = lines.join().unwrap().iter().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(times.iter().any(|&t| t < offline_at), "no write on cpu1 seen before it went offline");
    let first_after = times.iter().find(|&&t| t > back_at).map(|t| (t - back_at) / 1_000_000);
    assert!(
        first_after.is_some_and(|ms| ms < 500),
        "cpu1's writes not seen after its return: {first_after:?} ms"
    );
    let after_unwatch = times.iter().filter(|&&t| t > unwatched_by).count();
    assert_eq!(after_unwatch, 0, "{after_unwatch} hits after unwatch()");
}

/// The address of `_stext`, the kernel's first instruction, from /proc/kallsyms (hex); None where kallsyms
/// hides addresses.
fn kernel_text() -> Option<String> {
    let symbols = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let address = symbols.lines().find(|l| l.ends_with(" _stext"))?.split(' ').next()?.to_string();
    (!address.trim_start_matches('0').is_empty()).then_some(address)
}

/// A kernel watchpoint where the kernel refuses breakpoints on kernel addresses to steadytrace holding all
/// it asks for (this machine's 6.18 does) is one error at its attach point, said before anything is loaded;
/// where the kernel grants them, the same script attaches (the guest's 6.12 runs a kernel watchpoint too,
/// in tests/guest.rs).
#[test]
fn a_kernel_watchpoint_the_kernel_refuses_is_one_error_at_its_attach_point() {
    let test = "a_kernel_watchpoint_the_kernel_refuses_is_one_error_at_its_attach_point";
    if !can_trace(test) {
        return;
    }
    let Some(address) = kernel_text() else { return skip(test, "/proc/kallsyms hides kernel addresses") };
    let point = format!("watchpoint:0x{address}:8:w");
    let script = format!("{point} {{ @ = count(); }} interval:ms:100 {{ exit(); }}");
    let output = run_tracer(&["-e", &script], Duration::from_secs(20));
    match kernel_breakpoint(&address) {
        Err(error) if error.raw_os_error() == Some(libc::EPERM) => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("the kernel release");
            let expected = format!(
                "stdin:1:1: ERROR: this kernel ({}) refuses hardware breakpoints on kernel addresses (EPERM), although steadytrace holds CAP_SYS_ADMIN, all that Linux asks for them: it is built to refuse them\n{script}\n{}\nhelp: watch a user address in a process (-p PID or -c COMMAND), or trace what writes this address with a tracepoint or kprobe; kernel watchpoints need a kernel that grants them (Linux as released does, to CAP_SYS_ADMIN)\n",
                release.trim(),
                "^".repeat(point.len())
            );
            assert_eq!((output.status.code(), stderr(&output)), (Some(1), expected));
            assert_eq!(stdout(&output), "", "nothing ran");
        }
        Err(error) => panic!("perf_event_open of a breakpoint on kernel text failed: {error}"),
        Ok(()) => {
            assert!(output.status.success(), "{}", stderr(&output));
            assert!(stderr(&output).contains("Attached 2 probes"), "{}", stderr(&output));
        }
    }
}

/// Without CAP_SYS_ADMIN (dropped by `setpriv`, CAP_PERFMON and CAP_BPF kept) every kernel refuses a
/// breakpoint on a kernel address: the error names the capability, not CAP_PERFMON or perf_event_paranoid.
#[test]
fn a_kernel_watchpoint_without_cap_sys_admin_names_the_capability() {
    let test = "a_kernel_watchpoint_without_cap_sys_admin_names_the_capability";
    if !can_trace(test) {
        return;
    }
    let Some(address) = kernel_text() else { return skip(test, "/proc/kallsyms hides kernel addresses") };
    if Command::new("setpriv").arg("--version").output().is_err() {
        return skip(test, "needs setpriv (util-linux)");
    }
    let script = format!("watchpoint:0x{address}:8:w {{ }}");
    let mut command = Command::new("setpriv");
    command.args([
        "--bounding-set",
        "-sys_admin",
        "--inh-caps",
        "-sys_admin",
        BIN,
        "--dry-run",
        "-e",
        &script,
    ]);
    let output = run_reaped(&mut command, Duration::from_secs(20));
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.starts_with("stdin:1:1: ERROR: watching a kernel address needs CAP_SYS_ADMIN in the initial user namespace: the kernel refuses hardware breakpoints on kernel addresses without it (EPERM), whatever kernel.perf_event_paranoid allows\n"), "{err}");
    assert!(err.contains("help: run steadytrace as root on the host, or grant it CAP_SYS_ADMIN (docker/podman: --cap-add SYS_ADMIN); else watch a user address"), "{err}");
}
