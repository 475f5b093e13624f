//! bpftrace 0.17's tools (Debian's bpftrace package, /usr/sbin/*.bt), run unmodified under a workload that makes
//! each one print. Every tool that bpftrace 0.17 itself runs on this kernel is here; the kprobe tools run in the
//! guest (tests/guest.rs). Each run checks the tool's header against bpftrace's own (when bpftrace is installed,
//! run the same way), and that the workload's event lines and the maps printed at exit are there, in bpftrace's
//! format.

mod common;

use common::{tracer, KernelState};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

struct Tool {
    name: &'static str,
    /// The shell script the tool traces (its `-c` is `/bin/sh SCRIPT`: bpftrace 0.17 splits `-c` at white
    /// space); `exec` keeps the pid that uprobes are limited to. Standard input is a file of two shell commands.
    workload: &'static str,
    /// Each entry: some line of the output holds all these pieces.
    lines: &'static [&'static [&'static str]],
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "bashreadline",
        workload: "exec /bin/bash --norc -i < WORKDIR/commands",
        lines: &[&["echo steadytrace-marker"]],
    },
    Tool {
        name: "bitesize",
        workload: "dd if=/dev/zero of=WORKDIR/file bs=64k count=32 oflag=direct status=none",
        lines: &[&["@[dd]:"], &["[64K, 128K)", "|@"]],
    },
    // Busy for half a second: cpuwalk samples only CPUs running a task. Its lhist has step 1: rows `[0]`, as
    // bpftrace 0.27.1 labels them (0.17: `[0, 1)`).
    Tool {
        name: "cpuwalk",
        workload: "timeout 0.5 sh -c 'while :; do :; done'; true",
        lines: &[&["@cpu:"], &["[", "]", "|@"]],
    },
    Tool {
        name: "execsnoop",
        workload: "/bin/true steadytrace-marker",
        lines: &[&["/bin/true steadytrace-marker"]],
    },
    Tool {
        name: "gethostlatency",
        workload: "exec getent hosts localhost",
        lines: &[&["getent", "localhost"]],
    },
    Tool { name: "killsnoop", workload: "sleep 5 & kill -USR1 $!", lines: &[&["10", "0"]] },
    Tool { name: "naptime", workload: "sleep 0.2", lines: &[] },
    Tool { name: "opensnoop", workload: "cat WORKDIR/commands", lines: &[&["cat", "WORKDIR/commands"]] },
    Tool {
        name: "pidpersec",
        workload: "for i in 1 2 3 4 5; do /bin/true; done; sleep 1.2",
        lines: &[&["@: "]],
    },
    Tool { name: "runqlat", workload: "sleep 0.5", lines: &[&["@usecs:"], &[")", "|@"]] },
    Tool {
        name: "setuids",
        workload: "setpriv --reuid=65534 /bin/true",
        lines: &[&["setpriv", "setresuid", "ruid=65534"]],
    },
    Tool { name: "statsnoop", workload: "stat WORKDIR/commands", lines: &[&["stat", "WORKDIR/commands"]] },
    Tool {
        name: "syncsnoop",
        workload: "sync WORKDIR/commands",
        lines: &[&["sync", "tracepoint:syscalls:sys_enter_"]],
    },
    Tool {
        name: "syscount",
        workload: "sleep 0.5",
        lines: &[&["Top 10 syscalls IDs:"], &["@syscall["], &["Top 10 processes:"], &["@process["]],
    },
    Tool {
        name: "writeback",
        workload: "dd if=/dev/zero of=WORKDIR/file bs=1M count=4 status=none; sync",
        lines: &[],
    },
    Tool { name: "ssllatency", workload: "exec openssl speed -seconds 1 rsa2048", lines: &[] },
    Tool { name: "sslsnoop", workload: "exec openssl speed -seconds 1 rsa2048", lines: &[] },
    Tool { name: "threadsnoop", workload: "sleep 0.2", lines: &[] },
];

fn tools_dir() -> Option<&'static Path> {
    let dir = Path::new("/usr/sbin");
    dir.join("opensnoop.bt").exists().then_some(dir)
}

fn bpftrace_installed() -> bool {
    Command::new("bpftrace").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The tool's header: the lines its BEGIN prints, before the first event, map or blank line.
fn header(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|line| !line.starts_with("Attaching "))
        .take_while(|line| {
            !line.is_empty() && !line.starts_with('@') && !line.starts_with(|c: char| c.is_ascii_digit())
        })
        .collect()
}

fn run(program: &mut Command, stdin: &Path) -> Output {
    let stdin = std::fs::File::open(stdin).expect("stdin file");
    let child = common::Reaped::spawn(program.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped()))
        .expect("spawn");
    common::wait_output(child, Duration::from_secs(60))
}

fn workdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("steadytrace-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("work dir");
    std::fs::write(dir.join("commands"), "echo steadytrace-marker\nexit\n").expect("commands file");
    dir
}

