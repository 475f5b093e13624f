//! Tracepoints, raw tracepoints, uprobes and listing, with real workloads the tests start
//! (examples/workload.rs). Kprobes and the 4-CPU cpumask IPIs are tested in the guest (tests/guest.rs).

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

fn w() -> String {
    workload().to_string_lossy().into_owned()
}

#[test]
fn openat_counts_are_exact_for_the_command() {
    if !can_trace("openat_counts_are_exact_for_the_command") {
        return;
    }
    let script = r#"tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @[str(args.filename)] = count(); }"#;
    let output =
        tracer(&["-q", "-e", script, "-c", &format!("{} open /etc/hostname 5", w())]).output().unwrap();
    let text = stdout(&output);
    assert!(text.contains("\n@[/etc/hostname]: 5\n"), "{text}{}", stderr(&output));
}

/// The command runs with SIGPIPE's default action, as it would without steadytrace (which ignores SIGPIPE itself,
/// and an ignored signal stays ignored across exec): `yes | head -1` in it ends quietly.
#[test]
fn the_command_gets_sigpipes_default_back() {
    if !can_trace("the_command_gets_sigpipes_default_back") {
        return;
    }
    const SIGPIPE: u32 = 13;
    let output =
        tracer(&["-q", "-e", "interval:s:30 { exit(); }", "-c", "/bin/grep SigIgn /proc/self/status"])
            .output()
            .unwrap();
    let text = stdout(&output);
    let ignored = text
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line: {text}{}", stderr(&output)));
    assert_eq!(ignored & (1 << (SIGPIPE - 1)), 0, "SIGPIPE is ignored in the command: {ignored:#x}");
}

/// One probe on two tracepoints whose `filename` sits at different offsets (`open` has no `dfd` before it):
/// each program reads the field where its own tracepoint has it. bpftrace's opensnoop.bt is written so.
#[test]
fn a_field_is_read_where_each_tracepoint_has_it() {
    if !can_trace("a_field_is_read_where_each_tracepoint_has_it") {
        return;
    }
    let script = r#"tracepoint:syscalls:sys_enter_open, tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @[str(args->filename)] = count(); }"#;
    let output =
        tracer(&["-q", "-e", script, "-c", &format!("{} open /etc/hostname 2", w())]).output().unwrap();
    let text = stdout(&output);
    assert!(text.contains("\n@[/etc/hostname]: 2\n"), "{text}{}", stderr(&output));
}

#[test]
fn exec_tracepoint_sees_the_program_started() {
    let Some(_kernel) = KernelState::acquire("exec_tracepoint_sees_the_program_started") else { return };
    let script =
        r#"tracepoint:sched:sched_process_exec /pid == cpid/ { printf("exec %s\n", str(args.filename)); }"#;
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} calls 1", w())]).output().unwrap();
    assert!(
        stdout(&output).starts_with(&format!("exec {}\n", w())),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}

/// `join()` prints the strings an array of string pointers points to: the command's own arguments.
#[test]
fn join_prints_the_arguments_of_exec() {
    let Some(_kernel) = KernelState::acquire("join_prints_the_arguments_of_exec") else { return };
    let script =
        r#"tracepoint:syscalls:sys_enter_execve /pid == cpid/ { join(args->argv); join(args->argv, ","); }"#;
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} calls 1", w())]).output().unwrap();
    let expected = format!("{w} calls 1\n{w},calls,1\n", w = w());
    assert!(stdout(&output).starts_with(&expected), "{}{}", stdout(&output), stderr(&output));
}

