//! `--metrics`: a real Prometheus scrapes the tracer and reads the script's maps as exact numbers.

mod common;

use common::{can_trace, tracer, workload};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free now (the kernel's choice), for a server started just after.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Kills the child when dropped, also on a failed assertion.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of the PromQL `query`, once Prometheus answers with one sample.
fn query(prometheus: u16, query: &str) -> Option<f64> {
    let url = format!("http://127.0.0.1:{prometheus}/api/v1/query?query={}", urlencode(query));
    let output = Command::new("curl").args(["-s", &url]).output().ok()?;
    let reply: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    reply["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn a_real_prometheus_reads_exact_counts_and_histograms() {
    let test = "a_real_prometheus_reads_exact_counts_and_histograms";
    if !can_trace(test) {
        return;
    }
    if Command::new("prometheus").arg("--version").output().is_err() {
        println!(
            "SKIPPED: {test}: prometheus is not installed (apt-get install prometheus; scripts/setup does)"
        );
        return;
    }
    const CALLS: u32 = 1234;
    let (metrics, web) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("steadytrace-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for Prometheus");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global: {{ scrape_interval: 1s }}\nscrape_configs:\n  - job_name: steadytrace\n    static_configs: [ {{ targets: ['127.0.0.1:{metrics}'] }} ]\n"),
    )
    .expect("write the config");
    // The test workload makes exactly CALLS getppid calls, then the command lives on while Prometheus
    // scrapes.
    let command = format!("sh -c '{} getppid {CALLS} 1; sleep 30'", workload().display());
    let address = format!("127.0.0.1:{metrics}");
    let script =
        r#"tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { @calls = count(); @h = hist(2); }"#;
    let _tracer = Running(
        tracer(&["--metrics", &address, "-c", &command, "-e", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the tracer"),
    );
    let _prometheus = Running(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let wanted = f64::from(CALLS);
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut last = (None, None, None);
    while Instant::now() < deadline {
        last = (
            query(web, "steadytrace_map_calls_total"),
            query(web, "steadytrace_map_h_bucket{le=\"+Inf\"}"),
            query(web, "steadytrace_map_h_count"),
        );
        if last == (Some(wanted), Some(wanted), Some(wanted)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        last,
        (Some(wanted), Some(wanted), Some(wanted)),
        "(calls, +Inf bucket, count) as Prometheus read them"
    );
}
