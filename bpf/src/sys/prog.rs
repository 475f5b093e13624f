//! Loading programs into the kernel, with the verifier's log when it says no (`code/prog.rs` reads it).

use crate::code::insn::{Asm, Code, Insn, Reg};
use crate::code::prog::{reason, rejected_insn, AttachMode, ProgType, TrampolineTarget, NO_REASON};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A loaded program.
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Runs the program once, now, in this thread (`BPF_PROG_TEST_RUN`), with a zeroed context of
    /// `ctx_size` bytes; returns the program's return value. Raw tracepoint programs can be run
    /// this way since Linux 5.10: no attachment and no detach to wait for.
    pub fn run(&self, ctx_size: usize) -> io::Result<u32> {
        self.run_with_context(&vec![0u8; ctx_size])
    }

    /// Runs the program once, now, with `ctx` as its context (a raw tracepoint's arguments); allocates
    /// nothing.
    pub fn run_with_context(&self, ctx: &[u8]) -> io::Result<u32> {
        self.test_run(libbpf_sys::bpf_test_run_opts {
            ctx_in: ctx.as_ptr().cast(),
            ctx_size_in: ctx.len() as u32,
            ..Default::default()
        })
    }

    /// Runs a packet program once, now, on `packet` (at least an Ethernet header, 14 bytes).
    pub fn run_on_packet(&self, packet: &[u8]) -> io::Result<u32> {
        self.test_run(libbpf_sys::bpf_test_run_opts {
            data_in: packet.as_ptr().cast(),
            data_size_in: packet.len() as u32,
            ..Default::default()
        })
    }

    fn test_run(&self, mut opts: libbpf_sys::bpf_test_run_opts) -> io::Result<u32> {
        opts.sz = std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _;
        // SAFETY: opts and the buffers it points to (borrowed by the callers) outlive the call.
        let ret = unsafe { libbpf_sys::bpf_prog_test_run_opts(self.fd.as_raw_fd(), &mut opts) };
        if ret < 0 {
            return Err(io::Error::from_raw_os_error(-ret));
        }
        Ok(opts.retval)
    }
}

/// Whether this kernel runs raw tracepoint programs on request (`BPF_PROG_TEST_RUN`, Linux 5.10).
pub(crate) fn run_on_request_supported() -> bool {
    let mut asm = Asm::new();
    asm.mov64_imm(Reg::R0, 7);
    asm.exit();
    let Ok(code) = asm.finish() else { return false };
    match load("st_feature", ProgType::RawTracepoint, AttachMode::PerfEvent, &code, &[]) {
        Ok(prog) => matches!(prog.run(8), Ok(7)),
        Err(_) => false,
    }
}

