//! Stacks: `ustack` of a known call chain in this test process symbolizes to its function names,
//! `kstack` of system calls shows the kernel's syscall entry, and `-f folded` gives flame-graph lines.
//! (Frame pointers are on for the workspace, see .cargo/config.toml, so user stacks can be walked.)

mod common;

use common::*;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_leaf(stop: &AtomicBool) -> u64 {
    let mut x = 0u64;
    while !stop.load(Ordering::Relaxed) {
        x = black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    x
}

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_middle(stop: &AtomicBool) -> u64 {
    black_box(stack_test_leaf(stop)) + 1
}

#[inline(never)]
#[no_mangle]
extern "C" fn stack_test_outer(stop: &AtomicBool) -> u64 {
    black_box(stack_test_middle(stop)) + 1
}

/// Runs the known call chain in a thread of this process until dropped.
struct Workload {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Workload {
    fn start() -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            black_box(stack_test_outer(&flag));
        });
        Workload { stop, thread: Some(thread) }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().map(|t| t.join());
    }
}

/// Samples the user stacks of this test process (running the workload) for 700 ms, with `options`.
fn profile_this_process(options: &[&str]) -> std::process::Output {
    let _work = Workload::start();
    let me = std::process::id().to_string();
    let mut args = vec!["-q", "-p", &me];
    args.extend_from_slice(options);
    args.extend(["-e", "profile:hz:99 { @[ustack] = count(); } interval:ms:700 { exit(); }"]);
    tracer(&args).output().unwrap()
}

#[test]
fn ustack_names_the_functions_of_a_known_call_chain() {
    let Some(_kernel) = KernelState::acquire("ustack_names_the_functions_of_a_known_call_chain") else {
        return;
    };
    let output = profile_this_process(&[]);
    let text = stdout(&output);
    // One key, innermost frame first, 4-space indent as bpftrace prints map keys.
    let chain = text.split("@[").find(|key| key.contains("stack_test_leaf+"));
    let chain = chain.unwrap_or_else(|| panic!("no stack with stack_test_leaf:\n{text}{}", stderr(&output)));
    let leaf = chain.find("\n    stack_test_leaf+").expect("leaf frame");
    let middle = chain.find("\n    stack_test_middle+").expect("middle frame");
    let outer = chain.find("\n    stack_test_outer+").expect("outer frame");
    assert!(leaf < middle && middle < outer, "frames out of order:\n{chain}");
}

#[test]
fn folded_output_gives_flame_graph_lines() {
    let Some(_kernel) = KernelState::acquire("folded_output_gives_flame_graph_lines") else { return };
    let output = profile_this_process(&["-f", "folded"]);
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains("stack_test_outer;stack_test_middle;stack_test_leaf "));
    let line =
        line.unwrap_or_else(|| panic!("no folded line for the call chain:\n{text}{}", stderr(&output)));
    let count: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count > 0);
    assert!(!line.contains('+'), "offsets are dropped in folded lines: {line}");
}

#[test]
fn kstack_of_system_calls_shows_the_syscall_entry() {
    let Some(_kernel) = KernelState::acquire("kstack_of_system_calls_shows_the_syscall_entry") else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let caller = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            // SAFETY: getppid has no preconditions.
            black_box(unsafe { libc::getppid() });
        }
    });
    let me = std::process::id().to_string();
    let output = tracer(&[
        "-q",
        "-p",
        &me,
        "-e",
        "profile:hz:199 { @[kstack] = count(); } interval:ms:700 { exit(); }",
    ])
    .output()
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    caller.join().unwrap();
    let text = stdout(&output);
    assert!(
        text.contains("\n    do_syscall_64+"),
        "no kernel stack through do_syscall_64:\n{text}{}",
        stderr(&output)
    );
}

