//! Guest tests: scenarios this machine's kernel cannot provide (cpu0 offline, an older kernel without uprobe_multi,
//! four CPUs going offline in turn), run in a qemu guest booting Debian's 6.1 or 6.12 kernel through `tests/vm/run`.
//! See docs/TESTING.md. The guest is ~50x slower than the host: these tests check behaviour, never timing precision.
//! What every kernel must do (each probe type, each kernel feature, the seed on 5.10, 6.1 and 6.12) is checked in
//! tests/kernels.rs, in one boot per kernel; the tests here are the scenarios beyond that.
//!
//! When the rig cannot be set up (no qemu, no kernels to be had) every test is skipped (`common::skip`) and passes,
//! unless STEADYTRACE_REQUIRE_VM=1, which turns that into a failure.

mod common;

use common::guest::{guest, quote, run, sections, tracer, workload, GuestRun, PRELUDE};
use std::path::Path;

/// The seed: cpu0 goes offline and comes back while a 12 s interval probe waits; the probe must still fire.
/// bpftrace 0.17 never fires here (measured); when it is installed it runs alongside, for the record only.
#[test]
fn seed_interval_survives_cpu0_offline() {
    let Some(_guest) = guest("seed_interval_survives_cpu0_offline") else { return };
    let script = format!(
        r#"{PRELUDE}
set -e
prog='interval:s:12 {{ printf("fired\n"); exit(); }}'
if command -v bpftrace >/dev/null; then
  bpftrace -e "$prog" >/tmp/bt.out 2>&1 &
  bt=$!
  i=0; until grep -q '^Attaching' /tmp/bt.out || [ $i -ge 300 ]; do i=$((i + 1)); sleep 0.1; done
  bt_start=$(now_ms)
fi
start=$(now_ms)
timeout 60 {tracer} -e "$prog" >/tmp/st.out 2>/tmp/st.err &
st=$!
wait_attached /tmp/st.err
sleep 2
echo 0 > /sys/devices/system/cpu/cpu0/online
echo "offline=$(cat /sys/devices/system/cpu/online)"
sleep 1
echo 1 > /sys/devices/system/cpu/cpu0/online
rc=0; wait $st || rc=$?
echo "elapsed_ms=$(( $(now_ms) - start ))"
echo "rc=$rc"
echo "fired=$(grep -c '^fired$' /tmp/st.out || true)"
cat /tmp/st.err >&2
if [ -n "${{bt:-}}" ]; then
  sleep 3
  if kill $bt 2>/dev/null; then echo "bpftrace=had not fired $(( $(now_ms) - bt_start )) ms after attaching"
  else echo "bpftrace=exited, printing $(grep -c '^fired$' /tmp/bt.out || true) fired line(s)"; fi
fi
"#,
        tracer = quote(tracer())
    );
    let r = run("6.1", 4, "cpu0_hotplug", 240, &script);
    assert_eq!(r.code, Some(0), "{r}");
    assert_eq!(r.field("offline"), "1-3", "cpu0 did not go offline\n{r}");
    assert_eq!(r.field("rc"), "0", "steadytrace failed (124: still running 60 s after its start)\n{r}");
    assert_eq!(r.number("fired"), 1, "{r}");
    let elapsed = r.number("elapsed_ms");
    assert!(
        (12_000..40_000).contains(&elapsed),
        "steadytrace exited after {elapsed} ms, not about 12 s\n{r}"
    );
    if let Some(line) = r.stdout.lines().find_map(|l| l.strip_prefix("bpftrace=")) {
        eprintln!("for contrast, bpftrace in the same guest: {line}");
    }
}

/// cpu1, cpu2 and cpu3 go offline and online in turn; a 100 ms interval probe keeps firing through every phase.
#[test]
fn interval_survives_cpu1_to_3_hotplug() {
    let Some(_guest) = guest("interval_survives_cpu1_to_3_hotplug") else { return };
    let script = format!(
        r#"{PRELUDE}
set -e
ticks() {{ grep -c '^tick$' /tmp/st.out || true; }}
alive() {{ kill -0 $st 2>/dev/null && echo alive || echo exited; }}
timeout 120 {tracer} -e 'interval:ms:100 {{ printf("tick\n"); }}' >/tmp/st.out 2>/tmp/st.err &
st=$!
wait_attached /tmp/st.err
sleep 1
echo "phase start $(ticks) $(alive)"
for c in 1 2 3; do
  echo 0 > /sys/devices/system/cpu/cpu$c/online
  sleep 1
  echo "phase cpu$c-offline $(ticks) $(alive) $(cat /sys/devices/system/cpu/online)"
  echo 1 > /sys/devices/system/cpu/cpu$c/online
  sleep 1
  echo "phase cpu$c-online $(ticks) $(alive) $(cat /sys/devices/system/cpu/online)"
done
# Ended by Ctrl-C once the phases are over (a slow guest must not make an exit timer fire during them).
kill -INT $st
rc=0; wait $st || rc=$?
echo "rc=$rc"
cat /tmp/st.err >&2
"#,
        tracer = quote(tracer())
    );
    let r = run("6.12", 4, "", 240, &script);
    assert_eq!(r.code, Some(0), "{r}");
    let phases: Vec<(&str, u64, &str)> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("phase "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], f[1].parse().unwrap_or_else(|_| panic!("bad phase line {l:?}\n{r}")), f[2])
        })
        .collect();
    assert_eq!(phases.len(), 7, "{r}");
    for pair in phases.windows(2) {
        let ((prev, before, _), (phase, after, state)) = (pair[0], pair[1]);
        assert_eq!(state, "alive", "steadytrace had exited by {phase}\n{r}");
        assert!(after > before, "no tick between {prev} ({before}) and {phase} ({after})\n{r}");
    }
    assert_eq!(r.field("rc"), "0", "{r}");
}

/// 4 CPUs, all busy: cpu1, cpu2 and cpu3 go offline and come back one after another while a profile
/// probe counts samples per CPU; each must be sampled again after it returns (counts, not rates).
#[test]
fn profile_covers_cpu1_to_3_again_after_each_returns() {
    let Some(_guest) = guest("profile_covers_cpu1_to_3_again_after_each_returns") else { return };
    let script = format!(
        r#"{PRELUDE}
set -e
spin() {{ taskset -c $1 sh -c 'while :; do :; done' & }}
for c in 0 1 2 3; do spin $c; done
timeout 120 {tracer} -e 'profile:hz:20 {{ printf("cpu%d\n", cpu); }}' >>/tmp/st.out 2>/tmp/st.err &
st=$!
wait_attached /tmp/st.err
sleep 2
for c in 1 2 3; do
  echo 0 > /sys/devices/system/cpu/cpu$c/online
  sleep 1
  echo 1 > /sys/devices/system/cpu/cpu$c/online
  spin $c
  echo "returned$c" >> /tmp/st.out
  sleep 3
done
kill -INT $st; wait $st || true
for c in 1 2 3; do
  echo "after$c=$(sed -n "/^returned$c\$/,\$p" /tmp/st.out | grep -c "^cpu$c\$" || true)"
done
cat /tmp/st.err >&2
"#,
        tracer = quote(tracer())
    );
    let r = run("6.12", 4, "", 300, &script);
    assert_eq!(r.code, Some(0), "{r}");
    for cpu in 1..=3 {
        assert!(r.number(&format!("after{cpu}")) > 0, "cpu{cpu} was never sampled after it returned\n{r}");
    }
}

