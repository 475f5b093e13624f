//! The qemu guest rig as the guest tests use it (tests/guest.rs, tests/kernels.rs): setting it up once per test
//! process, one guest at a time, running a shell script in a guest booting one of Debian's kernels through
//! `tests/vm/run`, and reading what the script printed. See docs/TESTING.md.
//!
//! Guests are x86_64 (Debian's 5.10, 6.1 and 6.12: [`guest`], [`run`], [`tracer`], [`workload`]) or arm64 (6.1
//! and 6.12: [`guest_for`], [`run_on`], [`tracer_for`], [`workload_for`] with [`Arch::Aarch64`]). An arm64 guest
//! sees the host's / at the same paths too, but the host's programs are x86_64: its scripts run under busybox's sh
//! (PATH starts at /.guest-bin, busybox's applets) and run the static aarch64 builds of the tracer and the workload.
//!
//! When the rig cannot be set up (no qemu, no kernels to be had, for arm64 no aarch64 build) [`guest`] skips the test
//! ([`super::skip`]) and it returns, unless STEADYTRACE_REQUIRE_VM=1, which turns that into a failure.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The architecture a guest emulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// `tests/vm/run --arch`.
    fn run_name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The kernels `tests/vm/setup` is to prepare: without arguments the x86_64 ones; the arm64 ones only for a test
    /// asking for an arm64 guest, as they cost qemu-system-arm and their own downloads.
    fn setup_args(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &[],
            Arch::Aarch64 => &["arm64-6.1", "arm64-6.12"],
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.run_name())
    }
}

/// The directory of this test process's copies (see `snapshot`), the copies of test processes that are gone
/// removed.
fn snapshot_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::temp_dir();
        for entry in fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("steadytrace-guest-")) else {
                continue;
            };
            if !Path::new("/proc").join(pid).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        base.join(format!("steadytrace-guest-{}", std::process::id()))
    })
}

/// Copies `from` to `to`, the directories made on the way and the copy open to every user (mode 755): root of
/// the rootless section's user namespace is uid 100000 in the guest, and runs the tracer and the workload.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let failed = |e: std::io::Error| format!("cannot copy {} to {}: {e}", from.display(), to.display());
    let dir = to.parent().expect("a directory");
    fs::create_dir_all(dir).map_err(failed)?;
    fs::copy(from, to).map_err(failed)?;
    for path in dir.ancestors().take_while(|d| d.starts_with(snapshot_dir())).chain([to]) {
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(failed)?;
    }
    Ok(())
}

/// The tracer and the workload as they were built for this test run, copied out of target/ when first needed (the
/// guest sees the host's / over 9p, so at the same path). The guest caches what it reads of the host's files
/// (9p `cache=loose`): a rebuild replacing target/debug/steadytrace while a guest ran (another `cargo build`
/// meanwhile) left the guest running a mix of the old and the new binary, which crashed at address 0.
fn snapshot() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = snapshot_dir().to_path_buf();
        let copied = copy(Path::new(super::BIN), &dir.join("steadytrace"))
            .and_then(|()| copy(&super::workload(), &dir.join("examples/workload")));
        copied.unwrap_or_else(|e| panic!("{e}"));
        // Only the rootless cases need it; they say so when it was not built.
        let harness = super::workload().with_file_name("delegated_userns");
        if harness.is_file() {
            copy(&harness, &dir.join("examples/delegated_userns")).unwrap_or_else(|e| panic!("{e}"));
        }
        dir
    })
}

/// The same for arm64 guests, in the `aarch64` subdirectory: this test run's source built by `scripts/build-static
/// --arch aarch64` (the tracer, `--example workload` and `--example delegated_userns`), static because the guest has no aarch64 libraries at
/// all. Built once per test process, when an arm64 guest is first asked for (under the guest lock: a cross build
/// takes minutes of both host CPUs); Err holds why it could not be, and the arm64 tests are then skipped.
fn snapshot_aarch64() -> &'static Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = snapshot_dir().join("aarch64");
        let built = build_static(&["--arch", "aarch64"])?;
        copy(&built, &dir.join("steadytrace"))?;
        for example in ["workload", "delegated_userns"] {
            let built = build_static(&["--arch", "aarch64", "--example", example])?;
            copy(&built, &dir.join("examples").join(example))?;
        }
        Ok(dir)
    })
}

/// Runs scripts/build-static with `args`; its last line on stdout is the binary's path.
fn build_static(args: &[&str]) -> Result<PathBuf, String> {
    let what = format!("scripts/build-static {}", args.join(" "));
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-static"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().map(str::trim).unwrap_or_default();
    if out.status.success() && Path::new(path).is_file() {
        Ok(PathBuf::from(path))
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(format!("{what} failed: {}", stderr.trim().lines().last().unwrap_or("no message")))
    }
}

/// The tracer for guest scripts: this test run's build, as copied when first needed (see `snapshot`).
pub fn tracer() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| snapshot().join("steadytrace").to_string_lossy().into_owned())
}

/// The tracer for guest scripts on `arch`: [`tracer`] for x86_64, the static aarch64 build for arm64 (see
/// `snapshot_aarch64`; call it once [`guest_for`] has said the guest is usable, which includes that build).
pub fn tracer_for(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => tracer(),
        Arch::Aarch64 => {
            static PATH: OnceLock<String> = OnceLock::new();
            PATH.get_or_init(|| aarch64_binary("steadytrace"))
        }
    }
}