/// `print(args)` shows every field of the record: strings, integers, pointers in hex; JSON an object.
#[test]
fn print_args_shows_the_whole_record() {
    let Some(_kernel) = KernelState::acquire("print_args_shows_the_whole_record") else { return };
    let exec = "tracepoint:sched:sched_process_exec /pid == cpid/ { printf(\"%d\\n\", pid); print(args); printf(\"[%s]\\n\", args); }";
    let output = tracer(&["-q", "-e", exec, "-c", &format!("{} calls 1", w())]).output().unwrap();
    let text = stdout(&output);
    let pid = text.lines().next().unwrap_or_else(|| panic!("no output{}", stderr(&output)));
    let record = format!("{{ .filename = {}, .pid = {pid}, .old_pid = {pid} }}", w());
    let expected = format!("{pid}\n{record}\n[{record}]\n");
    assert!(text.starts_with(&expected), "{text}{}", stderr(&output));

    let open = "tracepoint:syscalls:sys_enter_openat /pid == cpid && str(args.filename) == \"/etc/hostname\"/ { print(args); }";
    let output = tracer(&["-q", "-f", "json", "-e", open, "-c", &format!("{} open /etc/hostname 1", w())])
        .output()
        .unwrap();
    let line = stdout(&output).lines().next().unwrap_or_default().to_string();
    assert!(
        line.starts_with(r#"{"type": "value", "data": {"__syscall_nr": "#)
            && line.contains(r#", "filename": "#),
        "{line}{}",
        stderr(&output)
    );
    let output =
        tracer(&["-q", "-e", open, "-c", &format!("{} open /etc/hostname 1", w())]).output().unwrap();
    assert!(stdout(&output).contains(", .filename = 0x"), "{}{}", stdout(&output), stderr(&output));
}

#[test]
fn ipis_to_each_cpu_are_counted() {
    let Some(_kernel) = KernelState::acquire("ipis_to_each_cpu_are_counted") else { return };
    if !has_online_cpus("ipis_to_each_cpu_are_counted", 2) {
        return;
    }
    // TLB shootdowns from cpu0 to a writer on cpu1.
    let script = "tracepoint:ipi:ipi_send_cpu /pid == cpid/ { @[args.cpu] = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} tlb 0 1 1", w())]).output().unwrap();
    let text = stdout(&output);
    let to_cpu1: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("@[1]: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no IPI to cpu1 counted:\n{text}{}", stderr(&output)));
    assert!(to_cpu1 >= 100, "only {to_cpu1} IPIs to cpu1 in a second of shootdowns");
}

#[test]
fn uprobe_and_uretprobe_count_calls_and_return_values_exactly() {
    if !can_trace("uprobe_and_uretprobe_count_calls_and_return_values_exactly") {
        return;
    }
    let script = format!(
        "uprobe:{w}:workload_add {{ @calls = count(); @args = sum(arg0 + arg1); }} uretprobe:{w}:workload_add {{ @returns = count(); @retvals = sum(retval); }}",
        w = w()
    );
    let output = tracer(&["-q", "-e", &script, "-c", &format!("{} calls 7", w())]).output().unwrap();
    // Calls workload_add(i, 1) for i in 0..7: arguments and return values sum to 28.
    assert_eq!(
        stdout(&output),
        "\n\n@args: 28\n@calls: 7\n@returns: 7\n@retvals: 28\n",
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_stripped_binary_is_probed_by_address() {
    if !can_trace("a_stripped_binary_is_probed_by_address") {
        return;
    }
    let stripped = std::env::temp_dir().join(format!("workload-stripped-{}", std::process::id()));
    std::fs::copy(workload(), &stripped).unwrap();
    let strip = Command::new("strip").arg(&stripped).status();
    if !strip.is_ok_and(|s| s.success()) {
        skip("a_stripped_binary_is_probed_by_address", "no `strip` (binutils)");
        return;
    }
    // The address comes from the unstripped original's symbol table.
    let nm = Command::new("nm").arg(workload()).output().unwrap();
    let address = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" workload_add"))
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .expect("workload_add in nm output");
    let script = format!("uprobe:{}:0x{address} {{ @ = count(); }}", stripped.display());
    let output =
        tracer(&["-q", "-e", &script, "-c", &format!("{} calls 3", stripped.display())]).output().unwrap();
    std::fs::remove_file(&stripped).unwrap();
    assert_eq!(stdout(&output), "\n\n@: 3\n", "{}", stderr(&output));
}