#[test]
fn bpftrace_0_17_tools_run_unmodified() {
    let Some(_state) = KernelState::acquire("bpftrace_0_17_tools_run_unmodified") else { return };
    let Some(dir) = tools_dir() else {
        common::skip(
            "bpftrace_0_17_tools_run_unmodified",
            "bpftrace 0.17's tools are not installed (apt-get install bpftrace)",
        );
        return;
    };
    if common::tracefs().is_none() {
        common::skip("bpftrace_0_17_tools_run_unmodified", "tracefs cannot be mounted");
        return;
    }
    let compare = bpftrace_installed();
    if !compare {
        println!("note: bpftrace is not installed: headers are checked for presence, not against bpftrace's");
    }
    let work = workdir();
    let work_text = work.to_str().expect("utf-8 temp dir");
    let mut failures = Vec::new();
    for tool in TOOLS {
        let script = dir.join(format!("{}.bt", tool.name));
        let script_file = work.join(format!("{}.sh", tool.name));
        // The workload's own output would mix with the tool's.
        let text = format!("exec >/dev/null 2>&1\n{}\n", tool.workload.replace("WORKDIR", work_text));
        std::fs::write(&script_file, text).expect("workload script");
        let workload = format!("/bin/sh {}", script_file.display());
        let commands = work.join("commands");
        let ours = run(tracer(&[script.to_str().unwrap(), "-c", &workload]).current_dir(&work), &commands);
        let stdout = String::from_utf8_lossy(&ours.stdout);
        let stderr = String::from_utf8_lossy(&ours.stderr);
        let mut problems = Vec::new();
        if !ours.status.success() {
            problems.push(format!("exit status {}", ours.status));
        }
        if header(&stdout).is_empty() {
            problems.push("no header".to_string());
        }
        for pieces in tool.lines {
            let pieces: Vec<String> = pieces.iter().map(|p| p.replace("WORKDIR", work_text)).collect();
            if !stdout.lines().any(|line| pieces.iter().all(|p| line.contains(p.as_str()))) {
                problems.push(format!("no line with {pieces:?}"));
            }
        }
        if compare {
            let theirs = run(
                Command::new("bpftrace").args([script.to_str().unwrap(), "-c", &workload]).current_dir(&work),
                &commands,
            );
            let their_stdout = String::from_utf8_lossy(&theirs.stdout);
            if !theirs.status.success() {
                let why = String::from_utf8_lossy(&theirs.stderr);
                let why = why.lines().find(|l| !l.contains("RLIMIT_MEMLOCK")).unwrap_or("").to_string();
                println!(
                    "note: bpftrace 0.17 itself fails on {} here ({why}): header not compared",
                    tool.name
                );
            } else if header(&their_stdout) != header(&stdout) {
                problems.push(format!(
                    "header differs from bpftrace's:\n  bpftrace:    {:?}\n  steadytrace: {:?}",
                    header(&their_stdout),
                    header(&stdout)
                ));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{}: {}\n--- stdout\n{}\n--- stderr\n{}",
                tool.name,
                problems.join("; "),
                stdout.chars().take(2000).collect::<String>(),
                stderr.chars().take(2000).collect::<String>()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        failures.is_empty(),
        "{} of {} tools failed:\n{}",
        failures.len(),
        TOOLS.len(),
        failures.join("\n\n")
    );
}

/// Current bpftrace's opensnoop.bt walks the task's working directory (dentries and mounts through BTF, in
/// two bounded loops) to print a relative path in full, and names the error with `-- --errname`.
#[test]
fn current_opensnoop_prints_relative_paths_in_full() {
    let test = "current_opensnoop_prints_relative_paths_in_full";
    let Some(_state) = KernelState::acquire(test) else { return };
    if common::tracefs().is_none() {
        common::skip(test, "tracefs cannot be mounted");
        return;
    }
    let tool = match common::fetched("bpftrace-tools") {
        Ok(dir) => dir.join("opensnoop.bt"),
        Err(why) => {
            common::skip(test, &format!("bpftrace's tools cannot be had: {why}"));
            return;
        }
    };
    let work = workdir().join("opensnoop");
    std::fs::create_dir_all(work.join("dir")).expect("work dir");
    std::fs::write(work.join("dir/present"), "x").expect("file");
    let work = work.canonicalize().expect("canonical work dir");
    let script = work.join("workload.sh");
    std::fs::write(&script, "cd dir\ncat ./absent present >/dev/null 2>&1\n").expect("workload");
    let workload = format!("/bin/sh {}", script.display());
    let dir = work.join("dir");
    for (extra, absent) in [(None, "  -1   2 "), (Some("--errname"), "  -1 No such file or directory ")] {
        let mut args = vec![tool.to_str().unwrap(), "-c", &workload];
        args.extend(extra.map(|e| ["--", e]).into_iter().flatten());
        let out = run(tracer(&args).current_dir(&work), Path::new("/dev/null"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{extra:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        let cat_line = |path: String| stdout.lines().find(|l| l.contains(" cat ") && l.ends_with(&path));
        let line = cat_line(format!(" {}/./absent", dir.display()));
        assert!(
            line.is_some_and(|l| l.contains(absent)),
            "{extra:?}: no failed open of ./absent in\n{stdout}"
        );
        let line = cat_line(format!(" {}/present", dir.display()));
        assert!(line.is_some(), "{extra:?}: no open of present in\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&work);
}
