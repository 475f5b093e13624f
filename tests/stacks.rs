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
