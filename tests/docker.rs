//! A real Docker engine (scripts/docker-up starts one): the static tracer and the static test workload in a
//! `FROM scratch` image, run under Docker's default seccomp profile with the capabilities a user would grant; and a
//! fleet of two traced containers on Docker's default bridge, scraped by one real Prometheus. docs/INSTALL.md's
//! Docker recipes are these tests.
//!
//! The client is Debian's /usr/bin/docker, which comes with the daemon scripts/docker-up installs (20.10, API
//! 1.41). Docker 28's client (at /usr/local/bin/docker on some machines, earlier in PATH) works with that daemon
//! too, negotiating the API version down, but its `docker build` warns that the legacy builder is deprecated.

mod common;

use common::prometheus::{self, Prometheus};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const DOCKER: &str = "/usr/bin/docker";

const SYS_ADMIN: &[&str] = &["--cap-add", "SYS_ADMIN"];
const BPF_AND_PERFMON: &[&str] = &["--cap-add", "BPF", "--cap-add", "PERFMON"];
/// The host's tracefs, for the tracepoints' format files (only read).
const TRACEFS: &[&str] = &["-v", "/sys/kernel/tracing:/sys/kernel/tracing:ro"];

/// The first Docker Engine release whose daemon knows CAP_BPF and CAP_PERFMON by name (moby v23.0.0: 20.10 left
/// out every capability after CAP_AUDIT_READ) and whose default seccomp profile allows `bpf` to CAP_BPF and
/// `perf_event_open` to CAP_PERFMON (moby pull request 43988, also first in v23.0.0).
const FIRST_DOCKER_KNOWING_CAP_BPF: u32 = 23;

/// `docker ARGS`, its output.
fn docker(args: &[&str]) -> Output {
    Command::new(DOCKER).args(args).output().unwrap_or_else(|e| panic!("cannot run {DOCKER}: {e}"))
}

/// `docker ARGS`, which must succeed: its stdout, trimmed.
fn docker_ok(args: &[&str]) -> String {
    let output = docker(args);
    assert!(output.status.success(), "docker {}: {}", args.join(" "), stderr(&output));
    stdout(&output).trim().to_string()
}

/// The Docker daemon's version (`20.10.24+dfsg1`), or why Docker cannot be used here.
fn daemon_version() -> Result<&'static str, &'static str> {
    static VERSION: OnceLock<Result<String, String>> = OnceLock::new();
    let version = VERSION.get_or_init(|| {
        if !Path::new(DOCKER).is_file() {
            return Err(format!("no {DOCKER} (scripts/docker-up installs docker.io)"));
        }
        let output = docker(&["version", "--format", "{{.Server.Version}}"]);
        if !output.status.success() {
            let why = stderr(&output);
            return Err(format!(
                "the Docker daemon does not answer (scripts/docker-up starts it): {}",
                why.trim()
            ));
        }
        Ok(stdout(&output).trim().to_string())
    });
    version.as_deref().map_err(String::as_str)
}

/// The image's tag, once the test may run here: as root, on x86_64, with a Docker daemon answering and tracefs
/// mounted on the host; `None` after [`skip`].
fn ready(test: &str) -> Option<&'static str> {
    runnable(test).then(image)
}

/// Whether a test may run here (see [`ready`]); `false` after [`skip`].
fn runnable(test: &str) -> bool {
    if !cfg!(target_arch = "x86_64") {
        skip(test, "scripts/build-static builds for x86_64 only");
        return false;
    }
    if !can_trace(test) {
        return false;
    }
    if let Err(reason) = daemon_version() {
        skip(test, reason);
        return false;
    }
    if tracefs().is_none() {
        skip(test, "tracefs cannot be mounted at /sys/kernel/tracing");
        return false;
    }
    true
}

/// Runs scripts/build-static with `args`; its last line on stdout is the binary's path.
fn build_static(args: &[&str]) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-static");
    let output =
        Command::new(script).args(args).stderr(Stdio::inherit()).output().expect("run scripts/build-static");
    assert!(output.status.success(), "scripts/build-static {} failed", args.join(" "));
    let path = PathBuf::from(stdout(&output).lines().last().expect("a path on the last line"));
    assert!(path.is_absolute() && path.is_file(), "{path:?}");
    path
}

