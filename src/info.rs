//! `steadytrace --info`: what this kernel and this process allow, for a user to read before filing a
//! bug (or before choosing a container's flags). Everything is found out without attaching anything.

use crate::kernel;
use crate::privilege;
use crate::probes::{profile_timer, syscall, syscall_formats};
use bpf::features::{Feature, Features};
use std::fs;
use std::path::Path;

/// One line of the report: a name (a JSON key) and its value.
pub struct Item {
    pub key: &'static str,
    pub value: Value,
}

pub enum Value {
    Text(String),
    Flag(bool),
    /// A flag with the reason it is not set.
    FlagBecause(bool, String),
    List(Vec<String>),
}

/// The report, in the order it is printed.
pub fn gather(features: &Features) -> Vec<Item> {
    let item = |key, value| Item { key, value };
    let perf = privilege::perf_event_open_denied();
    let (syscall_attach, syscall_reason) = syscall::chosen();
    let mut items = vec![
        item("kernel_release", Value::Text(read_trimmed("/proc/sys/kernel/osrelease"))),
        item("arch", Value::Text(bpf::arch::HOST.summary())),
        item("btf", Value::Flag(Path::new("/sys/kernel/btf/vmlinux").exists())),
        item("lockdown", Value::Text(privilege::lockdown().unwrap_or_else(|| "not available".into()))),
        item(
            "perf_event_open",
            Value::FlagBecause(perf.is_none(), perf.map_or(String::new(), perf_denied_reason)),
        ),
        item(
            "perf_event_paranoid",
            Value::Text(privilege::perf_event_paranoid().map_or("unknown".into(), |p| p.to_string())),
        ),
        item("seccomp_filter", Value::Flag(privilege::seccomp_filtered())),
        item("initial_user_namespace", Value::Flag(privilege::initial_user_namespace())),
        item("bpf_token", Value::Text(bpf_token())),
        item("capabilities", Value::List(privilege::capability_names(privilege::effective_capabilities()))),
        item(
            "unprivileged_bpf_disabled",
            Value::Text(read_trimmed("/proc/sys/kernel/unprivileged_bpf_disabled")),
        ),
        item("kprobes", Value::Flag(Path::new("/sys/bus/event_source/devices/kprobe").exists())),
        item("uprobes", Value::Flag(Path::new("/sys/bus/event_source/devices/uprobe").exists())),
        item("tracefs", Value::Text(tracefs_location())),
        item("debugfs", Value::Text(mount_point("debugfs").unwrap_or_else(|| "not mounted".into()))),
        item("cpus_online", Value::Text(read_trimmed("/sys/devices/system/cpu/online"))),
        item("cpus_hotpluggable", Value::List(hotpluggable_cpus())),
        item("interval_engine", Value::Text(interval_engine(features))),
        item("profile_engine", Value::Text(profile_engine(features))),
        item(
            "syscall_tracepoints",
            Value::Text(match syscall_attach {
                _ if crate::kernel::tracefs::root().is_ok_and(|root| syscall_formats::made_up(&root)) => {
                    format!("raw_syscalls raw tracepoints ({})", syscall_formats::REASON)
                }
                syscall::Attach::Perf => format!("tracepoint perf events ({syscall_reason})"),
                syscall::Attach::Raw => format!("raw_syscalls raw tracepoints ({syscall_reason})"),
            }),
        ),
    ];
    items.extend(Feature::ALL.iter().map(|&f| item(f.key(), feature(features, f))));
    items
}

/// What samples `profile` probes: perf events, or BPF timers where perf_event_open is refused.
fn profile_engine(features: &Features) -> String {
    match profile_timer::chosen(features) {
        (profile_timer::Engine::Perf, why) => format!("perf events ({why})"),
        (profile_timer::Engine::Timer, why) => format!("BPF timers, one per CPU ({why})"),
    }
}

/// A kernel feature of the table: yes, or no with the Linux release that has it and what steadytrace
/// does without it.
fn feature(features: &Features, feature: Feature) -> Value {
    let present = features.has(feature);
    let why = match (present, feature) {
        (true, _) => String::new(),
        (false, Feature::TpBtf | Feature::Fentry) => {
            let error =
                if feature == Feature::TpBtf { bpf::features::tp_btf() } else { bpf::features::fentry() };
            let error = error.err().map_or(String::new(), |e| format!("; loading one fails: {e}"));
            format!("Linux {}{error}; without it: {}", feature.since(), kernel::without(feature))
        }
        // Only fentry programs may call bpf_d_path: where they cannot load, neither can it.
        (false, Feature::DPath) if !features.has(Feature::Fentry) => {
            format!("fentry programs cannot run here; without it: {}", kernel::without(feature))
        }
        (false, _) => format!("Linux {}; without it: {}", feature.since(), kernel::without(feature)),
    };
    Value::FlagBecause(present, why)
}

