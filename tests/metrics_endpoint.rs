//! `--metrics` as an HTTP endpoint, read with curl: both exposition formats by `Accept`, the health
//! metrics, the key cap, a scrape answered while the event reader is blocked, and the errors of bad input.

mod common;

use common::prometheus::free_port;
use common::{can_trace, skip, stderr, tracer, wait_for_stderr_line, wait_output, workload, Reaped};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tracer serving `--metrics` on a free port with `args`, once it has attached its probes; and the rest of
/// its stderr, once it has exited.
fn serving(args: &[&str]) -> (Reaped, u16, std::thread::JoinHandle<String>) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut child = Reaped::spawn(
        tracer(&[&["--metrics", &address], args].concat()).stdout(Stdio::null()).stderr(Stdio::piped()),
    )
    .expect("start the tracer");
    let rest_of_stderr = wait_for_stderr_line(&mut child, "Attached");
    (child, port, rest_of_stderr)
}

/// GET /metrics (or `path`) with an optional Accept header: (Content-Type, body); within 5 s.
fn get(port: u16, path: &str, accept: Option<&str>) -> (String, String) {
    let mut curl = Command::new("curl");
    curl.args(["-s", "-m", "5", "-D", "/dev/stderr", &format!("http://127.0.0.1:{port}{path}")]);
    if let Some(accept) = accept {
        curl.args(["-H", &format!("Accept: {accept}")]);
    }
    let output = curl.output().expect("run curl");
    let headers = String::from_utf8_lossy(&output.stderr).to_string();
    let content_type = headers
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type: ").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    (content_type, String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The value of the sample line starting with `series ` (the series name and labels as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn needs_curl(test: &str) -> bool {
    if Command::new("curl").arg("--version").output().is_err() {
        skip(test, "needs curl (scripts/setup installs it)");
        return false;
    }
    can_trace(test)
}

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