/// The perf interval engine on cpu0, which goes offline and comes back (the 6.1 guest allows it): the
/// event moves to another CPU and keeps firing, where bpftrace's interval dies.
#[test]
fn perf_interval_engine_survives_cpu0_offline() {
    let Some(_guest) = guest("perf_interval_engine_survives_cpu0_offline") else { return };
    let script = format!(
        r#"{PRELUDE}
set -e
for c in 0 1 2 3; do taskset -c $c sh -c 'while :; do :; done' & done
ticks() {{ grep -c '^tick$' /tmp/st.out || true; }}
timeout 120 {tracer} --interval-engine perf -e 'interval:ms:100 {{ printf("tick\n"); }}' >/tmp/st.out 2>/tmp/st.err &
st=$!
wait_attached /tmp/st.err
sleep 2
echo "before=$(ticks)"
echo 0 > /sys/devices/system/cpu/cpu0/online
sleep 2
echo "offline=$(ticks)"
echo 1 > /sys/devices/system/cpu/cpu0/online
sleep 2
echo "back=$(ticks)"
kill -INT $st; wait $st || true
cat /tmp/st.err >&2
"#,
        tracer = quote(tracer())
    );
    let r = run("6.1", 4, "cpu0_hotplug", 240, &script);
    assert_eq!(r.code, Some(0), "{r}");
    let (before, offline, back) = (r.number("before"), r.number("offline"), r.number("back"));
    assert!(before > 0, "no tick before cpu0 went offline\n{r}");
    assert!(offline > before, "no tick while cpu0 was offline\n{r}");
    assert!(back > offline, "no tick after cpu0 came back\n{r}");
}