fn aarch64_binary(name: &str) -> String {
    match snapshot_aarch64() {
        Ok(dir) => dir.join(name).to_string_lossy().into_owned(),
        Err(reason) => panic!("no aarch64 build for the arm64 guest: {reason}"),
    }
}

/// One guest at a time: each one keeps four emulated CPUs busy on a 2-CPU host.
static GUEST: Mutex<()> = Mutex::new(());

fn vm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm")
}

/// Runs tests/vm/setup once per test process for the x86_64 guests; Err holds the reason the rig is unusable.
pub fn rig() -> &'static Result<(), String> {
    rig_for(Arch::X86_64)
}

/// Runs tests/vm/setup once per test process for the guests of `arch`, only when a test asks for one.
pub fn rig_for(arch: Arch) -> &'static Result<(), String> {
    static X86_64: OnceLock<Result<(), String>> = OnceLock::new();
    static AARCH64: OnceLock<Result<(), String>> = OnceLock::new();
    let once = match arch {
        Arch::X86_64 => &X86_64,
        Arch::Aarch64 => &AARCH64,
    };
    once.get_or_init(|| {
        let out = Command::new(vm_dir().join("setup"))
            .args(arch.setup_args())
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

/// The guest lock when the x86_64 rig is usable; None (after [`super::skip`]) when `test` is to be skipped.
pub fn guest(test: &str) -> Option<MutexGuard<'static, ()>> {
    guest_for(test, Arch::X86_64)
}

/// The guest lock when the rig for `arch` is usable (for arm64 also the aarch64 build of the tracer and the
/// workload); None (after [`super::skip`]) when `test` is to be skipped.
pub fn guest_for(test: &str, arch: Arch) -> Option<MutexGuard<'static, ()>> {
    let lock = GUEST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let usable = rig_for(arch).clone().and_then(|()| match arch {
        Arch::X86_64 => Ok(()),
        Arch::Aarch64 => snapshot_aarch64().as_ref().map(drop).map_err(Clone::clone),
    });
    match usable {
        Ok(()) => Some(lock),
        Err(reason) if std::env::var("STEADYTRACE_REQUIRE_VM").as_deref() == Ok("1") => {
            panic!("the guest rig is required (STEADYTRACE_REQUIRE_VM=1) but unusable: {reason}")
        }
        Err(reason) => {
            super::skip(test, &reason);
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

/// Runs a shell command as root in an x86_64 guest; `timeout` bounds the whole boot-run-poweroff cycle. A guest
/// that fails to boot (rare under emulation; the command never ran) is booted once more.
pub fn run(kernel: &str, cpus: u32, append: &str, timeout: u32, script: &str) -> GuestRun {
    run_on(Arch::X86_64, kernel, cpus, append, timeout, script)
}

/// [`run`] in a guest of `arch`. An arm64 guest (kernel 6.1 or 6.12) takes 7-9 s from start to the script, against
/// ~2.5 s for x86_64; its script runs under busybox's sh, with shell functions standing in for `date +%s%N` and
/// `dmesg -C` (busybox's have neither), which a `sh -c` the script starts does not have.
pub fn run_on(arch: Arch, kernel: &str, cpus: u32, append: &str, timeout: u32, script: &str) -> GuestRun {
    let boot = || {
        let out = Command::new(vm_dir().join("run"))
            .args(["--arch", arch.run_name(), "--kernel", kernel, "--cpus", &cpus.to_string()])
            .args(["--append", append])
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
    // Under emulation on a loaded host a guest kernel now and then fails to boot (an oops in its text patching,
    // seconds into the boot: tried up to 4 times), or locks up ("soft lockup" in its IPIs) and never finishes
    // (tried twice). A tracer that hangs makes the second run time out too, and the test fails.
    let (mut boots, mut timeouts) = (0, 0);
    loop {
        let run = boot();
        match run.code {
            Some(BOOT_FAILED) if boots < 3 => boots += 1,
            Some(GUEST_TIMED_OUT) if timeouts < 1 => timeouts += 1,
            _ => return run,
        }
        eprintln!("the {arch} {kernel} guest failed to boot or to finish; booting it again:\n{}", run.stderr);
    }
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

/// The test workload for guest scripts on `arch` (see [`tracer_for`]).
pub fn workload_for(arch: Arch) -> String {
    match arch {
        Arch::X86_64 => workload(),
        Arch::Aarch64 => aarch64_binary("examples/workload"),
    }
}

/// examples/delegated_userns.rs for guest scripts on `arch` (see [`tracer_for`]): run as root, it runs a command as
/// root of a new user namespace with a BPF filesystem delegated to it on /sys/fs/bpf. Err says why there is none.
pub fn harness_for(arch: Arch) -> Result<String, String> {
    let path = match arch {
        Arch::X86_64 => snapshot().join("examples/delegated_userns").to_string_lossy().into_owned(),
        Arch::Aarch64 => aarch64_binary("examples/delegated_userns"),
    };
    match Path::new(&path).is_file() {
        true => Ok(path),
        false => Err(format!(
            "{} was not built: cargo build --example delegated_userns",
            super::workload().with_file_name("delegated_userns").display()
        )),
    }
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
