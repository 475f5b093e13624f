//! Shared by the integration tests: running the tracer, privileges, tracefs, and the CPU hotplug lock.
#![allow(dead_code)] // each test binary uses its own part of this module

pub mod apk;
pub mod delegated;
pub mod guest;
pub mod prometheus;

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_steadytrace");

/// The tracer with `args`.
pub fn tracer(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    command
}

/// Runs the tracer on `program` with `-q` and returns its output, within `limit`.
pub fn run(program: &str, limit: Duration) -> Output {
    run_with(&["-q", "-e", program], limit)
}

/// Runs the tracer with `args` and returns its output, within `limit`.
pub fn run_with(args: &[&str], limit: Duration) -> Output {
    let child = Reaped::spawn(tracer(args).stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn");
    wait_output(child, limit)
}

/// Waits for `child` and collects its output; kills its process group and fails the test past `limit`.
/// Until it has exited, the guard kills it if this thread panics. The pipes are drained meanwhile, so a child
/// writing more than a pipe holds does not stall.
pub fn wait_output(mut child: Reaped, limit: Duration) -> Output {
    fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = vec![];
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let timed_out = status.is_none();
    let status = match status {
        Some(status) => {
            drop(child.into_inner());
            status
        }
        None => child.kill_with_output().status,
    };
    let output = Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    };
    if timed_out {
        panic!(
            "the tracer did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// Reads the child's stderr until a line containing `needle` (e.g. "Attached"), then hands the
/// rest of stderr back as a string when the child ends.
pub fn wait_for_stderr_line(child: &mut Child, needle: &str) -> std::thread::JoinHandle<String> {
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = needle.to_string();
    let handle = std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut seen = String::new();
        let mut line = String::new();
        let mut signalled = false;
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if !signalled && line.contains(&wanted) {
                let _ = tx.send(());
                signalled = true;
            }
            seen.push_str(&line);
            line.clear();
        }
        let _ = reader.read_to_string(&mut seen);
        seen
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(()) => handle,
        // The reader ended without the line: the tracer exited, and what it said is why.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let said = handle.join().unwrap_or_default();
            panic!("the tracer exited without saying {needle:?}; its stderr:\n{said}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the tracer did not say {needle:?} within 20 s")
        }
    }
}

/// Where [`skip`] records each skip, one `test: reason` line a skip, for the test command's summary
/// (`scripts/test`); unset, skips are only printed.
pub const SKIP_LOG_VAR: &str = "STEADYTRACE_SKIP_LOG";

/// Says that `test` did not run for `reason` (what this machine lacks): prints `SKIPPED: test: reason`
/// and appends the same line to the file named by [`SKIP_LOG_VAR`], so that a skip is listed at the end of
/// the run even when the harness captured what the test printed.
pub fn skip(test: &str, reason: &str) {
    let line = format!("{test}: {reason}");
    println!("SKIPPED: {line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_VAR) {
        use std::io::Write;
        // One write of the whole line with O_APPEND: lines of concurrent tests never interleave.
        let record = format!("{}\n", line.replace('\n', " "));
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(record.as_bytes()));
        if let Err(error) = written {
            panic!("cannot record the skip of {test} in {}: {error}", Path::new(&path).display());
        }
    }
}

/// A child process that is killed and reaped when the guard is dropped, also when the test fails or
/// panics, with every process it started: it runs in a process group of its own, and the whole group is
/// sent SIGKILL. Dereferences to the [`Child`].
pub struct Reaped {
    child: Option<Child>,
}

impl Reaped {
    /// Starts `command` in a new process group under the guard.
    pub fn spawn(command: &mut Command) -> std::io::Result<Reaped> {
        use std::os::unix::process::CommandExt;
        // Out of the terminal's process group, a Ctrl-C of `cargo test` no longer reaches the child, and a test
        // process killed outright runs no destructor: the kernel kills the child when the spawning thread ends.
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let child = command.process_group(0).spawn()?;
        Ok(Reaped { child: Some(child) })
    }

    /// Gives up the guard: the caller waits for the child itself (`wait_with_output`, say).
    pub fn into_inner(mut self) -> Child {
        self.child.take().expect("the child is held until dropped")
    }

    /// Kills the process group and collects what the child wrote until then.
    pub fn kill_with_output(mut self) -> Output {
        let mut child = self.child.take().expect("the child is held until dropped");
        kill_group(&mut child);
        child.wait_with_output().expect("output")
    }
}

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.child.as_ref().expect("the child is held until dropped")
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("the child is held until dropped")
    }
}

/// SIGKILL to the process group `child` leads. Called before this guard reaps the child: while its zombie (or any
/// member of its group) lives, the kernel gives its id to no other process or group.
fn kill_group(child: &mut Child) {
    let group = child.id() as libc::pid_t;
    // SAFETY: kill has no memory preconditions; the group is the one this guard's child leads.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.kill();
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        kill_group(&mut child);
        let _ = child.wait();
    }
}