/// fentry and fexit (this machine's kernel refuses BPF trampolines), in the 6.12 guest: each nanosleep
/// of the workload counted exactly at entry, exit and through the `kfunc:vmlinux:` alias and a wildcard;
/// `args` typed by the function's BTF (an enum, a struct pointer read with `->`, a signed int) and
/// `retval` with its sign (a failed openat's -ENOENT, not 2^64 - 2); `path()` of a file's `f_path` and of a
/// `struct path *` argument.
#[test]
fn fentry_and_fexit_count_exactly_with_typed_args_and_retval() {
    let Some(_guest) = guest("fentry_and_fexit_count_exactly_with_typed_args_and_retval") else { return };
    let sleeps = "fentry:do_nanosleep /pid == cpid/ { @entries = count(); @mode[args.mode] = count(); @own[args.t->task == curtask] = count(); } fexit:do_nanosleep /pid == cpid/ { @ret[retval] = count(); } kfunc:vmlinux:do_nanosleep /pid == cpid/ { @alias = count(); } fentry:do_nanoslee? /pid == cpid/ { @wildcard[probe] = count(); }";
    let opens = "fexit:do_sys_openat2 /pid == cpid && retval < 0/ { @failed[retval, args.dfd] = count(); }";
    // `path()`: bpf_d_path of a `struct path` the trampoline handed over, whole and with a size.
    let paths = r#"fentry:security_file_open /pid == cpid/ { if (path(args.file->f_path) == "/proc/version") { @full = count(); @sized[path(args.file.f_path, 16)] = count(); } }"#;
    // ... and of a `struct path *` argument, as the pointer and as what it points to.
    let pointed = r#"fentry:security_inode_getattr /pid == cpid/ { if (path(args.path) == "/proc/version") { @pointer = count(); } if (path(*args.path) == "/proc/version") { @pointee = count(); } }"#;
    let script = format!(
        "timeout 120 {tracer} -q -e {sleeps} -c {sleep}; echo rc=$?; timeout 120 {tracer} -q -e {opens} -c {open}; echo rc=$?; timeout 120 {tracer} -q -e {paths} -c {version}; echo rc=$?; echo 'import os; [os.stat(\"/proc/version\") for _ in range(3)]' >/tmp/stat.py; timeout 120 {tracer} -q -e {pointed} -c {stats}; echo rc=$?",
        tracer = quote(tracer()),
        sleeps = quote(sleeps),
        sleep = quote(&format!("{} sleep 5", workload())),
        opens = quote(opens),
        open = quote(&format!("{} open /nonexistent 3", workload())),
        paths = quote(paths),
        version = quote(&format!("{} open /proc/version 3", workload())),
        pointed = quote(pointed),
        stats = quote("python3 /tmp/stat.py"),
    );
    // Batched into this boot: write_user() (no lockdown here) rewrites the path cat opens; override() is refused
    // by a kernel built without CONFIG_BPF_KPROBE_OVERRIDE (Debian's); a watchpoint on jiffies fires; a kernel
    // watchpoint outlives cpu1's hotplug and ends at unwatch() (`kernel_watchpoint_case`).
    let write = r#"tracepoint:syscalls:sys_enter_openat /pid == cpid && str(args.filename) == "/tmp/asked"/ { @wrote[write_user(args.filename, "/tmp/given", 11)] = count(); }"#;
    let script = format!(
        r#"{script}; echo ==extra; echo asked >/tmp/asked; echo given >/tmp/given; timeout 60 {tracer} -q --unsafe -e {write} -c 'cat /tmp/asked'; echo rc=$?; timeout 60 {tracer} --unsafe --dry-run -e 'kprobe:vfs_read {{ override(-1); }}' 2>&1 | head -1; timeout 60 {tracer} -q -e {watch} 0x$(awk '$3 == "jiffies" {{print $1}}' /proc/kallsyms); echo rc=$?; echo ==cookie; timeout 60 {tracer} -q -e {cookie} -c {connect}; echo rc=$?; echo ==kwatch; {kwatch}"#,
        tracer = quote(tracer()),
        write = quote(write),
        watch = quote(r#"watchpoint:$1:4:w { printf("hit %s\n", probe); exit(); }"#),
        cookie = quote("fentry:tcp_v4_connect /pid == cpid/ { @connect = socket_cookie(args.sk); } fentry:tcp_close /pid == cpid/ { @close = socket_cookie(args.sk); }"),
        connect = quote(r#"python3 -c 'import socket; s = socket.socket(); s.connect_ex(("127.0.0.1", 9)); s.close()'"#),
        kwatch = kernel_watchpoint_case(),
    );
    // skboutput(): 3 UDP datagrams sent from cpu1 over loopback (brought up: the guest starts with it down), cpu1 taken offline and back, 3 more; every
    // received IP packet is captured whole, and without its first 20 bytes (the IP header) into another file.
    let capture = r#"fentry:ip_rcv { @rx[skboutput("/tmp/rx.pcap", args.skb, args.skb->len, 0)] = count(); @cut[skboutput("/tmp/cut.pcap", args.skb, args.skb->len, 20)] = count(); }"#;
    let send = r#"import socket, sys; r = socket.socket(2, 2); r.bind(("127.0.0.1", 9999)); s = socket.socket(2, 2); k = int(sys.argv[1]); [(s.sendto(b"steadytrace-%d" % i, ("127.0.0.1", 9999)), r.recv(64)) for i in range(k, k + 3)]"#;
    let flap = "taskset -c 1 python3 /tmp/send.py 0; echo 0 >/sys/devices/system/cpu/cpu1/online; sleep 0.5; echo 1 >/sys/devices/system/cpu/cpu1/online; sleep 1; taskset -c 1 python3 /tmp/send.py 3";
    let script = format!(
        "{script}; echo ==pcap; ip link set lo up; echo {send} >/tmp/send.py; echo {flap} >/tmp/flap.sh; timeout 120 {tracer} -q -v -e {capture} -c 'sh /tmp/flap.sh' 2>/tmp/capture.err; echo rc=$?; grep -o 'skboutput() wrote [0-9]* packets' /tmp/capture.err; timeout 60 {tracer} -q -e {kfunc}; for bad in {not_skb} {negative}; do {tracer} --dry-run -e \"$bad\" 2>&1 | head -1; done; for f in rx cut; do od -An -v -tx1 /tmp/$f.pcap | tr -d ' \\n'; echo; done",
        kfunc = quote(r#"fentry:vfs_read { printf("kfunc_allowed %d\n", kfunc_allowed("bpf_task_from_pid")); exit(); }"#),
        not_skb = quote(r#"fentry:ip_rcv { skboutput("x.pcap", args.dev, 64, 0); }"#),
        negative = quote(r#"fentry:ip_rcv { skboutput("x.pcap", args.skb, 64, -1); }"#),
        send = quote(send),
        flap = quote(flap),
        tracer = quote(tracer()),
        capture = quote(capture),
    );
    let r = run("6.12", 2, "", 420, &script);
    let (stdout, pcap) = r.stdout.split_once("==pcap\n").unwrap_or_else(|| panic!("no skboutput case\n{r}"));
    check_captures(pcap, &r);
    let (stdout, extra) = stdout.split_once("==extra\n").unwrap_or_else(|| panic!("no extra cases\n{r}"));
    let (extra, cookie) =
        extra.split_once("==cookie\n").unwrap_or_else(|| panic!("no socket_cookie case\n{r}"));
    let (cookie, kwatch) =
        cookie.split_once("==kwatch\n").unwrap_or_else(|| panic!("no kernel watchpoint case\n{r}"));
    check_kernel_watchpoint(kwatch, &r);
    // The socket connected is the socket closed: one cookie, not 0.
    let value =
        |name: &str| cookie.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.parse::<u64>().ok());
    let (connect, close) = (value("@connect: "), value("@close: "));
    assert!(connect.is_some_and(|c| c > 0) && connect == close, "socket_cookie: {connect:?} {close:?}\n{r}");
    assert!(extra.starts_with("given\n\n\n@wrote[true]: 1\nrc=0\n"), "write_user:\n{r}");
    assert!(extra.contains("`override()` needs the bpf_override_return helper"), "override:\n{r}");
    assert!(
        extra.contains("\nhit watchpoint:0x") && extra.ends_with(":4:w\n\n\nrc=0\n"),
        "watchpoint on jiffies:\n{r}"
    );
    assert_eq!(
        (r.code, stdout),
        (
            Some(0),
            "\n\n@alias: 5\n@entries: 5\n@mode[1]: 5\n@own[true]: 5\n@ret[0]: 5\n@wildcard[fentry:do_nanosleep]: 5\nrc=0\n\n\n@failed[-2, -100]: 3\nrc=0\n\n\n@full: 3\n@sized[/proc/version]: 3\nrc=0\n\n\n@pointee: 3\n@pointer: 3\nrc=0\n"
        ),
        "{r}"
    );
}

/// The kernel watchpoint case of the 6.12 boot (the host's kernel refuses breakpoints on kernel addresses; see
/// tests/watchpoints.rs): the `nvcsw` of a Python process sleeping on cpu1 (pinning itself there again once cpu1 is
/// back) is watched on cpu1; its hits are counted before cpu1 goes offline, after it came back, and after a SIGUSR1
/// had the script `unwatch()` the address. The tracer runs without `timeout`, which would take the SIGUSR1 itself
/// (and die of it); the guest's own timeout bounds it.
fn kernel_watchpoint_case() -> String {
    let sleeper = "import os, time\nwhile True:\n    try:\n        os.sched_setaffinity(0, {1})\n    except OSError:\n        pass\n    time.sleep(0.01)\n";
    let address = r#"tracepoint:sched:sched_switch /args.prev_pid == $1/ { printf("0x%lx\n", (uint64)curtask + offsetof(struct task_struct, nvcsw)); exit(); }"#;
    let watch = r#"watchpoint:$1:8:w /cpu == 1/ { printf("hit\n"); } self:signal:SIGUSR1 { unwatch($1); }"#;
    format!(
        "echo {sleeper} >/tmp/sleeper.py; python3 /tmp/sleeper.py & sp=$!; addr=$(timeout 60 {tracer} -q -e {address} $sp); echo address=$addr; {tracer} -e {watch} $addr >/tmp/kw.out 2>/tmp/kw.err & st=$!; i=0; until grep -q '^Attached' /tmp/kw.err || [ $i -ge 600 ]; do i=$((i + 1)); sleep 0.1; done; hits() {{ grep -c '^hit$' /tmp/kw.out || true; }}; sleep 2; echo before=$(hits); echo 0 >/sys/devices/system/cpu/cpu1/online; sleep 1; echo offline=$(hits); echo 1 >/sys/devices/system/cpu/cpu1/online; sleep 3; echo back=$(hits); kill -USR1 $st; sleep 2; echo unwatched=$(hits); sleep 2; echo later=$(hits); kill -INT $st; wait $st; echo kwrc=$?; kill $sp; cat /tmp/kw.err >&2",
        sleeper = quote(sleeper),
        tracer = quote(tracer()),
        address = quote(address),
        watch = quote(watch),
    )
}

/// What [`kernel_watchpoint_case`] printed: the watchpoint attached and fired on cpu1, fired there again after cpu1
/// came back (its event reopened), and not once after `unwatch()` had settled.
fn check_kernel_watchpoint(output: &str, r: &GuestRun) {
    let count = |key: &str| {
        output
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("kernel watchpoint: no {key}=N\n{r}"))
    };
    assert!(output.contains("address=0xffff"), "no kernel address found:\n{r}");
    assert!(count("before") > 0, "no write on cpu1 seen before it went offline:\n{r}");
    assert!(count("back") > count("offline"), "cpu1's writes not seen after its return:\n{r}");
    assert_eq!(count("later"), count("unwatched"), "hits after unwatch():\n{r}");
    assert_eq!(count("kwrc"), 0, "the tracer's exit code:\n{r}");
}

/// The packets of [`fentry_and_fexit_count_exactly_with_typed_args_and_retval`]'s skboutput() case: each helper
/// call succeeded; each file is a pcap of raw IP (link type 101) holding each of the 6 datagrams exactly
/// once, also the 3 sent after cpu1 came back (its ring opened anew), whole in one file and from its UDP
/// header on in the other.
fn check_captures(output: &str, r: &GuestRun) {
    let lines: Vec<&str> = output.lines().collect();
    let maps: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with('@')).collect();
    assert_eq!(maps.len(), 2, "skboutput maps:\n{r}");
    let mut calls = 0;
    for line in &maps {
        let (key, count) = line.split_once("]: ").unwrap_or_else(|| panic!("{line}\n{r}"));
        let count = count.parse::<u64>().unwrap_or(0);
        assert!(key.ends_with("[0") && count >= 6, "a failed skboutput():\n{r}");
        calls += count;
    }
    assert!(lines.contains(&"rc=0"), "skboutput run:\n{r}");
    // Every successful call's packet reached its file: none was lost.
    assert!(output.contains(&format!("skboutput() wrote {calls} packets")), "packets written:\n{r}");
    assert!(
        output
            .contains("`skboutput()` takes a `struct sk_buff *` (e.g. `args.skb`), not struct net_device *"),
        "{r}"
    );
    assert!(
        output.contains("`skboutput()` takes the bytes to leave out of each packet as a number, 0 or more"),
        "{r}"
    );
    let (rx, cut) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    let datagrams = |hex: &str, ip_header: usize| -> Vec<String> {
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_else(|_| panic!("hex\n{r}")))
            .collect();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        assert!(bytes.len() >= 24 && word(0) == 0xa1b2_c3d4 && word(20) == 101, "pcap header:\n{r}");
        let (mut at, mut found) = (24, vec![]);
        while at + 16 <= bytes.len() {
            let length = word(at + 8) as usize;
            assert_eq!(length, word(at + 12) as usize, "captured and original lengths:\n{r}");
            let packet = &bytes[at + 16..at + 16 + length];
            // UDP to port 9999: the payload after its 8-byte header.
            let udp = &packet[ip_header..];
            if (ip_header == 0 || packet[9] == 17) && udp.len() > 8 && udp[2..4] == [0x27, 0x0f] {
                found.push(String::from_utf8_lossy(&udp[8..]).into_owned());
            }
            at += 16 + length;
        }
        assert_eq!(at, bytes.len(), "a cut record:\n{r}");
        found.sort();
        found
    };
    let sent: Vec<String> = (0..6).map(|i| format!("steadytrace-{i}")).collect();
    assert_eq!(datagrams(rx, 20), sent, "whole packets:\n{r}");
    assert_eq!(datagrams(cut, 0), sent, "packets from their UDP header:\n{r}");
}

/// Wildcard kprobes and kretprobes. On 6.12 each is one program on one kprobe_multi link; on 6.1 (Debian builds it
/// without CONFIG_FPROBE: no kprobe_multi links) and with STEADYTRACE_KPROBE_ATTACH=perf, one perf kprobe event per
/// function. Either way each function the workload goes through counts exactly, `func` names the function that
/// fired and `retval` is its own; a probe using `probe`, or comparing `func` with a string, gets a program per
/// function. `-v` says how each probe was attached.
#[test]
fn kprobe_wildcards_count_each_function_exactly() {
    let Some(_guest) = guest("kprobe_wildcards_count_each_function_exactly") else { return };
    let sleeps = "kprobe:*_nanosleep /pid == cpid/ { @[func] = count(); } kretprobe:*_nanosleep /pid == cpid/ { @returns[func] = count(); }";
    let getppid = "kretprobe:*sys_getppid /pid == cpid/ { @[func, retval] = count(); }";
    let per_function = r#"kprobe:*_nanosleep /pid == cpid/ { @[probe] = count(); } kprobe:*_nanosleep /pid == cpid && func == "do_nanosleep"/ { @do = count(); }"#;
    let script = format!(
        r#"
# NAME ENV PROGRAM COMMAND: the tracer's pid (the parent of the command), its maps' lines, and how its probes attached.
run_case() {{
  echo "== $1"
  env $2 {tracer} -v -e "$3" -c "$4" >/tmp/out 2>/tmp/err &
  st=$!
  rc=0; wait $st || rc=$?
  echo "rc=$rc"
  echo "tracer=$st"
  grep '^@' /tmp/out
  echo "multi=$(grep -c ' runs on one kprobe_multi link on ' /tmp/err)"
  echo "perf=$(grep -c ' runs on a perf kprobe event$' /tmp/err)"
  grep '^Attached' /tmp/err
  cat /tmp/err >&2
}}
run_case sleeps '' {sleeps} '{workload} sleep 25'
run_case sleeps-perf STEADYTRACE_KPROBE_ATTACH=perf {sleeps} '{workload} sleep 25'
run_case getppid '' {getppid} '{workload} getppid 10 1'
run_case per-function '' {per_function} '{workload} sleep 25'
"#,
        tracer = quote(tracer()),
        workload = workload(),
        sleeps = quote(sleeps),
        getppid = quote(getppid),
        per_function = quote(per_function),
    );
    for kernel in ["6.1", "6.12"] {
        let r = run(kernel, 2, "", 300, &script);
        assert_eq!(r.code, Some(0), "{kernel}: {r}");
        let multi = kernel == "6.12";
        let cases = sections(&r.stdout);
        let case =
            |name: &str| cases.get(name).unwrap_or_else(|| panic!("{kernel}: no case {name}\n{r}")).clone();
        let field = |lines: &[String], key: &str| -> String {
            lines
                .iter()
                .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
                .unwrap_or_else(|| panic!("{kernel}: no {key}= in {lines:?}\n{r}"))
                .to_string()
        };
        let maps = |lines: &[String]| {
            let mut maps: Vec<String> = lines.iter().filter(|l| l.starts_with('@')).cloned().collect();
            maps.sort();
            maps
        };
        let functions = ["__x64_sys_clock_nanosleep", "do_nanosleep", "hrtimer_nanosleep"];
        let counts = |format: &dyn Fn(&str) -> String| -> Vec<String> {
            functions.iter().map(|f| format!("{}: 25", format(f))).collect()
        };

        for name in ["sleeps", "sleeps-perf"] {
            let lines = case(name);
            assert_eq!(field(&lines, "rc"), "0", "{kernel} {name}\n{r}");
            let mut expected = counts(&|f| format!("@[{f}]"));
            expected.extend(counts(&|f| format!("@returns[{f}]")));
            expected.sort();
            assert_eq!(maps(&lines), expected, "{kernel} {name}\n{r}");
            let (multi_links, perf_events): (u64, u64) =
                (field(&lines, "multi").parse().unwrap(), field(&lines, "perf").parse().unwrap());
            if multi && name == "sleeps" {
                assert_eq!((multi_links, perf_events), (2, 0), "{kernel} {name}: one link per probe\n{r}");
                assert!(lines.contains(&"Attached 2 probes".to_string()), "{kernel} {name}\n{r}");
            } else {
                assert_eq!(multi_links, 0, "{kernel} {name}: no kprobe_multi link expected\n{r}");
                // Each wildcard matches at least the three functions counted, and more besides.
                assert!(perf_events >= 6, "{kernel} {name}: a perf kprobe event per function\n{r}");
            }
        }

        let lines = case("getppid");
        assert_eq!(field(&lines, "rc"), "0", "{kernel} getppid\n{r}");
        // getppid returns the tracer's pid. The function is `__do_sys_getppid` on both kernels, which on 6.12
        // shares its address with `__x64_sys_getppid`: `func` of a kprobe_multi link, a ksym, may name either.
        let tracer = field(&lines, "tracer");
        let getppids = maps(&lines);
        assert!(!getppids.is_empty(), "{kernel} getppid: no call counted\n{r}");
        for line in getppids {
            let (function, rest) =
                line.split_once(", ").unwrap_or_else(|| panic!("{kernel} getppid: {line}\n{r}"));
            assert!(
                function.starts_with("@[") && function.ends_with("sys_getppid"),
                "{kernel} getppid: {line}\n{r}"
            );
            assert_eq!(rest, format!("{tracer}]: 10"), "{kernel} getppid: {line}\n{r}");
        }
        assert_eq!(field(&lines, "multi"), if multi { "1" } else { "0" }, "{kernel} getppid\n{r}");

        let lines = case("per-function");
        assert_eq!(field(&lines, "rc"), "0", "{kernel} per-function\n{r}");
        let mut expected = counts(&|f| format!("@[kprobe:{f}]"));
        expected.push("@do: 25".to_string());
        expected.sort();
        assert_eq!(maps(&lines), expected, "{kernel} per-function\n{r}");
        assert_eq!(
            field(&lines, "multi"),
            "0",
            "{kernel} per-function: `probe` and string `func` need a program per function\n{r}"
        );
    }
}

/// 4 CPUs: TLB shootdowns from cpu0 to writers on cpus 1-3 make `ipi_send_cpumask` events. Their CPU
/// lists must name the same CPUs as the kernel's own trace (which prints hex words: `00000000,0000000e`
/// is `1-3`), the `for` expansion must count each target
/// CPU once per event (the counts sum to the cpumasks' weights), and JSON gives one record per target.
#[test]
fn cpumask_ipis_name_the_cpus_the_kernel_traced() {
    let Some(_guest) = guest("cpumask_ipis_name_the_cpus_the_kernel_traced") else { return };
    let text_prog = r#"tracepoint:ipi:ipi_send_cpumask /pid == cpid/ {
  printf("mask %s\n", args.cpumask);
  @weights = sum(cpumask_weight(args.cpumask));
  for ($cpu : args.cpumask) { @targets[$cpu] = count(); @in_mask = sum(cpumask_test(args.cpumask, $cpu)); }
  @tested = sum(cpumask_test(args.cpumask, 0) + cpumask_test(args.cpumask, 1) + cpumask_test(args.cpumask, 2)
    + cpumask_test(args.cpumask, 3) + cpumask_test(args.cpumask, 200));
}
tracepoint:ipi:ipi_send_cpumask /pid == cpid && cpumask_test(args.cpumask, 2)/ { @on2 = count(); }"#;
    let json_prog = r#"tracepoint:ipi:ipi_send_cpumask /pid == cpid/ {
  printf("w %d\n", cpumask_weight(args.cpumask));
  for ($cpu : args.cpumask) { printf("cpu %d\n", $cpu); }
}"#;
    let script = format!(
        r#"set -e
t=/sys/kernel/tracing
echo > $t/trace
echo 1 > $t/events/ipi/ipi_send_cpumask/enable
timeout 120 {tracer} -q -e {text_prog} -c {command} > /tmp/text.out
echo 0 > $t/events/ipi/ipi_send_cpumask/enable
grep -o 'mask [0-9,-]*' /tmp/text.out | sed 's/mask //' | sort > /tmp/ours
# The kernel prints the mask as comma-separated 32-bit hex words, most significant first: turn them into
# a CPU list to compare.
grep 'workload' $t/trace | grep -o 'cpumask=[0-9a-f,]*' | sed 's/cpumask=//' | python3 -c '
import sys
for line in sys.stdin:
    bits = int(line.strip().replace(",", ""), 16)
    cpus = [c for c in range(bits.bit_length()) if bits >> c & 1]
    ranges, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        ranges.append(str(cpus[i]) if i == j else f"{{cpus[i]}}-{{cpus[j]}}")
        i = j + 1
    print(",".join(ranges))
' | sort > /tmp/kernels
echo "events=$(wc -l < /tmp/ours)"
echo "kernel_events=$(wc -l < /tmp/kernels)"
if cmp -s /tmp/ours /tmp/kernels; then echo same=yes; else echo same=no; diff /tmp/ours /tmp/kernels | head >&2; fi
echo "weights=$(grep '^@weights: ' /tmp/text.out | sed 's/@weights: //')"
echo "targets=$(grep '^@targets\[' /tmp/text.out | sed 's/.*: //' | awk '{{s += $1}} END {{print s + 0}}')"
echo "in_mask=$(grep '^@in_mask: ' /tmp/text.out | sed 's/@in_mask: //' | grep . || echo 0)"
echo "tested=$(grep '^@tested: ' /tmp/text.out | sed 's/@tested: //' | grep . || echo 0)"
echo "on2=$(grep '^@on2: ' /tmp/text.out | sed 's/@on2: //' | grep . || echo 0)"
echo "targets2=$(grep '^@targets\[2\]: ' /tmp/text.out | sed 's/.*: //' | grep . || echo 0)"
timeout 120 {tracer} -q -f json -e {json_prog} -c {command} > /tmp/json.out
echo "json_weights=$(grep -o '"w [0-9]*' /tmp/json.out | awk '{{s += $2}} END {{print s + 0}}')"
echo "json_targets=$(grep -c '"cpu [0-9]*' /tmp/json.out)"
"#,
        tracer = quote(tracer()),
        text_prog = quote(text_prog),
        json_prog = quote(json_prog),
        command = quote(&format!("{} tlb 0 1 2 3 2", workload()))
    );
    let r = run("6.12", 4, "", 300, &script);
    assert_eq!(r.code, Some(0), "{r}");
    assert!(r.number("events") > 0, "no ipi_send_cpumask event from the workload\n{r}");
    assert_eq!(r.field("same"), "yes", "CPU lists differ from the kernel's trace\n{r}");
    assert_eq!(r.number("weights"), r.number("targets"), "per-CPU counts do not sum to the weights\n{r}");
    // cpumask_test: every CPU of the expansion is in the mask; CPUs 0-3 (and none past the mask) make up each
    // mask's weight; filtering on CPU 2 counts the events `@targets[2]` counted.
    assert_eq!(r.number("in_mask"), r.number("targets"), "cpumask_test of the CPUs `for` gives\n{r}");
    assert_eq!(r.number("tested"), r.number("weights"), "cpumask_test of CPUs 0-3 and 200\n{r}");
    assert_eq!(r.number("on2"), r.number("targets2"), "a predicate on cpumask_test(args.cpumask, 2)\n{r}");
    assert!(r.number("json_targets") > 0, "{r}");
    assert_eq!(r.number("json_weights"), r.number("json_targets"), "JSON: one record per target CPU\n{r}");
}

