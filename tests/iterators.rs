//! `iter:` probes on the kernel's BPF iterators: every task, every open file and every memory mapping of
//! every task, checked against /proc for a process the test starts; `exit()` in an iterator lets the
//! iteration finish, as in bpftrace.

mod common;

use common::*;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A process sleeping with a file of its own open on fd 0, killed when dropped.
struct Sleeper(Child, std::path::PathBuf);

impl Sleeper {
    fn start(name: &str) -> Sleeper {
        let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&file, "input\n").unwrap();
        let child = Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open(&file).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .expect("start sleep");
        Sleeper(child, file)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn iterate(script: &str, args: &[&str]) -> String {
    let mut all = vec!["-q", "-e", script];
    all.extend(args);
    let output = run_with(&all, Duration::from_secs(30));
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn iter_task_visits_every_task_once() {
    if !can_trace("iter_task_visits_every_task_once") {
        return;
    }
    let sleeper = Sleeper::start("iter_task_input");
    let out = iterate(r#"iter:task { printf("%d %s\n", ctx.task.pid, ctx.task.comm); }"#, &[]);
    let line = format!("{} sleep", sleeper.pid());
    assert_eq!(out.lines().filter(|l| *l == line).count(), 1, "the sleeper once:\n{out}");
    // Every thread is a task: the tracer's own threads are among them (the iterator thread reads).
    assert!(out.lines().filter(|l| l.contains(" steadytrace")).count() >= 2, "{out}");
}

#[test]
fn iter_task_file_names_the_open_files_with_path() {
    if !can_trace("iter_task_file_names_the_open_files_with_path") {
        return;
    }
    let sleeper = Sleeper::start("iter_task_file_input");
    let script =
        r#"iter:task_file /ctx.task.pid == $1/ { printf("%d %s\n", ctx.fd, path(ctx.file.f_path, 256)); }"#;
    let out = iterate(script, &[&sleeper.pid()]);
    let fd0 = format!("0 {}", sleeper.1.display());
    assert!(out.lines().any(|l| l == fd0), "fd 0 is the file the sleeper reads: {fd0}\n{out}");
    let open = std::fs::read_dir(format!("/proc/{}/fd", sleeper.pid())).unwrap().count();
    assert_eq!(out.lines().filter(|l| !l.is_empty()).count(), open, "one line per open file:\n{out}");
}

#[test]
fn iter_task_vma_gives_every_mapping() {
    if !can_trace("iter_task_vma_gives_every_mapping") {
        return;
    }
    let sleeper = Sleeper::start("iter_task_vma_input");
    let script =
        r#"iter:task_vma /ctx.task.pid == $1/ { printf("%lx-%lx\n", ctx.vma.vm_start, ctx.vma.vm_end); }"#;
    let out = iterate(script, &[&sleeper.pid()]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", sleeper.pid())).unwrap();
    // The vsyscall page is no mapping of the process's own (the kernel's gate area).
    let expected: Vec<String> = maps
        .lines()
        .filter(|l| !l.ends_with("[vsyscall]"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|range| range.split('-').map(|a| a.trim_start_matches('0')).collect::<Vec<_>>().join("-"))
        .collect();
    let got: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(got, expected, "the mappings of /proc/PID/maps, in order");
}

#[test]
fn exit_in_an_iterator_lets_the_iteration_finish() {
    if !can_trace("exit_in_an_iterator_lets_the_iteration_finish") {
        return;
    }
    let sleeper = Sleeper::start("iter_exit_input");
    let script = r#"iter:task { printf("%d\n", ctx.task.pid); exit(); } END { printf("end\n"); }"#;
    let out = iterate(script, &[]);
    assert!(out.lines().any(|l| l == sleeper.pid()), "the sleeper's line although exit() came first:\n{out}");
    assert!(out.trim_end().ends_with("\nend"), "END runs after the iteration:\n{out}");
}
