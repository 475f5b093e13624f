//! The delegated user namespace of examples/delegated_userns.rs, for the rootless tests (tests/rootless.rs,
//! tests/rootless_profile.rs): root inside is uid 100000 outside, with a BPF filesystem delegated to it on
//! /sys/fs/bpf, the way systemd 258 (PrivateBPF=yes), LXD and Incus run a container.

use super::{can_trace, skip, stderr, wait_output, Reaped, BIN};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// What the harness maps root of the namespace to (its default).
pub const UID_BASE: &str = "100000";
/// The harness's exit status when a setup step failed (its stderr names the step).
pub const SETUP_FAILED: i32 = 125;

/// Built by a plain `cargo test` (every example is); `cargo test --test rootless` alone builds no example.
pub fn harness() -> PathBuf {
    let path = Path::new(BIN).parent().expect("target dir").join("examples").join("delegated_userns");
    assert!(path.is_file(), "{} is missing: cargo build --example delegated_userns", path.display());
    path
}

/// `args` run by the harness as root of a new user namespace with the delegated bpffs on /sys/fs/bpf.
pub fn inside(args: &[&str]) -> Command {
    let mut command = Command::new(harness());
    command.arg("--").args(args);
    command
}

/// The same namespace without the delegated bpffs: what a container has without PrivateBPF.
pub fn inside_without_delegation(args: &[&str]) -> Command {
    let mut command = Command::new(harness());
    command.args(["--no-delegate", "--"]).args(args);
    command
}

pub fn output_of(command: &mut Command) -> Output {
    let child =
        Reaped::spawn(command.stdout(Stdio::piped()).stderr(Stdio::piped())).expect("spawn the harness");
    wait_output(child, Duration::from_secs(30))
}

/// The running kernel's (major, minor).
pub fn kernel_version() -> (u32, u32) {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").expect("the kernel release");
    let mut numbers = release.trim().split(['.', '-']).map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Whether the delegated namespace can be made here; [`skip`]s the test when not: it needs root (for the
/// host side), user namespaces, and a kernel with BPF tokens (6.9), whose bpffs may be owned by a user namespace.
pub fn can_delegate(test: &str) -> bool {
    // Root also maps the namespace's ids and delegates its bpffs.
    if !can_trace(test) {
        return false;
    }
    let output = output_of(&mut inside(&["true"]));
    if output.status.success() {
        return true;
    }
    let said = stderr(&output);
    if output.status.code() == Some(SETUP_FAILED) && said.contains(": unshare(") {
        skip(test, &format!("user namespaces are not available here: {}", said.trim()));
        return false;
    }
    // Before 6.9 bpffs ignores unknown options, delegate_* among them, and only creating a superblock owned by
    // a user namespace is refused (EPERM): the step that fails is an fsconfig.
    let (major, minor) = kernel_version();
    if output.status.code() == Some(SETUP_FAILED) && said.contains(": fsconfig") && (major, minor) < (6, 9) {
        skip(
            test,
            &format!(
                "kernel {major}.{minor} lacks BPF tokens (6.9+): it refused the delegated bpffs: {}",
                said.trim()
            ),
        );
        return false;
    }
    panic!(
        "the harness cannot make the delegated namespace on kernel {major}.{minor}: {:?}\n{said}",
        output.status
    );
}