/// Tracepoints, kprobes, kretprobes and (on 6.1, without uprobe_multi) uprobes each hang on ONE perf event, opened on
/// the first online CPU. The kernel runs a trace event's BPF programs on every CPU the event fires on, whatever the
/// state of that perf event; this proves it still holds after the perf event's own CPU went offline and came back.
/// The tracer runs through phases with CPUs going offline and online; in each phase the workload sleeps 20 times
/// and calls `workload_add` 50 times on every online CPU in turn (one process per CPU and kind, pinned with taskset),
/// and every probe's count per process must be exact. `@cpu` shows where the sleeps fired.
///
/// - 6.1 with `cpu0_hotplug`, "cpu0 leaves": events opened on cpu0; phases before, while and after cpu0 is offline.
/// - 6.1, "cpu0 offline at start": events opened on cpu1 (an event on offline cpu0 could not be opened at all);
///   phases with cpu0 offline, cpu0 back, cpu1 offline, cpu1 back.
/// - 6.12 cannot take cpu0 offline, so the tracer is made to see `1-3` as the online CPUs while it starts (a file
///   bind-mounted over /sys/devices/system/cpu/online, unmounted once it has attached): events opened on cpu1, then
///   cpu1 goes offline and comes back.
#[test]
fn trace_events_count_exactly_after_their_cpu_left() {
    let Some(_guest) = guest("trace_events_count_exactly_after_their_cpu_left") else { return };
    let workload = workload();
    // 230 is clock_nanosleep on x86_64, the syscall behind each of the workload's sleeps.
    let prog = format!(
        r#"tracepoint:syscalls:sys_enter_clock_nanosleep /comm == "workload"/ {{ @syscall_tp[pid] = count(); @cpu[pid, cpu] = count(); }}
tracepoint:raw_syscalls:sys_enter /comm == "workload" && args.id == 230/ {{ @raw_tp[pid] = count(); }}
kprobe:do_nanosleep /comm == "workload"/ {{ @kprobe[pid] = count(); }}
kretprobe:do_nanosleep /comm == "workload"/ {{ @kretprobe[pid] = count(); }}
uprobe:{workload}:workload_add /comm == "workload"/ {{ @uprobe[pid] = count(); }}"#
    );
    let prelude = format!(
        r#"{PRELUDE}
set -e
online() {{ echo $2 > /sys/devices/system/cpu/cpu$1/online; }}
# NAME CPUS: the workload on each of CPUS, the online CPUs as the phase saw them, and the pids of its processes.
phase() {{
  echo "phase $1 online=$(cat /sys/devices/system/cpu/online)"
  for c in $2; do
    taskset -c $c {workload} sleep 20 & p=$!; wait $p; echo "run $1 cpu$c sleep $p"
    taskset -c $c {workload} calls 50 & p=$!; wait $p; echo "run $1 cpu$c calls $p"
  done
}}
start() {{
  echo "== $1"
  timeout 600 {tracer} -v -e {prog} >/tmp/$1.out 2>/tmp/$1.err &
  st=$!
  wait_attached /tmp/$1.err
}}
# The maps, and the kprobes still registered once the tracer is gone (it must leave none behind).
stop() {{
  kill -INT $st
  rc=0; wait $st || rc=$?
  echo "rc=$rc"
  echo "kprobes_left=$(grep -c do_nanosleep /sys/kernel/debug/kprobes/list || true)"
  grep '^@' /tmp/$1.out
  cat /tmp/$1.err >&2
}}
"#,
        tracer = quote(tracer()),
        prog = quote(&prog),
    );
    let cpu0_hotplug = r#"
start cpu0-leaves
phase before "0 1 2 3"
online 0 0
phase cpu0-offline "1 2 3"
online 0 1
phase cpu0-back "0 1 2 3"
stop cpu0-leaves

online 0 0
start cpu0-offline-at-start
phase at-start "1 2 3"
online 0 1
phase cpu0-back "0 1 2 3"
online 1 0
phase cpu1-offline "0 2 3"
online 1 1
phase cpu1-back "0 1 2 3"
stop cpu0-offline-at-start
"#;
    let cpu1_first = r#"
echo 1-3 > /tmp/online
mount --bind /tmp/online /sys/devices/system/cpu/online
start cpu1-first
# Lazily: the tracer keeps the file open (its CPU watcher), and goes on reading "1-3" from it.
umount -l /sys/devices/system/cpu/online
phase before "0 1 2 3"
online 1 0
phase cpu1-offline "0 2 3"
online 1 1
phase cpu1-back "0 1 2 3"
stop cpu1-first
"#;
    let cases: [(&str, &str, &str, &[Scenario]); 2] = [
        (
            "6.1",
            "cpu0_hotplug",
            cpu0_hotplug,
            &[
                Scenario {
                    name: "cpu0-leaves",
                    phases: &[("before", "0-3"), ("cpu0-offline", "1-3"), ("cpu0-back", "0-3")],
                },
                Scenario {
                    name: "cpu0-offline-at-start",
                    phases: &[
                        ("at-start", "1-3"),
                        ("cpu0-back", "0-3"),
                        ("cpu1-offline", "0,2-3"),
                        ("cpu1-back", "0-3"),
                    ],
                },
            ],
        ),
        (
            "6.12",
            "",
            cpu1_first,
            &[Scenario {
                name: "cpu1-first",
                phases: &[("before", "0-3"), ("cpu1-offline", "0,2-3"), ("cpu1-back", "0-3")],
            }],
        ),
    ];
    for (kernel, append, script, scenarios) in cases {
        let r = run(kernel, 4, append, 300, &format!("{prelude}{script}"));
        assert_eq!(r.code, Some(0), "{kernel}: {r}");
        let sections = sections(&r.stdout);
        for scenario in scenarios {
            let lines =
                sections.get(scenario.name).unwrap_or_else(|| panic!("{kernel}: no {}\n{r}", scenario.name));
            check_trace_event_counts(kernel, scenario, lines, &r);
        }
    }
}

