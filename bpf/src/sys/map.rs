//! BPF maps: created from a plain description (`code/map.rs`), owned by their file descriptor.

use crate::code::map::{MapKind, MapSpec};
use libbpf_rs::{MapCore, MapHandle, MapType};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// A map the kernel has created.
pub struct Map {
    handle: MapHandle,
}

impl Map {
    /// Another handle on the same kernel map (a duplicated descriptor), for another thread to read.
    pub fn try_clone(&self) -> io::Result<Map> {
        let handle = MapHandle::try_from(&self.handle).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Map { handle })
    }

    pub fn create(spec: &MapSpec) -> io::Result<Map> {
        Map::create_with_btf(spec, None)
    }

    /// Creates a map whose key and value the kernel knows by BTF type ids: needed for values holding
    /// special fields such as a `struct bpf_timer`.
    pub fn create_with_btf(spec: &MapSpec, btf: Option<&crate::sys::btf::TimerValue>) -> io::Result<Map> {
        let kind = match spec.kind {
            MapKind::Hash => MapType::Hash,
            MapKind::PercpuHash => MapType::PercpuHash,
            MapKind::LruHash => MapType::LruHash,
            MapKind::LruPercpuHash => MapType::LruPercpuHash,
            MapKind::Array => MapType::Array,
            MapKind::PercpuArray => MapType::PercpuArray,
            MapKind::RingBuf => MapType::RingBuf,
            MapKind::ProgArray => MapType::ProgArray,
            MapKind::StackTrace => MapType::StackTrace,
            MapKind::PerfEventArray => MapType::PerfEventArray,
        };
        let (token_fd, token_flag) = crate::sys::token::fd_and_flag();
        let mut opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            token_fd,
            map_flags: token_flag,
            ..Default::default()
        };
        if let Some(btf) = btf {
            opts.btf_fd = btf.btf.as_raw_fd() as u32;
            opts.btf_key_type_id = btf.key_type;
            opts.btf_value_type_id = btf.value_type;
        }
        // The kernel keeps at most 15 characters of a map name, from [A-Za-z0-9_.].
        let name: String =
            spec.name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(15).collect();
        MapHandle::create(kind, Some(name), spec.key_size, spec.value_size, spec.max_entries, &opts)
            .map(|handle| Map { handle })
            .map_err(to_io)
    }

    /// Every key in the map (a snapshot: entries added meanwhile may be missed).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        self.handle.keys().collect()
    }

    /// The value under `key`, if present.
    pub fn lookup(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.handle.lookup(key, libbpf_rs::MapFlags::ANY).map_err(to_io)
    }

    pub fn delete(&self, key: &[u8]) -> io::Result<()> {
        self.handle.delete(key).map_err(to_io)
    }

    /// Sets every CPU's value under `key` of a per-CPU map.
    pub fn update_percpu(&self, key: &[u8], values: &[Vec<u8>]) -> io::Result<()> {
        self.handle.update_percpu(key, values, libbpf_rs::MapFlags::ANY).map_err(to_io)
    }

    /// Sets `key` to `value`.
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.handle.update(key, value, libbpf_rs::MapFlags::ANY).map_err(to_io)
    }

    /// Every CPU's value under `key` in a per-CPU map (empty when the key is absent).
    pub fn percpu_values(&self, key: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        self.handle.lookup_percpu(key, libbpf_rs::MapFlags::ANY).map(Option::unwrap_or_default).map_err(to_io)
    }

    /// The libbpf handle, for lookups, updates and iteration.
    pub fn handle(&self) -> &MapHandle {
        &self.handle
    }
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.handle.as_fd()
    }
}

/// libbpf's error as an I/O error of the same kind (a missing privilege stays recognisable).
fn to_io(error: libbpf_rs::Error) -> io::Error {
    let kind = match error.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => io::ErrorKind::PermissionDenied,
        libbpf_rs::ErrorKind::NotFound => io::ErrorKind::NotFound,
        libbpf_rs::ErrorKind::InvalidInput => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, error.to_string())
}
