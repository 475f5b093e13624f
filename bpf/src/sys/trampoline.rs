//! fentry and fexit: a program on a BPF trampoline at a kernel function's entry or exit, the function
//! named at load time by its BTF id ([`AttachMode::Trampoline`]).

use crate::code::insn::{Asm, Reg};
use crate::code::prog::{AttachMode, ProgType, TrampolineTarget};
use crate::sys::link;
use crate::sys::prog::load;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Attaches `prog`, loaded with [`AttachMode::Trampoline`], to the function it was loaded for.
/// Closing the link detaches it.
pub fn attach(prog: BorrowedFd<'_>, exit: bool) -> io::Result<OwnedFd> {
    let attach_type = if exit { libbpf_sys::BPF_TRACE_FEXIT } else { libbpf_sys::BPF_TRACE_FENTRY };
    link::create(prog, attach_type, &link::options())
}

/// Whether this kernel runs fentry programs on the function with BTF id `btf_id`: the kernel's own answer,
/// from loading a program that does nothing and attaching it for a moment. Some kernels refuse to load
/// them with EPERM even to root; arm64 before 6.4 loads them and refuses to attach (ENOTSUPP), as its
/// trampolines cannot reach kernel functions without ftrace's direct calls.
pub fn supported(btf_id: u32) -> io::Result<()> {
    let mut asm = Asm::new();
    asm.mov64_imm(Reg::R0, 0);
    asm.exit();
    let code = asm.finish().map_err(|e| io::Error::other(format!("{e:?}")))?;
    let mode = AttachMode::Trampoline { btf_id, exit: false, target: TrampolineTarget::Kernel };
    let program = load("st_feature", ProgType::Tracing, mode, &code, &[]).map_err(|e| e.error)?;
    match attach(program.as_fd(), false) {
        Ok(_link) => Ok(()),
        Err(e) if e.raw_os_error() == Some(crate::sys::uprobe::ENOTSUPP) => {
            Err(io::Error::other("attaching fails with ENOTSUPP, errno 524"))
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("attaching fails: {e}"))),
    }
}
