//! What this process may do with BPF and perf events, found out from the kernel, and the messages that
//! say what to change when it may not: in a container, "needs root" is wrong (the process often is
//! root), so a refusal names the call, the likely cause, and the ways out.

use std::fs;
use std::io;
use std::sync::OnceLock;

pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// The capabilities by number, as `capabilities(7)` names them.
const CAP_NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// A line of `/proc/self/status` (`Seccomp:`, `CapEff:`), without its label.
fn status_field(label: &str) -> Option<String> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| line.strip_prefix(label)).map(|v| v.trim().to_string())
}

/// The effective capabilities, as a bit set.
pub fn effective_capabilities() -> u64 {
    status_field("CapEff:").and_then(|hex| u64::from_str_radix(&hex, 16).ok()).unwrap_or(0)
}

pub fn has_capability(cap: u32) -> bool {
    effective_capabilities() & (1 << cap) != 0
}

/// The names of the capabilities in `set`.
pub fn capability_names(set: u64) -> Vec<String> {
    (0..64)
        .filter(|bit| set & (1u64 << bit) != 0)
        .map(|bit| CAP_NAMES.get(bit as usize).map_or(format!("cap_{bit}"), |n| n.to_string()))
        .collect()
}

/// Whether a seccomp filter is installed on this process (`Seccomp: 2`).
pub fn seccomp_filtered() -> bool {
    status_field("Seccomp:").as_deref() == Some("2")
}

/// `kernel.perf_event_paranoid`.
pub fn perf_event_paranoid() -> Option<i32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok()?.trim().parse().ok()
}

/// The kernel's lockdown mode (`none`, `integrity`, `confidentiality`); `None` without the lockdown LSM.
pub fn lockdown() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let start = text.find('[')? + 1;
    let end = text[start..].find(']')? + start;
    Some(text[start..end].to_string())
}

/// Whether this process is in the initial user namespace (the host's), where BPF may be allowed at all; read
/// once (start-up asked twice).
pub fn initial_user_namespace() -> bool {
    static INITIAL: OnceLock<bool> = OnceLock::new();
    *INITIAL.get_or_init(|| match fs::read_to_string("/proc/self/uid_map") {
        Ok(map) => map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"],
        Err(_) => true,
    })
}

/// Why perf_event_open is refused to this process, `None` when it is allowed; found out once, by
/// opening (and closing) a dummy software event on one CPU for every process, as a tracepoint's is.
pub fn perf_event_open_denied() -> Option<&'static io::Error> {
    static DENIED: OnceLock<Option<io::Error>> = OnceLock::new();
    DENIED
        .get_or_init(|| {
            let spec = bpf::perf::PerfEventSpec {
                type_: bpf::perf::TYPE_SOFTWARE,
                config: 9, // PERF_COUNT_SW_DUMMY
                config1: 0,
                config2: 0,
                sample: bpf::perf::Sample::Period(0),
                bp_type: 0,
                inherit: false,
            };
            let cpu = crate::online_cpus::online().ok().and_then(|c| c.first().copied()).unwrap_or(0);
            match bpf::perf::PerfEvent::open(&spec, -1, cpu as i32) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => Some(e),
                _ => None,
            }
        })
        .as_ref()
}

/// The ways out of a denied perf_event_open, in the order a user in a container can take them.
const PERF_WAYS_OUT: &str = "Ways out: grant CAP_PERFMON (docker/podman: --cap-add PERFMON; Kubernetes: \
    securityContext.capabilities.add: [\"PERFMON\"]); or lower kernel.perf_event_paranoid on the host \
    (sysctl kernel.perf_event_paranoid=-1 lets any process open tracepoint events); or allow perf_event_open \
    in the container's seccomp profile (docker/podman: --security-opt seccomp=PROFILE.json; Kubernetes: \
    securityContext.seccompProfile).";

