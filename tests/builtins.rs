//! Builtins of current bpftrace whose output depends on the clock or on a traced process, so that the
//! corpus (tests/scripts) cannot hold it: `strftime`, `nsecs(clock)`, `buf` of process memory, `reg`, `cgroupid`.

mod common;

use common::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `SECONDS.MICROS` as microseconds.
fn micros(text: &str) -> i128 {
    let (seconds, fraction) = text.split_once('.').expect("a `%s.%f` time");
    assert_eq!(fraction.len(), 6, "%f is 6 digits: {text}");
    seconds.parse::<i128>().unwrap() * 1_000_000 + fraction.parse::<i128>().unwrap()
}

#[test]
fn strftime_prints_wall_clock_times_of_boot_nanoseconds() {
    if !can_trace("strftime_prints_wall_clock_times_of_boot_nanoseconds") {
        return;
    }
    let script = r#"BEGIN { printf("%s %s %s\n", strftime("%s.%f", 1000123000), strftime("%s.%f", 0),
        strftime("%s", nsecs(boot))); exit(); }"#;
    let out = stdout(&run(script, Duration::from_secs(20)));
    let fields: Vec<&str> = out.lines().next().expect("a line").split(' ').collect();
    assert_eq!(micros(fields[0]) - micros(fields[1]), 1_000_123, "{out}");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let printed: i64 = fields[2].parse().unwrap();
    assert!((now - printed).abs() <= 60, "strftime of nsecs(boot) is now: {printed} vs {now}");
}

#[test]
fn nsecs_reads_the_clock_it_names() {
    if !can_trace("nsecs_reads_the_clock_it_names") {
        return;
    }
    let script = r#"BEGIN { printf("%llu %llu %llu %llu %llu\n", nsecs(monotonic), nsecs(boot), nsecs(tai),
        nsecs(sw_tai), nsecs); exit(); }"#;
    let out = stdout(&run(script, Duration::from_secs(20)));
    let v: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    let (monotonic, boot, tai, sw_tai, plain) = (v[0], v[1], v[2], v[3], v[4]);
    assert!(boot >= monotonic && plain >= monotonic, "{out}");
    // TAI counts from 1970: more than 50 years of nanoseconds.
    assert!(tai > 50 * 365 * 86_400 * 1_000_000_000, "{out}");
    assert!(sw_tai.abs_diff(tai) < 1_000_000_000, "sw_tai approximates tai: {out}");
}

#[test]
fn buf_reads_process_memory_of_a_length_known_at_run_time() {
    let test = "buf_reads_process_memory_of_a_length_known_at_run_time";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        return skip(test, "tracefs cannot be mounted");
    }
    let script = r#"tracepoint:syscalls:sys_enter_write /pid == cpid/ {
        printf("<%r|%rh|%r>\n", buf(args.buf, args.count), buf(args.buf, 2), buf(args.buf, 100 * args.count)); }"#;
    let out = stdout(&run_with(&["-q", "-e", script, "-c", "/bin/echo hello"], Duration::from_secs(30)));
    // The length is cut to the 64 bytes a buffer holds; what follows the 6 bytes written is not checked.
    let line = out.lines().find(|l| l.starts_with('<')).unwrap_or_else(|| panic!("no buffer line: {out}"));
    assert!(line.starts_with(r"<hello\x0a|68 65|hello\x0a"), "{line}");
}

#[test]
fn str_reads_a_length_known_at_run_time_and_uptr_takes_an_integer() {
    let test = "str_reads_a_length_known_at_run_time_and_uptr_takes_an_integer";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        return skip(test, "tracefs cannot be mounted");
    }
    // Half the 12 bytes written; a length beyond what a string holds reads what it holds (here all of it, up to
    // the NUL that ends echo's buffer or the 64 bytes read); an integer made a user address by uptr().
    let script = r#"tracepoint:syscalls:sys_enter_write /pid == cpid/ {
        printf("<%s|%s|%s|%s>\n", str(args.buf, args.count / 2), str(args.buf, args.count * 1000),
               str(uptr((uint64)args.buf), 5), str(args.buf, (int64)args.count - 100)); }"#;
    let out =
        stdout(&run_with(&["-q", "-e", script, "-c", "/bin/echo hello-world"], Duration::from_secs(30)));
    assert!(out.contains("<hello-|hello-world\n"), "{out}");
    // A negative length reads nothing, as in bpftrace.
    assert!(out.contains("|hello|>"), "{out}");
}

