//! `--metrics`: a real Prometheus scrapes the tracer and reads the script's maps, and its health, as exact
//! numbers.

mod common;

use common::prometheus::{free_port, installed, Prometheus};
use common::{can_trace, tracer, workload, Reaped};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn a_real_prometheus_reads_exact_counts_and_histograms() {
    let test = "a_real_prometheus_reads_exact_counts_and_histograms";
    if !can_trace(test) {
        return;
    }
    if !installed(test) {
        return;
    }
    const CALLS: u32 = 1234;
    let metrics = free_port();
    // The test workload makes exactly CALLS getppid calls, then the command lives on while Prometheus
    // scrapes.
    let command = format!("sh -c '{} getppid {CALLS} 1; sleep 30'", workload().display());
    let address = format!("127.0.0.1:{metrics}");
    // A key that needs escaping: one unescaped quote would make Prometheus refuse the whole scrape.
    let script = r#"BEGIN { @weird["a\"b\\c"] = count(); }
        tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { @calls = count(); @h = hist(2); }"#;
    let _tracer = Reaped::spawn(
        tracer(&["--metrics", &address, "-c", &command, "-e", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("start the tracer");
    let prometheus = Prometheus::start(&[address]);
    let wanted = f64::from(CALLS);
    let last = prometheus.wait_for(
        &[
            "steadytrace_map_calls_total",
            "steadytrace_map_h_bucket{le=\"+Inf\"}",
            "steadytrace_map_h_count",
            "steadytrace_lost_events_total",
            "steadytrace_probes_attached",
            r#"steadytrace_map_weird_total{key="a\"b\\c"}"#,
        ],
        &[wanted, wanted, wanted, 0.0, 2.0, 1.0],
        Duration::from_secs(25),
    );
    assert_eq!(
        last,
        [Some(wanted), Some(wanted), Some(wanted), Some(0.0), Some(2.0), Some(1.0)],
        "(calls, +Inf bucket, count, lost events, probes attached, the escaped key) as Prometheus read them"
    );
}