/// This test process's image: `/steadytrace` and `/workload`, both static, and nothing else. Built once; a
/// static is never dropped, so the image is removed when the process exits (atexit).
fn image() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let tracer = build_static(&[]);
        let workload = build_static(&["--example", "workload"]);
        build_image(&image_tag(), &[(tracer, "steadytrace"), (workload, "workload")])
    })
}

/// An image of `/workload` alone (static), for tests whose tracer runs on the host: it needs no release build of
/// the tracer. Built once, removed at exit as [`image`] is.
fn workload_image() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let workload = build_static(&["--example", "workload"]);
        build_image(&workload_image_tag(), &[(workload, "workload")])
    })
}

/// `FROM scratch` and `files` (`(host path, name in /)`), tagged `tag`, removed when the process exits.
fn build_image(tag: &str, files: &[(PathBuf, &str)]) -> String {
    let context = Path::new(env!("CARGO_TARGET_TMPDIR")).join(tag);
    std::fs::create_dir_all(&context).expect("the build context");
    for (from, name) in files {
        std::fs::copy(from, context.join(name)).unwrap_or_else(|e| panic!("copy {from:?}: {e}"));
    }
    let names: Vec<&str> = files.iter().map(|(_, name)| *name).collect();
    std::fs::write(context.join("Dockerfile"), format!("FROM scratch\nCOPY {} /\n", names.join(" ")))
        .unwrap();
    let built = docker(&["build", "-q", "-t", tag, &context.to_string_lossy()]);
    let _ = std::fs::remove_dir_all(&context);
    assert!(built.status.success(), "docker build: {}", stderr(&built));
    // SAFETY: registers a function without arguments that only runs `docker rmi`.
    assert_eq!(unsafe { libc::atexit(remove_images) }, 0, "atexit");
    tag.to_string()
}

extern "C" fn remove_images() {
    let _ = Command::new(DOCKER).args(["rmi", "-f", &image_tag(), &workload_image_tag()]).output();
}

/// Unique to this test process, so that test runs in other checkouts keep their own images.
fn image_tag() -> String {
    format!("steadytrace-test-{}", std::process::id())
}

fn workload_image_tag() -> String {
    format!("steadytrace-test-workload-{}", std::process::id())
}

/// A container name of this process's; the container is removed (`docker rm -f`) when this is dropped, also on
/// a failed assertion or a timeout.
struct Container {
    name: String,
}

impl Container {
    fn named() -> Container {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Container { name: format!("steadytrace-test-{}-{n}", std::process::id()) }
    }

    /// `docker run` of the image with `options` before the image and `command` after it, not waited for.
    fn start(&self, options: &[&str], command: &[&str]) -> Reaped {
        self.start_image(image(), options, command)
    }

