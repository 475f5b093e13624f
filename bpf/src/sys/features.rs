//! What the running kernel offers, found out: whether it has each feature of the table (`code/features.rs`),
//! each found out once, when first asked, without attaching anything (a program loaded and closed, a link
//! request the kernel must refuse), so a script pays only for the features it uses; the answers are kept by
//! one [`Features`] value per run.

use crate::code::features::Feature;
use crate::code::helper::Helper;
use crate::code::insn::{Asm, Reg, Size};
use crate::code::map::{MapKind, MapSpec};
use crate::code::prog::{helper_refused, AttachMode, ProgType, TrampolineTarget};
use crate::sys::map::Map;
use crate::sys::prog::load;
use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// What the running kernel offers: each feature found out when first asked and remembered, two bits a
/// feature (asked, present). One value per run, made at start and handed to whatever decides by it.
#[derive(Debug, Default)]
pub struct Features {
    answers: AtomicU64,
    /// Features taken as absent whatever the kernel says (tests of the fallbacks; `STEADYTRACE_KERNEL_WITHOUT`).
    absent: Vec<Feature>,
}

impl Features {
    /// The running kernel's features, probed as they are asked.
    pub fn probing() -> Self {
        Self::default()
    }

    /// Answers no for `absent`, whatever the kernel has: the way to run the fallbacks on a kernel that does
    /// not need them.
    pub fn assuming_absent(absent: Vec<Feature>) -> Self {
        Features { answers: AtomicU64::new(0), absent }
    }

    /// Answers from this table for every feature, probing nothing: `present` are there (unless taken as
    /// absent), the rest are not. Compiling against a table gives the same programs on any machine and
    /// needs no privilege (the golden corpus of emitted programs).
    pub fn given(self, present: &[Feature]) -> Self {
        let mut answers = 0;
        for (index, feature) in Feature::ALL.iter().enumerate() {
            let (asked, found) = (1 << (2 * index), 1 << (2 * index + 1));
            answers |=
                asked | if present.contains(feature) && !self.assumed_absent(*feature) { found } else { 0 };
        }
        Features { answers: AtomicU64::new(answers), ..self }
    }

    /// Whether the running kernel has `feature`; found out on the first call, remembered after.
    pub fn has(&self, feature: Feature) -> bool {
        let index = Feature::ALL.iter().position(|f| *f == feature).expect("every feature is in ALL");
        let (asked, present) = (1 << (2 * index), 1 << (2 * index + 1));
        let answers = self.answers.load(Ordering::Relaxed);
        if answers & asked != 0 {
            return answers & present != 0;
        }
        let found = !self.assumed_absent(feature) && self.probe(feature);
        self.answers.fetch_or(asked | if found { present } else { 0 }, Ordering::Relaxed);
        found
    }

    /// Whether `feature` is taken as absent whatever the kernel says.
    pub fn assumed_absent(&self, feature: Feature) -> bool {
        self.absent.contains(&feature)
    }

    /// Finds out whether the running kernel has `feature`.
    fn probe(&self, feature: Feature) -> bool {
        use ProgType::{Kprobe as KPROBE, RawTracepoint as RAW_TP};
        match feature {
            Feature::RingBuffer => ring_buffer(),
            Feature::RawTracepoint => prog_type(RAW_TP),
            Feature::RunOnRequest => crate::sys::prog::run_on_request_supported(),
            Feature::TpBtf => tp_btf().is_ok(),
            Feature::Fentry => fentry().is_ok(),
            Feature::KprobeMulti => crate::sys::kprobe::multi_supported(),
            Feature::KprobeSession => crate::sys::kprobe::session_supported(),
            Feature::UprobeMulti => crate::sys::uprobe::multi_supported(),
            Feature::GetFuncIp
            | Feature::AttachCookie
            | Feature::TaskPtRegs
            | Feature::WriteUser
            | Feature::OverrideReturn => helper(KPROBE, feature),
            // The kernel allows bpf_d_path only in BPF trampolines: ask an fentry program.
            Feature::DPath => {
                self.has(Feature::Fentry)
                    && tracing_calls("security_file_open", Helper::DPath).unwrap_or(false)
            }
            Feature::Cmpxchg => cmpxchg_loads(),
            Feature::TimerCpuPin => self.has(Feature::BpfTimer) && crate::sys::timer::cpu_pin_supported(),
            _ => helper(RAW_TP, feature),
        }
    }
}

