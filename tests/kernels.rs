//! Every kernel Android and the LTS distributions ship (issue 20): Debian 11's 5.10, Debian 12's 6.1 and 6.12
//! (bookworm-backports), each booted ONCE in a 4-CPU qemu guest (see docs/TESTING.md), in which one shell script
//! runs the host-built tracer through every probe type and every kernel feature the generated code may use, each
//! with an exact expected output or count from a known workload (examples/workload.rs), plus the seed (an interval
//! probe while cpu0, or cpu1 on 6.12, goes offline and back) and profile revival after cpu1 returns.
//!
//! The script prints one section per case (`== NAME`, the tracer's stdout, `-- stderr` and its stderr, `-- kernel`
//! and what the kernel logged meanwhile, `-- rc=N ms=M`); the host judges every case, prints a table of them
//! (kernel, case, pass or the error it was allowed to end in, seconds it took in the guest) and fails naming each
//! case that failed. `steadytrace --info` of each guest heads the table: `cargo test --test kernels -- --nocapture`.
//! `cargo test --test kernels kernel_5_10` boots one kernel (add `-- --exact` for kernel_6_1, a prefix of
//! kernel_6_12); `STEADYTRACE_GUEST_CASES=seed,profile_revival` runs only those cases.
//!
//! 5.10 lacks bpf_loop (5.17), bpf_for_each_map_elem (5.13), bpf_map_lookup_percpu_elem (5.19), kprobe_multi
//! (5.18), uprobe_multi (6.6), bpf_timer and get_func_ip (5.15). There, range loops and strcontains() run as bounded
//! loops and count/sum/avg reads as shared maps, so they must give the exact output; `for` over a map, `len()` and
//! min/max reads may instead end in ONE error naming the feature's first Linux version and this kernel. The
//! corpus's range of 100,000 iterations with a run-time bound may stop at the bounded loop's limit with a warning
//! (no bounded loop of that length gets past 5.10's verifier), and as 5.10's BTF has no per-CPU variables,
//! `percpu_kaddr()` may be refused. The table says which of these happened.
//!
//! In the 6.12 guests (x86_64 and arm64) a rootless section (issue 37) runs the tracer as root of an unprivileged
//! user namespace with a delegated BPF filesystem (examples/delegated_userns.rs), through a BPF token: see
//! `rootless_cases`.
//!
//! When the rig cannot be set up every test is skipped (`common::skip`) and passes, unless STEADYTRACE_REQUIRE_VM=1.

mod common;

use common::guest::{guest_for, quote, run_on, sections, tracer_for, workload_for, Arch, PRELUDE};
use std::fmt::Write as _;
use std::time::Instant;

/// A guest kernel and what it is expected to offer.
struct Kernel {
    arch: Arch,
    /// How the report names it: the series, `arm64 ` before it for arm64.
    name: &'static str,
    series: &'static str,
    append: &'static str,
    /// The CPU the seed's case takes offline: cpu0 where the kernel lets it go (`cpu0_hotplug`), else cpu1.
    seed_cpu: u32,
    /// `--info` keys whose value must start with `no` on this kernel (all others listed in FEATURES: `yes`).
    lacks: &'static [&'static str],
    /// Whether uprobes are uprobe_multi links here (else perf uprobe events).
    uprobe_multi: bool,
    /// Whether /proc/kallsyms lists variables (CONFIG_KALLSYMS_ALL), where `percpu_kaddr()` finds their addresses:
    /// Debian's arm64 kernels are built without it.
    kallsyms_all: bool,
    /// Whether the kernel's BTF describes its per-CPU variables (`percpu_kaddr()` looks them up there): Debian 11's
    /// 5.10 was built with a pahole that left them out.
    percpu_vars_in_btf: bool,
    /// Whether the rootless cases run (a user namespace with a delegated BPF filesystem: BPF tokens, Linux 6.9).
    rootless: bool,
}

/// `--info` keys checked on every kernel.
const FEATURES: &[&str] = &[
    "btf",
    "kprobes",
    "uprobes",
    "ringbuf",
    "raw_tp",
    "run_on_request",
    "tp_btf",
    "fentry",
    "kprobe_multi",
    "uprobe_multi",
    "bpf_loop",
    "for_each_map_elem",
    "percpu_lookup",
    "get_func_ip",
    "attach_cookie",
    "d_path",
    "per_cpu_ptr",
    "ktime_get_tai_ns",
    "bpf_timer",
    "cmpxchg",
];

const LINUX_5_10: Kernel = Kernel {
    arch: Arch::X86_64,
    name: "5.10",
    series: "5.10",
    append: "cpu0_hotplug",
    seed_cpu: 0,
    lacks: &[
        "kprobe_multi",
        "uprobe_multi",
        "bpf_loop",
        "for_each_map_elem",
        "percpu_lookup",
        "get_func_ip",
        "attach_cookie",
        "ktime_get_tai_ns",
        "bpf_timer",
        "cmpxchg",
    ],
    uprobe_multi: false,
    percpu_vars_in_btf: false,
    kallsyms_all: true,
    rootless: false,
};

const LINUX_6_1: Kernel = Kernel {
    arch: Arch::X86_64,
    name: "6.1",
    series: "6.1",
    append: "cpu0_hotplug",
    seed_cpu: 0,
    // Debian builds 6.1 without CONFIG_FPROBE.
    lacks: &["kprobe_multi", "uprobe_multi"],
    uprobe_multi: false,
    percpu_vars_in_btf: true,
    kallsyms_all: true,
    rootless: false,
};

const LINUX_6_12: Kernel = Kernel {
    arch: Arch::X86_64,
    name: "6.12",
    series: "6.12",
    append: "",
    seed_cpu: 1,
    lacks: &[],
    uprobe_multi: true,
    percpu_vars_in_btf: true,
    kallsyms_all: true,
    rootless: true,
};

/// Debian 12's arm64 6.1: its BPF trampolines cannot reach kernel functions (ftrace's direct calls came to arm64
/// in 6.4), and it is built without CONFIG_FPROBE. cpu0 goes offline through PSCI.
const ARM64_6_1: Kernel = Kernel {
    arch: Arch::Aarch64,
    name: "arm64 6.1",
    series: "6.1",
    append: "",
    seed_cpu: 0,
    lacks: &["kprobe_multi", "uprobe_multi", "fentry", "d_path"],
    uprobe_multi: false,
    percpu_vars_in_btf: true,
    kallsyms_all: false,
    rootless: false,
};

/// Debian 12's arm64 6.12 (bookworm-backports).
const ARM64_6_12: Kernel = Kernel {
    arch: Arch::Aarch64,
    name: "arm64 6.12",
    series: "6.12",
    append: "",
    seed_cpu: 0,
    lacks: &["kprobe_multi"],
    uprobe_multi: true,
    percpu_vars_in_btf: true,
    kallsyms_all: true,
    rootless: true,
};

#[test]
fn arm64_kernel_6_1() {
    check_kernel("arm64_kernel_6_1", &ARM64_6_1);
}

#[test]
fn arm64_kernel_6_12() {
    check_kernel("arm64_kernel_6_12", &ARM64_6_12);
}

#[test]
fn kernel_5_10() {
    check_kernel("kernel_5_10", &LINUX_5_10);
}

#[test]
fn kernel_6_1() {
    check_kernel("kernel_6_1", &LINUX_6_1);
}

#[test]
fn kernel_6_12() {
    check_kernel("kernel_6_12", &LINUX_6_12);
}

/// What one case printed: the tracer's (or the case's) stdout and stderr, its exit status, and how long it took in
/// the guest.
struct Outcome {
    stdout: String,
    stderr: String,
    /// What the kernel logged while the case ran (`run_case` only).
    kernel: String,
    rc: Option<i32>,
    ms: Option<u64>,
}

impl Outcome {
    fn parse(lines: &[String]) -> Outcome {
        let (mut stdout, mut stderr, mut kernel) = (String::new(), String::new(), String::new());
        let (mut part, mut rc, mut ms) = (0, None, None);
        for line in lines {
            if line == "-- stderr" {
                part = 1;
            } else if line == "-- kernel" {
                part = 2;
            } else if let Some(end) = line.strip_prefix("-- rc=") {
                let (code, took) = end.split_once(" ms=").unwrap_or((end, ""));
                (rc, ms) = (code.parse().ok(), took.parse().ok());
            } else {
                let _ = writeln!([&mut stdout, &mut stderr, &mut kernel][part], "{line}");
            }
        }
        Outcome { stdout, stderr, kernel, rc, ms }
    }

    /// The value of a `KEY=VALUE` line of the case's stdout.
    fn field(&self, key: &str) -> Result<&str, String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            .ok_or_else(|| format!("no {key}= line"))
    }

    fn number(&self, key: &str) -> Result<u64, String> {
        let value = self.field(key)?;
        value.parse().map_err(|_| format!("{key}={value} is not a number"))
    }

    fn exited_0(&self) -> Result<(), String> {
        match self.rc {
            Some(0) => Ok(()),
            Some(124) => Err("still running after 120 s (timeout's exit status 124)".into()),
            rc => Err(format!("exit status {rc:?}")),
        }
    }
}

type Check = Box<dyn Fn(&Outcome) -> Result<(), String>>;

