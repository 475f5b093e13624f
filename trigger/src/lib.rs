//! The functions that steadytrace's BEGIN, END and interval probes hang on.
//!
//! steadytrace never asks the kernel for a timer or a CPU-bound event to run these probes. Instead the
//! tracer calls one of the functions below from userspace, and a uprobe on that function runs the BPF
//! programs. A plain function call cannot be lost to CPU hotplug and needs no `perf_event_open`.
//!
//! This crate is not for anything else: it has no knowledge of BPF or of the language.

use std::fs;
use std::hint::black_box;
use std::io;
use std::path::PathBuf;

/// Runs the `BEGIN` probes of this process's tracer.
#[no_mangle]
#[inline(never)]
pub extern "C" fn steadytrace_begin_trigger() {
    // Distinct bodies keep the linker from folding the triggers into one address.
    black_box(1u64);
}

/// Runs the `END` probes of this process's tracer.
#[no_mangle]
#[inline(never)]
pub extern "C" fn steadytrace_end_trigger() {
    black_box(2u64);
}

/// Runs the interval probe numbered `probe_index`; every interval program checks the argument
/// (the first argument register) against its own index.
#[no_mangle]
#[inline(never)]
pub extern "C" fn steadytrace_interval_trigger(probe_index: u64) {
    black_box(probe_index);
}

/// One of the trigger functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Begin,
    End,
    Interval,
}

impl Trigger {
    /// Calls the trigger: every uprobe attached to it fires synchronously, in this thread.
    pub fn fire(self, probe_index: u64) {
        match self {
            Trigger::Begin => steadytrace_begin_trigger(),
            Trigger::End => steadytrace_end_trigger(),
            Trigger::Interval => steadytrace_interval_trigger(probe_index),
        }
    }

    fn address(self) -> u64 {
        match self {
            Trigger::Begin => steadytrace_begin_trigger as extern "C" fn() as usize as u64,
            Trigger::End => steadytrace_end_trigger as extern "C" fn() as usize as u64,
            Trigger::Interval => steadytrace_interval_trigger as extern "C" fn(u64) as usize as u64,
        }
    }

    /// Where a uprobe must be placed to catch calls of this trigger.
    pub fn location(self) -> io::Result<Location> {
        let maps = fs::read_to_string("/proc/self/maps")?;
        locate(&maps, self.address()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "the trigger function is in no file-backed mapping of /proc/self/maps",
            )
        })
    }
}

/// A file and an offset in it: what a uprobe is attached to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub offset: u64,
}

/// Maps a code address to a file offset through the text of `/proc/PID/maps`. This works on stripped
/// binaries and position-independent executables alike, where a symbol's value is not its file offset.
fn locate(maps: &str, address: u64) -> Option<Location> {
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
        let _perms = fields.next()?;
        let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
        let path = fields.nth(2)?;
        if !(start..end).contains(&address) || !path.starts_with('/') {
            return None;
        }
        // A binary replaced on disk while running shows as "(deleted)"; the kernel still reaches its
        // inode through /proc/self/exe.
        let path = if line.ends_with(" (deleted)") { "/proc/self/exe" } else { path };
        Some(Location { path: PathBuf::from(path), offset: address - start + offset })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a4a000 r--p 00000000 fd:01 1311 /usr/bin/steadytrace
55d0c0a4a000-55d0c0c61000 r-xp 0004a000 fd:01 1311 /usr/bin/steadytrace
7ffd6b6f1000-7ffd6b712000 rw-p 00000000 00:00 0 [stack]
";

    #[test]
    fn maps_an_address_to_its_file_offset() {
        let location = locate(MAPS, 0x55d0c0a4a000 + 0x1234).unwrap();
        assert_eq!(location.path, PathBuf::from("/usr/bin/steadytrace"));
        assert_eq!(location.offset, 0x4a000 + 0x1234);
    }

    #[test]
    fn ignores_anonymous_mappings() {
        assert_eq!(locate(MAPS, 0x7ffd6b6f1010), None);
    }

    #[test]
    fn finds_this_process_triggers_at_distinct_offsets() {
        let offsets: Vec<u64> = [Trigger::Begin, Trigger::End, Trigger::Interval]
            .iter()
            .map(|t| t.location().unwrap().offset)
            .collect();
        assert_ne!(offsets[0], offsets[1]);
        assert_ne!(offsets[1], offsets[2]);
    }
}