/// Whether a BTF-typed raw tracepoint program (tp_btf) loads, on `sched_switch`, and why not.
pub fn tp_btf() -> io::Result<()> {
    tracing_loads("sched_switch", libbpf_sys::BPF_TRACE_RAW_TP, None).map(|_| ())
}

/// Whether an fentry program loads and attaches, and why not: on `bpf_fentry_test1`, which the kernel
/// keeps for testing BPF trampolines and calls only from `BPF_PROG_TEST_RUN`, else on `vfs_read`.
pub fn fentry() -> io::Result<()> {
    let id = ["bpf_fentry_test1", "vfs_read"]
        .iter()
        .map(|name| vmlinux_btf_id(name, libbpf_sys::BPF_TRACE_FENTRY))
        .find(Result::is_ok)
        .unwrap_or_else(|| vmlinux_btf_id("vfs_read", libbpf_sys::BPF_TRACE_FENTRY))?;
    crate::sys::trampoline::supported(id)
}

/// Whether programs of `prog_type` may call the kernel function (kfunc) `name`, of BTF id `id` in vmlinux: the
/// verifier says "calling kernel function NAME is not allowed" of one not registered for the type, whatever
/// else it refuses. False where a tracing program has no function to attach to.
pub fn kfunc_allowed(name: &str, id: u32, prog_type: ProgType) -> bool {
    let attach = match prog_type {
        ProgType::Tracing => {
            let target = ["bpf_fentry_test1", "vfs_read"]
                .iter()
                .find_map(|name| vmlinux_btf_id(name, libbpf_sys::BPF_TRACE_FENTRY).ok());
            match target {
                Some(btf_id) => {
                    AttachMode::Trampoline { btf_id, exit: false, target: TrampolineTarget::Kernel }
                }
                None => return false,
            }
        }
        _ => AttachMode::PerfEvent,
    };
    let mut asm = Asm::new();
    asm.call_kernel_function(id);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    match load("st_kfunc", prog_type, attach, &code, &[]) {
        Ok(_) => true,
        Err(e) => !e.log.contains(&format!("calling kernel function {name} is not allowed")),
    }
}

/// The BTF id of the kernel's `target` for programs of `attach_type`.
pub(crate) fn vmlinux_btf_id(target: &str, attach_type: libbpf_sys::bpf_attach_type) -> io::Result<u32> {
    let name = CString::new(target).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let id = unsafe { libbpf_sys::libbpf_find_vmlinux_btf_id(name.as_ptr(), attach_type) };
    if id < 0 {
        return Err(io::Error::from_raw_os_error(-id));
    }
    Ok(id as u32)
}

// The probes below load and create through this crate (not libbpf's `libbpf_probe_*`), so that they
// carry the BPF token where one is in use (crate::sys::token): without it they would find nothing in a user
// namespace.

/// Whether the kernel loads programs of this type.
fn prog_type(kind: ProgType) -> bool {
    let mut asm = Asm::new();
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    load("st_feature", kind, AttachMode::PerfEvent, &code, &[]).is_ok()
}

/// Whether the kernel has the ring buffer map (Linux 5.8): one of a page.
fn ring_buffer() -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u32;
    let spec = MapSpec {
        name: "st_feature".into(),
        kind: MapKind::RingBuf,
        key_size: 0,
        value_size: 0,
        max_entries: page,
    };
    Map::create(&spec).is_ok()
}