struct Case {
    name: &'static str,
    /// Shell lines printing the case's section.
    shell: String,
    check: Check,
    /// On this kernel the tracer may instead refuse the case: fail with no output and errors that all say this.
    refusal: Option<Refusal>,
    /// Another outcome this kernel may give by design, and what it is.
    alternative: Option<(&'static str, Check)>,
    /// Some(why) when the outcome shows the case cannot run in this guest (a missing kernel feature): skipped
    /// through `common::skip`, never passed.
    skip: Option<SkipWhen>,
}

/// Why an outcome shows that a case cannot run here, if it does.
type SkipWhen = Box<dyn Fn(&Outcome) -> Option<String>>;

/// How the tracer may refuse a case: a failure exit, no output, and error lines each holding all of `needles`.
struct Refusal {
    needles: Vec<String>,
    /// Only one error line (a script using a missing feature once).
    single: bool,
}

/// A case running the tracer once: `run_case NAME ENV ARGS...` (see SCRIPT_HELPERS).
fn tracer_case(name: &'static str, env: &str, args: &[&str], check: Check) -> Case {
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    Case {
        name,
        shell: format!("run_case {name} {} {}\n", quote(env), args.join(" ")),
        check,
        refusal: None,
        alternative: None,
        skip: None,
    }
}

impl Case {
    /// The case needs a kernel feature of Linux `since` that has no fallback: on an older kernel the tracer may
    /// refuse it with an error naming that version and this kernel.
    fn needs(mut self, kernel: &Kernel, since: &str) -> Case {
        if older(kernel.series, since) {
            let needles = vec![format!("Linux {since}"), format!("this kernel is {}", kernel.series)];
            self.refusal = Some(Refusal { needles, single: true });
        }
        self
    }

    /// Where `applies` holds the case may instead end as `check` accepts, which is `what` by design.
    fn or_where(mut self, applies: bool, what: &'static str, check: Check) -> Case {
        if applies {
            self.alternative = Some((what, check));
        }
        self
    }

    /// Where `refused` holds the tracer may refuse the case with errors saying `why` (one per use).
    fn may_refuse(mut self, refused: bool, why: &str) -> Case {
        if refused {
            self.refusal = Some(Refusal { needles: vec![why.to_string()], single: false });
        }
        self
    }
}

/// Exactly this stdout, exit status 0.
fn exact(expected: &str) -> Check {
    let expected = expected.to_string();
    Box::new(move |o| {
        o.exited_0()?;
        if o.stdout == expected {
            Ok(())
        } else {
            Err(format!("stdout differs: expected {expected:?}, got {:?}", o.stdout))
        }
    })
}

/// Exit status 0, and these map lines (in any order) besides blank lines and nothing else.
fn maps(expected: &[&str]) -> Check {
    let mut expected: Vec<String> = expected.iter().map(|l| l.to_string()).collect();
    expected.sort();
    Box::new(move |o| {
        o.exited_0()?;
        let mut got: Vec<String> = o.stdout.lines().filter(|l| !l.is_empty()).map(String::from).collect();
        got.sort();
        if got == expected {
            Ok(())
        } else {
            Err(format!("maps differ: expected {expected:?}, got {got:?}"))
        }
    })
}

/// Exit status 0 and some line containing each of `pieces` (not necessarily the same line).
fn contains(pieces: &'static [&'static str]) -> Check {
    Box::new(move |o| {
        o.exited_0()?;
        let missing: Vec<&&str> = pieces.iter().filter(|p| !o.stdout.contains(*p)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("no {missing:?} in stdout {:?}", o.stdout))
        }
    })
}

/// `-lv` output (a tracepoint, then its fields indented), as the fields of each tracepoint.
fn fields_by_tracepoint(listing: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut by_tracepoint = std::collections::BTreeMap::new();
    let mut current: Option<&mut Vec<String>> = None;
    for line in listing.lines() {
        if let Some(field) = line.strip_prefix("    ") {
            if let Some(fields) = current.as_mut() {
                fields.push(field.to_string());
            }
        } else if !line.is_empty() {
            current = Some(by_tracepoint.entry(line.to_string()).or_default());
        }
    }
    by_tracepoint
}

/// `@[KEY]: N` lines of a stdout, as (KEY, N).
fn keyed_counts(stdout: &str) -> Result<Vec<(String, u64)>, String> {
    stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (key, n) = l
                .strip_prefix("@[")
                .and_then(|rest| rest.split_once("]: "))
                .ok_or_else(|| format!("not a keyed count: {l:?}"))?;
            Ok((key.to_string(), n.parse().map_err(|_| format!("not a count: {l:?}"))?))
        })
        .collect()
}

/// The guest's shell functions: `run_case NAME ENV ARGS...` runs `env ENV steadytrace ARGS...` (at most 120 s)
/// and prints its section: stdout, stderr, what the kernel logged meanwhile, the exit status and the milliseconds
/// it took; `show FILE` prints a file ending it with a newline; `spin CPU...` starts a busy loop
/// pinned to each CPU, `stop_spinning` ends them all; `ticks FILE` counts `tick` lines.
const SCRIPT_HELPERS: &str = r#"
show() { cat "$1"; [ -z "$(tail -c1 "$1")" ] || echo; }
run_case() {
  name=$1; env=$2; shift 2
  echo "== $name"
  dmesg -C
  start=$(now_ms)
  rc=0; timeout 120 env $env "$T" "$@" >/tmp/case.out 2>/tmp/case.err </dev/null || rc=$?
  show /tmp/case.out
  echo "-- stderr"
  show /tmp/case.err
  echo "-- kernel"
  dmesg
  echo "-- rc=$rc ms=$(( $(now_ms) - start ))"
}
# run_rootless NAME HARNESS_OPTIONS ARGS...: as run_case, the tracer run by examples/delegated_userns ($H) as root
# of a new user namespace (uid 100000 outside) with a delegated BPF filesystem on /sys/fs/bpf, unless
# HARNESS_OPTIONS says --no-delegate, with kernel.perf_event_paranoid at the guest's boot value. The kernel refuses a user namespace to a chrooted process, and the guest's
# command runs chrooted into its overlay: the harness starts from PID 1's root (the initramfs), in a mount
# namespace of its own where the overlay is moved onto / (as switch_root does), so that it is no chroot. $pre, when
# set, is printed first.
run_rootless() {
  name=$1; hopts=$2; shift 2
  echo "$boot_paranoid" >/proc/sys/kernel/perf_event_paranoid
  echo "== $name"
  [ -z "$pre" ] || echo "$pre"
  dmesg -C
  start=$(now_ms)
  rc=0
  timeout 120 chroot /proc/1/root /bin/unshare -m /bin/sh -c 'cd /newroot && mount --move . / && exec chroot . "$@"' \
    unchrooted "$H" $hopts -- "$T" "$@" >/tmp/case.out 2>/tmp/case.err </dev/null || rc=$?
  show /tmp/case.out
  echo "-- stderr"
  show /tmp/case.err
  echo "-- kernel"
  dmesg
  echo "-- rc=$rc ms=$(( $(now_ms) - start ))"
}
spin() { for c in "$@"; do taskset -c $c sh -c 'while :; do :; done' & echo $! >>/tmp/spinners; done; }
stop_spinning() { kill $(cat /tmp/spinners) 2>/dev/null; rm -f /tmp/spinners; wait 2>/dev/null; }
ticks() { grep -c '^tick' "$1" || true; }
"#;