#[test]
fn classic_text_by_default_and_openmetrics_when_asked() {
    let test = "classic_text_by_default_and_openmetrics_when_asked";
    if !needs_curl(test) {
        return;
    }
    let (_tracer, port, _) =
        serving(&["-e", "BEGIN { @calls[\"a\"] = count(); @calls[\"a\"] = count(); @v = 5; }"]);
    let (content_type, text) = get(port, "/metrics", None);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(text.contains("# TYPE steadytrace_map_calls_total counter\n"), "{text}");
    assert_eq!(sample(&text, "steadytrace_map_calls_total{key=\"a\"}"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "steadytrace_map_v"), Some(5.0), "{text}");
    assert!(!text.contains("# EOF"), "{text}");

    let (content_type, text) = get(port, "/metrics", Some(PROMETHEUS_ACCEPT));
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(text.contains("# TYPE steadytrace_map_calls counter\n"), "{text}");
    assert_eq!(sample(&text, "steadytrace_map_calls_total{key=\"a\"}"), Some(2.0), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");

    let (_, text) = get(port, "/elsewhere", None);
    assert_eq!(text, "steadytrace serves /metrics\n");
    assert_eq!(status(port, &["-I"]), "200");
    assert_eq!(status(port, &["-X", "POST"]), "405");
}

/// The HTTP status of a request to /metrics made with curl's `options`.
fn status(port: u16, options: &[&str]) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let output = Command::new("curl")
        .args(["-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(options)
        .arg(&url)
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every kind of map, with keys that need escaping and names that collide.
const EVERY_KIND: &str = r#"BEGIN { @q["a\"b\\c\nd"] = count(); @ = count(); @total = 5; @h = hist(-3); @h = hist(100); @h_count = 2; @l[comm] = lhist(5, 0, 100, 10); @s[1] = stats(-9); @s[2] = stats(9); @a = avg(-7); @mn = min(-3); @mx = max(4); @u = 18446744073709551615; @k[kstack] = count(); @st[pid] = "x"; }"#;

#[test]
fn promtool_parses_the_classic_exposition_of_every_kind_of_map() {
    let test = "promtool_parses_the_classic_exposition_of_every_kind_of_map";
    if !needs_curl(test) {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        skip(test, "promtool is not installed (the prometheus package has it; scripts/setup installs it)");
        return;
    }
    let (_tracer, port, _) = serving(&["-e", EVERY_KIND]);
    let (_, text) = get(port, "/metrics", None);
    let mut promtool = Reaped::spawn(
        Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("run promtool");
    use std::io::Write;
    promtool.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write to promtool");
    let checked = promtool.into_inner().wait_with_output().expect("promtool's verdict");
    let said =
        format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    // 0: clean; 3: naming advice only (a map called @h "contains an abbreviated unit"); 1: it did not parse.
    assert!(matches!(checked.status.code(), Some(0 | 3)), "promtool: {said}\n{text}");
    assert!(!said.contains("error"), "promtool: {said}\n{text}");
    for series in [
        r#"steadytrace_map_q_total{key="a\"b\\c\nd"} 1"#,
        "steadytrace_map_total 1",
        "steadytrace_map_total_2 5",
        "steadytrace_map_h_count 2",
        "steadytrace_map_h_count_2 2",
        r#"steadytrace_map_s_sum{key="2"} 9"#,
        "steadytrace_map_u 18446744073709551615",
    ] {
        assert!(text.lines().any(|l| l == series), "no `{series}` in\n{text}");
    }
    assert!(!text.contains(r#"steadytrace_map_s_sum{key="1"}"#), "a negative sum: {text}");
    assert!(!text.contains("steadytrace_map_st"), "strings are not metrics: {text}");
}

#[test]
fn the_openmetrics_exposition_keeps_the_specifications_rules() {
    let test = "the_openmetrics_exposition_keeps_the_specifications_rules";
    if !needs_curl(test) {
        return;
    }
    let (_tracer, port, _) = serving(&["-e", EVERY_KIND]);
    let (_, text) = get(port, "/metrics", Some(PROMETHEUS_ACCEPT));
    assert!(text.ends_with("# EOF\n") && text.matches("# EOF").count() == 1, "{text}");
    let mut series = std::collections::HashSet::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').expect("a sample");
        assert!(series.insert(name), "a series twice: {name}");
        assert!(value != "NaN", "NaN in {line}");
    }
    // Every histogram's +Inf bucket is its count, and no histogram with a bucket below zero has a sum.
    for histogram in ["steadytrace_map_h", "steadytrace_map_l"] {
        let top =
            text.lines().find(|l| l.starts_with(&format!("{histogram}_bucket")) && l.contains("le=\"+Inf\""));
        let count = text.lines().find(|l| l.starts_with(&format!("{histogram}_count")));
        let value = |line: Option<&str>| line.and_then(|l| l.rsplit_once(' ')).map(|(_, v)| v.to_string());
        assert!(value(top).is_some() && value(top) == value(count), "{histogram}: {top:?} {count:?}");
        assert!(!text.contains(&format!("{histogram}_sum")), "{text}");
    }
}

#[test]
fn labels_are_named_as_the_script_names_the_keys() {
    let test = "labels_are_named_as_the_script_names_the_keys";
    if !needs_curl(test) {
        return;
    }
    let script =
        r#"BEGIN { $fd = 3; @opens[comm, $fd, 7] = count(); @by_pid[pid, pid] = sum(2); @s[str("x")] = 1; }"#;
    let (_tracer, port, _) = serving(&["-e", script]);
    let (_, text) = get(port, "/metrics", None);
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", _tracer.id())).expect("the tracer's comm");
    let opens = format!("steadytrace_map_opens_total{{comm=\"{}\",fd=\"3\",key2=\"7\"}}", comm.trim());
    assert_eq!(sample(&text, &opens), Some(1.0), "no {opens} in\n{text}");
    let by_pid = format!("steadytrace_map_by_pid{{pid=\"{0}\",key1=\"{0}\"}}", _tracer.id());
    assert_eq!(sample(&text, &by_pid), Some(2.0), "no {by_pid} in\n{text}");
    // A call is named by its argument when that has a name, else by itself.
    assert_eq!(sample(&text, "steadytrace_map_s{str=\"x\"}"), Some(1.0), "{text}");
}

#[test]
fn health_metrics_count_probes_intervals_and_dropped_updates() {
    let test = "health_metrics_count_probes_intervals_and_dropped_updates";
    if !needs_curl(test) {
        return;
    }
    // 10 keys into a map of 3: 7 updates dropped. Two probes, one of them an interval.
    let script = "let @d = hash(3); BEGIN { $i = 0; while ($i < 10) { @d[$i] = $i; $i++; } } interval:ms:50 { @ticks = count(); }";
    let (_tracer, port, _) = serving(&["-e", script]);
    let (_, text) = get(port, "/metrics", None);
    assert_eq!(sample(&text, "steadytrace_probes_attached"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "steadytrace_dropped_map_updates_total{map=\"@d\"}"), Some(7.0), "{text}");
    assert_eq!(sample(&text, "steadytrace_lost_events_total"), Some(0.0), "{text}");
    assert!(
        sample(&text, "steadytrace_interval_periods_skipped_total{probe=\"interval:ms:50\"}").is_some(),
        "{text}"
    );
    assert!(
        sample(&text, "steadytrace_scrape_duration_seconds").is_some_and(|s| s > 0.0 && s < 5.0),
        "{text}"
    );
    // No per-CPU perf probes: no hotplug figures.
    assert!(!text.contains("steadytrace_cpu_transitions"), "{text}");
    assert_eq!(sample(&text, "steadytrace_map_d{i=\"2\"}"), Some(2.0), "{text}");
}

#[test]
fn per_cpu_perf_probes_bring_the_hotplug_figures() {
    let test = "per_cpu_perf_probes_bring_the_hotplug_figures";
    if !needs_curl(test) {
        return;
    }
    let (_tracer, port, _) = serving(&["-e", "profile:hz:49 { @samples = count(); }"]);
    let (_, text) = get(port, "/metrics", None);
    for series in [
        "steadytrace_cpu_transitions_total{to=\"offline\"}",
        "steadytrace_cpu_transitions_total{to=\"online\"}",
        "steadytrace_perf_event_revivals_total{how=\"reopened\"}",
        "steadytrace_perf_event_revivals_total{how=\"reenabled\"}",
        "steadytrace_perf_event_revivals_total{how=\"new_cpu\"}",
        "steadytrace_perf_event_revivals_total{how=\"moved\"}",
    ] {
        assert!(sample(&text, series).is_some(), "no {series} in\n{text}");
    }
}

#[test]
fn over_the_key_cap_the_largest_keys_are_served_and_the_rest_counted() {
    let test = "over_the_key_cap_the_largest_keys_are_served_and_the_rest_counted";
    if !needs_curl(test) {
        return;
    }
    let script = "BEGIN { $i = 0; while ($i < 10) { @sizes[$i] = $i * 100; $i++; } }";
    let (mut tracer, port) = {
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let child = Reaped::spawn(
            tracer(&["--metrics", &address, "--metrics-max-keys", "3", "-e", script])
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        )
        .expect("start the tracer");
        (child, port)
    };
    let rest_of_stderr = wait_for_stderr_line(&mut tracer, "Attached");
    let mut text = String::new();
    for _ in 0..2 {
        text = get(port, "/metrics", None).1;
    }
    let served: Vec<(&str, f64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("steadytrace_map_sizes{i=\""))
        .filter_map(|l| l.split_once("\"} ").and_then(|(k, v)| Some((k, v.parse().ok()?))))
        .collect();
    assert_eq!(served, [("9", 900.0), ("8", 800.0), ("7", 700.0)], "{text}");
    assert_eq!(sample(&text, "steadytrace_metrics_keys_left_out{map=\"@sizes\"}"), Some(7.0), "{text}");
    drop(tracer);
    let said = rest_of_stderr.join().expect("stderr");
    assert_eq!(
        said.matches("--metrics: @sizes has more than 3 keys").count(),
        1,
        "said once per map:\n{said}"
    );
}

#[test]
fn a_scrape_is_answered_while_the_event_reader_is_blocked_and_counts_lost_events() {
    let test = "a_scrape_is_answered_while_the_event_reader_is_blocked_and_counts_lost_events";
    if !needs_curl(test) {
        return;
    }
    // Nobody reads the tracer's stdout: once the pipe is full the event reader blocks writing, the ring
    // buffer fills, and the programs count the records it refuses.
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let script = r#"tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { printf("%s %d %d %d %d\n", comm, pid, tid, cpu, nsecs); }"#;
    let mut child = Reaped::spawn(
        tracer(&["--metrics", &address, "-e", script]).stdout(Stdio::piped()).stderr(Stdio::piped()),
    )
    .expect("start the tracer");
    drop(wait_for_stderr_line(&mut child, "Attached"));
    let calls = Command::new(workload()).args(["getppid", "400000", "1"]).status().expect("run the workload");
    assert!(calls.success());
    let started = Instant::now();
    let (_, text) = get(port, "/metrics", None);
    let answered_in = started.elapsed();
    let lost = sample(&text, "steadytrace_lost_events_total");
    assert!(lost.is_some_and(|n| n > 0.0), "records lost while the reader is blocked: {lost:?}\n{text}");
    assert!(answered_in < Duration::from_secs(2), "the scrape took {answered_in:?}");
}

#[test]
fn a_port_in_use_and_a_bad_address_are_refused_clearly() {
    let test = "a_port_in_use_and_a_bad_address_are_refused_clearly";
    if !can_trace(test) {
        return;
    }
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("its address").to_string();
    let child = Reaped::spawn(
        tracer(&["--metrics", &address, "-e", "BEGIN { exit(); }"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("start the tracer");
    let output = wait_output(child, Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains(&format!("steadytrace: cannot serve metrics on {address}: Address already in use")),
        "{}",
        stderr(&output)
    );

    for (args, says) in [
        (
            vec!["--metrics", "localhost:notaport"],
            "invalid value 'localhost:notaport' for '--metrics <ADDR>'",
        ),
        (vec!["--metrics", "9435"], "invalid value '9435' for '--metrics <ADDR>'"),
        (vec!["--metrics-max-keys", "5"], "--metrics <ADDR>"),
        (
            vec!["--metrics", "127.0.0.1:0", "--metrics-max-keys", "0"],
            "invalid value '0' for '--metrics-max-keys <N>'",
        ),
    ] {
        let output = tracer(&[args.as_slice(), &["-e", "BEGIN { exit(); }"]].concat()).output().expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(says), "{args:?}: {}", stderr(&output));
        assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    }
}

#[test]
fn hostile_clients_neither_crash_nor_lock_out_the_endpoint() {
    let test = "hostile_clients_neither_crash_nor_lock_out_the_endpoint";
    if !needs_curl(test) {
        return;
    }
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let (mut tracer, port, rest_of_stderr) = serving(&["-e", "BEGIN { @n = count(); }"]);
    // Forty connections that send half a request and wait: more than the endpoint serves at once.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream.write_all(b"GET /metrics HTTP/1.1\r\n").expect("write");
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let busy = status(port, &[]);
    assert!(busy == "200" || busy == "503", "while 40 clients idle: {busy}");
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(port, &[]) != "200" {
        assert!(Instant::now() < deadline, "the endpoint did not come back after the idle clients left");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A request head larger than the endpoint takes.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let huge = format!("GET /metrics HTTP/1.1\r\nX-Filler: {}\r\n\r\n", "x".repeat(64 * 1024));
    let _ = stream.write_all(huge.as_bytes());
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer:?}");
    // A request that is not HTTP.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.write_all(b"hello\r\n\r\n").expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer:?}");
    assert_eq!(status(port, &[]), "200");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(tracer.id() as i32), nix::sys::signal::SIGINT);
    let started = Instant::now();
    let exited = loop {
        if let Some(status) = tracer.try_wait().expect("try_wait") {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the tracer did not exit on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exited.success(), "{exited:?}");
    let said = rest_of_stderr.join().expect("stderr");
    assert!(!said.contains("internal error") && !said.contains("panicked"), "{said}");
}
