//! The table of kernel features generated programs and the runtime may use, each with the first Linux
//! release that has it and the helper it is, if one (`sys/features.rs` finds out whether the running kernel
//! has it). Callers ask that, never the kernel version string: distribution and Android kernels backport
//! features and configure some out.

use crate::code::helper::Helper;

macro_rules! features {
    ($($name:ident = $key:expr, $since:expr, $what:expr;)*) => {
        /// A kernel feature steadytrace may use.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Feature { $($name,)* }

        impl Feature {
            /// Every feature, in the order `--info` lists them.
            pub const ALL: &'static [Feature] = &[$(Feature::$name,)*];

            /// The short name `--info` and `STEADYTRACE_KERNEL_WITHOUT` use.
            pub fn key(self) -> &'static str {
                match self { $(Feature::$name => $key,)* }
            }

            /// The first Linux release that has it on x86_64.
            fn since_on_x86_64(self) -> &'static str {
                match self { $(Feature::$name => $since,)* }
            }

            /// What it is, as the kernel's documentation names it.
            pub fn what(self) -> &'static str {
                match self { $(Feature::$name => $what,)* }
            }
        }
    };
}

features! {
    RingBuffer = "ringbuf", "5.8", "BPF ring buffer maps";
    RawTracepoint = "raw_tp", "4.17", "raw tracepoint programs";
    RunOnRequest = "run_on_request", "5.10", "BPF_PROG_TEST_RUN of raw tracepoint programs";
    TpBtf = "tp_btf", "5.5", "BTF-typed tracepoint programs";
    Fentry = "fentry", "5.5", "fentry/fexit programs (BPF trampolines)";
    KprobeMulti = "kprobe_multi", "5.18", "kprobe_multi links";
    KprobeSession = "kprobe_session", "6.10", "kprobe session links (a kprobe and its kretprobe as one program)";
    UprobeMulti = "uprobe_multi", "6.6", "uprobe_multi links";
    BpfLoop = "bpf_loop", "5.17", "the bpf_loop helper";
    ForEachMapElem = "for_each_map_elem", "5.13", "the bpf_for_each_map_elem helper";
    PercpuLookup = "percpu_lookup", "5.19", "the bpf_map_lookup_percpu_elem helper";
    GetFuncIp = "get_func_ip", "5.15", "the bpf_get_func_ip helper in kprobes";
    AttachCookie = "attach_cookie", "5.15", "the bpf_get_attach_cookie helper";
    NsPid = "ns_pid", "5.7", "the bpf_get_ns_current_pid_tgid helper";
    DPath = "d_path", "5.10", "the bpf_d_path helper in fentry/fexit";
    PerCpuPtr = "per_cpu_ptr", "5.10", "the bpf_per_cpu_ptr and bpf_this_cpu_ptr helpers";
    BootNs = "ktime_get_boot_ns", "5.8", "the bpf_ktime_get_boot_ns helper";
    TaiNs = "ktime_get_tai_ns", "6.1", "the bpf_ktime_get_tai_ns helper";
    BpfTimer = "bpf_timer", "5.15", "BPF timers (bpf_timer_init)";
    TimerCpuPin = "timer_cpu_pin", "6.7", "BPF timers pinned to a CPU, at an absolute time (BPF_F_TIMER_CPU_PIN)";
    Cmpxchg = "cmpxchg", "5.12", "the atomic compare-and-exchange instruction (BPF_CMPXCHG)";
    TaskPtRegs = "task_pt_regs", "5.15", "the bpf_task_pt_regs helper";
    WriteUser = "probe_write_user", "4.8", "the bpf_probe_write_user helper (refused by a locked-down kernel)";
    OverrideReturn = "override_return", "4.16", "the bpf_override_return helper (CONFIG_BPF_KPROBE_OVERRIDE)";
}

impl Feature {
    /// The helper whose presence this feature is, if it is one.
    pub fn helper(self) -> Option<Helper> {
        Some(match self {
            Feature::BpfLoop => Helper::Loop,
            Feature::ForEachMapElem => Helper::ForEachMapElem,
            Feature::PercpuLookup => Helper::MapLookupPercpuElem,
            Feature::GetFuncIp => Helper::GetFuncIp,
            Feature::AttachCookie => Helper::GetAttachCookie,
            Feature::NsPid => Helper::GetNsCurrentPidTgid,
            Feature::DPath => Helper::DPath,
            Feature::PerCpuPtr => Helper::PerCpuPtr,
            Feature::BootNs => Helper::KtimeGetBootNs,
            Feature::TaiNs => Helper::KtimeGetTaiNs,
            Feature::BpfTimer => Helper::TimerInit,
            Feature::TaskPtRegs => Helper::TaskPtRegs,
            Feature::WriteUser => Helper::ProbeWriteUser,
            Feature::OverrideReturn => Helper::OverrideReturn,
            _ => return None,
        })
    }

    /// The feature a call of `helper` needs, for helpers newer than the ring buffer (which steadytrace
    /// cannot run without, so older helpers are there whenever it runs).
    pub fn of_helper(helper: Helper) -> Option<Feature> {
        match helper {
            Helper::ThisCpuPtr => Some(Feature::PerCpuPtr),
            Helper::TimerSetCallback | Helper::TimerStart => Some(Feature::BpfTimer),
            _ => Feature::ALL.iter().copied().find(|f| f.helper() == Some(helper)),
        }
    }

    /// The first Linux release that has it on this architecture: BPF trampolines reach kernel functions
    /// later on some.
    pub fn since(self) -> &'static str {
        let listed = self.since_on_x86_64();
        match self {
            Feature::Fentry | Feature::DPath => later(listed, crate::code::arch::HOST.fentry_since),
            _ => listed,
        }
    }
}

/// The later of two Linux releases (`5.10`, `6.4`).
fn later<'a>(a: &'a str, b: &'a str) -> &'a str {
    let parts = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    if parts(a) >= parts(b) {
        a
    } else {
        b
    }
}

/// The feature named `key` ([`Feature::key`]).
pub fn by_key(key: &str) -> Option<Feature> {
    Feature::ALL.iter().copied().find(|f| f.key() == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_feature_has_a_distinct_key_and_a_release() {
        let mut keys: Vec<&str> = Feature::ALL.iter().map(|f| f.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), Feature::ALL.len());
        for f in Feature::ALL {
            let (major, minor) = f.since().split_once('.').expect("MAJOR.MINOR");
            assert!(major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok(), "{f:?}");
            assert_eq!(by_key(f.key()), Some(*f));
        }
    }

    #[test]
    fn trampolines_come_later_on_arm64() {
        assert_eq!(later("5.10", "6.4"), "6.4");
        assert_eq!(later("5.10", "5.5"), "5.10");
        let fentry = Feature::Fentry.since();
        assert_eq!(fentry, if crate::code::arch::HOST.name == "aarch64" { "6.4" } else { "5.5" });
        assert_eq!(Feature::DPath.since(), later("5.10", fentry));
    }

    #[test]
    fn helpers_map_back_to_their_features() {
        for f in Feature::ALL {
            if let Some(helper) = f.helper() {
                assert_eq!(Feature::of_helper(helper), Some(*f));
            }
        }
        assert_eq!(Feature::of_helper(Helper::TimerStart), Some(Feature::BpfTimer));
        assert_eq!(Feature::of_helper(Helper::MapLookupElem), None);
    }
}