#[test]
fn byte_array_fields_of_tracepoints_are_addresses_for_ntop() {
    let test = "byte_array_fields_of_tracepoints_are_addresses_for_ntop";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        return skip(test, "tracefs cannot be mounted");
    }
    // `__u8 daddr[4]` and `__u8 saddr_v6[16]`: the connection bash opens to 127.0.0.1 (refused or not).
    let script = r#"tracepoint:sock:inet_sock_set_state /pid == cpid && args.newstate == 2/ {
        printf("<%s|%s|%d>\n", ntop(args.family, args.daddr), ntop(args.daddr_v6), args.daddr[3]);
        print(args.daddr); exit(); }"#;
    let command = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>/dev/null; true";
    let out = stdout(&run_with(&["-q", "-e", script, "-c", command], Duration::from_secs(30)));
    assert!(out.contains("<127.0.0.1|::ffff:127.0.0.1|1>\n[127,0,0,1]\n"), "{out}");
}

#[test]
fn jiffies_numaid_and_cgroup_are_the_kernels() {
    if !can_trace("jiffies_numaid_and_cgroup_are_the_kernels") {
        return;
    }
    let script = r#"BEGIN { printf("%llu %llu %llu\n", jiffies, numaid, cgroup); exit(); }"#;
    let out = stdout(&run(script, Duration::from_secs(20)));
    let v: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    // jiffies start 5 minutes before wrapping 32 bits, so a running kernel's are above 2^32 - 300 * HZ.
    assert!(v[0] > (1 << 32) - 300 * 1000, "{out}");
    assert!(std::path::Path::new(&format!("/sys/devices/system/node/node{}", v[1])).exists(), "{out}");
    assert!(v[2] >= 1, "a cgroup id: {out}");
}