/// A quoted part of an attach point is taken whole, as bpftrace takes it: a path with a space and a `:` in it.
#[test]
fn a_quoted_uprobe_path_may_hold_spaces_and_colons() {
    if !can_trace("a_quoted_uprobe_path_may_hold_spaces_and_colons") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("steadytrace quoted:{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("work load");
    std::fs::copy(workload(), &copy).unwrap();
    let script = format!(r#"uprobe:"{}":workload_add {{ @[probe] = count(); }}"#, copy.display());
    let output =
        tracer(&["-q", "-e", &script, "-c", &format!("'{}' calls 3", copy.display())]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        stdout(&output),
        format!("\n\n@[uprobe:{}:workload_add]: 3\n", copy.display()),
        "{}",
        stderr(&output)
    );
}

#[test]
fn dash_p_excludes_another_process_running_the_same_binary() {
    if !can_trace("dash_p_excludes_another_process_running_the_same_binary") {
        return;
    }
    let spawn = |calls: &str| {
        Reaped::spawn(Command::new(workload()).args(["wait-then-calls", calls]).stdin(Stdio::piped()))
            .unwrap()
    };
    let (mut traced, mut other) = (spawn("4"), spawn("9"));
    let script = format!("uprobe:{}:workload_add {{ @[pid] = count(); }}", w());
    let mut child = Reaped::spawn(
        tracer(&["-e", &script, "-p", &traced.id().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let _stderr = wait_for_stderr_line(&mut child, "Attached");
    for process in [&mut traced, &mut other] {
        use std::io::Write;
        process.stdin.take().unwrap().write_all(b"go\n").unwrap();
        process.wait().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = wait_output(child, Duration::from_secs(10));
    assert_eq!(stdout(&output), format!("\n\n@[{}]: 4\n", traced.id()));
}

#[test]
fn count_loses_no_increments_from_two_threads_on_two_cpus() {
    let Some(_kernel) = KernelState::acquire("count_loses_no_increments_from_two_threads_on_two_cpus") else {
        return;
    };
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @ = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} getppid 200000 2", w())]).output().unwrap();
    assert_eq!(stdout(&output), "\n\n@: 200000\n", "{}", stderr(&output));
}

/// A `for` over a per-CPU `count()` map gives the count merged over the CPUs, in BPF, as print does.
#[test]
fn for_over_a_count_map_merges_the_cpus() {
    let Some(_kernel) = KernelState::acquire("for_over_a_count_map_merges_the_cpus") else { return };
    if !has_online_cpus("for_over_a_count_map_merges_the_cpus", 2) {
        return;
    }
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @calls[pid] = count(); @cpus[cpu] = count(); }
        END { for ($kv : @calls) { printf(\"merged %d\\n\", $kv.1); } printf(\"cpus %d\\n\", len(@cpus)); clear(@calls); clear(@cpus); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} getppid 100000 2", w())]).output().unwrap();
    let text = stdout(&output);
    assert!(text.starts_with("merged 100000\ncpus 2\n"), "{text}{}", stderr(&output));
}

#[test]
fn raw_tracepoints_give_their_arguments() {
    let Some(_kernel) = KernelState::acquire("raw_tracepoints_give_their_arguments") else { return };
    if !cfg!(target_arch = "x86_64") {
        skip(
            "raw_tracepoints_give_their_arguments",
            "the system call number of getppid is known for x86_64 only",
        );
        return;
    }
    // sys_enter's arg1 is the system call number: getppid is 110 on x86_64.
    let script = "rawtracepoint:sys_enter /pid == cpid && arg1 == 110/ { @ = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} getppid 1000 1", w())]).output().unwrap();
    assert_eq!(stdout(&output), "\n\n@: 1000\n", "{}", stderr(&output));
}

/// Kernel structs through the kernel's BTF: `curtask->...`, a pointer member followed to another task,
/// a struct inside a struct (`se.vruntime`), a `char[]` member, and a raw tracepoint's task arguments.
#[test]
fn kernel_structs_are_read_through_btf() {
    let Some(_kernel) = KernelState::acquire("kernel_structs_are_read_through_btf") else { return };
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        skip("kernel_structs_are_read_through_btf", "this kernel has no BTF");
        return;
    }
    let script = r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {
        printf("%d %d %d %d %s\n", curtask->tgid == pid, curtask->real_parent->tgid, curtask->comm == comm,
               curtask->se.vruntime > 0, ((struct task_struct *)curtask)->group_leader->comm);
        exit();
    }"#;
    let child = Reaped::spawn(
        tracer(&["-q", "-e", script, "-c", &format!("{} getppid 1 1", w())])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .unwrap();
    let tracer_pid = child.id();
    let output = wait_output(child, Duration::from_secs(20));
    let first = stdout(&output).lines().next().unwrap_or_default().to_string();
    assert_eq!(first, format!("1 {tracer_pid} 1 1 workload"), "{}", stderr(&output));

    // Pointers compare and take part in arithmetic as addresses; `%p` and `print` show the whole address.
    let script = r#"tracepoint:syscalls:sys_enter_getppid /pid == cpid/ {
        printf("%d %d %d\n", curtask->mm != 0, curtask->real_parent != curtask, curtask + 8 - 8 == curtask);
        printf("%p\n", curtask); print(curtask); exit();
    }"#;
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} getppid 1 1", w())]).output().unwrap();
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"1 1 1"), "{text}{}", stderr(&output));
    assert!(lines.len() >= 3 && lines[1] == lines[2] && lines[1].len() == 18, "{text}");

    // Every time the workload sleeps, the scheduler switches away from it: `args.prev` is its task.
    let script = "rawtracepoint:sched_switch /args.prev->tgid == cpid/ { @[args.prev->comm] = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} sleep 20", w())]).output().unwrap();
    let text = stdout(&output);
    let switches: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("@[workload]: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no switch away from the workload counted:\n{text}{}", stderr(&output)));
    assert!(switches >= 20, "only {switches} switches away from a task that slept 20 times");

    // A system call's struct argument is the process's memory: `args->rqtp` of each 1 ms sleep.
    let script = "tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { @[args->rqtp->tv_sec, args->rqtp->tv_nsec] = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} sleep 5", w())]).output().unwrap();
    assert_eq!(stdout(&output), "\n\n@[0, 1000000]: 5\n", "{}", stderr(&output));
}

