//! The qemu guest rig as the guest tests use it (tests/guest.rs, tests/kernels.rs): setting it up once per test
//! process, one guest at a time, running a shell script in a guest booting one of Debian's kernels through
//! `tests/vm/run`, and reading what the script printed. See docs/TESTING.md.
//!
//! When the rig cannot be set up (no qemu, no kernels to be had) [`guest`] prints `SKIPPED: <reason>` and the test
//! returns, unless STEADYTRACE_REQUIRE_VM=1, which turns that into a failure.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The tracer and the workload as they were built for this test run, copied out of target/ when first needed (the
/// guest sees the host's / over 9p, so at the same path). The guest caches what it reads of the host's files
/// (9p `cache=loose`): a rebuild replacing target/debug/steadytrace while a guest ran (another `cargo build`
/// meanwhile) left the guest running a mix of the old and the new binary, which crashed at address 0.
fn snapshot() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::temp_dir();
        // The copies of test processes that are gone.
        for entry in fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("steadytrace-guest-")) else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let dir = base.join(format!("steadytrace-guest-{}", std::process::id()));
        let copy = |from: &Path, to: PathBuf| {
            fs::create_dir_all(to.parent().expect("a directory"))
                .and_then(|()| fs::copy(from, &to))
                .unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", from.display(), to.display()));
        };
        copy(Path::new(super::BIN), dir.join("steadytrace"));
        copy(&super::workload(), dir.join("examples/workload"));
        dir
    })
}

/// The tracer for guest scripts: this test run's build, as copied when first needed (see `snapshot`).
pub fn tracer() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| snapshot().join("steadytrace").to_string_lossy().into_owned())
}

/// One guest at a time: each one keeps four emulated CPUs busy on a 2-CPU host.
static GUEST: Mutex<()> = Mutex::new(());

fn vm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm")
}

/// Runs tests/vm/setup once per test process; Err holds the reason the rig is unusable.
pub fn rig() -> &'static Result<(), String> {
    static RIG: OnceLock<Result<(), String>> = OnceLock::new();
    RIG.get_or_init(|| {
        let out = Command::new(vm_dir().join("setup"))
            .output()
            .map_err(|e| format!("cannot run tests/vm/setup: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!("tests/vm/setup failed: {}", stderr.trim().lines().last().unwrap_or("no message")))
        }
    })
}

/// The guest lock when the rig is usable; None (after saying why) when the test is to be skipped.
pub fn guest() -> Option<MutexGuard<'static, ()>> {
    let lock = GUEST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match rig() {
        Ok(()) => Some(lock),
        Err(reason) if std::env::var("STEADYTRACE_REQUIRE_VM").as_deref() == Ok("1") => {
            panic!("the guest rig is required (STEADYTRACE_REQUIRE_VM=1) but unusable: {reason}")
        }
        Err(reason) => {
            // Straight to the process's stderr: libtest captures eprintln! of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
            None
        }
    }
}

/// What a guest script printed, and its exit code (that of `tests/vm/run`).
pub struct GuestRun {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl GuestRun {
    /// The value of a `KEY=VALUE` line the guest script printed.
    pub fn field(&self, key: &str) -> &str {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            .unwrap_or_else(|| panic!("the guest printed no {key}=...\n{self}"))
    }

    pub fn number(&self, key: &str) -> u64 {
        let value = self.field(key);
        value.parse().unwrap_or_else(|_| panic!("{key}={value} is not a number\n{self}"))
    }
}

impl std::fmt::Display for GuestRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code: {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Exit code of tests/vm/run when the guest failed before the command ran.
pub const BOOT_FAILED: i32 = 125;
/// `tests/vm/run`'s exit code when the guest did not finish within its timeout.
pub const GUEST_TIMED_OUT: i32 = 124;

/// Runs a shell command as root in a guest; `timeout` bounds the whole boot-run-poweroff cycle. A guest
/// that fails to boot (rare under emulation; the command never ran) is booted once more.
pub fn run(kernel: &str, cpus: u32, append: &str, timeout: u32, script: &str) -> GuestRun {
    let boot = || {
        let out = Command::new(vm_dir().join("run"))
            .args(["--kernel", kernel, "--cpus", &cpus.to_string(), "--append", append])
            .args(["--timeout", &timeout.to_string(), "--", script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cannot run tests/vm/run");
        GuestRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let first = boot();
    // Under emulation on a loaded host a guest kernel now and then fails to boot, or locks up ("soft lockup" in
    // its IPIs) and never finishes: boot it once more. A tracer that hangs makes the second run time out too,
    // and the test fails.
    if first.code != Some(BOOT_FAILED) && first.code != Some(GUEST_TIMED_OUT) {
        return first;
    }
    eprintln!("the {kernel} guest failed to boot or to finish; booting it again:\n{}", first.stderr);
    boot()
}

/// Single-quotes a string for sh.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Shell functions the guest scripts share. `now_ms` is the guest's clock in milliseconds; `wait_attached FILE`
/// waits (up to 60 s: start-up is slow under emulation) until the tracer reports its probes attached in FILE.
pub const PRELUDE: &str = r#"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
wait_attached() {
  i=0
  until grep -q '^Attached' "$1"; do
    i=$((i + 1)); [ $i -le 600 ] || { echo "no 'Attached' line in $1" >&2; cat "$1" >&2; return 1; }
    sleep 0.1
  done
}
"#;

/// The test workload (examples/workload.rs) for guest scripts, copied with the tracer (see `snapshot`).
pub fn workload() -> String {
    snapshot().join("examples/workload").to_string_lossy().into_owned()
}

/// The lines after each `== NAME` line, by NAME.
pub fn sections(text: &str) -> HashMap<String, Vec<String>> {
    let mut sections = HashMap::new();
    let mut current: Option<&mut Vec<String>> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("== ") {
            current = Some(sections.entry(name.to_string()).or_default());
        } else if let Some(lines) = current.as_mut() {
            lines.push(line.to_string());
        }
    }
    sections
}
