//! A real Prometheus for the tests of `--metrics` (tests/metrics.rs, tests/docker.rs): started on a free port with
//! a generated configuration scraping every second, asked PromQL through its HTTP API (with curl).

use super::Reaped;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A port free now (the kernel's choice), for a server started just after.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Whether the `prometheus` server is installed; [`skip`](super::skip)s the test when not.
pub fn installed(test: &str) -> bool {
    if Command::new("prometheus").arg("--version").output().is_err() {
        super::skip(test, "prometheus is not installed (apt-get install prometheus; scripts/setup does)");
        return false;
    }
    true
}

/// A Prometheus server on 127.0.0.1 scraping `targets` (`HOST:PORT`) every second, with its configuration and
/// data in a directory of its own; stopped and the directory removed when dropped.
pub struct Prometheus {
    web: u16,
    dir: PathBuf,
    process: Option<Reaped>,
}

impl Prometheus {
    pub fn start(targets: &[String]) -> Prometheus {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        Prometheus::start_jobs(&format!(
            "  - job_name: steadytrace\n    static_configs: [ {{ targets: [{}] }} ]\n",
            targets.join(", ")
        ))
    }

    /// A Prometheus server whose `scrape_configs` are `jobs` (YAML list items, indented by two), scraping
    /// every second.
    pub fn start_jobs(jobs: &str) -> Prometheus {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("steadytrace-prometheus-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for Prometheus");
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, format!("global: {{ scrape_interval: 1s }}\nscrape_configs:\n{jobs}"))
            .expect("write the config");
        let web = free_port();
        let process = Reaped::spawn(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{web}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .expect("start prometheus");
        Prometheus { web, dir, process: Some(process) }
    }

    /// The value of the PromQL `query`, once Prometheus answers with one sample.
    pub fn query(&self, query: &str) -> Option<f64> {
        let url = format!("http://127.0.0.1:{}/api/v1/query?query={}", self.web, urlencode(query));
        let output = Command::new("curl").args(["-s", &url]).output().ok()?;
        let reply: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
        reply["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// The value of each query in `queries`, read again every half second until they are `wanted` or `limit`
    /// has passed; the last values read, to compare with `wanted`.
    pub fn wait_for(&self, queries: &[&str], wanted: &[f64], limit: Duration) -> Vec<Option<f64>> {
        let wanted: Vec<Option<f64>> = wanted.iter().copied().map(Some).collect();
        let deadline = Instant::now() + limit;
        loop {
            let values: Vec<Option<f64>> = queries.iter().map(|q| self.query(q)).collect();
            if values == wanted || Instant::now() > deadline {
                return values;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Stopped first: it writes into the directory until then.
        drop(self.process.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