/// A scenario of `trace_events_count_exactly_after_their_cpu_left`: its name and its phases, each with the CPUs
/// online during it.
struct Scenario {
    name: &'static str,
    phases: &'static [(&'static str, &'static str)],
}

/// Checks one scenario's output (see `trace_events_count_exactly_after_their_cpu_left`): the phases saw the CPUs
/// online that they should have, each sleeping process counts exactly 20 in every sleep probe, all on its own CPU,
/// each calling process exactly 50 in the uprobe, nothing else was counted, and no kprobe was left behind.
fn check_trace_event_counts(kernel: &str, scenario: &Scenario, lines: &[String], r: &GuestRun) {
    let context = format!("{kernel} {}", scenario.name);
    let seen: Vec<String> = lines.iter().filter_map(|l| l.strip_prefix("phase ")).map(String::from).collect();
    let wanted: Vec<String> =
        scenario.phases.iter().map(|(name, online)| format!("{name} online={online}")).collect();
    assert_eq!(seen, wanted, "{context}: the phases did not see the CPUs online they should have\n{r}");
    assert!(lines.contains(&"rc=0".to_string()), "{context}: the tracer failed\n{r}");
    assert!(lines.contains(&"kprobes_left=0".to_string()), "{context}: kprobes left behind\n{r}");

    // pid -> "PHASE cpuN", and the map lines each run must have produced.
    let mut runs = std::collections::HashMap::new();
    let mut expected = vec![];
    for run in lines.iter().filter_map(|l| l.strip_prefix("run ")) {
        let [phase, cpu, kind, pid] = run.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("{context}: bad run line {run:?}\n{r}")
        };
        runs.insert(pid.to_string(), format!("{phase} {cpu}"));
        if kind == "sleep" {
            for map in ["syscall_tp", "raw_tp", "kprobe", "kretprobe"] {
                expected.push(format!("@{map}[{pid}]: 20"));
            }
            expected.push(format!("@cpu[{pid}, {}]: 20", cpu.trim_start_matches("cpu")));
        } else {
            expected.push(format!("@uprobe[{pid}]: 50"));
        }
    }
    let mut counted: Vec<String> = lines.iter().filter(|l| l.starts_with('@')).cloned().collect();
    counted.sort();
    expected.sort();
    if counted != expected {
        // Name the phase and CPU of each process whose counts are wrong.
        let pid = |line: &str| line.split(['[', ',', ']']).nth(1).unwrap_or_default().to_string();
        let describe =
            |line: &String| format!("{line} ({})", runs.get(&pid(line)).map_or("?", String::as_str));
        let missing: Vec<String> = expected.iter().filter(|l| !counted.contains(l)).map(describe).collect();
        let unexpected: Vec<String> =
            counted.iter().filter(|l| !expected.contains(l)).map(describe).collect();
        panic!("{context}: counts differ\nexpected but not printed: {missing:#?}\nprinted but not expected: {unexpected:#?}\n{r}");
    }
}