    /// `docker run` of `image`, as [`Container::start`].
    fn start_image(&self, image: &str, options: &[&str], command: &[&str]) -> Reaped {
        Reaped::spawn(
            Command::new(DOCKER)
                .args(["run", "--rm", "--name", &self.name])
                .args(options)
                .arg(image)
                .args(command)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .expect("spawn docker run")
    }

    /// The container's address on Docker's default bridge.
    fn ip(&self) -> String {
        let ip = docker_ok(&["inspect", "-f", "{{.NetworkSettings.IPAddress}}", &self.name]);
        assert!(!ip.is_empty(), "{} has no address on the bridge", self.name);
        ip
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

/// `docker run --rm` of the image with `options` and `command`, within a minute.
fn run_container(options: &[&str], command: &[&str]) -> Output {
    let container = Container::named();
    wait_output(container.start(options, command), Duration::from_secs(60))
}

/// Runs the tracer with `options`, which must succeed; its stdout.
fn traced(options: &[&str], args: &[&str]) -> String {
    let command: Vec<&str> = std::iter::once("/steadytrace").chain(args.iter().copied()).collect();
    let output = run_container(options, &command);
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

// At exit the tracer prints two newlines and then the maps, as bpftrace does.

fn begin_and_end_print(caps: &[&str]) {
    let script = r#"BEGIN { printf("hi\n"); exit(); } END { printf("end\n"); }"#;
    assert_eq!(traced(caps, &["-e", script]), "hi\nend\n\n\n");
}

fn interval_fires_five_times(caps: &[&str]) {
    let script = "interval:ms:100 { @n = count(); if (@n == 5) { exit(); } }";
    assert_eq!(traced(caps, &["-e", script]), "\n\n@n: 5\n");
}

/// The tracer in a container with the host's pid namespace counts the getppid calls of a workload that runs on
/// the host, started once the probes are attached. The workload runs under a name of its own (its `comm`), as
/// the tracepoint sees every process of the machine; the tracer exits when the workload does.
fn a_syscall_tracepoint_counts_a_host_workloads_calls(caps: &[&str]) {
    const CALLS: u32 = 4321;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("dw{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&name);
    std::fs::copy(workload(), &program).expect("copy the workload");
    let script = format!(
        r#"tracepoint:syscalls:sys_enter_getppid /comm == "{name}"/ {{ @calls = count(); }}
           tracepoint:syscalls:sys_enter_exit_group /comm == "{name}"/ {{ exit(); }}"#
    );
    let mut options = vec!["--pid=host"];
    options.extend(caps.iter().chain(TRACEFS).copied());
    let container = Container::named();
    let mut tracer = container.start(&options, &["/steadytrace", "-e", &script]);
    let rest_of_stderr = wait_for_stderr_line(&mut tracer, "Attached");
    let ran = Command::new(&program).args(["getppid", &CALLS.to_string(), "2"]).status();
    let output = wait_output(tracer, Duration::from_secs(30));
    let _ = std::fs::remove_file(&program);
    assert!(ran.expect("run the workload").success());
    assert!(output.status.success(), "{}", rest_of_stderr.join().unwrap());
    assert_eq!(stdout(&output), format!("\n\n@calls: {CALLS}\n"));
}

#[test]
fn without_capabilities_the_tracer_names_cap_bpf_and_the_flags() {
    let test = "without_capabilities_the_tracer_names_cap_bpf_and_the_flags";
    if ready(test).is_none() {
        return;
    }
    let output = run_container(&[], &["/steadytrace", "-e", r#"BEGIN { printf("hi\n"); exit(); }"#]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(stdout(&output), "");
    // Docker's default capabilities (CAP_CHOWN, ...) hold neither.
    assert!(err.contains("lacks CAP_BPF (it holds CAP_CHOWN, "), "{err}");
    assert!(err.contains("--cap-add BPF --cap-add PERFMON"), "{err}");
    assert!(err.contains("Docker before 23.0 knows neither name: --cap-add SYS_ADMIN"), "{err}");
}

#[test]
fn with_sys_admin_begin_and_end_print() {
    if ready("with_sys_admin_begin_and_end_print").is_some() {
        begin_and_end_print(SYS_ADMIN);
    }
}

#[test]
fn with_sys_admin_interval_fires_five_times() {
    if ready("with_sys_admin_interval_fires_five_times").is_some() {
        interval_fires_five_times(SYS_ADMIN);
    }
}

#[test]
fn with_sys_admin_a_syscall_tracepoint_counts_a_host_workloads_calls() {
    if ready("with_sys_admin_a_syscall_tracepoint_counts_a_host_workloads_calls").is_some() {
        a_syscall_tracepoint_counts_a_host_workloads_calls(SYS_ADMIN);
    }
}

/// The uprobe sits on the image's file, which every container of the image runs (the profile test's too):
/// `/pid == cpid/` keeps to this container's command.
#[test]
fn with_sys_admin_a_uprobe_counts_the_images_workload_calls() {
    if ready("with_sys_admin_a_uprobe_counts_the_images_workload_calls").is_none() {
        return;
    }
    let script = "uprobe:/workload:workload_add /pid == cpid/ { @calls = count(); }";
    assert_eq!(traced(SYS_ADMIN, &["-e", script, "-c", "/workload calls 7"]), "\n\n@calls: 7\n");
}

/// The workload keeps a CPU busy for a few tenths of a second (an idle CPU takes no samples); at most 99 samples a
/// second of its single thread's running.
#[test]
fn with_sys_admin_profile_samples_the_workload() {
    if ready("with_sys_admin_profile_samples_the_workload").is_none() {
        return;
    }
    let script = "profile:hz:99 /pid == cpid/ { @samples = count(); }";
    let started = Instant::now();
    let out = traced(SYS_ADMIN, &["-e", script, "-c", "/workload calls 20000000"]);
    let most = (99.0 * started.elapsed().as_secs_f64()).ceil() as u64;
    let samples: u64 = out
        .strip_prefix("\n\n@samples: ")
        .and_then(|rest| rest.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not one count: {out:?}"));
    assert!((1..=most).contains(&samples), "{samples} samples, expected 1..={most}");
}

#[test]
fn bpf_and_perfmon_by_name_work_or_are_refused_as_this_docker_version_says() {
    let test = "bpf_and_perfmon_by_name_work_or_are_refused_as_this_docker_version_says";
    if ready(test).is_none() {
        return;
    }
    let version = daemon_version().expect("checked by ready()");
    let major: u32 = version.split('.').next().and_then(|m| m.parse().ok()).expect("a Docker version");
    if major >= FIRST_DOCKER_KNOWING_CAP_BPF {
        println!(
            "{test}: Docker {version} knows CAP_BPF and CAP_PERFMON: checking BEGIN, interval, tracepoint"
        );
        begin_and_end_print(BPF_AND_PERFMON);
        interval_fires_five_times(BPF_AND_PERFMON);
        a_syscall_tracepoint_counts_a_host_workloads_calls(BPF_AND_PERFMON);
    } else {
        println!("{test}: Docker {version} predates CAP_BPF and CAP_PERFMON: checking that it refuses them");
        let output = run_container(BPF_AND_PERFMON, &["/steadytrace", "-e", "BEGIN { exit(); }"]);
        // 125: the error is Docker's own, the container never started.
        assert_eq!(output.status.code(), Some(125), "{}", stderr(&output));
        assert!(stderr(&output).contains(r#"unknown capability: "CAP_BPF""#), "{}", stderr(&output));
    }
}

/// Two traced containers, each serving its count on the bridge at :9435, one Prometheus on the host scraping
/// both: the sum is exact, and when one container dies Prometheus marks it down while the other's count stays.
#[test]
fn a_fleet_of_two_containers_is_scraped_by_one_prometheus() {
    let test = "a_fleet_of_two_containers_is_scraped_by_one_prometheus";
    if ready(test).is_none() || !prometheus::installed(test) {
        return;
    }
    const CALLS: [u32; 2] = [1000, 2345];
    let script = "tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @calls = count(); }";
    let mut options = vec!["-d"];
    options.extend(SYS_ADMIN.iter().chain(TRACEFS).copied());
    let fleet: Vec<(Container, String)> = CALLS
        .iter()
        .map(|calls| {
            // The workload lives on after its calls (longer than the test), so that the tracer keeps serving.
            let command = format!("/workload getppid-then-sleep {calls} 300");
            let container = Container::named();
            let started = container.start(
                &options,
                &["/steadytrace", "--metrics", "0.0.0.0:9435", "-c", &command, "-e", script],
            );
            let started = wait_output(started, Duration::from_secs(30));
            assert!(started.status.success(), "{}", stderr(&started));
            let target = format!("{}:9435", container.ip());
            (container, target)
        })
        .collect();
    let targets: Vec<String> = fleet.iter().map(|(_, target)| target.clone()).collect();
    let prometheus = Prometheus::start(&targets);
    let total = f64::from(CALLS.iter().sum::<u32>());
    let read = prometheus.wait_for(&["sum(steadytrace_map_calls_total)"], &[total], Duration::from_secs(30));
    assert_eq!(read, [Some(total)], "the fleet's total as Prometheus read it");

    let (a, b) = (&targets[0], &targets[1]);
    docker_ok(&["kill", &fleet[0].0.name]);
    let queries = [
        format!(r#"up{{instance="{a}"}}"#),
        format!(r#"up{{instance="{b}"}}"#),
        format!(r#"steadytrace_map_calls_total{{instance="{b}"}}"#),
    ];
    let queries: Vec<&str> = queries.iter().map(String::as_str).collect();
    let wanted = [0.0, 1.0, f64::from(CALLS[1])];
    let read = prometheus.wait_for(&queries, &wanted, Duration::from_secs(30));
    assert_eq!(read, wanted.map(Some), "(A up, B up, B's count) after A was killed");
}

/// Two containers of one image run the same workload, 3 and 7 getppid calls; the tracer on the host counts them
/// per `cgroup`, and its `--metrics` tell the containers apart by the name and the full id Docker gives them
/// (asked over /var/run/docker.sock), with the cgroup's v2 path; a real Prometheus reads the same. Docker 20.10
/// with the cgroupfs driver puts a container's processes in `/docker/<id>` of every hierarchy, the v2 one of a
/// hybrid host included (runc joins it too), so `cgroup` differs per container; where a container sits in the v2
/// root, this cannot work: skipped.
#[test]
fn a_host_tracer_labels_each_containers_series_with_its_name_and_id() {
    let test = "a_host_tracer_labels_each_containers_series_with_its_name_and_id";
    if !runnable(test) {
        return;
    }
    const CALLS: [u32; 2] = [3, 7];
    let image = workload_image();
    let script =
        r#"tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { @calls[cgroup] = count(); }"#;
    let (tracer, port, _stderr) = serving_metrics(&["-e", script], Stdio::null());
    let containers: Vec<(Container, String)> = CALLS
        .iter()
        .map(|calls| {
            let container = Container::named();
            // Alive after its calls (longer than the test), so that its cgroup is there at the scrape.
            let command = ["/workload", "getppid-then-sleep", &calls.to_string(), "300"];
            let started =
                wait_output(container.start_image(image, &["-d"], &command), Duration::from_secs(30));
            assert!(started.status.success(), "{}", stderr(&started));
            let id = docker_ok(&["inspect", "-f", "{{.Id}}", &container.name]);
            (container, id)
        })
        .collect();
    let pid = docker_ok(&["inspect", "-f", "{{.State.Pid}}", &containers[0].0.name]);
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("the container's cgroups");
    let v2 = cgroups.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/").to_string();
    if v2 == "/" {
        skip(test, "Docker puts its containers in the cgroup v2 root here: `cgroup` cannot tell them apart");
        return;
    }
    let wanted: Vec<String> = containers
        .iter()
        .zip(CALLS)
        .map(|((container, id), calls)| {
            assert_eq!(v2, format!("/docker/{}", containers[0].1), "where Docker put the first container");
            format!(
                "steadytrace_map_calls_total{{container_id=\"{id}\",container=\"{}\",cgroup=\"/docker/{id}\"}} {calls}",
                container.name
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut text = scrape_metrics(port);
    while !wanted.iter().all(|line| text.lines().any(|l| l == line)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        text = scrape_metrics(port);
    }
    for line in &wanted {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    println!("{test}: {}", wanted.join("\n"));
    // And as a real Prometheus reads them (OpenMetrics, as it asks).
    if prometheus::installed(&format!("{test} (its Prometheus part)")) {
        let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")]);
        let queries: Vec<String> = containers
            .iter()
            .map(|(container, id)| {
                format!(
                    r#"steadytrace_map_calls_total{{container="{}",container_id="{id}"}}"#,
                    container.name
                )
            })
            .collect();
        let queries: Vec<&str> = queries.iter().map(String::as_str).collect();
        let wanted = CALLS.map(f64::from);
        let read = prometheus.wait_for(&queries, &wanted, Duration::from_secs(30));
        assert_eq!(read, wanted.map(Some), "each container's count as Prometheus read it");
    }
    drop(tracer);
}