/// Every case, in the order the guest runs them (the busy ones last).
fn cases(kernel: &Kernel) -> Vec<Case> {
    let w = workload_for(kernel.arch);
    let arch = match kernel.arch {
        Arch::X86_64 => &bpf::arch::X86_64,
        Arch::Aarch64 => &bpf::arch::AARCH64,
    };
    let number = |call: &str| arch.syscall_number(call).expect("a system call of the table");
    // The function the kernel enters each system call through; frames a kernel stack taken at do_nanosleep's
    // entry shows (on arm64 the caller's frame record is not yet written there, so hrtimer_nanosleep is not one);
    // how a user stack names the workload's main (the static aarch64 tracer does not demangle: issue 25).
    let (sys_prefix, kernel_frames, user_frames): (_, &[&str], &[&str]) = match kernel.arch {
        Arch::X86_64 => {
            ("__x64_sys_", &["hrtimer_nanosleep", "do_syscall_64"], &["clock_nanosleep", "workload::main"])
        }
        Arch::Aarch64 => (
            "__arm64_sys_",
            &["__arm64_sys_clock_nanosleep", "invoke_syscall"],
            &["clock_nanosleep", "_ZN8workload4main"],
        ),
    };
    // A uprobe's dw_ustack in perf mode: the probed function, then its caller, each with the workload's path.
    let dw_uprobe_frames: &[&str] = match kernel.arch {
        Arch::X86_64 => &[" workload_add+0 (", " workload::main::"],
        Arch::Aarch64 => &[" workload_add+0 (", " _ZN8workload4main"],
    };
    let lacks_fentry = kernel.lacks.contains(&"fentry");
    let sleeps = format!("{w} sleep 25");
    let calls = format!("{w} calls 50");
    // 40 getppid calls by 4 threads, thread N pinned to cpuN: 10 calls on each CPU.
    let getppids = format!("{w} getppid 40 4");
    let e = |name: &'static str, prog: &str, check: Check| tracer_case(name, "", &["-q", "-e", prog], check);
    let with = |name: &'static str, prog: &str, command: &str, check: Check| {
        tracer_case(name, "", &["-q", "-e", prog, "-c", command], check)
    };
    let begin_interval_end = r#"BEGIN { printf("begin\n"); } interval:ms:200 { printf("tick\n"); exit(); } END { printf("end\n"); }"#;
    let trigger_mechanism =
        if kernel.uprobe_multi { "(a uprobe_multi link)" } else { "(a perf uprobe event)" };
    let lacks: Vec<&str> = kernel.lacks.to_vec();
    let series = kernel.series;

    let mut cases = vec![
        tracer_case(
            "info",
            "",
            &["--info"],
            Box::new(move |o| {
                o.exited_0()?;
                let value = |key: &str| {
                    o.stdout
                        .lines()
                        .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix(": ")))
                        .ok_or_else(|| format!("no `{key}:` line"))
                };
                let mut wrong = vec![];
                if !value("arch")?.starts_with(arch.name) {
                    wrong.push(format!("arch: {}", value("arch")?));
                }
                if !value("kernel_release")?.starts_with(&format!("{series}.")) {
                    wrong.push(format!("kernel_release: {}", value("kernel_release")?));
                }
                if value("cpus_online")? != "0-3" {
                    wrong.push(format!("cpus_online: {}", value("cpus_online")?));
                }
                for key in FEATURES {
                    let want = if lacks.contains(key) { "no" } else { "yes" };
                    let got = value(key)?;
                    if !got.starts_with(want) {
                        wrong.push(format!("{key}: {got} (expected {want})"));
                    }
                }
                if wrong.is_empty() {
                    Ok(())
                } else {
                    Err(format!("unexpected --info values: {wrong:?}"))
                }
            }),
        ),
        // Probe types.
        e("begin_interval_end", begin_interval_end, exact("begin\ntick\nend\n\n\n")),
        tracer_case(
            "begin_interval_end_through_trigger_uprobe",
            "STEADYTRACE_TRIGGER=uprobe",
            &["-v", "-q", "-e", begin_interval_end],
            Box::new(move |o| {
                exact("begin\ntick\nend\n\n\n")(o)?;
                let said = o.stderr.lines().filter(|l| l.contains("runs through the trigger's uprobe")).count();
                let right = o.stderr.lines().filter(|l| l.ends_with(trigger_mechanism)).count();
                if (said, right) == (3, 3) {
                    Ok(())
                } else {
                    Err(format!("-v should say \"{trigger_mechanism}\" for BEGIN, interval and END"))
                }
            }),
        ),
        e(
            "interval",
            r#"interval:ms:100 { @n++; printf("tick %d\n", @n); if (@n == 5) { exit(); } }"#,
            exact("tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n\n\n@n: 5\n"),
        ),
        // Each of the workload's sleeps is one clock_nanosleep(CLOCK_MONOTONIC, 0, ...).
        with(
            "tracepoint_args",
            "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { @[args.which_clock, args.flags] = count(); }",
            &sleeps,
            maps(&["@[1, 0]: 25"]),
        ),
        // sys_enter's arg1 is the system call number: clock_nanosleep's is 230 on x86_64, 115 on arm64.
        with(
            "rawtracepoint",
            &format!("rawtracepoint:sys_enter /pid == cpid && arg1 == {}/ {{ @ = count(); }}", number("clock_nanosleep")),
            &sleeps,
            maps(&["@: 25"]),
        ),
        with("kprobe", "kprobe:do_nanosleep /pid == cpid/ { @ = count(); }", &sleeps, maps(&["@: 25"])),
        // A misspelt function is skipped with a warning naming the nearest one.
        with(
            "kprobe_misspelt",
            "kprobe:do_nanosleeq { @ = count(); } kprobe:do_nanosleep /pid == cpid/ { @n = count(); }",
            &sleeps,
            Box::new(|o| {
                maps(&["@n: 25"])(o)?;
                match o.stderr.contains("no function `do_nanosleeq` to probe (did you mean `kprobe:do_nanosleep`?)") {
                    true => Ok(()),
                    false => Err(format!("no suggestion in stderr: {:?}", o.stderr)),
                }
            }),
        ),
        with(
            "kretprobe",
            "kretprobe:do_nanosleep /pid == cpid/ { @[retval] = count(); }",
            &sleeps,
            maps(&["@[0]: 25"]),
        ),
        // A kprobe and a kretprobe of one function: one program on one kprobe session link where the kernel has
        // them (Linux 6.10 with kprobe_multi: the x86 6.12 guest), two programs elsewhere; counted alike.
        tracer_case(
            "kprobe_session",
            "",
            &[
                "-v",
                "-e",
                "kprobe:do_nanosleep /pid == cpid/ { @entries = count(); } kretprobe:do_nanosleep /pid == cpid/ { @returns[retval] = count(); }",
                "-c",
                &sleeps,
            ],
            session_check(kernel.arch == Arch::X86_64 && kernel.series == "6.12"),
        ),
        // Three functions match `*_nanosleep` on each sleep's path: __x64_sys_clock_nanosleep (__arm64_sys_ on
        // arm64), hrtimer_nanosleep and do_nanosleep.
        with(
            "kprobe_wildcards",
            "kprobe:*_nanosleep /pid == cpid/ { @entries = count(); } kretprobe:*_nanosleep /pid == cpid/ { @returns = count(); } kprobe:do_nanoslee? /pid == cpid/ { @one = count(); }",
            &sleeps,
            maps(&["@entries: 75", "@one: 25", "@returns: 75"]),
        ),
        with(
            "fentry_fexit",
            "fentry:do_nanosleep /pid == cpid/ { @entries = count(); } fexit:do_nanosleep /pid == cpid/ { @returns[retval] = count(); }",
            &sleeps,
            maps(&["@entries: 25", "@returns[0]: 25"]),
        )
        .may_refuse(lacks_fentry, "refuses `f"),
        // workload_add(i, 1) for i in 0..50.
        with(
            "uprobe",
            &format!("uprobe:{w}:workload_add /pid == cpid/ {{ @calls = count(); @ones = sum(arg1); }}"),
            &calls,
            maps(&["@calls: 50", "@ones: 50"]),
        ),
        with(
            "uretprobe",
            &format!("uretprobe:{w}:workload_add /pid == cpid/ {{ @ = sum(retval); }}"),
            &calls,
            maps(&["@: 1275"]),
        ),
        with(
            "uprobe_wildcard",
            &format!("uprobe:{w}:workload_multi_* /pid == cpid/ {{ @[func] = count(); }}"),
            &format!("{w} multi 10"),
            maps(&["@[workload_multi_one]: 10", "@[workload_multi_two]: 20", "@[workload_multi_three]: 30"]),
        ),
        // Every sleep switches the workload out at least once.
        with(
            "software_event",
            "software:cs:1 /pid == cpid/ { @ = count(); }",
            &sleeps,
            Box::new(|o| {
                o.exited_0()?;
                let n: u64 = o
                    .stdout
                    .trim()
                    .strip_prefix("@: ")
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("no `@: N` in {:?}", o.stdout))?;
                if n >= 25 {
                    Ok(())
                } else {
                    Err(format!("{n} context switches for 25 sleeps"))
                }
            }),
        ),
        with(
            "hist",
            &format!("uprobe:{w}:workload_add /pid == cpid/ {{ @h = hist(arg0); }}"),
            &calls,
            exact(concat!(
                "\n\n@h:\n",
                "[0]                    1 |@@                                                  |\n",
                "[1]                    1 |@@                                                  |\n",
                "[2, 4)                 2 |@@@@@                                               |\n",
                "[4, 8)                 4 |@@@@@@@@@@@                                         |\n",
                "[8, 16)                8 |@@@@@@@@@@@@@@@@@@@@@@@                             |\n",
                "[16, 32)              16 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@      |\n",
                "[32, 64)              18 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n",
                "\n",
            )),
        ),
        // The workload is still sleeping when the stack is printed, so its frames resolve.
        with(
            "kstack",
            "kprobe:do_nanosleep /pid == cpid/ { printf(\"%s\", kstack); exit(); }",
            &format!("{w} sleep 500"),
            contains(kernel_frames),
        ),
        with(
            "ustack",
            "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { printf(\"%s\", ustack); exit(); }",
            &format!("{w} sleep 500"),
            contains(user_frames),
        ),
        // dw_ustack: the registers the process entered the kernel with (bpf_task_pt_regs from 5.15, before it
        // read at the top of the task's kernel stack) in a kprobe; a uprobe's own registers.
        with(
            "dw_ustack_kprobe",
            "kprobe:do_nanosleep /pid == cpid/ { printf(\"%s\", dw_ustack); exit(); }",
            &format!("{w} sleep 500"),
            contains(user_frames),
        ),
        with(
            "dw_ustack_uprobe",
            &format!("uprobe:{w}:workload_add /pid == cpid/ {{ printf(\"%s\", dw_ustack(perf)); exit(); }}"),
            &calls,
            contains(dw_uprobe_frames),
        ),
        tracer_case(
            "json",
            "",
            &[
                "-q",
                "-f",
                "json",
                "-e",
                &format!(
                    "uprobe:{w}:workload_add /pid == cpid/ {{ @c = count(); if (arg0 == 7) {{ printf(\"seven %d\\n\", arg0); }} }}"
                ),
                "-c",
                &calls,
            ],
            Box::new(|o| {
                o.exited_0()?;
                let mut records = vec![];
                for line in o.stdout.lines().filter(|l| !l.trim().is_empty()) {
                    let value: serde_json::Value =
                        serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line:?}"))?;
                    records.push(value);
                }
                let expected = [
                    serde_json::json!({"type": "printf", "data": "seven 7\n"}),
                    serde_json::json!({"type": "map", "data": {"@c": 50}}),
                ];
                if records == expected {
                    Ok(())
                } else {
                    Err(format!("records {records:?}, expected {expected:?}"))
                }
            }),
        ),
        with(
            "string_compare",
            r#"tracepoint:syscalls:sys_enter_clock_nanosleep /comm == "workload"/ { @ = count(); }"#,
            &format!("{w} sleep 5"),
            maps(&["@: 5"]),
        ),
        e(
            "printf",
            r#"BEGIN { printf("%d %s %x %5d|%-5s|%u\n", -42, "str", 255, 7, "ab", 3); exit(); }"#,
            exact("-42 str ff     7|ab   |3\n\n\n"),
        ),
        // System calls by this architecture's numbers: syscall_name() of the record's number, and the
        // `syscalls` tracepoints served from `raw_syscalls` (as in containers without perf_event_open).
        with(
            "syscall_name",
            "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @[syscall_name(args.__syscall_nr)] = count(); }",
            &getppids,
            maps(&["@[getppid]: 40"]),
        ),
        tracer_case(
            "syscalls_on_raw_syscalls",
            "STEADYTRACE_SYSCALL_ATTACH=raw",
            &[
                "-q",
                "-e",
                "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { @[args.which_clock, args.flags] = count(); }
                 tracepoint:syscalls:sys_exit_clock_nanosleep /pid == cpid/ { @ret[args.ret] = count(); }
                 tracepoint:syscalls:sys_exit_getppid /pid == cpid/ { @getppid[syscall_name(args.__syscall_nr)] = count(); }",
                "-c",
                &format!("{w} sleep-getppid 25 40"),
            ],
            maps(&["@[1, 0]: 25", "@ret[0]: 25", "@getppid[getppid]: 40"]),
        ),
        // A kernel built without per-syscall tracepoints (as Android's often are), shown by hiding them: the
        // same probes, made up from the tracer's own table, on `raw_syscalls`.
        Case {
            name: "syscalls_without_their_tracepoints",
            shell: format!(
                "mount -t tmpfs none /sys/kernel/tracing/events/syscalls\nrun_case syscalls_without_their_tracepoints '' -q -e {} -c {}\numount /sys/kernel/tracing/events/syscalls\n",
                quote("tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { @[args.which_clock, args.flags] = count(); } tracepoint:syscalls:sys_exit_getppid /pid == cpid/ { @calls[syscall_name(args.__syscall_nr), args.ret > 0] = count(); }"),
                quote(&format!("{w} sleep-getppid 25 40")),
            ),
            check: maps(&["@[1, 0]: 25", "@calls[getppid, true]: 40"]),
            refusal: None,
            alternative: None,
            skip: None,
        },
        // Every per-syscall tracepoint of the kernel is a system call of the tracer's table for this architecture,
        // and the record the tracer makes up for it where they are hidden has the kernel's fields.
        Case {
            name: "syscall_table",
            shell: r#"echo '== syscall_table'
"$T" -lv 'tracepoint:syscalls:sys_enter_*' > /tmp/real.list
mount -t tmpfs none /sys/kernel/tracing/events/syscalls
"$T" -lv 'tracepoint:syscalls:sys_enter_*' > /tmp/made.list
umount /sys/kernel/tracing/events/syscalls
cat /tmp/real.list
echo '-- stderr'
cat /tmp/made.list
echo '-- rc=0'
"#
            .into(),
            check: Box::new(move |o| {
                let (real, made) = (fields_by_tracepoint(&o.stdout), fields_by_tracepoint(&o.stderr));
                let unknown: Vec<&str> = real
                    .keys()
                    .filter_map(|t| t.strip_prefix("tracepoint:syscalls:sys_enter_"))
                    .filter(|call| arch.syscall_number(call).is_none())
                    .collect();
                // The names a script reads (`args.NAME`), in order; older kernels declare a few types otherwise
                // (`void *` for `int *`), which reads the same 8 bytes.
                let names = |fields: &Vec<String>| -> Vec<String> {
                    fields.iter().map(|f| f.rsplit(' ').next().unwrap_or_default().to_string()).collect()
                };
                let differing: Vec<String> = real
                    .iter()
                    .filter(|(t, fields)| made.get(*t).map(names) != Some(names(fields)))
                    .map(|(t, fields)| format!("{t}: kernel {fields:?}, made up {:?}", made.get(t)))
                    .collect();
                if real.len() < 250 {
                    Err(format!("only {} per-syscall tracepoints listed", real.len()))
                } else if !unknown.is_empty() {
                    Err(format!("system calls the {} table lacks: {unknown:?}", arch.name))
                } else if !differing.is_empty() {
                    Err(format!("made-up records that differ: {differing:?}"))
                } else {
                    Ok(())
                }
            }),
            refusal: None,
            alternative: None,
            skip: None,
        },
        // USDT probes of a `<sys/sdt.h>` program built for the guest (tests/usdt): arguments of every kind the
        // compiler wrote (registers, the stack, constants; signed and unsigned, 1 to 8 bytes), and a semaphore.
        match usdt_app(kernel.arch) {
            Ok(app) => with(
                "usdt",
                &format!(
                    r#"usdt:{app}:app:tick {{ printf("%d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4); }}
                       usdt:{app}:app:constant {{ @[arg0, arg1] = count(); }}
                       usdt:{app}:app:guarded {{ @guarded = sum(arg0); }}
                       usdt:{app}:app:done {{ printf("enabled %d\n", arg0); }}"#
                ),
                &format!("{app} 3"),
                exact("0 0 0 -1 60000\n1 1 -3 -2 60001\n2 3 -6 -3 60002\nenabled 3\n\n\n@[5, -7]: 3\n@guarded: 30\n"),
            ),
            Err(why) => Case {
                name: "usdt",
                shell: String::new(),
                check: Box::new(move |_| Err(format!("the USDT program could not be built: {why}"))),
                refusal: None,
                alternative: None,
                skip: None,
            },
        },
        // Kernel features the generated code may use.
        e(
            "for_range",
            "BEGIN { $s = 0; for ($i : 1..7) { $s += $i; } printf(\"%d\\n\", $s); exit(); }",
            exact("21\n\n\n"),
        ),
        e(
            "for_range_runtime_bound",
            "BEGIN { @n = 7; $s = 0; for ($i : 1..@n) { $s += $i; } printf(\"%d\\n\", $s); delete(@n); exit(); }",
            exact("21\n\n\n"),
        ),
        e(
            "for_map",
            "BEGIN { @m[1] = 10; @m[2] = 20; @m[3] = 30; $t = 0; $v = 0; for ($kv : @m) { $t += $kv.1; $v++; } printf(\"%d %d\\n\", $t, $v); clear(@m); exit(); }",
            exact("60 3\n\n\n"),
        )
        .needs(kernel, "5.13"),
        e(
            "len",
            "BEGIN { @m[1] = 10; @m[2] = 20; @m[3] = 30; printf(\"%d\\n\", len(@m)); clear(@m); exit(); }",
            exact("3\n\n\n"),
        )
        .needs(kernel, "5.13"),
        e(
            "strcontains",
            r#"BEGIN { printf("%d %d\n", strcontains("hello world", "o w"), strcontains("hello", "xyz")); exit(); }"#,
            exact("1 0\n\n\n"),
        ),
        e(
            "count_read",
            r#"interval:ms:50 { @ = count(); if (@ >= 5) { exit(); } } END { printf("count %d\n", @); }"#,
            exact("count 5\n\n\n@: 5\n"),
        ),
        // get_func_ip where the wildcard is a kprobe_multi link.
        with(
            "func_in_kprobe_wildcard",
            "kprobe:*_nanosleep /pid == cpid/ { @[func] = count(); }",
            &sleeps,
            maps(&[
                format!("@[{sys_prefix}clock_nanosleep]: 25").as_str(),
                "@[do_nanosleep]: 25",
                "@[hrtimer_nanosleep]: 25",
            ]),
        ),
        // bpf_d_path.
        with(
            "path_in_fentry",
            r#"fentry:security_file_open /pid == cpid/ { if (path(args.file->f_path) == "/proc/version") { @ = count(); } }"#,
            &format!("{w} open /proc/version 3"),
            maps(&["@: 3"]),
        )
        .may_refuse(lacks_fentry, "refuses `fentry`"),
        // bpf_per_cpu_ptr and bpf_this_cpu_ptr on variables of kallsyms: a per-CPU counter read on CPU 0 and on
        // this CPU, and a `struct rq` member.
        e(
            "percpu_kaddr",
            r#"BEGIN {
                printf("processes=%d\n", *percpu_kaddr("process_counts", 0));
                printf("same=%d\n", *percpu_kaddr("process_counts") == *percpu_kaddr("process_counts", cpu));
                $rq = (struct rq *)percpu_kaddr("runqueues", 0);
                if ($rq != 0) { printf("running=%d\n", $rq->nr_running); }
                printf("nocpu=%d\n", percpu_kaddr("runqueues", 100000) == 0);
                exit(); }"#,
            Box::new(|o| {
                o.exited_0()?;
                if o.number("processes")? == 0 {
                    return Err("process_counts of CPU 0 is 0".into());
                }
                o.number("running")?;
                match (o.number("same")?, o.number("nocpu")?) {
                    (1, 1) => Ok(()),
                    other => Err(format!("(same, nocpu) = {other:?}, expected (1, 1)")),
                }
            }),
        )
        .may_refuse(!kernel.percpu_vars_in_btf, "the kernel's BTF has no per-CPU variable")
        .may_refuse(!kernel.kallsyms_all, "/proc/kallsyms does not list it"),
    ];

    // Aggregations read in END, merged over the 4 CPUs: the value on cpuN is N + 1. Before 5.19 (per-CPU lookups)
    // min/max reads need compare-and-exchange (5.12): refused on 5.10, with an error naming 5.19.
    for (name, aggregation, printed, since) in [
        ("count_read_4_cpus", "count()", "count 40", None),
        ("sum_read_4_cpus", "sum(cpu + 1)", "sum 100", None),
        ("avg_read_4_cpus", "avg(cpu + 1)", "avg 2", None),
        ("min_read_4_cpus", "min(cpu + 1)", "min 1", Some("5.19")),
        ("max_read_4_cpus", "max(cpu + 1)", "max 4", Some("5.19")),
    ] {
        let word = printed.split(' ').next().unwrap_or_default();
        let script = format!(
            r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {{ @x = {aggregation}; }} END {{ printf("{word} %d\n", @x); clear(@x); }}"#
        );
        let case = with(name, &script, &getppids, exact(&format!("{printed}\n\n\n")));
        cases.push(match since {
            Some(since) => case.needs(kernel, since),
            None => case,
        });
    }

    // The language corpus's loop scripts, with their expected outputs (break, continue and return in loops, keys
    // and values, bounds known at run time).
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts");
    let expected = |script: &str| {
        std::fs::read_to_string(format!("{corpus}/{script}.steadytrace.out"))
            .unwrap_or_else(|e| panic!("{script}.steadytrace.out: {e}"))
    };
    let corpus_case = |name: &'static str, script: &str| {
        tracer_case(name, "", &["-q", &format!("{corpus}/{script}.bt")], exact(&expected(script)))
    };
    for (name, script) in [
        ("corpus_for_map_entries", "for_map_entries"),
        ("corpus_for_map_keys_values", "for_map_keys_values"),
        ("corpus_for_map_control", "for_map_control"),
    ] {
        cases.push(corpus_case(name, script).needs(kernel, "5.13"));
    }
    // Its first loop sums 0..@n with @n = 100,000. A bounded loop (no bpf_loop) stops at its limit with a warning.
    let capped = expected("for_range");
    cases.push(corpus_case("corpus_for_range", "for_range").or_where(
        kernel.lacks.contains(&"bpf_loop"),
        "the 100,000-iteration loop stopped at the bounded loop's limit, with a warning",
        Box::new(move |o| {
            o.exited_0()?;
            let limit: u64 = o
                .stderr
                .split_once("WARNING: this loop stopped after ")
                .and_then(|(_, rest)| rest.split_once(" iterations"))
                .and_then(|(n, _)| n.parse().ok())
                .ok_or("no `WARNING: this loop stopped after N iterations`")?;
            let partial = capped.replace("sum 4999950000\n", &format!("sum {}\n", limit * (limit - 1) / 2));
            if o.stdout == partial {
                Ok(())
            } else {
                Err(format!("stdout differs: expected {partial:?}, got {:?}", o.stdout))
            }
        }),
    ));
    cases.push(corpus_case("corpus_strcontains", "strcontains"));
    if kernel.arch == Arch::X86_64 {
        cases.extend(module_address_and_program_probes(kernel));
    }

    if kernel.rootless {
        cases.extend(rootless_cases(kernel));
    }
    cases.push(seed("seed", kernel.seed_cpu));
    // Where cpu0 is the seed's CPU, cpu1 too: an interval probe must not care which CPU leaves.
    if kernel.seed_cpu == 0 {
        cases.push(seed("seed_cpu1", 1));
    }
    cases.push(Case {
        name: "profile",
        shell: format!(
            "spin 0 1 2 3\nrun_case profile '' -q -e {}\n",
            quote("profile:hz:99 { @[cpu] = count(); } interval:s:2 { exit(); }")
        ),
        check: Box::new(|o| {
            o.exited_0()?;
            let counts = keyed_counts(&o.stdout)?;
            let mut cpus: Vec<&str> =
                counts.iter().filter(|(_, n)| *n > 0).map(|(cpu, _)| cpu.as_str()).collect();
            cpus.sort();
            if cpus == ["0", "1", "2", "3"] {
                Ok(())
            } else {
                Err(format!("samples on CPUs {cpus:?}, all 4 were busy"))
            }
        }),
        refusal: None,
        alternative: None,
        skip: None,
    });
    cases.push(profile_revival());
    cases.push(pinned_iterator());
    cases
}

