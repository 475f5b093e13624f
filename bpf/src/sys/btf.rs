//! Loading the BTF written by `code/btf.rs` into the kernel: the function information of a program with
//! callbacks, and the BTF of a map value holding a `struct bpf_timer`.

use crate::code::btf::{func_info_blob, func_info_records, TimerValueBtf};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Function information for a program whose subprograms start at `starts` (the main program at 0
/// comes first); the BTF it refers to, loaded, and one `bpf_func_info` per function.
pub struct FuncInfo {
    pub btf: OwnedFd,
    pub records: Vec<libbpf_sys::bpf_func_info>,
}

impl FuncInfo {
    pub fn load(main: &str, subprograms: &[usize]) -> io::Result<FuncInfo> {
        let btf = load_blob(&func_info_blob(main, subprograms))?;
        let records = func_info_records(subprograms)
            .map(|(insn_off, type_id)| libbpf_sys::bpf_func_info { insn_off, type_id })
            .collect();
        Ok(FuncInfo { btf, records })
    }
}

/// The BTF of an array map whose value is `struct { struct bpf_timer timer; u64 fields[n]; }`, loaded.
pub struct TimerValue {
    pub btf: OwnedFd,
    /// The type ids to create the map with.
    pub key_type: u32,
    pub value_type: u32,
    /// The offset of each u64 field in the value (the timer is at 0).
    pub offsets: Vec<usize>,
}

impl TimerValue {
    pub fn load(fields: usize) -> io::Result<TimerValue> {
        let TimerValueBtf { blob, key_type, value_type, offsets } = TimerValueBtf::new(fields);
        Ok(TimerValue { btf: load_blob(&blob)?, key_type, value_type, offsets })
    }
}

fn load_blob(blob: &[u8]) -> io::Result<OwnedFd> {
    let (token_fd, token_flag) = crate::sys::token::fd_and_flag();
    let mut opts = libbpf_sys::bpf_btf_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_btf_load_opts>() as _,
        token_fd,
        btf_flags: token_flag,
        ..Default::default()
    };
    // SAFETY: the blob and options outlive the call.
    let fd = unsafe { libbpf_sys::bpf_btf_load(blob.as_ptr().cast(), blob.len() as _, &mut opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new file descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel's BTF object of module `name` (loaded kernel modules each have one, `/sys/kernel/btf/NAME`),
/// opened: what a trampoline on one of the module's functions is loaded against.
pub fn kernel_module_btf(name: &str) -> io::Result<OwnedFd> {
    let mut id = 0u32;
    loop {
        // SAFETY: `id` is a valid place for the next id.
        if unsafe { libbpf_sys::bpf_btf_get_next_id(id, &mut id) } < 0 {
            let error = io::Error::last_os_error();
            return Err(match error.raw_os_error() {
                Some(libc::ENOENT) => {
                    io::Error::new(io::ErrorKind::NotFound, format!("module `{name}` has no BTF"))
                }
                _ => error,
            });
        }
        // SAFETY: a plain system call; a non-negative return is a new fd that we own.
        let fd = unsafe { libbpf_sys::bpf_btf_get_fd_by_id(id) };
        if fd < 0 {
            continue; // gone meanwhile
        }
        // SAFETY: see above.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut text = [0u8; 64];
        let mut info = libbpf_sys::bpf_btf_info {
            name: text.as_mut_ptr() as u64,
            name_len: text.len() as u32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<libbpf_sys::bpf_btf_info>() as u32;
        // SAFETY: `info` and the name buffer it points to outlive the call, their sizes given.
        if unsafe {
            libbpf_sys::bpf_btf_get_info_by_fd(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut info, &mut len)
        } < 0
        {
            continue;
        }
        let found = std::ffi::CStr::from_bytes_until_nul(&text).map(|c| c.to_bytes()).unwrap_or_default();
        if info.kernel_btf != 0 && found == name.as_bytes() {
            return Ok(fd);
        }
    }
}
