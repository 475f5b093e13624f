//! The seccomp filter of the container tests: `perf_event_open` fails with EPERM, as a container's
//! profile can make it fail; every other call is allowed. A classic BPF program built by hand.

// Classic BPF opcodes and seccomp constants (linux/filter.h, linux/seccomp.h, linux/audit.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
/// `struct seccomp_data`: the call's number, then the architecture.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Sets no_new_privs and installs the filter on this process; it is inherited across fork and exec.
pub fn deny_perf_event_open() -> std::io::Result<()> {
    let arch = if cfg!(target_arch = "aarch64") { AUDIT_ARCH_AARCH64 } else { AUDIT_ARCH_X86_64 };
    let filter = [
        insn(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
        insn(BPF_JEQ_K, 1, 0, arch),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        insn(BPF_LD_W_ABS, 0, 0, NR_OFFSET),
        insn(BPF_JEQ_K, 0, 1, libc::SYS_perf_event_open as u32),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    // SAFETY: plain prctl calls; `program` and `filter` outlive the call that reads them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &program as *const _) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
