//! Watchpoints (`watchpoint:ADDRESS:LENGTH:MODE`) on real hardware breakpoints: in a process (`-c`, `-p`), in
//! the threads it has and creates, on code (`x`), on a kernel address on every CPU (also after cpu1 went
//! offline and came back), and `unwatch()`. The program watched is tests/watchpoint/watched.c, built by `cc`.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

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
        let status = std::process::Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&binary)
            .arg(source)
            .status();
        status.is_ok_and(|s| s.success()).then_some(binary)
    });
    if built.is_none() {
        println!("SKIPPED: {test}: needs a C compiler (cc)");
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
    let output = run_with(&["-c", &command(&program, "write 5"), "-e", script], Duration::from_secs(20));
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
    let output = run_with(&["-c", &command(&program, "thread 4"), "-e", script], Duration::from_secs(20));
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(text.contains("@[thread]: 4"), "the created thread's four writes:\n{text}");
    assert!(!text.contains("@[main]"), "the main thread wrote nothing:\n{text}");
}

#[test]
fn dash_p_watches_the_threads_a_process_already_has() {
    let Some(program) = watched("dash_p_watches_the_threads_a_process_already_has") else { return };
    let mut process = std::process::Command::new(&program).arg("forever").spawn().expect("start the program");
    // Its writing thread exists before the tracer starts.
    while std::fs::read_dir(format!("/proc/{}/task", process.id())).map_or(0, |d| d.count()) < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = process.id().to_string();
    let script = r#"watchpoint:0x10000000:8:w /tid != pid/ { @hits = count(); if (@hits == 3) { exit(); } }"#;
    let output = run_with(&["-p", &pid, "-e", script], Duration::from_secs(20));
    let _ = process.kill();
    let _ = process.wait();
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(count(&text, "hits"), Some(3), "{text}");
}

#[test]
fn an_execution_breakpoint_fires_at_each_call() {
    let Some(program) = watched("an_execution_breakpoint_fires_at_each_call") else { return };
    let output = run_with(
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
    let output = run_with(&["-c", &command(&program, "write 20"), "-e", script], Duration::from_secs(20));
    let text = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let hits = count(&text, "hits").expect("hits counted");
    assert!((3..=5).contains(&hits), "{hits} hits of 20 writes, unwatched after the third:\n{text}");
}

#[test]
fn a_user_address_without_a_process_is_refused_at_its_attach_point() {
    let output = run_with(&["--dry-run", "-e", "watchpoint:0x10000000:8:w { }"], Duration::from_secs(10));
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
    let output = run_with(&["-q", "-e", &script], Duration::from_secs(10));
    let address = stdout(&output).trim().to_string();
    assert!(address.starts_with("ffff"), "no kernel address found: {address:?} {}", stderr(&output));
    address
}

#[test]
fn a_kernel_watchpoint_fires_on_cpu1_again_after_it_came_back_and_unwatch_ends_it() {
    let test = "a_kernel_watchpoint_fires_on_cpu1_again_after_it_came_back_and_unwatch_ends_it";
    let Some(program) = watched(test) else { return };
    let Some(mut hotplug) = Hotplug::acquire(test, 1) else { return };
    // Sleeps over and over on cpu1, pinning itself there again after cpu1 comes back.
    let mut sleeper = std::process::Command::new(&program).arg("sleep").spawn().expect("start the sleeper");
    let address = nvcsw_address(sleeper.id());
    // Each write on cpu1 prints a time; a SIGUSR1 has the script unwatch the address.
    let script = format!(
        "watchpoint:0x{address}:8:w /cpu == 1/ {{ printf(\"%lu\\n\", nsecs); }} self:signal:SIGUSR1 {{ unwatch(0x{address}); }}"
    );
    let mut child = tracer(&["-e", &script]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
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
    let _ = sleeper.kill();
    let _ = sleeper.wait();
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