impl AsFd for Program {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The kernel refused a program.
#[derive(Debug)]
pub struct LoadError {
    pub error: io::Error,
    /// The verifier's whole log.
    pub log: String,
    /// The instruction the verifier was looking at when it gave up.
    pub insn: Option<usize>,
    /// The verifier's own words for the rejection.
    pub reason: String,
}

const LOG_SIZE: usize = 4 << 20;

/// Loads `code`, patching map relocations with `maps` (indexed as in the relocations). The first try
/// runs without a log (cheaper); a rejected program is loaded again with the log on to explain why.
pub fn load(
    name: &str,
    prog_type: ProgType,
    attach: AttachMode,
    code: &Code,
    maps: &[BorrowedFd<'_>],
) -> Result<Program, LoadError> {
    load_as(name, None, prog_type, attach, code, maps)
}

/// [`load`], with function information naming the program's main function `function` whatever its callbacks,
/// so that `fentry:bpf:FUNCTION` can trace it (trampolines attach only to programs with BTF). Where the
/// kernel takes no function information without callbacks, the program loads without.
pub fn load_named(
    name: &str,
    function: &str,
    prog_type: ProgType,
    attach: AttachMode,
    code: &Code,
    maps: &[BorrowedFd<'_>],
) -> Result<Program, LoadError> {
    match load_as(name, Some(function), prog_type, attach, code, maps) {
        Err(_) if code.subprograms.is_empty() => load_as(name, None, prog_type, attach, code, maps),
        loaded => loaded,
    }
}

fn load_as(
    name: &str,
    function: Option<&str>,
    prog_type: ProgType,
    attach: AttachMode,
    code: &Code,
    maps: &[BorrowedFd<'_>],
) -> Result<Program, LoadError> {
    let mut insns = code.insns.clone();
    for reloc in &code.map_relocs {
        insns[reloc.insn].imm = maps[reloc.map].as_raw_fd();
    }
    let funcs = match (function, code.subprograms.is_empty()) {
        (None, true) => None,
        (function, _) => {
            Some(crate::sys::btf::FuncInfo::load(function.unwrap_or("main"), &code.subprograms).map_err(
                |error| LoadError {
                    reason: format!("cannot load the BTF describing the program's functions: {error}"),
                    error,
                    log: String::new(),
                    insn: None,
                },
            )?)
        }
    };
    let parts = Parts { insns: &insns, funcs: funcs.as_ref() };
    match try_load(name, prog_type, attach, &parts, None) {
        Ok(fd) => Ok(Program { fd }),
        Err(error) => {
            let mut log = vec![0u8; LOG_SIZE];
            let _ = try_load(name, prog_type, attach, &parts, Some(&mut log));
            let len = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..len]).into_owned();
            let mut reason = reason(&log);
            if error.raw_os_error() == Some(libc::E2BIG) && reason == NO_REASON {
                reason =
                    "the program is larger than the kernel accepts (at most 1,000,000 instructions)".into();
            }
            let insn = rejected_insn(&reason, &log);
            Err(LoadError { error, insn, reason, log })
        }
    }
}

/// What a program is made of: its instructions and, with callbacks, the function information.
struct Parts<'a> {
    insns: &'a [Insn],
    funcs: Option<&'a crate::sys::btf::FuncInfo>,
}

fn try_load(
    name: &str,
    prog_type: ProgType,
    attach: AttachMode,
    parts: &Parts<'_>,
    log: Option<&mut Vec<u8>>,
) -> Result<OwnedFd, io::Error> {
    let insns = parts.insns;
    let kind = match prog_type {
        ProgType::Kprobe => libbpf_sys::BPF_PROG_TYPE_KPROBE,
        ProgType::Tracepoint => libbpf_sys::BPF_PROG_TYPE_TRACEPOINT,
        ProgType::PerfEvent => libbpf_sys::BPF_PROG_TYPE_PERF_EVENT,
        ProgType::RawTracepoint => libbpf_sys::BPF_PROG_TYPE_RAW_TRACEPOINT,
        ProgType::Tracing => libbpf_sys::BPF_PROG_TYPE_TRACING,
        ProgType::SchedCls => libbpf_sys::BPF_PROG_TYPE_SCHED_CLS,
    };
    let (token_fd, token_flag) = crate::sys::token::fd_and_flag();
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        token_fd,
        prog_flags: token_flag,
        expected_attach_type: match attach {
            AttachMode::UprobeMulti => libbpf_sys::BPF_TRACE_UPROBE_MULTI,
            AttachMode::KprobeMulti => libbpf_sys::BPF_TRACE_KPROBE_MULTI,
            AttachMode::KprobeSession => libbpf_sys::BPF_TRACE_KPROBE_SESSION,
            AttachMode::Trampoline { exit: false, .. } => libbpf_sys::BPF_TRACE_FENTRY,
            AttachMode::Trampoline { exit: true, .. } => libbpf_sys::BPF_TRACE_FEXIT,
            AttachMode::Iterator { .. } => libbpf_sys::BPF_TRACE_ITER,
            AttachMode::PerfEvent => 0,
        },
        ..Default::default()
    };
    if let AttachMode::Trampoline { btf_id, .. } | AttachMode::Iterator { btf_id } = attach {
        opts.attach_btf_id = btf_id;
    }
    // Held open until the program is loaded.
    let target = match attach {
        AttachMode::Trampoline { target: TrampolineTarget::Module(module), .. } => {
            Some(crate::sys::btf::kernel_module_btf(module)?)
        }
        AttachMode::Trampoline { target: TrampolineTarget::Program(id), .. } => Some(program_by_id(id)?),
        _ => None,
    };
    match (attach, &target) {
        (AttachMode::Trampoline { target: TrampolineTarget::Module(_), .. }, Some(btf)) => {
            opts.attach_btf_obj_fd = btf.as_raw_fd() as u32
        }
        (AttachMode::Trampoline { target: TrampolineTarget::Program(_), .. }, Some(program)) => {
            opts.attach_prog_fd = program.as_raw_fd() as u32
        }
        _ => {}
    }
    if let Some(funcs) = parts.funcs {
        opts.prog_btf_fd = funcs.btf.as_raw_fd() as u32;
        opts.func_info = funcs.records.as_ptr().cast();
        opts.func_info_cnt = funcs.records.len() as u32;
        opts.func_info_rec_size = std::mem::size_of::<libbpf_sys::bpf_func_info>() as u32;
    }
    if let Some(log) = log {
        opts.log_level = 1;
        opts.log_size = log.len() as u32;
        opts.log_buf = log.as_mut_ptr().cast();
    }
    let name: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(15).collect();
    let name = CString::new(name).expect("filtered name has no NUL");
    let license = c"GPL";
    // SAFETY: every pointer handed over stays valid for the duration of the call.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            kind,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new file descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The loaded program with id `id`, opened.
fn program_by_id(id: u32) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call; a non-negative return is a new fd that we own.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A function of a loaded BPF program that a trampoline can be put on: the program itself or one of its
/// callbacks, as its BTF names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedFunction {
    pub program_id: u32,
    pub name: String,
    /// The function's id in the program's BTF.
    pub btf_id: u32,
}