/// Opens /dev/net/tun 5 times from one shell (the tun module's `tun_chr_open` runs in the shell itself), in a
/// script the module cases run as `-c /bin/sh /tmp/open_tun`; written by the first of them, after loading tun.
const OPEN_TUN: &str =
    "modprobe tun\nprintf 'for i in 1 2 3 4 5; do : </dev/net/tun; done\\n' >/tmp/open_tun\n";

/// Kprobes and trampolines on a module's function (tun, loaded by the first case): named with its module,
/// without it, as a wildcard, at its return, and listed; a module that is not loaded; fentry and fexit on
/// another tracer's BPF program (`fentry:bpf:`); and a kprobe on a bare address, `do_nanosleep`'s from
/// /proc/kallsyms, which needs `--unsafe`.
fn module_address_and_program_probes(kernel: &Kernel) -> Vec<Case> {
    let w = workload_for(Arch::X86_64);
    let tun_script = "kprobe:tun:tun_chr_open /pid == cpid/ { @module = count(); } \
         kprobe:tun_chr_open /pid == cpid/ { @bare = count(); @func[func] = count(); } \
         kretprobe:tun:tun_chr_open /pid == cpid/ { @ret[retval] = count(); } \
         kprobe:t?n:tun_chr_op* /pid == cpid/ { @wildcard = count(); } \
         kprobe:tun:tun_chr_open { @probe[probe] = count(); }";
    let shell =
        |name: &str, body: String| format!("{}{body}", if name == "kprobe_module" { OPEN_TUN } else { "" });
    let case = |name: &'static str, body: String, check: Check| Case {
        name,
        shell: shell(name, body),
        check,
        refusal: None,
        alternative: None,
        skip: None,
    };
    vec![
        case(
            "kprobe_module",
            format!("run_case kprobe_module '' -q -e {} -c '/bin/sh /tmp/open_tun'\n", quote(tun_script)),
            maps(&[
                "@module: 5",
                "@bare: 5",
                "@func[tun_chr_open]: 5",
                "@ret[0]: 5",
                "@wildcard: 5",
                "@probe[kprobe:tun:tun_chr_open]: 5",
            ]),
        ),
        // Module BTF came in Linux 5.11: trampolines on a module's functions need it.
        case(
            "fentry_module",
            format!(
                "run_case fentry_module '' -q -e {} -c '/bin/sh /tmp/open_tun'\n",
                quote(
                    "fentry:tun:tun_chr_open /pid == cpid/ { @entry = count(); } \
                     fexit:tun:tun_chr_open /pid == cpid/ { @exit[retval] = count(); } \
                     fentry:tun:tun_chr_op* /pid == cpid/ { @[probe] = count(); }"
                )
            ),
            maps(&["@entry: 5", "@exit[0]: 5", "@[fentry:tun:tun_chr_open]: 5"]),
        )
        .may_refuse(kernel.series == "5.10", "CONFIG_DEBUG_INFO_BTF_MODULES"),
        // A tracer counting workload_add's calls with a uprobe is itself traced: its program's function, named
        // after its probe as bpftrace names them, at entry and exit, each of the 50 calls counted.
        case(
            "fentry_bpf",
            format!(
                "\"$T\" -q -e {} >/tmp/traced.out 2>&1 &\ntraced=$!\n\
                 for i in $(seq 1 300); do \"$T\" -l 'fentry:bpf:*workload_add_1' | grep -q . && break; sleep 0.2; done\n\
                 sleep 1\n\
                 run_case fentry_bpf '' -q -e {} -c {}\n\
                 kill -INT $traced; wait $traced\n",
                quote(&format!("uprobe:{w}:workload_add {{ @calls = count(); }}")),
                quote(
                    "fentry:bpf:uprobe_*_workload_add_1 { @entries = count(); @[probe == \"x\", func] = count(); } \
                     fexit:bpf:uprobe_*_workload_add_1 { @exits[retval] = count(); }"
                ),
                quote(&format!("{w} calls 50"))
            ),
            Box::new(|o| {
                o.exited_0()?;
                let lines: Vec<&str> = o.stdout.lines().filter(|l| !l.is_empty()).collect();
                let mut expected = vec![
                    "@entries: 50".to_string(),
                    "@exits[0]: 50".to_string(),
                ];
                expected.sort();
                let mut got: Vec<String> =
                    lines.iter().filter(|l| !l.starts_with("@[")).map(|l| l.to_string()).collect();
                got.sort();
                // `func` is the function's name, cut to the 64 bytes of a string.
                let named = lines.iter().any(|l| l.starts_with("@[false, uprobe_") && l.ends_with("]: 50"));
                match got == expected && named {
                    true => Ok(()),
                    false => Err(format!("expected {expected:?} and `func` naming the traced program's function 50 times, got {lines:?}")),
                }
            }),
        )
        .may_refuse(kernel.lacks.contains(&"fentry"), "refuses `f"),
        case(
            "fentry_module_listed",
            "run_case fentry_module_listed '' -l 'fentry:tun:tun_chr_o*'\n".into(),
            exact("fentry:tun:tun_chr_open\n"),
        )
        .or_where(kernel.series == "5.10", "no module BTF before Linux 5.11", exact("")),
        case(
            "kprobe_module_listed",
            "run_case kprobe_module_listed '' -l 'kprobe:*:tun_chr_open'\n".into(),
            exact("kprobe:tun:tun_chr_open\n"),
        ),
        case(
            "kprobe_module_listed_bare",
            "run_case kprobe_module_listed_bare '' -l 'kprobe:tun_chr_ope?'\n".into(),
            exact("kprobe:tun_chr_open\n"),
        ),
        case(
            "kprobe_module_not_loaded",
            "run_case kprobe_module_not_loaded '' -e 'kprobe:nonsense:vfs_read { exit(); }'\n".into(),
            error_saying(&[
                "steadytrace: warning: module `nonsense` is not loaded: skipped",
                "stdin:1:1: ERROR: none of the script's attach points exists here",
            ]),
        ),
        case(
            "kprobe_address",
            format!(
                "A=$(grep ' do_nanosleep$' /proc/kallsyms | cut -d' ' -f1)\n\
                 run_case kprobe_address '' --unsafe -q -e \"kprobe:0x$A /pid == cpid/ {{ @[func] = count(); @[probe] = count(); }}\" -c {}\n",
                quote(&format!("{} sleep 25", workload_for(Arch::X86_64)))
            ),
            Box::new(|o| {
                o.exited_0()?;
                let counts = keyed_counts(&o.stdout)?;
                // `probe` names the address in decimal, as bpftrace does: a kernel text address.
                let at_address = |key: &str| {
                    key.strip_prefix("kprobe:").and_then(|a| a.parse::<u64>().ok()).is_some_and(|a| a >> 47 == 0x1ffff)
                };
                let mut keys: Vec<&str> = counts.iter().filter(|(_, n)| *n == 25).map(|(k, _)| k.as_str()).collect();
                keys.sort();
                match keys[..] {
                    [func, probe] if counts.len() == 2 && func == "do_nanosleep" && at_address(probe) => Ok(()),
                    _ => Err(format!("expected @[do_nanosleep] and @[kprobe:ADDRESS] 25 times each, got {counts:?}")),
                }
            }),
        ),
        case(
            "kprobe_address_needs_unsafe",
            "run_case kprobe_address_needs_unsafe '' -e 'kprobe:0xffffffff81000000 { exit(); }'\n".into(),
            error_saying(&["stdin:1:1: ERROR: `kprobe` at an address needs `--unsafe`"]),
        ),
    ]
}