/// `kaddr()` gives a kernel symbol's address (which `ksym()` names again) and `*` reads memory there.
#[test]
fn kaddr_and_dereference_read_kernel_memory() {
    if !can_trace("kaddr_and_dereference_read_kernel_memory") {
        return;
    }
    let script =
        r#"BEGIN { printf("%s %d\n", ksym(kaddr("do_nanosleep")), *kaddr("do_nanosleep") != 0); exit(); }"#;
    let output = tracer(&["-q", "-e", script]).output().unwrap();
    assert!(stdout(&output).starts_with("do_nanosleep 1\n"), "{}{}", stdout(&output), stderr(&output));
}

/// `args.NAME` in a raw tracepoint: the arguments named and typed by the kernel's BTF.
#[test]
fn raw_tracepoint_arguments_have_their_btf_names() {
    let Some(_kernel) = KernelState::acquire("raw_tracepoint_arguments_have_their_btf_names") else { return };
    if !cfg!(target_arch = "x86_64") {
        skip(
            "raw_tracepoint_arguments_have_their_btf_names",
            "the system call number of getppid is known for x86_64 only",
        );
        return;
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        skip("raw_tracepoint_arguments_have_their_btf_names", "this kernel has no BTF");
        return;
    }
    let script = "rawtracepoint:sys_enter /pid == cpid && args.id == 110/ { @ = count(); print(args); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} getppid 3 1", w())]).output().unwrap();
    let text = stdout(&output);
    let records: Vec<&str> = text.lines().filter(|l| l.starts_with("{ .regs = 0x")).collect();
    assert_eq!(records.len(), 3, "{text}{}", stderr(&output));
    assert!(records.iter().all(|r| r.ends_with(", .id = 110 }")), "{text}");
    assert!(text.ends_with("\n\n@: 3\n"), "{text}");
}

#[test]
fn listing_shows_tracepoints_and_their_fields() {
    if !can_trace("listing_shows_tracepoints_and_their_fields") {
        return;
    }
    let list = tracer(&["-l", "tracepoint:ipi:*"]).output().unwrap();
    let text = stdout(&list);
    assert!(text.lines().any(|l| l == "tracepoint:ipi:ipi_send_cpu"), "{text}");
    assert!(text.lines().any(|l| l == "tracepoint:ipi:ipi_send_cpumask"), "{text}");
    let fields = tracer(&["-lv", "tracepoint:ipi:ipi_send_cpumask"]).output().unwrap();
    assert_eq!(
        stdout(&fields),
        "tracepoint:ipi:ipi_send_cpumask\n    __data_loc cpumask_t cpumask\n    void * callsite\n    void * callback\n"
    );
}

#[test]
fn kprobes_on_a_kernel_without_them_say_so() {
    if std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        skip("kprobes_on_a_kernel_without_them_say_so", "this kernel has kprobes (tested in the guest)");
        return;
    }
    let output = tracer(&["--dry-run", "-e", "kprobe:do_nanosleep { }"]).output().unwrap();
    assert!(
        stderr(&output).starts_with(
            "stdin:1:1: ERROR: kprobes are not available on this kernel (CONFIG_KPROBES is not set)\n"
        ),
        "{}",
        stderr(&output)
    );
}

