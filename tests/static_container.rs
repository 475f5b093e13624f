//! The static binary (scripts/build-static) in a container as a user would copy it in: an empty root
//! directory holding only that binary and a static test program, /proc, /sys and tracefs mounted inside it,
//! chroot, only CAP_BPF and CAP_PERFMON, a seccomp filter failing perf_event_open with EPERM, and fresh mount
//! and pid namespaces (`unshare`, then examples/container_entry.rs). No libc, libelf or zlib in there.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The test program: calls `traced_call` 7 times, then opens `/steadytrace-marker` (absent) 5 times.
const PROGRAM: &str = r#"
#include <fcntl.h>
#include <unistd.h>
__attribute__((noinline)) int traced_call(int i) { __asm__ volatile("" ::: "memory"); return i + 1; }
int main(void) {
    int sum = 0;
    for (int i = 0; i < 7; i++) sum += traced_call(i);
    for (int i = 0; i < 5; i++) { int fd = open("/steadytrace-marker", O_RDONLY); if (fd >= 0) close(fd); }
    return sum == 28 ? 0 : 1;
}
"#;
const CALLS: usize = 7;
const OPENS: usize = 5;

/// The static binary, built once for all the tests of this file (a release build: minutes).
fn static_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-static");
        let output =
            Command::new(&script).stderr(Stdio::inherit()).output().expect("run scripts/build-static");
        assert!(output.status.success(), "scripts/build-static failed");
        let path = PathBuf::from(stdout(&output).lines().last().expect("a path on the last line"));
        assert!(path.is_absolute() && path.is_file(), "{path:?}");
        path
    })
}

/// The static test program, built once; `None` when gcc cannot link statically here.
fn static_program() -> Option<&'static Path> {
    static PROGRAM_BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROGRAM_BINARY
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let source = dir.join("static_container_prog.c");
            let binary = dir.join("static_container_prog");
            std::fs::write(&source, PROGRAM).unwrap();
            let built = Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&binary).arg(&source).status();
            built.is_ok_and(|s| s.success()).then_some(binary)
        })
        .as_deref()
}

fn container_entry() -> PathBuf {
    Path::new(BIN).parent().expect("target dir").join("examples").join("container_entry")
}

/// An empty root directory with `/steadytrace` and `/prog` (and `extra` files); removed on drop, after
/// checking that no mount under it is left in the host's mount table.
struct Container {
    root: PathBuf,
}

impl Container {
    /// `None` (after [`skip`]) where the machine cannot make one.
    fn new(test: &str, extra: &[(&str, &str)]) -> Option<Container> {
        if !cfg!(target_arch = "x86_64") {
            skip(test, "scripts/build-static builds for x86_64 only");
            return None;
        }
        if !can_trace(test) {
            return None;
        }
        for tool in ["unshare", "gcc"] {
            if Command::new(tool).arg("--version").output().is_err() {
                skip(test, &format!("needs {tool}"));
                return None;
            }
        }
        let Some(program) = static_program() else {
            skip(test, "gcc cannot link a static program (libc6-dev)");
            return None;
        };
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("steadytrace-container-{}-{n}", std::process::id()));
        std::fs::create_dir(&root).unwrap();
        let container = Container { root };
        std::fs::copy(static_binary(), container.root.join("steadytrace")).unwrap();
        std::fs::copy(program, container.root.join("prog")).unwrap();
        for (path, text) in extra {
            let path = container.root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Some(container)
    }