/// bpftrace 0.17's kprobe tools (/usr/sbin/*.bt), unmodified, in the 6.12 guest (this machine's kernel has no
/// kprobes): each runs under a workload (file reads, a TCP connection on the loopback, capability checks) until
/// SIGINT, ends cleanly, prints its header, and the tools that see the workload print its events. Block, md, swap
/// and OOM tools see no events in the guest (it has no disk): their runs check the header and a clean exit.
#[test]
fn bpftrace_0_17_kprobe_tools_run_in_the_guest() {
    let Some(_guest) = guest("bpftrace_0_17_kprobe_tools_run_in_the_guest") else { return };
    if !Path::new("/usr/sbin/tcpconnect.bt").exists() {
        common::skip(
            "bpftrace_0_17_kprobe_tools_run_in_the_guest",
            "bpftrace 0.17's tools are not installed (apt-get install bpftrace)",
        );
        return;
    }
    // Each tool: its name, and pieces that some line of its output must hold (all of them).
    let tools: &[(&str, &[&str])] = &[
        ("biolatency", &["Tracing block device I/O"]),
        ("biosnoop", &["TIME(ms)", "DISK", "LAT(ms)"]),
        ("biostacks", &["Tracing block I/O with init stacks"]),
        ("capable", &["CAP_", "python3"]),
        ("dcsnoop", &["Tracing dcache lookups"]),
        ("loads", &["load averages: "]),
        ("mdflush", &["Tracing md flush events"]),
        ("oomkill", &["Tracing oom_kill_process()"]),
        ("runqlen", &["@runqlen:"]),
        ("swapin", &[]),
        ("tcpaccept", &["python3", "127.0.0.1"]),
        ("tcpconnect", &["python3", "127.0.0.1", "4747"]),
        ("tcpdrop", &["Tracing tcp drops"]),
        ("tcplife", &["python3", "127.0.0.1", "4747"]),
        ("tcpretrans", &["Tracing tcp retransmits"]),
        ("tcpsynbl", &["Tracing SYN backlog size"]),
        ("undump", &["Dump UNIX socket packages RX"]),
        ("vfscount", &["@[vfs_read]: "]),
        ("vfsstat", &["@[vfs_read]: "]),
        ("xfsdist", &["Tracing XFS operation latency"]),
    ];
    let names: Vec<&str> = tools.iter().map(|(name, _)| *name).collect();
    let script = format!(
        r#"{PRELUDE}
ip link set lo up
cat >/tmp/work.py <<'PY'
import os, socket, time
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 4747)); server.listen(8)
for _ in range(3):
    client = socket.create_connection(("127.0.0.1", 4747)); peer, _ = server.accept()
    client.sendall(b"x" * 1000); peer.recv(1000); client.close(); peer.close()