/// The functions of every loaded BPF program that has BTF function information (programs without it cannot
/// be traced by trampolines). Programs that go away meanwhile are left out.
pub fn loaded_functions() -> io::Result<Vec<LoadedFunction>> {
    let mut found = vec![];
    let mut id = 0u32;
    // SAFETY: `id` is a valid place for the next id.
    while unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut id) } == 0 {
        let Ok(program) = program_by_id(id) else { continue };
        let Ok(records) = func_info_of(&program) else { continue };
        if records.is_empty() {
            continue;
        }
        let Ok(btf) = libbpf_rs::btf::Btf::from_prog_id(id) else { continue };
        for record in records {
            let Some(function) = btf.type_by_id::<libbpf_rs::btf::types::Func<'_>>(record.type_id.into())
            else {
                continue;
            };
            let name = function.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            found.push(LoadedFunction { program_id: id, name, btf_id: record.type_id });
        }
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ENOENT) => Ok(found),
        _ if !found.is_empty() => Ok(found),
        _ => Err(error),
    }
}

/// The function information records of `program`.
fn func_info_of(program: &OwnedFd) -> io::Result<Vec<libbpf_sys::bpf_func_info>> {
    let info_len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = info_len;
    // SAFETY: `info` outlives the call, its size given.
    if unsafe { libbpf_sys::bpf_prog_get_info_by_fd(program.as_raw_fd(), &mut info, &mut len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let record_size = std::mem::size_of::<libbpf_sys::bpf_func_info>() as u32;
    let count = info.nr_func_info as usize;
    if count == 0 || info.func_info_rec_size != record_size {
        return Ok(vec![]);
    }
    let mut records = vec![libbpf_sys::bpf_func_info::default(); count];
    let mut info = libbpf_sys::bpf_prog_info {
        nr_func_info: count as u32,
        func_info_rec_size: record_size,
        func_info: records.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = info_len;
    // SAFETY: `info` and the records it points to outlive the call, their sizes given.
    if unsafe { libbpf_sys::bpf_prog_get_info_by_fd(program.as_raw_fd(), &mut info, &mut len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    records.truncate(info.nr_func_info as usize);
    Ok(records)
}