/// The rootless section's kprobes: one on a function, its return, and a wildcard matching the three functions
/// each sleep goes through.
const KPROBES: &str = "kprobe:do_nanosleep /pid == cpid/ { @kprobe = count(); }
kretprobe:do_nanosleep /pid == cpid/ { @kretprobe[retval] = count(); }
kprobe:*_nanosleep /pid == cpid/ { @[func] = count(); }";

/// A case of the rootless section: `run_rootless NAME HARNESS_OPTIONS ARGS...` (see SCRIPT_HELPERS), skipped when
/// the guest cannot make the user namespace (the harness's setup failed: exit status 125, its step on stderr).
fn rootless_case(name: &'static str, harness_options: &str, args: &[&str], check: Check) -> Case {
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    Case {
        name,
        shell: format!("run_rootless {name} {} {}\n", quote(harness_options), args.join(" ")),
        check,
        refusal: None,
        alternative: None,
        skip: Some(Box::new(|o| {
            let said = o.stderr.lines().find(|l| l.starts_with("delegated_userns: "))?;
            (o.rc == Some(125)).then(|| format!("the guest cannot make the delegated user namespace: {said}"))
        })),
    }
}

/// [`kprobe_session`]'s counts, and how `-v` says the pair ran: on one session link or apart.
fn session_check(sessions: bool) -> Check {
    Box::new(move |o| {
        o.exited_0()?;
        let counts: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with('@')).collect();
        if counts != ["@entries: 25", "@returns[0]: 25"] {
            return Err(format!("expected 25 entries and 25 returns, got {counts:?}"));
        }
        let said = match sessions {
            true => "kprobe:do_nanosleep runs on a kprobe session link with `kretprobe:do_nanosleep`",
            false => "kretprobe:do_nanosleep runs on a",
        };
        match o.stderr.contains(said) {
            true => Ok(()),
            false => Err(format!("no {said:?} in stderr {:?}", o.stderr)),
        }
    })
}