for _ in range(20):
    with open("/etc/hostname") as f: f.read()
try: os.setuid(0)
except OSError: pass
time.sleep(0.5)
PY
# All tools at once: under emulation each start-up takes seconds, and one workload serves them all.
for tool in {names}; do
  {tracer} /usr/sbin/$tool.bt >/tmp/$tool.out 2>/tmp/$tool.err &
  echo $! >/tmp/$tool.pid
done
# Up to 5 minutes for all of them to attach.
i=0
until [ $i -ge 3000 ]; do
  waiting=0
  for tool in {names}; do grep -q '^Attached' /tmp/$tool.err || waiting=1; done
  [ $waiting = 0 ] && break
  i=$((i + 1)); sleep 0.1
done
python3 /tmp/work.py; sleep 2
for tool in {names}; do kill -INT $(cat /tmp/$tool.pid) 2>/dev/null; done
for tool in {names}; do
  wait $(cat /tmp/$tool.pid); echo "tool=$tool exit=$?"
  # The head, and the lines of the workload (a busy tool prints thousands of other lines).
  echo "--- $tool stdout"; {{ head -c 2000 /tmp/$tool.out; grep -F -e python3 -e '@[' /tmp/$tool.out | head -40; }}
  echo "--- $tool stderr"; head -c 2000 /tmp/$tool.err