/// Whether programs of this type may call the feature's helper: a call of it with zero arguments
/// loads, or is refused for its arguments rather than for the helper ([`helper_refused`]).
fn helper(kind: ProgType, feature: Feature) -> bool {
    let Some(helper) = feature.helper() else { return false };
    let mut asm = Asm::new();
    for reg in [Reg::R1, Reg::R2, Reg::R3, Reg::R4, Reg::R5] {
        asm.mov64_imm(reg, 0);
    }
    asm.call(helper.id());
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    match load("st_feature", kind, AttachMode::PerfEvent, &code, &[]) {
        Ok(_) => true,
        Err(refused) => !refused.log.is_empty() && !helper_refused(&refused.log),
    }
}

/// Whether the verifier accepts a compare-and-exchange on the stack (before 5.12 it knows only atomic adds).
fn cmpxchg_loads() -> bool {
    let mut asm = Asm::new();
    asm.store_imm(Size::DW, Reg::FP, -8, 0);
    asm.mov64_imm(Reg::R0, 0);
    asm.mov64_imm(Reg::R1, 1);
    asm.atomic_cmpxchg64(Reg::FP, -8, Reg::R1);
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    load("st_feature", ProgType::RawTracepoint, AttachMode::PerfEvent, &code, &[]).is_ok()
}

/// Whether an fentry program on `target` may call `helper`: the verifier names a helper it does not
/// know, or does not allow there, as [`helper_refused`] reads it; any other rejection
/// (of the meaningless arguments) means it got past that.
fn tracing_calls(target: &str, helper: Helper) -> io::Result<bool> {
    match tracing_loads(target, libbpf_sys::BPF_TRACE_FENTRY, Some(helper)) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Loads (and closes) a trivial tracing program attached by BTF to the kernel's `target` (a function
/// for fentry, `btf_trace_NAME` for tp_btf), calling `helper` with zero arguments if given: whether
/// such probes can be had here, and why not. A helper the verifier does not know or allow fails with
/// EINVAL; one whose zero arguments it refuses, with EACCES.
fn tracing_loads(
    target: &str,
    attach_type: libbpf_sys::bpf_attach_type,
    helper: Option<Helper>,
) -> io::Result<()> {
    let id = vmlinux_btf_id(target, attach_type)?;
    let mut asm = Asm::new();
    if let Some(helper) = helper {
        for reg in [Reg::R1, Reg::R2, Reg::R3] {
            asm.mov64_imm(reg, 0);
        }
        asm.call(helper.id());
    }
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let code = asm.finish().map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut log = vec![0u8; 4096];
    let (token_fd, token_flag) = crate::sys::token::fd_and_flag();
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        token_fd,
        prog_flags: token_flag,
        expected_attach_type: attach_type,
        attach_btf_id: id,
        log_level: u32::from(helper.is_some()),
        log_size: if helper.is_some() { log.len() as u32 } else { 0 },
        log_buf: if helper.is_some() { log.as_mut_ptr().cast() } else { std::ptr::null_mut() },
        ..Default::default()
    };
    // SAFETY: every pointer handed over (the name, the code, the log) stays valid for the call.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_TRACING,
            c"probe".as_ptr(),
            c"GPL".as_ptr(),
            code.insns.as_ptr().cast(),
            code.insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        // The verifier wrote why it refused: the helper, or only the arguments.
        let text =
            String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
        if helper.is_some() && !text.is_empty() {
            let errno = if helper_refused(&text) { libc::EINVAL } else { libc::EACCES };
            return Err(io::Error::from_raw_os_error(errno));
        }
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new file descriptor that we own; dropping it closes it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_feature_has_its_two_bits_of_answers() {
        assert!(Feature::ALL.len() <= 32, "two bits a feature in a u64");
    }

    #[test]
    fn a_given_table_answers_without_probing_and_absence_wins() {
        let features =
            Features::assuming_absent(vec![Feature::BpfLoop]).given(&[Feature::BpfLoop, Feature::Fentry]);
        assert!(features.has(Feature::Fentry));
        assert!(!features.has(Feature::BpfLoop));
        assert!(!features.has(Feature::RingBuffer));
    }
}