/// Exit status 1, nothing on stdout, and each of `lines` the start of a line of stderr.
fn error_saying(lines: &'static [&'static str]) -> Check {
    Box::new(move |o| {
        let missing: Vec<&&str> =
            lines.iter().filter(|l| !o.stderr.lines().any(|s| s.starts_with(**l))).collect();
        if o.rc != Some(1) || !o.stdout.trim().is_empty() || !missing.is_empty() {
            return Err(format!(
                "expected exit status 1, no output and the lines {missing:?} on stderr, got {:?}",
                o.rc
            ));
        }
        Ok(())
    })
}

/// Exit status 1, nothing on stdout, one line on stderr starting with `start` and holding each of `pieces`.
fn one_error(start: String, pieces: &'static [&'static str]) -> Check {
    Box::new(move |o| {
        let lines: Vec<&str> = o.stderr.lines().collect();
        if o.rc != Some(1) || !o.stdout.trim().is_empty() || lines.len() != 1 {
            return Err(format!("expected exit status 1, no output and one error line, got {:?}", o.rc));
        }
        let missing: Vec<&&str> = pieces.iter().filter(|p| !lines[0].contains(*p)).collect();
        if !lines[0].starts_with(&start) || !missing.is_empty() {
            return Err(format!("the error does not start with {start:?} or lacks {missing:?}"));
        }
        Ok(())
    })
}