/// A C program `main → top → mid → leaf → getppid()` with frame pointers, built once into the target directory;
/// `None` when there is no C compiler.
fn exiting_program() -> Option<std::path::PathBuf> {
    static BUILT: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
            let (source, binary) = (dir.join("stack_chain.c"), dir.join("stack_chain"));
            std::fs::write(
                &source,
                "#include <unistd.h>\n\
                 __attribute__((noinline)) int leaf(void) { return getppid(); }\n\
                 __attribute__((noinline)) int mid(void) { return leaf() + 1; }\n\
                 __attribute__((noinline)) int top(void) { return mid() + 1; }\n\
                 int main(void) { return top() > 0 ? 0 : 1; }\n",
            )
            .ok()?;
            let built = std::process::Command::new("cc")
                .args(["-O0", "-fno-omit-frame-pointer", "-g", "-o"])
                .arg(&binary)
                .arg(&source)
                .status();
            built.is_ok_and(|s| s.success()).then_some(binary)
        })
        .clone()
}

/// [`exiting_program`], when the test can trace; `None` after saying why not (SKIPPED).
fn traceable_program(test: &str) -> Option<std::path::PathBuf> {
    if !can_trace(test) {
        return None;
    }
    let program = exiting_program();
    if program.is_none() {
        println!("SKIPPED: {test}: needs a C compiler (cc)");
    }
    program
}

/// The frames of the program's getppid stack, as text and in JSON, have names although the program exited before
/// they were printed.
fn assert_named_after_exit(text: &str, json: bool) {
    // With frame pointers, the frame of `leaf` (whose callee getppid keeps no frame) is not seen: see dw_ustack.
    let wanted = ["getppid+", "mid+", "top+", "main+"];
    let stack = if json { text.replace("\\n", "\n") } else { text.to_string() };
    let positions: Vec<Option<usize>> =
        wanted.iter().map(|name| stack.find(&format!("\n    {name}"))).collect();
    assert!(positions.iter().all(Option::is_some), "not every frame named in\n{text}");
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "frames out of order in\n{text}");
    // The C library's own frame, where its symbols (or libc6-dbg's) name it.
    if std::path::Path::new("/usr/lib/debug/.build-id").is_dir() {
        assert!(stack.contains("\n    __libc_start_call_main+"), "no libc frame in\n{text}");
    }
}

#[test]
fn the_stacks_of_a_command_that_exited_are_named() {
    let test = "the_stacks_of_a_command_that_exited_are_named";
    let Some(program) = traceable_program(test) else { return };
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[ustack] = count(); }";
    for json in [false, true] {
        let format = if json { "json" } else { "text" };
        let output = tracer(&["-q", "-f", format, "-c", &program.to_string_lossy(), "-e", script])
            .output()
            .expect("run the tracer");
        assert!(output.status.success(), "{}", stderr(&output));
        assert_named_after_exit(&stdout(&output), json);
    }
}

#[test]
fn the_stacks_of_a_short_lived_process_not_started_by_the_tracer_are_named() {
    let test = "the_stacks_of_a_short_lived_process_not_started_by_the_tracer_are_named";
    let Some(program) = traceable_program(test) else { return };
    let script = r#"tracepoint:syscalls:sys_enter_getppid /comm == "stack_chain"/ { @[ustack] = count(); }"#;
    let mut child = tracer(&["-e", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the tracer");
    drop(wait_for_stderr_line(&mut child, "Attached"));
    // Started by a shell, as any other program, and gone well before the maps are printed.
    let ran = std::process::Command::new("sh").arg("-c").arg(&program).status().expect("run the program");
    assert!(ran.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGINT);
    let output = wait_output(child, std::time::Duration::from_secs(20));
    assert_named_after_exit(&stdout(&output), false);
}

#[test]
fn usym_of_a_command_that_exited_is_named() {
    let test = "usym_of_a_command_that_exited_is_named";
    let Some(program) = traceable_program(test) else { return };
    let program = program.to_string_lossy();
    let script = format!(r#"uprobe:{program}:mid {{ @[usym(reg("ip"))] = count(); }}"#);
    let output = tracer(&["-q", "-c", &program, "-e", &script]).output().expect("run the tracer");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "@[mid]: 1");
}