/// `tseries()` on the clock bpftrace's tests use (`BPFTRACE_DUMMY_TS_MAP`): ten values per 100 ms
/// interval, the last one kept (or the minimum, the average); the text graph and JSON points as current
/// bpftrace prints them (its runtime/outputs/tseries*.txt and .json, times in UTC here).
#[test]
fn tseries_keeps_the_last_intervals() {
    if !can_trace("tseries_keeps_the_last_intervals") {
        return;
    }
    let script = |agg: &str| {
        format!(
            r#"BEGIN {{ @ts = (uint64)0; $i = (uint64)0; while ($i < 100) {{ @a = tseries($i % 10, 100ms, 5{agg});
            @ts += 10000000; $i++; }} clear(@ts); exit(); }}"#
        )
    };
    let run_clocked = |args: &[&str], script: &str| {
        let mut command = tracer(args);
        command.arg(script).env("BPFTRACE_DUMMY_TS_MAP", "@ts").env("TZ", "UTC");
        stdout(&wait_output(
            Reaped::spawn(command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()))
                .unwrap(),
            Duration::from_secs(20),
        ))
    };
    let text = run_clocked(&["-q", "-e"], &script(""));
    let mut expected = String::from(
        "\n\n@a:\n             8                                                  10\nhh:mm:ss.ms  |___________________________________________________|\n",
    );
    for tenth in 5..10 {
        expected.push_str(&format!(
            "00:00:00.{tenth}00 |                         *                         | 9\n"
        ));
    }
    expected.push_str("             v___________________________________________________v\n");
    expected.push_str("             8                                                  10\n\n");
    assert_eq!(text, expected);
    let min = run_clocked(&["-q", "-e"], &script(r#", "min""#));
    assert!(min.contains("00:00:00.900 *                                                   | 0\n"), "{min}");
    let json = run_clocked(&["-q", "-f", "json", "-e"], &script(r#", "avg""#));
    let points: Vec<String> = (5..10)
        .map(|t| format!(r#"{{"interval_start":"1970-01-01 00:00:00.{t}00000000","value":4}}"#))
        .collect();
    assert!(
        json.contains(&format!(r#"{{"type": "tseries", "data": {{"@a": [{}]}}}}"#, points.join(","))),
        "{json}"
    );
}

/// Without the test clock, `tseries()` reads the TAI clock: the one point is now.
#[test]
fn tseries_reads_the_wall_clock() {
    if !can_trace("tseries_reads_the_wall_clock") {
        return;
    }
    let out = stdout(&run(r#"BEGIN { @ = tseries(7, 1s, 3); exit(); }"#, Duration::from_secs(20)));
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let json_out = {
        let args = ["-q", "-f", "json", "-e", r#"BEGIN { @ = tseries(7, 1s, 3); exit(); }"#];
        stdout(&run_with(&args, Duration::from_secs(20)))
    };
    // One point: no interval to measure, so bpftrace shows nanoseconds.
    assert!(out.contains("hh:mm:ss.ns        |") && out.contains("| 7\n"), "{out}");
    // The point's start, in UTC, is within a minute of now (TAI runs ahead of UTC by at most 37 s).
    let start = json_out.split("\"interval_start\":\"").nth(1).expect("a point").split('"').next().unwrap();
    let seconds_of_day = |hms: &str| -> i64 {
        let parts: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
        parts[0] * 3600 + parts[1] * 60 + parts[2]
    };
    let printed = seconds_of_day(&start[11..19]);
    let expected = (now % 86_400) as i64;
    let diff = (printed - expected).rem_euclid(86_400);
    assert!(diff <= 60 || diff >= 86_400 - 60, "{start} vs {now}");
}

/// `strerror`, `signal_name`, `syscall_name` against the C library; `ppid` and `pcomm` against this
/// thread, the tracer's parent (the kernel's `pid` of a task is its thread id).
#[test]
fn names_of_numbers_and_the_parent_process() {
    if !can_trace("names_of_numbers_and_the_parent_process") {
        return;
    }
    let script = format!(
        r#"BEGIN {{ printf("%s|%s|%s|%s|%s|%d|%s\n", strerror({}), strerror(-{}), signal_name({}), syscall_name({}),
        syscall_name({}), ppid, pcomm); exit(); }}"#,
        libc::EINVAL,
        libc::ENOENT,
        libc::SIGINT,
        libc::SYS_getppid,
        libc::SYS_exit_group
    );
    let out = stdout(&run(&script, Duration::from_secs(20)));
    let fields: Vec<&str> = out.trim_end().split('|').collect();
    let system_text = |errno: i32| {
        let text = std::io::Error::from_raw_os_error(errno).to_string();
        text.split(" (os error").next().unwrap().to_string()
    };
    assert_eq!(fields[0], system_text(libc::EINVAL));
    assert_eq!(fields[1], system_text(libc::ENOENT));
    assert_eq!(fields[2], "Interrupt");
    assert_eq!(fields[3], "getppid");
    assert_eq!(fields[4], "exit_group");
    let thread = std::fs::read_link("/proc/thread-self").unwrap();
    assert_eq!(fields[5], thread.file_name().unwrap().to_str().unwrap());
    let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
    assert_eq!(fields[6], comm.trim_end());
}

/// `cgroup_path(cgroup)` names the tracer's cgroup v2 path (`unified:` + what /proc/self/cgroup says, the
/// tracer being in this process's cgroup), then the v1 hierarchies.
#[test]
fn cgroup_path_names_the_cgroup_of_the_tracer() {
    if !can_trace("cgroup_path_names_the_cgroup_of_the_tracer") {
        return;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let Some(v2) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        skip("cgroup_path_names_the_cgroup_of_the_tracer", "no cgroup v2 hierarchy");
        return;
    };
    let out = stdout(&run(
        r#"BEGIN { printf("%s\n", cgroup_path(cgroup)); print(cgroup_path(cgroup, "unif*")); exit(); }"#,
        Duration::from_secs(20),
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(&format!("unified:{v2}")), "{out}");
    assert_eq!(lines[1], format!("unified:{v2}"), "{out}");
}

/// `reg()` in a perf-event probe reads the registers the sample interrupted (as bpftrace allows): in kernel
/// mode, `reg("ip")` is the function `kstack`'s first frame names, sample by sample (where the kernel could walk
/// the stack at all: a sample inside `_copy_from_user` may come with none).
#[test]
#[cfg(target_arch = "x86_64")]
fn reg_in_a_profile_probe_is_where_the_sample_was_taken() {
    if !can_trace("reg_in_a_profile_probe_is_where_the_sample_was_taken") {
        return;
    }
    let script = r#"profile:hz:997 /!usermode/ { @[ksym(reg("ip")), kstack(1)] = count(); } interval:ms:700 { exit(); }"#;
    let out = stdout(&run_with(&["-q", "-e", script], Duration::from_secs(30)));
    let mut compared = 0;
    for entry in out.split("@[").skip(1) {
        let (named, rest) = entry.split_once(", ").unwrap_or_else(|| panic!("{entry}"));
        let Some(frame) = rest.strip_prefix('\n').and_then(|r| r.trim_start().split(['+', '\n']).next())
        else {
            continue;
        };
        assert_eq!(named, frame, "reg(\"ip\") and the stack's first frame differ:\n{out}");
        compared += 1;
    }
    assert!(compared > 0, "no kernel-mode sample with a stack:\n{out}");
}

/// `reg(name)` reads the registers a uprobe saw: `ip` is the probed function's entry (the same offset in
/// its page as the function's address in the file), `di` its first argument (x86_64).
#[test]
#[cfg(target_arch = "x86_64")]
fn reg_reads_the_registers_of_the_probed_call() {
    use object::{Object, ObjectSymbol};
    if !can_trace("reg_reads_the_registers_of_the_probed_call") {
        return;
    }
    let w = workload();
    let image = std::fs::read(&w).expect("workload binary");
    let elf = object::File::parse(&*image).expect("an ELF file");
    let entry = elf.symbols().find(|s| s.name() == Ok("workload_multi_one")).expect("the symbol").address();
    let script = format!(
        r#"uprobe:{w}:workload_multi_one {{ printf("%d %d %d\n", reg("ip") & 0xfff, reg("di"), reg("sp") > 0); }}"#,
        w = w.display()
    );
    let command = format!("{} multi 4", w.display());
    let out = stdout(&run_with(&["-q", "-e", &script, "-c", &command], Duration::from_secs(30)));
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let expected: Vec<String> = (0..4).map(|n| format!("{} {n} 1", entry & 0xfff)).collect();
    assert_eq!(lines, expected, "{out}");
}

/// `cgroupid(path)` is the id a probe sees as `cgroup` for a process in that cgroup; `is_err` is the
/// kernel's IS_ERR(); `kfunc_exist` asks the kernel's BTF.
#[test]
fn cgroupid_is_err_and_kfunc_exist_answer_as_the_kernel_does() {
    let test = "cgroupid_is_err_and_kfunc_exist_answer_as_the_kernel_does";
    if !can_trace(test) {
        return;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mountinfo.lines().find(|l| l.contains(" - cgroup2 ")).and_then(|l| l.split(' ').nth(4));
    let (Some(v2), Some(mount)) = (own.lines().find_map(|l| l.strip_prefix("0::")), mount) else {
        skip(test, "no cgroup v2 hierarchy");
        return;
    };
    let path = format!("{mount}{}", v2.trim_end_matches('/'));
    let script = format!(
        r#"BEGIN {{ printf("%d %d %d %d %d %d %d\n", cgroupid("{path}") == cgroup, is_err(0), is_err(-1),
           is_err(-4095), is_err(-4096), kfunc_exist("vfs_read"), kfunc_exist("steadytrace_no_such_function")); exit(); }}"#
    );
    let out = stdout(&run(&script, Duration::from_secs(20)));
    assert_eq!(out.trim_end(), "1 0 1 1 0 1 0", "{path}: {out}");
}

/// `kfunc_allowed` asks the verifier for the probe's program type: a kfunc every type may call, one only some
/// (tracing, not the kprobe type BEGIN is) may, and none at all. (The tracing case runs in the 6.12 guest.)
#[test]
fn kfunc_allowed_asks_the_verifier_for_the_probes_program_type() {
    if !can_trace("kfunc_allowed_asks_the_verifier_for_the_probes_program_type") {
        return;
    }
    let script = r#"BEGIN { printf("%d %d %d\n", kfunc_allowed("bpf_rcu_read_lock"), kfunc_allowed("bpf_task_from_pid"), kfunc_allowed("steadytrace_no_such_function")); exit(); }"#;
    let out = run(script, Duration::from_secs(20));
    assert_eq!(stdout(&out).trim_end(), "1 0 0", "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("libbpf"), "{out:?}");
}

/// `system()` runs its formatted command when the record arrives, its output in order with the rest;
/// only with `--unsafe`.
#[test]
fn system_runs_the_command_in_order_and_only_with_unsafe() {
    if !can_trace("system_runs_the_command_in_order_and_only_with_unsafe") {
        return;
    }
    let script = r#"BEGIN { printf("before\n"); system("echo out %d; echo err >&2", 6 * 7); printf("after\n"); exit(); }"#;
    let refused = tracer(&["-e", script]).output().expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("run with --unsafe"), "{refused:?}");
    let out = tracer(&["--unsafe", "-e", script]).output().expect("run");
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).starts_with("before\nout 42\nerr\nafter\n"), "{out:?}");
}

/// `signal()` (by name or number) and `signal_thread()` send a signal to the process (thread) the probe fired
/// in: the traced shell's trap sees it.
#[test]
fn signal_reaches_the_traced_process() {
    let test = "signal_reaches_the_traced_process";
    if !can_trace(test) {
        return;
    }
    if tracefs().is_none() {
        return skip(test, "tracefs cannot be mounted");
    }
    let dir = std::env::temp_dir().join(format!("steadytrace-signal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shell = dir.join("trap.sh");
    std::fs::write(
        &shell,
        "trap 'echo got-usr1; kill $!; exit 0' USR1\nsleep 30 >/dev/null 2>&1 &\nwait\necho no-signal\n",
    )
    .unwrap();
    let command = format!("/bin/sh {}", shell.display());
    for call in [r#"signal("SIGUSR1")"#, r#"signal_thread("USR1")"#, "signal(10)"] {
        let script = format!("tracepoint:syscalls:sys_enter_wait4 /pid == cpid/ {{ {call}; }}");
        let out = run_with(&["--unsafe", "-q", "-e", &script, "-c", &command], Duration::from_secs(60));
        assert!(stdout(&out).contains("got-usr1"), "{call}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `uaddr("name")` is where a global of the probed binary is in the traced process, also in a
/// position-independent one (the workload is a PIE): reading it gives the global's value, and the size of
/// its symbol types the pointer (`uint32 *`).
#[test]
fn uaddr_finds_a_global_of_the_probed_binary() {
    if !can_trace("uaddr_finds_a_global_of_the_probed_binary") {
        return;
    }
    let w = workload();
    let script = format!(
        r#"uprobe:{w}:workload_add {{ printf("0x%x %d\n", *uaddr("WORKLOAD_GLOBAL"), sizeof(*uaddr("WORKLOAD_GLOBAL"))); exit(); }}"#,
        w = w.display()
    );
    let command = format!("{} calls 2", w.display());
    let out = stdout(&run_with(&["-q", "-e", &script, "-c", &command], Duration::from_secs(30)));
    assert_eq!(out.lines().next(), Some("0x55555555 4"), "{out}");
}

#[test]
fn debugf_writes_a_line_into_the_kernel_s_trace_buffer() {
    let test = "debugf_writes_a_line_into_the_kernel_s_trace_buffer";
    if !can_trace(test) {
        return;
    }
    let Some(tracefs) = tracefs() else {
        skip(test, "tracefs cannot be mounted");
        return;
    };
    // A token of this run, so that the buffer need not be cleared.
    let token = format!("st{}x{}", std::process::id(), monotonic_ns() % 1_000_000);
    let script = format!(
        r#"BEGIN {{ debugf("{token} %s %d %x", "a", 1, 16); debugf("{token} %ld|%-4u| 100%%", -1, 7); exit(); }}"#
    );
    let output = run_with(&["-e", &script], Duration::from_secs(10));
    assert!(output.status.success(), "{}", stderr(&output));
    let trace = std::fs::read_to_string(tracefs.join("trace")).expect("the trace buffer");
    let lines: Vec<&str> = trace.lines().filter(|l| l.contains(&token)).collect();
    assert!(lines.iter().any(|l| l.ends_with(&format!("bpf_trace_printk: {token} a 1 10"))), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.ends_with(&format!("bpf_trace_printk: {token} -1|7   | 100%"))),
        "{lines:?}"
    );
}

/// `write_user()` rewrites the path `cat` opens, where the kernel lets BPF write to user memory; a locked-down
/// kernel (this host boots with lockdown=integrity) refuses it with an error that says so.
#[test]
fn write_user_redirects_an_open_or_says_why_the_kernel_refuses() {
    let test = "write_user_redirects_an_open_or_says_why_the_kernel_refuses";
    if !can_trace(test) {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (asked, given) = (dir.join("write_user_a"), dir.join("write_user_b"));
    std::fs::write(&asked, "asked for\n").unwrap();
    std::fs::write(&given, "given instead\n").unwrap();
    let (asked, given) = (asked.to_string_lossy().into_owned(), given.to_string_lossy().into_owned());
    let script = format!(
        r#"tracepoint:syscalls:sys_enter_openat /pid == cpid && str(args.filename) == "{asked}"/ {{ @wrote[write_user(args.filename, "{given}", {})] = count(); }}"#,
        given.len() + 1
    );
    let output =
        run_with(&["--unsafe", "-e", &script, "-c", &format!("cat {asked}")], Duration::from_secs(10));
    let (out, err) = (stdout(&output), stderr(&output));
    let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown").unwrap_or_default();
    if !output.status.success() {
        assert!(err.contains("write_user("), "the error points at the call: {err}");
        let locked = lockdown.contains("[integrity]") || lockdown.contains("[confidentiality]");
        let said = if locked { "this kernel is locked down" } else { "bpf_probe_write_user helper" };
        assert!(err.contains(said), "{err}");
        skip(test, "the kernel refuses bpf_probe_write_user (its error checked)");
        return;
    }
    assert!(out.starts_with("given instead\n"), "cat printed the file written in:\n{out}");
    assert!(out.contains("@wrote[true]: 1"), "{out}");
}

/// `errorf()` in a macro called by a macro: after its own place, each macro call it was expanded from, innermost
/// first, with its line and `~` under the call (bpftrace 0.27.1 prints exactly this); BEGIN's message follows
/// "Attached 1 probe".
#[test]
fn errorf_in_macros_names_each_call_it_was_expanded_from() {
    if !can_trace("errorf_in_macros_names_each_call_it_was_expanded_from") {
        return;
    }
    let script =
        r#"macro bad() { errorf("Something bad"); } macro worse() { bad(); } begin { worse(); exit(); }"#;
    let output = tracer(&["-e", script]).output().expect("run the tracer");
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = format!(
        "Attached 1 probe\n\
         stdin:1:15-38: ERROR: Something bad\n\
         stdin:1:58-63: ERROR: expanded from\n\
         {script}\n{:57}~~~~~\n\
         stdin:1:75-82: ERROR: expanded from\n\
         {script}\n{:74}~~~~~~~\n",
        "", ""
    );
    assert_eq!(stderr(&output), expected);
}