/// The rootless section (issue 37): the tracer as root of an unprivileged user namespace (uid 100000 in the guest)
/// with a BPF filesystem delegated to it, the way systemd 258 (PrivateBPF=yes), LXD and Incus run a container,
/// using a BPF token made from it. tests/rootless.rs's checks on this kernel, and what the host cannot show: kprobes
/// (through kprobe_multi links: perf kprobe events are closed to the namespace), fentry/fexit and an iterator.
/// kernel.perf_event_paranoid stays at the guest's default (Debian's 3), put back first should a case have changed it.
fn rootless_cases(kernel: &Kernel) -> Vec<Case> {
    // check_kernel sets $H to it.
    if let Err(why) = common::guest::harness_for(kernel.arch) {
        return vec![Case {
            name: "rootless",
            shell: String::new(),
            check: Box::new(move |_| Err(format!("no harness for the rootless cases: {why}"))),
            refusal: None,
            alternative: None,
            skip: None,
        }];
    }
    let w = workload_for(kernel.arch);
    let arch = match kernel.arch {
        Arch::X86_64 => &bpf::arch::X86_64,
        Arch::Aarch64 => &bpf::arch::AARCH64,
    };
    let getppid = arch.syscall_number("getppid").expect("getppid in the table");
    let sys_prefix = match kernel.arch {
        Arch::X86_64 => "__x64_sys_",
        Arch::Aarch64 => "__arm64_sys_",
    };
    let release = kernel.series;
    let sleeps = format!("{w} sleep 25");
    let info = rootless_case(
        "rootless_info",
        "",
        &["--info"],
        Box::new(|o| {
            o.exited_0()?;
            let value = |key: &str| {
                o.stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix(": ")))
                    .ok_or_else(|| format!("no `{key}:` line"))
            };
            let paranoid: i32 = value("perf_event_paranoid")?.parse().map_err(|_| "perf_event_paranoid")?;
            let token = value("bpf_token")?;
            if value("initial_user_namespace")? != "no" {
                Err("initial_user_namespace is not `no`".into())
            } else if !token.starts_with("in use, from /sys/fs/bpf (delegate_cmds=any,delegate_maps=any,") {
                Err(format!("bpf_token: {token}"))
            } else if paranoid < 2 {
                Err(format!("kernel.perf_event_paranoid is {paranoid}: the rootless cases need 2 or more"))
            } else if !value("perf_event_open")?.starts_with("no") {
                Err(format!("perf_event_open: {}", value("perf_event_open")?))
            } else {
                Ok(())
            }
        }),
    );
    // On a kernel without kprobe_multi links a kprobe has only perf kprobe events, closed here: one error per probe,
    // at the probe, pointing to fentry/fexit.
    let kprobes: Check = if kernel.lacks.contains(&"kprobe_multi") {
        Box::new(move |o| {
            let errors: Vec<&str> = o.stderr.lines().filter(|l| l.contains(": ERROR: ")).collect();
            let wanted = format!("needs a perf kprobe event on this kernel ({release}.");
            if o.rc != Some(1) || !o.stdout.trim().is_empty() || errors.len() != 3 {
                return Err(format!("expected exit status 1, no output and 3 errors, got {:?}", o.rc));
            }
            if !errors.iter().all(|e| e.contains(&wanted) && e.contains("perf kprobe events are closed here"))
            {
                return Err(format!("an error does not say {wanted:?}"));
            }
            // Each error at its probe, the attach point underlined, and what to use instead.
            for (n, line) in KPROBES.lines().enumerate() {
                let point = line.split(' ').next().unwrap_or_default();
                let (kind, function) = point.split_once(':').unwrap_or_default();
                let fentry = if kind == "kretprobe" { "fexit" } else { "fentry" };
                let shown = format!(
                    "stdin:{}:1: ERROR: `{point}` needs a perf kprobe event on this kernel ({release}.",
                    n + 1
                );
                let underlined = format!("\n{line}\n{}\n", "^".repeat(point.len()));
                let help =
                    format!("help: use `{fentry}:{function}` instead: BPF trampolines need no perf event");
                for piece in [&shown, &underlined, &help] {
                    if !o.stderr.contains(piece.as_str()) {
                        return Err(format!("no {piece:?} in stderr"));
                    }
                }
            }
            Ok(())
        })
    } else {
        let wildcard = [
            format!("@[{sys_prefix}clock_nanosleep]: 25"),
            "@[do_nanosleep]: 25".into(),
            "@[hrtimer_nanosleep]: 25".into(),
        ];
        // The x86 6.12 guest has kprobe sessions, which need no perf event either: the pair is one program there.
        let sessions = kernel.arch == Arch::X86_64;
        Box::new(move |o| {
            let mut expected = vec!["@kprobe: 25", "@kretprobe[0]: 25"];
            expected.extend(wildcard.iter().map(String::as_str));
            maps(&expected)(o)?;
            let (entry, exit) = match sessions {
                true => (
                    "kprobe:do_nanosleep runs on a kprobe session link with `kretprobe:do_nanosleep`",
                    "kretprobe:do_nanosleep runs in the kprobe session program of `kprobe:do_nanosleep`",
                ),
                false => (
                    "kprobe:do_nanosleep runs on a kprobe_multi link, as perf kprobe events are closed here",
                    "kretprobe:do_nanosleep runs on a kprobe_multi link, as perf kprobe events are closed here",
                ),
            };
            for line in [entry, exit, "kprobe:*_nanosleep runs on one kprobe_multi link on "] {
                if !o.stderr.lines().any(|l| l.starts_with(line)) {
                    return Err(format!("-v does not say {line:?}"));
                }
            }
            Ok(())
        })
    };
    let perf_error = |probe: &str| {
        format!("steadytrace: cannot attach `{probe}`: the kernel denied perf_event_open (EACCES, Permission denied)")
    };
    let perf_said: &[&str] = &["user namespace other than the host's", "kernel.perf_event_paranoid is "];
    let profile_error = one_error(perf_error("profile:hz:99"), perf_said);
    vec![
        info,
        rootless_case(
            "rootless_begin_interval_end",
            "",
            &["-q", "-e", r#"BEGIN { printf("begin\n"); } END { printf("end\n"); } interval:ms:100 { @n = count(); if (@n == 5) { exit(); } }"#],
            exact("begin\nend\n\n\n@n: 5\n"),
        ),
        // System calls through raw_syscalls (tracefs is the host root's), a raw tracepoint, and a trampoline with
        // typed arguments: do_nanosleep(struct hrtimer_sleeper *t, enum hrtimer_mode mode), mode HRTIMER_MODE_REL.
        // Without tracefs's list of what ftrace patches, `vfs_caches_init*` matches two `__init` functions of the
        // kernel's BTF, freed after boot: skipped, each named.
        rootless_case(
            "rootless_syscalls_fentry",
            "",
            &[
                "-q",
                "-e",
                &format!(
                    "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {{ @tracepoint = count(); }}
                     rawtracepoint:sys_enter /pid == cpid && arg1 == {getppid}/ {{ @raw = count(); }}
                     fentry:do_nanosleep /pid == cpid/ {{ @fentry[args.mode, args.t->task->pid == pid] = count(); }}
                     fexit:do_nanosleep /pid == cpid/ {{ @fexit[retval] = count(); }}
                     fentry:vfs_caches_init* {{ @never = count(); }}"
                ),
                "-c",
                &format!("{w} sleep-getppid 25 40"),
            ],
            Box::new(|o| {
                maps(&["@tracepoint: 40", "@raw: 40", "@fentry[1, true]: 25", "@fexit[0]: 25"])(o)?;
                let skipped = "steadytrace: cannot probe 2 functions, skipped: vfs_caches_init, \
                               vfs_caches_init_early (no trampoline can patch it: ";
                match o.stderr.lines().filter(|l| l.starts_with(skipped)).count() {
                    1 => Ok(()),
                    _ => Err(format!("no warning {skipped:?}")),
                }
            }),
        ),
        rootless_case(
            "rootless_uprobes",
            "",
            &[
                "-q",
                "-e",
                &format!(
                    "uprobe:{w}:workload_add /pid == cpid/ {{ @calls = count(); }} uretprobe:{w}:workload_add /pid == cpid/ {{ @sum = sum(retval); }}"
                ),
                "-c",
                &format!("{w} calls 50"),
            ],
            maps(&["@calls: 50", "@sum: 1275"]),
        ),
        rootless_case(
            "rootless_kprobes",
            "",
            &[
                "-v",
                "-q",
                "-e",
                KPROBES,
                "-c",
                &sleeps,
            ],
            kprobes,
        ),
        rootless_iterator(),
        rootless_case(
            "rootless_software",
            "",
            &["-q", "-e", "software:cpu-clock:1000000 { @ = count(); } interval:ms:300 { exit(); }"],
            one_error(perf_error("software:cpu-clock:1000000"), perf_said),
        ),
        // profile may sample without perf events one day: then it must sample.
        rootless_case(
            "rootless_profile",
            "",
            &["-q", "-e", "profile:hz:99 { @ = count(); } interval:ms:300 { exit(); }"],
            Box::new(move |o| {
                let sampled = o.stdout.trim().strip_prefix("@: ").and_then(|n| n.parse::<u64>().ok());
                match (o.rc, sampled) {
                    (Some(0), Some(n)) if n > 0 => Ok(()),
                    _ => profile_error(o),
                }
            }),
        ),
        rootless_case(
            "rootless_without_delegation",
            "--no-delegate",
            &["-e", r#"BEGIN { printf("hi\n"); exit(); }"#],
            Box::new(|o| {
                if o.rc != Some(1) || !o.stdout.is_empty() {
                    return Err(format!("expected exit status 1 and no output, got {:?}", o.rc));
                }
                let words = ["BPF token", "delegate_cmds", "PrivateBPF=yes", "security.delegate_bpf", "docs/CONTAINERS.md"];
                match words.iter().find(|w| !o.stderr.contains(*w)) {
                    Some(missing) => Err(format!("the error does not say {missing:?}")),
                    None => Ok(()),
                }
            }),
        ),
    ]
}

/// `iter:task` under the token lists exactly the three `sleep` processes the guest's shell started (each with its
/// pid; the shell is their parent), the pids it started them with.
fn rootless_iterator() -> Case {
    let mut case = rootless_case(
        "rootless_iter",
        "",
        &["-q", "/tmp/rootless-iter.bt"],
        Box::new(|o| {
            o.exited_0()?;
            let mut started: Vec<&str> = o.field("started")?.split(',').collect();
            let mut listed: Vec<&str> =
                o.stdout.lines().filter_map(|l| l.strip_prefix("sleeping ")).collect();
            started.sort();
            listed.sort();
            match started == listed {
                true => Ok(()),
                false => {
                    Err(format!("iter:task listed the sleeps {listed:?}; the shell started {started:?}"))
                }
            }
        }),
    );
    case.shell = format!(
        r#"printf 'iter:task /ctx.task.real_parent->tgid == %d && ctx.task.comm == "sleep"/ {{ printf("sleeping %%d\\n", ctx.task.pid); }}\n' $$ >/tmp/rootless-iter.bt
sleep 1000 & p1=$!; sleep 1000 & p2=$!; sleep 1000 & p3=$!
pre="started=$p1,$p2,$p3"
{}pre=
kill $p1 $p2 $p3; wait $p1 $p2 $p3 2>/dev/null
"#,
        case.shell
    );
    case
}

/// A pinned iterator: steadytrace pins it and exits; the kernel formats its `printf` (`bpf_seq_printf`, whose
/// conversions grew from 5.10 to 5.13) at each read of the file, here twice.
fn pinned_iterator() -> Case {
    let prog = r#"iter:task:/tmp/pins/tasks /ctx.task.pid == 2/ { printf("%d %s|%-3x|%hd|%c|%p|%lld\n", ctx.task.pid, ctx.task.comm, 255, 70000, 65, 0, -1); }"#;
    Case {
        name: "pinned_iterator",
        shell: format!(
            r#"echo "== pinned_iterator"
start=$(now_ms)
mkdir -p /tmp/pins && mount -t bpf bpf /tmp/pins
rc=0; timeout 120 "$T" -q -e {prog} >/tmp/pin.out 2>/tmp/pin.err </dev/null || rc=$?
show /tmp/pin.out
cat /tmp/pins/tasks /tmp/pins/tasks
echo "-- stderr"
show /tmp/pin.err
echo "-- rc=$rc ms=$(( $(now_ms) - start ))"
rm -f /tmp/pins/tasks; umount /tmp/pins
"#,
            prog = quote(prog)
        ),
        check: Box::new(|o| {
            o.exited_0()?;
            if !o.stdout.starts_with("Program pinned to /tmp/pins/tasks\n") {
                return Err("no `Program pinned to /tmp/pins/tasks` first".into());
            }
            let line = "2 kthreadd|ff |4464|A|0x0|-1";
            match o.stdout.lines().filter(|l| *l == line).count() {
                2 => Ok(()),
                n => Err(format!("{n} lines `{line}` in the pinned file's two reads, expected 2")),
            }
        }),
        refusal: None,
        alternative: None,
        skip: None,
    }
}

/// The seed: an interval probe ticking every 500 ms, 12 times, while the seed CPU goes offline (1.5 s) and
/// comes back. It must keep ticking while the CPU is away and after it returns, and exit 0 by itself.
fn seed(name: &'static str, cpu: u32) -> Case {
    let offline = if cpu == 0 { "1-3" } else { "0,2-3" };
    Case {
        name,
        shell: format!(
            r#"echo "== {name}"
start=$(now_ms)
timeout 120 "$T" -e {prog} >/tmp/seed.out 2>/tmp/seed.err &
st=$!
wait_attached /tmp/seed.err
echo "attached=$(ticks /tmp/seed.out)"
echo 0 > /sys/devices/system/cpu/cpu{cpu}/online
echo "offline=$(cat /sys/devices/system/cpu/online)"
echo "went_offline=$(ticks /tmp/seed.out)"
sleep 1.5
echo "coming_back=$(ticks /tmp/seed.out)"
echo 1 > /sys/devices/system/cpu/cpu{cpu}/online
echo "back=$(ticks /tmp/seed.out)"
rc=0; wait $st || rc=$?
echo "ticks=$(ticks /tmp/seed.out)"
grep '^@' /tmp/seed.out
echo "-- stderr"
show /tmp/seed.err
echo "-- rc=$rc ms=$(( $(now_ms) - start ))"
"#,
            prog = quote(r#"interval:ms:500 { @n++; printf("tick %d\n", @n); if (@n == 12) { exit(); } }"#),
        ),
        check: Box::new(move |o| {
            o.exited_0()?;
            if o.field("offline")? != offline {
                return Err(format!("cpu{cpu} did not go offline: online CPUs {}", o.field("offline")?));
            }
            let (went, coming_back, back) =
                (o.number("went_offline")?, o.number("coming_back")?, o.number("back")?);
            if coming_back <= went {
                return Err(format!(
                    "no tick while cpu{cpu} was offline ({went} before, {coming_back} after)"
                ));
            }
            if back >= 12 {
                return Err(format!(
                    "the tracer had finished before cpu{cpu} came back: the case proves nothing"
                ));
            }
            match (o.number("ticks")?, o.stdout.contains("\n@n: 12\n")) {
                (12, true) => Ok(()),
                (ticks, _) => Err(format!("{ticks} ticks (or no `@n: 12`), expected 12")),
            }
        }),
        refusal: None,
        alternative: None,
        skip: None,
    }
}

/// Profile revival: `profile:hz:99` while all 4 CPUs are busy; cpu1 goes offline and comes back (a new spinner
/// pinned there, as the kernel forgot the old one's pinning); cpu1 must be sampled again after its return.
fn profile_revival() -> Case {
    Case {
        name: "profile_revival",
        shell: format!(
            r#"echo "== profile_revival"
start=$(now_ms)
rm -f /tmp/rev.out
timeout 120 "$T" -e {prog} >>/tmp/rev.out 2>/tmp/rev.err &
st=$!
wait_attached /tmp/rev.err
sleep 1
echo 0 > /sys/devices/system/cpu/cpu1/online
echo "offline=$(cat /sys/devices/system/cpu/online)"
sleep 1
echo 1 > /sys/devices/system/cpu/cpu1/online
spin 1
echo returned >> /tmp/rev.out
sleep 2
kill -INT $st
rc=0; wait $st || rc=$?
echo "before=$(sed '/^returned$/q' /tmp/rev.out | grep -c '^cpu1$')"
echo "after=$(sed -n '/^returned$/,$p' /tmp/rev.out | grep -c '^cpu1$')"
for c in 0 2 3; do echo "after_cpu$c=$(sed -n '/^returned$/,$p' /tmp/rev.out | grep -c "^cpu$c\$")"; done
stop_spinning
echo "-- stderr"
show /tmp/rev.err
echo "-- rc=$rc ms=$(( $(now_ms) - start ))"
"#,
            prog = quote(r#"profile:hz:99 { printf("cpu%d\n", cpu); }"#),
        ),
        check: Box::new(|o| {
            o.exited_0()?;
            if o.field("offline")? != "0,2-3" {
                return Err(format!("cpu1 did not go offline: online CPUs {}", o.field("offline")?));
            }
            if o.number("before")? == 0 {
                return Err("cpu1 was never sampled before it went offline".into());
            }
            for cpu in [0, 2, 3] {
                if o.number(&format!("after_cpu{cpu}"))? == 0 {
                    return Err(format!("cpu{cpu} (never offline) was not sampled after cpu1 returned"));
                }
            }
            if o.number("after")? == 0 {
                return Err("cpu1 was never sampled after it returned".into());
            }
            Ok(())
        }),
        refusal: None,
        alternative: None,
        skip: None,
    }
}

/// tests/usdt's program built for the guest's architecture (see [`common::usdt_app`]); Err says why it cannot be.
fn usdt_app(arch: Arch) -> Result<String, String> {
    let app = common::usdt_app(arch == Arch::Aarch64, &format!("guest-usdt-app-{arch}"))?;
    Ok(app.to_string_lossy().into_owned())
}

/// Whether kernel `series` is older than Linux `since` (both `MAJOR.MINOR`).
fn older(series: &str, since: &str) -> bool {
    let version = |v: &str| -> (u32, u32) {
        let (major, minor) = v.split_once('.').expect("MAJOR.MINOR");
        (major.parse().expect("major"), minor.parse().expect("minor"))
    };
    version(series) < version(since)
}

/// The (first) error line when the tracer refused the case as `allowed`.
fn refused(o: &Outcome, allowed: &Refusal) -> Option<String> {
    let errors: Vec<&str> = o.stderr.lines().filter(|l| l.contains("ERROR")).collect();
    let as_allowed = o.rc.is_some_and(|rc| rc != 0)
        && o.stdout.trim().is_empty()
        && !errors.is_empty()
        && (errors.len() == 1 || !allowed.single)
        && errors.iter().all(|line| allowed.needles.iter().all(|needle| line.contains(needle.as_str())));
    as_allowed.then(|| errors[0].trim().to_string())
}

enum Verdict {
    Pass,
    /// The case's other outcome by design on this kernel (what it is).
    Alternative(&'static str),
    /// Refused with this error line, as allowed on this kernel.
    Refused(String),
    /// Cannot run in this guest, for this reason (skipped through `common::skip`).
    Skipped(String),
    Fail(String),
}

fn check_kernel(test: &str, kernel: &Kernel) {
    let Some(_guest) = guest_for(test, kernel.arch) else { return };
    let series = kernel.name;
    // STEADYTRACE_GUEST_CASES=NAME,NAME...: only those cases (to look into some without waiting for all).
    let only = std::env::var("STEADYTRACE_GUEST_CASES").ok();
    let cases: Vec<Case> = cases(kernel)
        .into_iter()
        .filter(|case| only.as_deref().is_none_or(|only| only.split(',').any(|name| name == case.name)))
        .collect();
    let mut script = format!(
        "{PRELUDE}{SCRIPT_HELPERS}T={}\nboot_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)\n",
        quote(tracer_for(kernel.arch))
    );
    if let (true, Ok(harness)) = (kernel.rootless, common::guest::harness_for(kernel.arch)) {
        let _ = writeln!(script, "H={}", quote(&harness));
    }
    for case in &cases {
        script.push_str(&case.shell);
    }
    let started = Instant::now();
    let r = run_on(kernel.arch, kernel.series, 4, kernel.append, 900, &script);
    let took = started.elapsed();
    let sections = sections(&r.stdout);

    let mut report = String::new();
    if let Some(info) = sections.get("info") {
        let _ = writeln!(report, "steadytrace --info in the {series} guest:");
        for line in info.iter().take_while(|l| *l != "-- stderr") {
            let _ = writeln!(report, "  {line}");
        }
    }
    let _ = writeln!(report, "{series}: guest boot and {} cases took {took:.0?}", cases.len());
    let mut failures = vec![];
    for case in &cases {
        let mut took = String::new();
        let verdict = match sections.get(case.name) {
            None => Verdict::Fail("no output: the guest stopped before this case ran".into()),
            Some(lines) => {
                let outcome = Outcome::parse(lines);
                if let Some(ms) = outcome.ms {
                    took = format!(" ({:.1} s)", ms as f64 / 1000.0);
                }
                match (case.check)(&outcome) {
                    Ok(()) => Verdict::Pass,
                    Err(_) if case.skip.as_ref().and_then(|skip| skip(&outcome)).is_some() => {
                        Verdict::Skipped(case.skip.as_ref().and_then(|skip| skip(&outcome)).unwrap_or_default())
                    }
                    Err(_) if case.alternative.as_ref().is_some_and(|(_, check)| check(&outcome).is_ok()) => {
                        Verdict::Alternative(case.alternative.as_ref().map_or("", |(what, _)| what))
                    }
                    Err(why) => {
                        match case.refusal.as_ref().and_then(|allowed| refused(&outcome, allowed)) {
                            Some(line) => Verdict::Refused(line),
                            None => Verdict::Fail(format!(
                                "{why}\n    exit status: {:?}\n    stdout: {:?}\n    stderr: {:?}\n    kernel log: {:?}",
                                outcome.rc, outcome.stdout, outcome.stderr, outcome.kernel
                            )),
                        }
                    }
                }
            }
        };
        match verdict {
            Verdict::Pass => {
                let _ = writeln!(report, "{series} {}: pass{took}", case.name);
            }
            Verdict::Alternative(what) => {
                let _ =
                    writeln!(report, "{series} {}: pass as designed on {series}{took}: {what}", case.name);
            }
            Verdict::Refused(line) => {
                let _ = writeln!(report, "{series} {}: refused as allowed{took}: {line}", case.name);
            }
            Verdict::Skipped(why) => {
                let _ = writeln!(report, "{series} {}: SKIPPED{took}: {why}", case.name);
                common::skip(&format!("{test} {}", case.name), &why);
            }
            Verdict::Fail(why) => {
                let _ = writeln!(
                    report,
                    "{series} {}: FAIL{took}: {}",
                    case.name,
                    why.lines().next().unwrap_or("")
                );
                failures.push(format!("{series} {}: {why}", case.name));
            }
        }
    }
    println!("{report}");
    assert_eq!(r.code, Some(0), "{series}: the guest script failed\n{report}\n{r}");
    assert!(
        failures.is_empty(),
        "{} of {} cases failed on {series}:\n{}\n\n{report}\nguest stderr:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n"),
        r.stderr
    );
}
