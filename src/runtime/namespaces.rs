//! Which pid namespace steadytrace runs in: in a container's own, the pids a script sees must be that
//! namespace's numbers (those `-c`, `-p` and /proc speak), not the host's.

use std::os::unix::fs::MetadataExt;

/// The inode of the initial pid namespace (the kernel's PROC_PID_INIT_INO).
const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// The nsfs device and inode of steadytrace's pid namespace, when it is not the initial one.
pub fn own_pid_namespace() -> Option<(u64, u64)> {
    let ns = std::fs::metadata("/proc/self/ns/pid").ok()?;
    (ns.ino() != INITIAL_PID_NAMESPACE).then(|| (ns.dev(), ns.ino()))
}
