//! `iter:` probes on the kernel's BPF iterators: every task, every open file and every memory mapping of
//! every task, checked against /proc for a process the test starts; `exit()` in an iterator lets the
//! iteration finish, as in bpftrace.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A process sleeping with a file of its own open on fd 0, killed when dropped.
struct Sleeper(Reaped, std::path::PathBuf);

impl Sleeper {
    fn start(name: &str) -> Sleeper {
        let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&file, "input\n").unwrap();
        let child = Reaped::spawn(
            Command::new("sleep").arg("30").stdin(std::fs::File::open(&file).unwrap()).stdout(Stdio::null()),
        )
        .expect("start sleep");
        Sleeper(child, file)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
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

/// A BPF filesystem of the test's own, unmounted (with its pins) when dropped.
struct BpfFs(std::path::PathBuf);

impl BpfFs {
    fn mount(name: &str) -> BpfFs {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&dir).status().expect("run mount");
        assert!(mounted.success(), "mount -t bpf bpf {}", dir.display());
        BpfFs(dir)
    }
}

impl Drop for BpfFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_pinned_iterator_prints_into_its_file_at_each_read() {
    if !can_trace("a_pinned_iterator_prints_into_its_file_at_each_read") {
        return;
    }
    let fs = BpfFs::mount("bpffs-pinned");
    let pin = fs.0.join("files");
    let sleeper = Sleeper::start("iter_pinned_input");
    let me = std::process::id().to_string();
    // Formatted by the kernel: a string's copy, integers of each width, flags and widths.
    let script = format!(
        r#"iter:task_file:{} /ctx.task.pid == $1 || ctx.task.pid == $2/ {{ printf("%d %d %s|%-4x|%hd|%05u\n", ctx.task.pid, ctx.fd, path(ctx.file.f_path, 256), 255, 70000, 42); }}"#,
        pin.display()
    );
    let out = run_with(&["-e", &script, &sleeper.pid(), &me], Duration::from_secs(30));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().next(), Some(format!("Program pinned to {}", pin.display()).as_str()));
    // steadytrace has gone: the kernel runs the program at each read of the file.
    let first = std::fs::read_to_string(&pin).expect("read the pinned iterator");
    let fd0 = format!("{} 0 {}|ff  |4464|00042", sleeper.pid(), sleeper.1.display());
    assert!(first.lines().any(|l| l == fd0), "fd 0 is the file the sleeper reads: {fd0}\n{first}");
    let open = std::fs::read_dir(format!("/proc/{}/fd", sleeper.pid())).unwrap().count();
    let sleepers = first.lines().filter(|l| l.starts_with(&format!("{} ", sleeper.pid())));
    assert_eq!(sleepers.count(), open, "one line per open file:\n{first}");
    let opened = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("iter_pinned_opened_later");
    std::fs::write(&opened, "x").unwrap();
    let named = |text: &str| text.lines().any(|l| l.contains(&format!(" {}|", opened.display())));
    assert!(!named(&first), "{first}");
    let file = std::fs::File::open(&opened).unwrap();
    let second = std::fs::read_to_string(&pin).unwrap();
    assert!(named(&second), "a file this test opened after the first read is in the second:\n{second}");
    drop(file);

    // Pinning over the pin is refused before anything is loaded, with the way out.
    let again = run_with(&["-e", &script, &sleeper.pid(), &me], Duration::from_secs(30));
    assert!(!again.status.success());
    let message = stderr(&again);
    assert!(
        message.contains("stdin:1:1: ERROR: cannot pin") && message.contains("the file exists"),
        "{message}"
    );
    assert!(message.contains(&format!("rm {}", pin.display())) && !message.contains("Attached"), "{message}");
    // A pin naming the filesystem's directory itself.
    let script = format!(r#"iter:task:{} {{ printf("%d\n", ctx.task.pid); }}"#, fs.0.display());
    let message = stderr(&run_with(&["-e", &script], Duration::from_secs(30)));
    assert!(message.contains("that is a directory") && message.contains("/list`"), "{message}");
}

#[test]
fn a_pin_outside_a_bpf_filesystem_says_where_pins_go() {
    if !can_trace("a_pin_outside_a_bpf_filesystem_says_where_pins_go") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let script = format!(r#"iter:task:{}/tasks {{ printf("%d\n", ctx.task.pid); }}"#, dir.display());
    let out = run_with(&["-e", &script], Duration::from_secs(30));
    assert!(!out.status.success());
    let message = stderr(&out);
    // The way out is the usual place, never a mount over the directory named.
    assert!(message.contains("is not on a BPF filesystem"), "{message}");
    assert!(
        message.contains("mount -t bpf bpf /sys/fs/bpf")
            && !message.contains(&format!("bpf {}`", dir.display())),
        "{message}"
    );
}

/// `exit(CODE)` in a pinned iterator runs when the file is read, after steadytrace has gone: the code reaches
/// nobody, which the script's author is told; `exit()` alone is said nothing of.
#[test]
fn an_exit_code_in_a_pinned_iterator_is_warned_of() {
    if !can_trace("an_exit_code_in_a_pinned_iterator_is_warned_of") {
        return;
    }
    let script = r#"iter:task:tasks { if (ctx.task.pid > 5) { exit(2); } if (ctx.task.pid > 9) { exit(); } printf("%d\n", ctx.task.pid); }"#;
    let out = run_with(&["--dry-run", "-e", script], Duration::from_secs(30));
    assert!(out.status.success(), "{}", stderr(&out));
    let message = stderr(&out);
    assert_eq!(message.matches("WARNING").count(), 1, "{message}");
    assert!(
        message.contains("stdin:1:43: WARNING: a pinned iterator's exit code reaches nobody"),
        "{message}"
    );
    assert!(message.contains("/sys/fs/bpf/tasks is read"), "{message}");
}