done
"#,
        names = names.join(" "),
        tracer = quote(tracer()),
    );
    let r = run("6.12", 2, "", 900, &script);
    assert_eq!(r.code, Some(0), "{r}");
    let mut failures = vec![];
    for (name, pieces) in tools {
        let status = r.stdout.lines().find_map(|l| l.strip_prefix(&format!("tool={name} ")));
        let output = r
            .stdout
            .split(&format!("--- {name} stdout\n"))
            .nth(1)
            .and_then(|rest| rest.split(&format!("--- {name} stderr\n")).next())
            .unwrap_or("");
        if status != Some("exit=0") {
            failures.push(format!("{name}: {status:?}"));
        } else if !pieces.is_empty() && !output.lines().any(|l| pieces.iter().all(|p| l.contains(p))) {
            failures.push(format!("{name}: no line with {pieces:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} tools failed: {failures:?}\n{r}", failures.len(), tools.len());
}

/// Current bpftrace's tools (its tools/*.bt, from the newest bpftrace package Debian ships: scripts/bpftrace-tools)
/// compile unmodified in the 6.12 guest, where kprobes exist.
#[test]
fn current_bpftrace_tools_compile_in_the_guest() {
    let Some(_guest) = guest("current_bpftrace_tools_compile_in_the_guest") else { return };
    let dir = match common::fetched("bpftrace-tools") {
        Ok(dir) => dir,
        Err(why) => {
            common::skip(
                "current_bpftrace_tools_compile_in_the_guest",
                &format!("bpftrace's tools cannot be had: {why}"),
            );
            return;
        }
    };
    let script = format!(
        r#"for f in {dir}/*.bt; do
  if {tracer} --dry-run "$f" >/tmp/out 2>&1; then echo "compiled $(basename $f)"; else echo "failed $(basename $f): $(grep -m1 ERROR /tmp/out)"; fi
done"#,
        dir = quote(dir.to_str().expect("utf-8 path")),
        tracer = quote(tracer()),
    );
    let r = run("6.12", 2, "", 600, &script);
    assert_eq!(r.code, Some(0), "{r}");
    // Known not to compile yet, with the reason: the list shrinks as steadytrace grows.
    let known: &[(&str, &str)] = &[
        // Not steadytrace's: the tool follows a kernel newer than the guest's (it compiles on this host's).
        ("runqlen.bt", "it reads `struct cfs_rq`'s `nr_queued`, which the 6.12 kernel does not have"),
    ];
    let failed: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("failed ")).collect();
    let compiled = r.stdout.lines().filter(|l| l.starts_with("compiled ")).count();
    assert!(compiled > 30, "{r}");
    let unexpected: Vec<&&str> = failed
        .iter()
        .filter(|l| !known.iter().any(|(tool, _)| l.starts_with(&format!("failed {tool}:"))))
        .collect();
    assert!(unexpected.is_empty(), "{} tools failed to compile:\n{}", unexpected.len(), failed.join("\n"));
    for (tool, why) in known {
        assert!(
            failed.iter().any(|l| l.starts_with(&format!("failed {tool}:"))),
            "{tool} compiles now: take it off the known list ({why})"
        );
    }
}

/// A line of [`SOURCE_LINES`] that runs once per call of `work`.
const COUNTED_LINE: usize = 5;

/// A program whose `work` runs `argv[1]` times: line [`COUNTED_LINE`] once each time.
const SOURCE_LINES: &str = "#include <stdlib.h>
static volatile int total;
__attribute__((noinline)) int work(int i)
{
\tint x = i * 2; /* counted */
\ttotal += x;
\treturn x;
}
int main(int argc, char **argv) { int n = argc > 1 ? atoi(argv[1]) : 0; for (int i = 0; i < n; i++) work(i); return 0; }
";

/// Built by `aarch64-linux-gnu-gcc` in `dir` (run there, so that DWARF names the source `srcline.c`); Err says why not.
fn cross_compile(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out =
        std::process::Command::new("aarch64-linux-gnu-gcc").current_dir(dir).args(args).output().map_err(
            |e| format!("needs aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu): {e}"),
        )?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("aarch64-linux-gnu-gcc {args:?}: {}", String::from_utf8_lossy(&out.stderr))),
    }
}

/// Android's own case on its own architecture, in the arm64 6.12 guest: a library stored in an APK, mapped from it
/// by a static aarch64 runner as Android's loader maps it, probed through `APK!/lib/arm64-v8a/libfoo.so` (its
/// functions, a wildcard, a uretprobe, `ustack` named from the library), and a source-line uprobe
/// (`BIN@FILE:LINE`) of a static aarch64 program built with -g; each counted exactly.
#[test]
fn apk_and_source_line_uprobes_count_exactly_on_arm64() {
    use common::apk::{file_offset, zip, LIBRARY, RUNNER};
    use common::guest::{guest_for, tracer_for, Arch};
    let test = "apk_and_source_line_uprobes_count_exactly_on_arm64";
    let Some(_guest) = guest_for(test, Arch::Aarch64) else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [("foo.c", LIBRARY), ("runner.c", RUNNER), ("srcline.c", SOURCE_LINES)] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let built = cross_compile(&dir, &["-shared", "-fPIC", "-O1", "-o", "libfoo.so", "foo.c"])
        .and_then(|()| cross_compile(&dir, &["-static", "-O1", "-o", "runner", "runner.c"]))
        .and_then(|()| cross_compile(&dir, &["-static", "-g", "-O0", "-o", "srcline", "srcline.c"]));
    if let Err(why) = built {
        common::skip(test, &why);
        return;
    }
    let library = std::fs::read(dir.join("libfoo.so")).unwrap();
    let entry = "lib/arm64-v8a/libfoo.so";
    let apk_bytes = zip(&[("AndroidManifest.xml", b"<manifest/>", true), (entry, &library, false)], 4096);
    let apk = dir.join("base.apk");
    std::fs::write(&apk, &apk_bytes).unwrap();
    let start = apk_bytes.windows(library.len()).position(|w| w == library).unwrap();
    let lib = format!("{}!/{entry}", apk.display());
    let apk_script = format!(
        "uprobe:{lib}:apk_* {{ @[func] = count(); }} \
         uprobe:{lib}:apk_leaf {{ @stack[ustack(1)] = count(); }} \
         uretprobe:{lib}:apk_answer {{ @returned = sum(retval); }}"
    );
    let runner = format!(
        "{} {} {start} {} {} 5",
        dir.join("runner").display(),
        apk.display(),
        library.len(),
        file_offset(&library, "apk_answer")
    );
    let srcline = dir.join("srcline");
    let line_script = format!("uprobe:{}@srcline.c:{COUNTED_LINE} {{ @line = count(); }}", srcline.display());
    let script = format!(
        "T={tracer}\necho '== apk'\n\"$T\" -q -e {apk} -c {runner} 2>&1; echo \"rc=$?\"\n\
         echo '== line'\n\"$T\" -q -e {line} -c {command} 2>&1; echo \"rc=$?\"\n",
        tracer = quote(tracer_for(Arch::Aarch64)),
        apk = quote(&apk_script),
        runner = quote(&runner),
        line = quote(&line_script),
        command = quote(&format!("{} 7", srcline.display())),
    );
    let r = common::guest::run_on(Arch::Aarch64, "6.12", 2, "", 300, &script);
    assert_eq!(r.code, Some(0), "{r}");
    let found = sections(&r.stdout);
    let lines = |name: &str| -> Vec<String> {
        found.get(name).cloned().unwrap_or_default().into_iter().filter(|l| !l.is_empty()).collect()
    };
    // apk_answer(i) = 3i + 5 for i in 0..5: 55 in all, as the runner prints it too.
    assert_eq!(
        lines("apk"),
        [
            "55",
            "@[apk_answer]: 5",
            "@[apk_leaf]: 10",
            "@returned: 55",
            "@stack[",
            "    apk_leaf+0",
            "]: 10",
            "rc=0"
        ],
        "{r}"
    );
    assert_eq!(lines("line"), ["@line: 7", "rc=0"], "{r}");
}
