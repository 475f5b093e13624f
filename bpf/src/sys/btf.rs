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
    pub fn load(subprograms: &[usize]) -> io::Result<FuncInfo> {
        let btf = load_blob(&func_info_blob(subprograms))?;
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