/// Set to 1 (CI does), a test that needs root fails instead of printing SKIPPED without it: a suite run
/// as an ordinary user cannot then pass having run nothing.
pub const REQUIRE_ROOT_VAR: &str = "STEADYTRACE_REQUIRE_ROOT";

/// Whether this process may load BPF programs; [`skip`]s the test when not (fails under [`REQUIRE_ROOT_VAR`]).
pub fn can_trace(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var(REQUIRE_ROOT_VAR).as_deref() != Ok("1"),
            "{test} needs root to load BPF programs, and {REQUIRE_ROOT_VAR}=1 forbids skipping it"
        );
        skip(test, "needs root to load BPF programs");
        return false;
    }
    true
}

/// Mounts tracefs where the kernel's tracing files are expected, if it is not there yet.
pub fn tracefs() -> Option<&'static Path> {
    let path = Path::new("/sys/kernel/tracing");
    if path.join("uprobe_events").exists() {
        return Some(path);
    }
    let status =
        Command::new("mount").args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"]).status().ok()?;
    (status.success() && path.join("uprobe_events").exists()).then_some(path)
}

/// CLOCK_MONOTONIC in nanoseconds, the clock of the `nsecs` builtin.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

static KERNEL_STATE_IN_PROCESS: Mutex<()> = Mutex::new(());
/// The same path as before this lock had its name, so that older checkouts' tests keep out too.
const KERNEL_STATE_LOCK_FILE: &str = "/tmp/steadytrace-hotplug.lock";

/// Exclusive use of the kernel state that tests share, across the threads of this test binary and
/// across test processes: the online CPUs (no test takes one offline meanwhile) and the events that
/// are counted machine-wide. Needs no CPU hotplug, so tests holding it run on every machine.
pub struct KernelState {
    _file: File,
    _guard: MutexGuard<'static, ()>,
}

impl KernelState {
    /// Takes the lock; `None` (after [`skip`]) when this process may not trace.
    pub fn acquire(test: &str) -> Option<KernelState> {
        can_trace(test).then(KernelState::lock)
    }

    fn lock() -> KernelState {
        let guard = KERNEL_STATE_IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(KERNEL_STATE_LOCK_FILE)
            .expect("lock file");
        // SAFETY: flock on a file we own; blocks until other test processes let go.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0, "flock");
        KernelState { _file: file, _guard: guard }
    }
}

/// Whether at least `cpus` CPUs are online; [`skip`]s the test when not.
pub fn has_online_cpus(test: &str, cpus: usize) -> bool {
    let online = fs::read_to_string("/sys/devices/system/cpu/online").expect("the online CPU list");
    let count: usize = online
        .trim()
        .split(',')
        .filter_map(|range| {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            Some(last.parse::<usize>().ok()? - first.parse::<usize>().ok()? + 1)
        })
        .sum();
    if count < cpus {
        skip(test, &format!("needs {cpus} online CPUs, this machine has {count}"));
        return false;
    }
    true
}

/// CPU hotplug, under the [`KernelState`] lock: every CPU it took offline goes back online when it is
/// dropped, also when the test panics.
pub struct Hotplug {
    offline: Vec<u32>,
    _lock: KernelState,
}

fn online_file(cpu: u32) -> String {
    format!("/sys/devices/system/cpu/cpu{cpu}/online")
}

impl Hotplug {
    /// Takes the lock; `None` (after [`skip`]) when `cpu` cannot be taken offline here.
    pub fn acquire(test: &str, cpu: u32) -> Option<Hotplug> {
        if !can_trace(test) {
            return None;
        }
        if fs::metadata(online_file(cpu)).is_err() {
            skip(test, &format!("cpu{cpu} cannot be taken offline on this machine"));
            return None;
        }
        Some(Hotplug { offline: vec![], _lock: KernelState::lock() })
    }