/// The message for a refused perf_event_open: the probe, the call, the likely cause, the ways out, and
/// `alternative` (a probe that serves the same event without perf_event_open), if any.
pub fn perf_event_denied(probe: &str, error: &io::Error, alternative: &str) -> String {
    let paranoid = perf_event_paranoid().map_or("unknown".to_string(), |p| p.to_string());
    if !initial_user_namespace() {
        return format!(
            "cannot attach `{probe}`: the kernel denied perf_event_open ({}): steadytrace runs in a user \
             namespace other than the host's (a rootless container), where its capabilities count for nothing \
             with perf events and a BPF token does not cover them, and kernel.perf_event_paranoid is \
             {paranoid}. Ways out, on the host: sysctl kernel.perf_event_paranoid=-1 (any process may then \
             open CPU-wide and tracepoint events: a machine-wide choice), or run steadytrace in the host's user \
             namespace with CAP_PERFMON.{alternative}",
            error_name(error)
        );
    }
    let cause = if !has_capability(CAP_PERFMON) && !has_capability(CAP_SYS_ADMIN) {
        format!("steadytrace lacks CAP_PERFMON and kernel.perf_event_paranoid is {paranoid}")
    } else if seccomp_filtered() {
        "steadytrace holds CAP_PERFMON, and a seccomp filter is installed on it (a container's profile?): \
         the filter is the likely cause"
            .to_string()
    } else {
        format!(
            "steadytrace holds CAP_PERFMON; kernel.perf_event_paranoid is {paranoid}; a security module \
             (SELinux, AppArmor) or lockdown may have refused it"
        )
    };
    format!(
        "cannot attach `{probe}`: the kernel denied perf_event_open ({}): {cause}. {PERF_WAYS_OUT}{alternative}",
        error_name(error)
    )
}

/// Why the kernel refused a `bpf()` call (creating a map, loading a program) in the host's user namespace,
/// for a message (in another: `bpf_token::user_namespace_advice`).
pub fn bpf_denied() -> String {
    let locked = lockdown().filter(|mode| mode != "none");
    if !has_capability(CAP_BPF) && !has_capability(CAP_SYS_ADMIN) {
        let held = capability_names(effective_capabilities());
        return format!(
            "steadytrace lacks CAP_BPF (it holds {}): grant CAP_BPF and CAP_PERFMON (docker/podman: \
             --cap-add BPF --cap-add PERFMON; Docker before 23.0 knows neither name: --cap-add SYS_ADMIN; \
             Kubernetes: securityContext.capabilities.add: [\"BPF\", \"PERFMON\"])",
            if held.is_empty() { "none".to_string() } else { held.join(", ") }
        );
    }
    match locked {
        Some(mode) => format!(
            "the kernel is locked down ({mode}), which forbids some BPF uses (confidentiality: reading \
             kernel memory and perf events; integrity: writing user memory); boot with lockdown=none to lift it"
        ),
        None if seccomp_filtered() => "steadytrace holds CAP_BPF, and a seccomp filter is installed on it: \
            allow bpf() in the container's seccomp profile (docker/podman: --security-opt seccomp=PROFILE.json)"
            .into(),
        None => "steadytrace holds CAP_BPF; a security module (SELinux, AppArmor) may have refused the call".into(),
    }
}

/// `EPERM (Operation not permitted)`.
fn error_name(error: &io::Error) -> String {
    let name = match error.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EACCES) => "EACCES",
        _ => return error.to_string(),
    };
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    format!("{name}, {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_names_by_bit() {
        assert_eq!(capability_names((1 << CAP_BPF) | (1 << CAP_PERFMON)), ["CAP_PERFMON", "CAP_BPF"]);
        assert_eq!(capability_names(1 << 45), ["cap_45"]);
    }

    #[test]
    fn a_denied_perf_event_open_names_the_call_and_the_ways_out() {
        let error = io::Error::from_raw_os_error(libc::EPERM);
        let message = perf_event_denied("profile:hz:99", &error, "");
        for needle in
            ["profile:hz:99", "perf_event_open", "EPERM", "CAP_PERFMON", "perf_event_paranoid", "seccomp"]
        {
            assert!(message.contains(needle), "{needle} missing from {message}");
        }
        assert!(!message.contains("root"), "{message}");
    }
}
