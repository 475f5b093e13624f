//! The function that steadytrace's BEGIN, END and interval probes hang on.
//!
//! steadytrace never asks the kernel for a timer or a CPU-bound event to run these probes. Instead the
//! tracer calls [`fire`] from userspace; one uprobe on the trigger function runs a dispatcher program
//! that tail-calls the probe's own program. A plain function call cannot be lost to CPU hotplug and
//! needs no `perf_event_open`.
//!
//! This crate is not for anything else: it has no knowledge of BPF or of the language.

use std::fs;
use std::hint::black_box;
use std::io;
use std::path::PathBuf;

/// Runs the probe program in slot `slot` of this process's tracer: the uprobe's dispatcher reads the
/// first argument register.
#[no_mangle]
#[inline(never)]
pub extern "C" fn steadytrace_trigger(slot: u64) {
    // Keeps the argument, and so the call, from being optimised away.
    black_box(slot);
}

/// Calls the trigger: the probe in `slot` runs synchronously, in this thread, before this returns.
pub fn fire(slot: u64) {
    steadytrace_trigger(slot);
}

/// Where a uprobe must be placed to catch calls of the trigger.
pub fn location() -> io::Result<Location> {
    let maps = fs::read_to_string("/proc/self/maps")?;
    let address = steadytrace_trigger as extern "C" fn(u64) as usize as u64;
    locate(&maps, address).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "the trigger function is in no file-backed mapping of /proc/self/maps",
        )
    })
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
        // The path is the rest of the line after the device and inode fields, spaces and all.
        let _device = fields.next()?;
        let _inode = fields.next()?;
        let path = fields.collect::<Vec<_>>().join(" ");
        // A binary replaced on disk while running shows as "(deleted)"; the kernel still reaches its
        // inode through /proc/self/exe.
        let path = path.strip_suffix(" (deleted)").map(|_| "/proc/self/exe").unwrap_or(&path);
        if !(start..end).contains(&address) || !path.starts_with('/') {
            return None;
        }
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
    fn keeps_paths_with_spaces() {
        let maps = "1000-2000 r-xp 00000000 fd:01 7 /opt/my tools/steadytrace\n";
        assert_eq!(locate(maps, 0x1800).unwrap().path, PathBuf::from("/opt/my tools/steadytrace"));
    }

    #[test]
    fn ignores_anonymous_mappings() {
        assert_eq!(locate(MAPS, 0x7ffd6b6f1010), None);
    }

    #[test]
    fn finds_the_trigger_of_this_process_in_an_executable_mapping() {
        let location = location().unwrap();
        let exe = fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(location.path, exe);
        assert!(location.offset > 0);
    }
}