    pub fn set_online(&mut self, cpu: u32, online: bool) {
        let path = online_file(cpu);
        let mut last_error = None;
        // The kernel may refuse for a moment while another transition completes.
        for _ in 0..50 {
            match fs::write(&path, if online { "1" } else { "0" }) {
                Ok(()) => {
                    last_error = None;
                    break;
                }
                Err(e) => last_error = Some(e),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(e) = last_error {
            panic!("cannot set cpu{cpu} online={online}: {e}");
        }
        if online {
            self.offline.retain(|&c| c != cpu);
        } else if !self.offline.contains(&cpu) {
            self.offline.push(cpu);
        }
    }
}

impl Drop for Hotplug {
    fn drop(&mut self) {
        for cpu in std::mem::take(&mut self.offline) {
            for _ in 0..100 {
                if fs::write(online_file(cpu), "1").is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A thread spinning on one CPU until dropped. The kernel forgets a thread's pinning when its CPU goes
/// offline, so the thread pins itself again every few milliseconds.
pub struct Spinner {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    pub fn on_cpu(cpu: usize) -> Spinner {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut last_pin = Instant::now() - Duration::from_secs(1);
            while !flag.load(Ordering::Relaxed) {
                if last_pin.elapsed() > Duration::from_millis(5) {
                    // SAFETY: a zeroed cpu_set_t with one CPU set, applied to this thread.
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                    }
                    last_pin = Instant::now();
                }
                std::hint::spin_loop();
            }
        });
        Spinner { stop, thread: Some(thread) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The number of open file descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    let dir = format!("/proc/{pid}/fd");
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot count the descriptors of pid {pid} in {dir}: {e}"))
        .count()
}

/// Reads lines of a child's stdout as they come, each stamped with CLOCK_MONOTONIC on arrival.
pub fn collect_lines(child: &mut Child) -> std::thread::JoinHandle<Vec<String>> {
    let stdout = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect())
}

/// The test workload (examples/workload.rs), built by `cargo test` next to the tracer.
pub fn workload() -> std::path::PathBuf {
    Path::new(BIN).parent().expect("target dir").join("examples/workload")
}

/// tests/usdt/app.c (with guarded.c) built into the target directory as `name`: by the host's `cc`, or with
/// `static_aarch64` by `aarch64-linux-gnu-gcc -static` for the arm64 guests (which have no aarch64 libraries; they
/// see the target directory at the same path). Err says why it cannot be built: no compiler, no `<sys/sdt.h>`.
pub fn usdt_app(static_aarch64: bool, name: &str) -> Result<std::path::PathBuf, String> {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/usdt");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut command = if static_aarch64 {
        // The cross compiler's headers lack <sys/sdt.h>, which systemtap-sdt-dev installs for the host (in its
        // multiarch directory on Debian): plain preprocessor and assembler text, the same for every architecture,
        // so it is lent to the cross compiler alone.
        let include = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdt-include");
        fs::create_dir_all(include.join("sys")).map_err(|e| e.to_string())?;
        let host = ["/usr/include/x86_64-linux-gnu/sys", "/usr/include/sys"]
            .into_iter()
            .find(|dir| Path::new(dir).join("sdt.h").is_file())
            .ok_or("no <sys/sdt.h> (apt-get install systemtap-sdt-dev)")?;
        for header in ["sdt.h", "sdt-config.h"] {
            fs::copy(format!("{host}/{header}"), include.join("sys").join(header))
                .map_err(|e| format!("{host}/{header}: {e}"))?;
        }
        let mut command = Command::new("aarch64-linux-gnu-gcc");
        command.arg("-static").arg("-I").arg(include);
        command
    } else {
        Command::new("cc")
    };
    let output = command
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(sources.join("app.c"))
        .arg(sources.join("guarded.c"))
        .output()
        .map_err(|e| format!("cannot run the C compiler: {e}"))?;
    let errors = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && errors.contains("sys/sdt.h") {
        return Err("no <sys/sdt.h> (apt-get install systemtap-sdt-dev)".into());
    }
    if !output.status.success() {
        return Err(errors.into_owned());
    }
    Ok(out)
}

/// What a fetching script of `scripts/` (bpftrace-source, bpftrace-tools) prints: the directory it unpacked
/// bpftrace's files into; what it said besides (an older version taken) is printed. `Err` is the script's reason
/// they cannot be had, for the caller's [`skip`].
pub fn fetched(script: &str) -> Result<std::path::PathBuf, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts").join(script);
    let output = Command::new(&path).output().map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if !output.status.success() {
        return Err(said);
    }
    if !said.is_empty() {
        println!("{said}");
    }
    Ok(std::path::PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// The tracer with `args`, serving `--metrics` on 127.0.0.1 at a port the kernel chose, once it has attached its
/// probes: the tracer (its stdout as `stdout` says), the port, and the rest of its stderr lines as they come.
pub fn serving_metrics(args: &[&str], stdout: Stdio) -> (Reaped, u16, std::sync::mpsc::Receiver<String>) {
    let mut child = Reaped::spawn(
        tracer(&[&["--metrics", "127.0.0.1:0"], args].concat()).stdout(stdout).stderr(Stdio::piped()),
    )
    .expect("start the tracer");
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut port, mut attached, mut said) = (None, false, vec![]);
    while port.is_none() || !attached {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("the tracer said no port and `Attached` ({e}); it said {said:?}"));
        if let Some(at) = line.strip_prefix("steadytrace: serving metrics at http://127.0.0.1:") {
            port = at.trim_end_matches("/metrics").parse().ok();
        }
        attached |= line.starts_with("Attached");
        said.push(line);
    }
    (child, port.expect("a port"), lines)
}

/// GET /metrics on 127.0.0.1:`port`: the body (the classic text format, no `Accept` header).
pub fn scrape_metrics(port: u16) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the scrape");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}