/// Where the kernel refuses BPF trampolines (this machine's: EPERM even for root), fentry and fexit say so
/// at each attach point, and name what to use instead; where it accepts them, the guest tests them.
#[test]
fn fentry_on_a_kernel_refusing_trampolines_says_so() {
    if !can_trace("fentry_on_a_kernel_refusing_trampolines_says_so") {
        return;
    }
    let output = tracer(&["-q", "-e", "fentry:do_nanosleep { } fexit:do_nanosleep { } BEGIN { exit(); }"])
        .output()
        .unwrap();
    if output.status.success() {
        return skip("fentry_on_a_kernel_refusing_trampolines_says_so", "this kernel accepts fentry");
    }
    let err = stderr(&output);
    // The kernel, the architecture, the kernel's errno; kprobes as the way out, and the release that lifts it.
    let kernel = format!(
        "this kernel ({} on {})",
        std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap().trim(),
        std::env::consts::ARCH
    );
    assert!(err.starts_with(&format!("stdin:1:1: ERROR: {kernel} refuses `fentry` programs (")), "{err}");
    assert!(err.contains("help: use `kprobe:FUNCTION` or `kretprobe:FUNCTION`"), "{err}");
    assert!(err.contains("kernels run `fentry` probes from Linux "), "{err}");
    assert!(err.contains(&format!("stdin:1:25: ERROR: {kernel} refuses `fexit` programs (")), "{err}");
    assert_eq!(err.matches("ERROR:").count(), 2, "{err}");
}

#[test]
fn ksym_names_the_kernel_function_that_sent_ipis() {
    let Some(_kernel) = KernelState::acquire("ksym_names_the_kernel_function_that_sent_ipis") else { return };
    if !has_online_cpus("ksym_names_the_kernel_function_that_sent_ipis", 2) {
        return;
    }
    // TLB shootdowns are sent by on_each_cpu_cond_mask.
    let script = "tracepoint:ipi:ipi_send_cpu /pid == cpid/ { @[ksym(args.callsite)] = count(); }";
    let output = tracer(&["-q", "-e", script, "-c", &format!("{} tlb 0 1 1", w())]).output().unwrap();
    let text = stdout(&output);
    assert!(text.contains("\n@[on_each_cpu_cond_mask]: "), "{text}{}", stderr(&output));
}

/// An integer array member of a struct (the script's or the kernel's) is read by element, at a known or a
/// run-time index (past the end: 0), and whole, as bpftrace reads it.
#[test]
fn integer_array_members_are_read_by_element_and_whole() {
    let test = "integer_array_members_are_read_by_element_and_whole";
    if !can_trace(test) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("steadytrace-arrays-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (source, binary) = (dir.join("arrays.c"), dir.join("arrays"));
    std::fs::write(
        &source,
        "struct S { int x; int y[4]; short z[3]; };\n\
         __attribute__((noinline)) int take(struct S *s) { return s->y[1]; }\n\
         int main(void) { struct S s = { 7, { -1, 2, 3, 40000 }, { -5, 6, 7 } }; return take(&s) == 2 ? 0 : 1; }\n",
    )
    .unwrap();
    if !Command::new("cc").args(["-O0", "-o"]).arg(&binary).arg(&source).status().is_ok_and(|s| s.success()) {
        std::fs::remove_dir_all(&dir).unwrap();
        skip(test, "no C compiler (`cc`)");
        return;
    }
    let script = format!(
        r#"struct S {{ int x; int y[4]; short z[3]; }}
        uprobe:{}:take {{ $s = (struct S *)arg0; $i = 3; $far = 9;
          printf("%d %d %d %d %d\n", $s.y[0], $s->y[3], $s->z[2], $s->y[$i], $s->y[$far]);
          print($s->y); @z = $s->z; }}"#,
        binary.display()
    );
    let out = tracer(&["-q", "-e", &script, "-c", &binary.to_string_lossy()]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(stdout(&out), "-1 40000 7 40000 0\n[-1,2,3,40000]\n\n\n@z: [-5,6,7]\n", "{}", stderr(&out));

    // The kernel's `unsigned long saved_auxv[]` of the traced process is its /proc/PID/auxv.
    let auxv = dir.with_extension("auxv");
    let script = r#"tracepoint:syscalls:sys_enter_openat /pid == cpid/ { $i = 2;
        printf("%lu %lu %lu\n", curtask->mm->saved_auxv[0], curtask->mm->saved_auxv[1], curtask->mm->saved_auxv[$i]); }"#;
    let command = format!("dd status=none if=/proc/self/auxv of={}", auxv.display());
    let out = tracer(&["-q", "-e", script, "-c", &command]).output().unwrap();
    let bytes = std::fs::read(&auxv).unwrap();
    std::fs::remove_file(&auxv).unwrap();
    let words: Vec<u64> =
        bytes.chunks(8).take(3).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
    let expected = format!("{} {} {}", words[0], words[1], words[2]);
    let printed = stdout(&out);
    assert_eq!(printed.lines().find(|l| !l.is_empty()), Some(expected.as_str()), "{}", stderr(&out));
}