/// Whether `bpf()` calls carry a BPF token, from where, and what it delegates.
fn bpf_token() -> String {
    use crate::bpf_token::Token;
    match crate::bpf_token::state() {
        Token::NotWanted => "not used (the host's user namespace)".into(),
        Token::Disabled => "not used: LIBBPF_BPF_TOKEN_PATH is empty".into(),
        Token::NoDelegation => "none: no BPF filesystem at /sys/fs/bpf delegates anything".into(),
        Token::InUse { path, delegates } => format!("in use, from {} ({delegates})", path.display()),
        Token::Refused { path, error } => format!("refused at {}: {error}", path.display()),
    }
}

fn read_trimmed(path: &str) -> String {
    fs::read_to_string(path).map_or_else(|e| format!("unreadable: {e}"), |t| t.trim().to_string())
}

fn perf_denied_reason(error: &std::io::Error) -> String {
    let caps = if privilege::has_capability(privilege::CAP_PERFMON) { "held" } else { "not held" };
    let seccomp = if privilege::seccomp_filtered() { ", a seccomp filter is installed" } else { "" };
    format!("{error}; CAP_PERFMON {caps}{seccomp}")
}

/// Where tracefs is, without mounting it.
fn tracefs_location() -> String {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find(|dir| Path::new(dir).join("events").is_dir())
        .map_or("not mounted".into(), |dir| {
            let writable = nix::unistd::access(*dir, nix::unistd::AccessFlags::W_OK).is_ok();
            format!("{dir}{}", if writable { "" } else { " (read-only)" })
        })
}

fn mount_point(fs_type: &str) -> Option<String> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(2) == Some(&fs_type)).then(|| fields[1].to_string())
    })
}

/// The CPUs that have an `online` file, the ones the kernel lets go offline.
fn hotpluggable_cpus() -> Vec<String> {
    let Ok(entries) = fs::read_dir("/sys/devices/system/cpu") else { return vec![] };
    let mut cpus: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .filter(|n: &u32| Path::new(&format!("/sys/devices/system/cpu/cpu{n}/online")).exists())
        .collect();
    cpus.sort_unstable();
    cpus.into_iter().map(|n| format!("cpu{n}")).collect()
}

fn interval_engine(features: &Features) -> String {
    if features.has(Feature::RunOnRequest) {
        "timer thread, programs run on request (BPF_PROG_TEST_RUN)".into()
    } else {
        "timer thread, programs run through the trigger uprobe".into()
    }
}

/// The report as text, one `name: value` line each.
pub fn text(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        let value = match &item.value {
            Value::Text(text) => text.clone(),
            Value::Flag(flag) => yes_no(*flag).into(),
            Value::FlagBecause(flag, why) if why.is_empty() => yes_no(*flag).into(),
            Value::FlagBecause(flag, why) => format!("{} ({why})", yes_no(*flag)),
            Value::List(list) if list.is_empty() => "none".into(),
            Value::List(list) => list.join(", "),
        };
        out.push_str(&format!("{}: {value}\n", item.key));
    }
    out
}

fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

/// The report as one JSON object; a flag with a reason is `{"value": false, "reason": "..."}`.
pub fn json(items: &[Item]) -> String {
    let string = |s: &str| {
        let mut out = Vec::new();
        crate::output::json::escape(&mut out, s.as_bytes());
        format!("\"{}\"", String::from_utf8_lossy(&out))
    };
    let fields: Vec<String> = items
        .iter()
        .map(|item| {
            let value = match &item.value {
                Value::Text(text) => string(text),
                Value::Flag(flag) => flag.to_string(),
                Value::FlagBecause(flag, why) if why.is_empty() => flag.to_string(),
                Value::FlagBecause(flag, why) => {
                    format!("{{\"value\": {flag}, \"reason\": {}}}", string(why))
                }
                Value::List(list) => {
                    format!("[{}]", list.iter().map(|s| string(s)).collect::<Vec<_>>().join(", "))
                }
            };
            format!("\"{}\": {value}", item.key)
        })
        .collect();
    format!("{{{}}}\n", fields.join(", "))
}
