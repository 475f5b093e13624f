//! Builtins of current bpftrace whose output depends on the clock or on a traced process, so that the
//! corpus (tests/scripts) cannot hold it: `strftime`, `nsecs(clock)`, `buf` of process memory.

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
    if !can_trace("buf_reads_process_memory_of_a_length_known_at_run_time") || tracefs().is_none() {
        println!("SKIPPED: needs root and tracefs");
        return;
    }
    let script = r#"tracepoint:syscalls:sys_enter_write /pid == cpid/ {
        printf("<%r|%rh|%r>\n", buf(args.buf, args.count), buf(args.buf, 2), buf(args.buf, 100 * args.count)); }"#;
    let child = tracer(&["-q", "-e", script, "-c", "/bin/echo hello"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = stdout(&wait_output(child, Duration::from_secs(30)));
    // The length is cut to the 64 bytes a buffer holds; what follows the 6 bytes written is not checked.
    let line = out.lines().find(|l| l.starts_with('<')).unwrap_or_else(|| panic!("no buffer line: {out}"));
    assert!(line.starts_with(r"<hello\x0a|68 65|hello\x0a"), "{line}");
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