    /// `COMMAND ARGS` inside the container; `None` (after [`skip`]) when the namespaces cannot be made.
    fn run(&self, test: &str, command: &str, args: &[&str]) -> Option<Output> {
        let child = Reaped::spawn(
            Command::new("unshare")
                .args(["--mount", "--pid", "--fork", "--propagation", "private"])
                .arg(container_entry())
                .arg(&self.root)
                .arg(command)
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("spawn unshare");
        let output = wait_output(child, Duration::from_secs(60));
        assert_eq!(self.leftover_mounts(), Vec::<String>::new(), "mounts left on the host");
        if stderr(&output).starts_with("unshare: ") {
            skip(test, &format!("cannot make mount and pid namespaces: {}", stderr(&output)));
            return None;
        }
        Some(output)
    }

    /// Lines of the host's mount table under the container's root.
    fn leftover_mounts(&self) -> Vec<String> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let root = self.root.to_string_lossy().into_owned();
        table.lines().filter(|line| line.contains(&root)).map(str::to_string).collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Never delete through a mount (sysfs, tracefs); there is none unless the namespace leaked one.
        if self.leftover_mounts().is_empty() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Runs `args` in a fresh container and checks that the tracer succeeded; `None` when skipped.
fn traced(test: &str, extra: &[(&str, &str)], args: &[&str]) -> Option<Output> {
    let container = Container::new(test, extra)?;
    let output = container.run(test, "/steadytrace", args)?;
    assert!(output.status.success(), "{}", stderr(&output));
    Some(output)
}

#[test]
fn the_binary_is_static_and_the_container_holds_only_cap_bpf_cap_perfmon_and_the_filter() {
    let test = "the_binary_is_static_and_the_container_holds_only_cap_bpf_cap_perfmon_and_the_filter";
    let Some(container) = Container::new(test, &[]) else { return };
    let file = Command::new("file").arg("-L").arg(static_binary()).output().unwrap();
    assert!(stdout(&file).contains("static-pie linked"), "{}", stdout(&file));
    // The root is empty indeed: the dynamic build cannot start there (no loader, no libc).
    std::fs::copy(BIN, container.root.join("dynamic")).unwrap();
    let Some(output) = container.run(test, "/dynamic", &["--info"]) else { return };
    assert!(!output.status.success() && stdout(&output).is_empty(), "{}", stderr(&output));
    assert!(stderr(&output).contains("exec \"/dynamic\""), "{}", stderr(&output));
    let Some(output) = container.run(test, "/steadytrace", &["--info"]) else { return };
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for line in ["capabilities: CAP_PERFMON, CAP_BPF", "seccomp_filter: yes", "initial_user_namespace: yes"] {
        assert!(text.lines().any(|l| l == line), "`{line}` missing:\n{text}");
    }
    assert!(text.contains("\nperf_event_open: no (Operation not permitted"), "{text}");
}

// At exit the tracer prints two newlines and then the maps, as bpftrace does.

#[test]
fn begin_and_end_run() {
    let script = r#"BEGIN { printf("begin\n"); exit(); } END { printf("end\n"); }"#;
    let Some(output) = traced("begin_and_end_run", &[], &["-e", script]) else { return };
    assert_eq!(stdout(&output), "begin\nend\n\n\n");
}

#[test]
fn interval_fires_ten_times() {
    let script = r#"interval:ms:10 { @n = @n + 1; if (@n == 10) { printf("ten\n"); exit(); } }"#;
    let Some(output) = traced("interval_fires_ten_times", &[], &["-q", "-e", script]) else { return };
    assert_eq!(stdout(&output), "ten\n\n\n@n: 10\n");
}

#[test]
fn a_uprobe_on_the_traced_program_counts_its_calls() {
    let script = "uprobe:/prog:traced_call { @calls = count(); }";
    let Some(output) =
        traced("a_uprobe_on_the_traced_program_counts_its_calls", &[], &["-e", script, "-c", "/prog"])
    else {
        return;
    };
    assert_eq!(stdout(&output), format!("\n\n@calls: {CALLS}\n"));
}

/// Through the raw_syscalls path, since the filter denies perf_event_open. Filtered on `comm`: inside a pid
/// namespace `cpid` is the container's number for the child and `pid` the host's (docs/CONTAINERS.md). The
/// program runs under a name of this test process's own, as the tracepoint sees every process of the machine
/// (the other tests run `/prog` at the same time).
#[test]
fn a_syscall_tracepoint_prints_the_files_the_program_opens() {
    let test = "a_syscall_tracepoint_prints_the_files_the_program_opens";
    let Some(container) = Container::new(test, &[]) else { return };
    let name = format!("stc{}", std::process::id());
    std::fs::copy(container.root.join("prog"), container.root.join(&name)).unwrap();
    let script = format!(
        r#"tracepoint:syscalls:sys_enter_openat /comm == "{name}"/ {{ printf("%s\n", str(args.filename)); }}"#
    );
    let command = format!("/{name}");
    let Some(output) = container.run(test, "/steadytrace", &["-v", "-e", &script, "-c", &command]) else {
        return;
    };
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("{}\n\n", "/steadytrace-marker\n".repeat(OPENS)));
    let err = stderr(&output);
    assert!(err.contains("runs on the raw tracepoint raw_syscalls:sys_enter"), "{err}");
}

/// glibc linked statically still reads /etc/passwd for `username` (its `files` lookup is built in), and
/// prints the number where the container has no password database.
#[test]
fn username_reads_the_containers_passwd() {
    let test = "username_reads_the_containers_passwd";
    let script = r#"BEGIN { printf("%s\n", username); exit(); }"#;
    let passwd = [("etc/passwd", "container-root:x:0:0::/:/steadytrace\n")];
    let Some(output) = traced(test, &passwd, &["-q", "-e", script]) else { return };
    assert_eq!(stdout(&output), "container-root\n\n\n");
    let Some(output) = traced(test, &[], &["-q", "-e", script]) else { return };
    assert_eq!(stdout(&output), "0\n\n\n");
}
