//! `dw_ustack`: user stacks unwound from the binaries' DWARF call frame information (`.eh_frame`, found
//! through `.eh_frame_hdr`; `.debug_frame` where a file has no `.eh_frame`), so that code built without frame
//! pointers (most distribution binaries, and libc) is walked through. The BPF program copies the registers
//! and the top of the stack (`codegen/user_stack_copy.rs`); this module unwinds the copy when its record
//! arrives, while the process most likely still lives, and keeps the return addresses under the copy's
//! handle until the stack is printed.
//!
//! ## Why framehop
//! Unwinding from CFI means parsing CIEs and FDEs, evaluating the CFA rules (including DWARF expressions,
//! as in glibc's signal trampolines and PLT entries), handling the first frame differently from return
//! addresses, detecting the end of the stack, and doing all of it fast enough for a profiler.
//! [framehop](https://github.com/mstange/framehop) is the unwinder of the samply profiler, written for exactly
//! this: registers and a copied stack in, return addresses out. It falls back to frame pointers where a
//! module has no unwind information, caches unwind rules per address, and builds on gimli, the Rust DWARF
//! parser. Built with `default-features = false, features = ["std"]`: no macOS or Windows formats.
//!
//! ## Where the mappings come from
//! A process's executable file mappings are read from `/proc/PID/maps` when its first copy arrives and again
//! when an address falls outside every known module (a library loaded later, an exec). A process that has
//! already exited is looked up in the journal of mappings ([`super::journal`]); a copy that neither knows
//! yet (the journal applies its records a drain late) is kept and unwound when the stack is printed.

use super::journal::Journal;
use super::DebugDirs;
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder as _};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

type Native = framehop::UnwinderNative<Arc<[u8]>, framehop::MayAllocateDuringUnwind>;
type Cache = framehop::CacheNative<framehop::MayAllocateDuringUnwind>;

/// The handle of a stack the program could not copy (the ring buffer was full); no handle made from the time is 0.
pub const NO_COPY: u64 = 0;
/// Processes whose module lists are kept; the least recently added is forgotten first.
const KEEP_PROCESSES: usize = 1024;
/// Copies kept for a second try at print time, when their process was in neither `/proc` nor the journal.
const KEEP_UNRESOLVED: usize = 256;
/// Tries (one a fold, every 100 ms) before a copy whose process is not found is unwound without its mappings.
const GIVE_UP_AFTER: u32 = 10;
/// How old a process's module list must be before a stack that went astray has it read again.
const REREAD_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// Unwound stacks kept by handle before the oldest are forgotten (about 50 bytes each, the frames shared): the
/// stacks of 18 minutes of `profile:hz:99` on 2 CPUs, for stacks kept as map values or printed late. Those
/// merged into the folded entries of a map are forgotten as soon as they are merged (see
/// `runtime/copied_stacks.rs`).
const KEEP_HANDLES: usize = 1 << 18;

/// One copied user stack, as the BPF program wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackCopy {
    pub handle: u64,
    pub pid: u32,
    pub ip: u64,
    pub sp: u64,
    pub fp: u64,
    /// The link register (arm64); 0 where there is none.
    pub lr: u64,
    /// The stack's bytes from `sp` up.
    pub stack: Vec<u8>,
    /// Frames kept at most.
    pub depth: u8,
}

/// An executable mapping: `[start, end)` maps the file from offset `pgoff` (no file: anonymous code, `[vdso]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    /// The file as the process mapped it.
    pub path: String,
    /// What tells the file apart from others of the same path (in other mount namespaces): its device and inode.
    pub identity: String,
    /// Where this process can open it, in order: `/proc/PID/map_files/…` (needs CAP_SYS_ADMIN) and the path
    /// in its root while it lives, else the path.
    pub open_as: Vec<String>,
}

/// The unwind sections of one file, shared by every process that maps it.
struct Sections {
    info: ExplicitModuleSectionInfo<Arc<[u8]>>,
    segments: Vec<Segment>,
}

/// A loadable segment of an ELF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    offset: u64,
    vaddr: u64,
    size: u64,
    executable: bool,
}

struct Process {
    unwinder: Native,
    /// The process's executable mappings, to tell whether an address is code.
    ranges: Vec<(u64, u64)>,
    read_at: std::time::Instant,
}

impl Process {
    fn knows(&self, addr: u64) -> bool {
        self.ranges.iter().any(|&(start, end)| start <= addr && addr < end)
    }
}

/// Unwinds copied stacks and keeps the results by handle.
pub struct Unwinder {
    processes: HashMap<u32, Process>,
    process_order: VecDeque<u32>,
    /// Parsed files by identity (a file none of a process's paths could open is tried again for the next).
    files: HashMap<String, Arc<Sections>>,
    cache: Cache,
    /// Each handle's process and return addresses (innermost first).
    unwound: HashMap<u64, (u32, Arc<[u64]>)>,
    handle_order: VecDeque<u64>,
    /// Equal stacks share one allocation, and the first handle that produced one stands for all of them.
    interned: HashMap<(u32, Arc<[u64]>), u64>,
    /// Copies whose process was found nowhere yet, with the tries made.
    unresolved: VecDeque<(StackCopy, u32)>,
    /// By CPU, the time of the newest copy taken (a handle is `time | cpu << 56`): a copy made before it has
    /// arrived, also when its stack has since been forgotten.
    newest: HashMap<u8, u64>,
    journal: Option<Journal>,
    /// Where separate debug files (for `.debug_frame`) are looked for (`--debuginfo`).
    debug_dirs: DebugDirs,
}

impl Default for Unwinder {
    fn default() -> Self {
        Unwinder::new()
    }
}

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder {
            processes: HashMap::new(),
            process_order: VecDeque::new(),
            files: HashMap::new(),
            cache: Cache::new(),
            unwound: HashMap::new(),
            handle_order: VecDeque::new(),
            interned: HashMap::new(),
            unresolved: VecDeque::new(),
            newest: HashMap::new(),
            journal: None,
            debug_dirs: DebugDirs::default(),
        }
    }

    /// Looks for separate debug files in `debug_dirs` (`--debuginfo`) before the default directory.
    pub fn use_debug_dirs(&mut self, debug_dirs: DebugDirs) {
        self.files.clear();
        self.debug_dirs = debug_dirs;
    }

    /// Also finds the mappings of processes that exited in `journal`.
    pub fn use_journal(&mut self, journal: Journal) {
        self.journal = Some(journal);
    }

    /// Unwinds `copy` now, or keeps it for a later try when its process's mappings are not known yet.
    pub fn take(&mut self, copy: StackCopy) {
        let (cpu, time) = handle_parts(copy.handle);
        let newest = self.newest.entry(cpu).or_default();
        *newest = (*newest).max(time);
        if !self.unwind_with(&copy, false) {
            if self.unresolved.len() == KEEP_UNRESOLVED {
                if let Some((oldest, _)) = self.unresolved.pop_front() {
                    self.unwind_with(&oldest, true);
                }
            }
            self.unresolved.push_back((copy, 1));
        }
    }

    /// Tries the copies not unwound yet again (the journal may know their process by now); one tried
    /// [`GIVE_UP_AFTER`] times is unwound with whatever is known.
    pub fn retry_unwinding(&mut self) {
        for _ in 0..self.unresolved.len() {
            let Some((copy, tries)) = self.unresolved.pop_front() else { break };
            if !self.unwind_with(&copy, tries >= GIVE_UP_AFTER) {
                self.unresolved.push_back((copy, tries + 1));
            }
        }
    }

    /// Forgets the stack under `handle`, unless it stands for other handles' stacks too.
    pub fn forget(&mut self, handle: u64) {
        if let Some(key) = self.unwound.get(&handle) {
            if self.interned.get(key) != Some(&handle) {
                self.unwound.remove(&handle);
            }
        }
    }

    /// Whether the stack under `handle` is unwound, or was never copied (the ring buffer was full: `NO_COPY`).
    pub fn is_unwound(&self, handle: u64) -> bool {
        handle == NO_COPY || self.unwound.contains_key(&handle)
    }

    /// Whether the copy under `handle` has come from the ring buffer (or was never made: `NO_COPY`).
    pub fn has_arrived(&self, handle: u64) -> bool {
        let (cpu, time) = handle_parts(handle);
        self.is_unwound(handle)
            || self.newest.get(&cpu).is_some_and(|&newest| time <= newest)
            || self.unresolved.iter().any(|(copy, _)| copy.handle == handle)
    }

    /// The process and return addresses of the stack copied under `handle` (`None` when it was not copied,
    /// as when the ring buffer was full). A copy still waiting is unwound now with whatever is known.
    pub fn frames(&mut self, handle: u64) -> Option<(u32, Arc<[u64]>)> {
        if !self.unwound.contains_key(&handle) {
            if let Some(at) = self.unresolved.iter().position(|(c, _)| c.handle == handle) {
                let (copy, _) = self.unresolved.remove(at).expect("just found");
                self.unwind_with(&copy, true);
            }
        }
        self.unwound.get(&handle).cloned()
    }

    /// The handle standing for every stack equal to `handle`'s (the same process, the same addresses).
    pub fn canonical(&mut self, handle: u64) -> u64 {
        match self.frames(handle) {
            Some(key) => self.interned.get(&key).copied().unwrap_or(handle),
            None => handle,
        }
    }

    /// Unwinds and keeps the result; false when the process's mappings are not to be found yet (on the last
    /// try, frame pointers are followed where nothing is known).
    fn unwind_with(&mut self, copy: &StackCopy, last_try: bool) -> bool {
        let stale = self.processes.get(&copy.pid).is_none_or(|p| !p.knows(copy.ip));
        if stale && !self.refresh(copy) {
            if !last_try {
                return false;
            }
            let frames = unwind_frames(&Native::new(), &mut self.cache, copy);
            self.keep(copy, frames);
            return true;
        }
        let (mut frames, astray) = self.unwind_known(copy);
        // A return address outside the modules known may be in a library loaded since they were read (read
        // again at most once a second: code whose unwind information framehop cannot follow goes astray too).
        let read_at = self.processes.get(&copy.pid).map(|p| p.read_at);
        let old = read_at.is_some_and(|at| at.elapsed() >= REREAD_AFTER);
        if astray && !stale && old && self.refresh(copy) {
            frames = self.unwind_known(copy).0;
        }
        self.keep(copy, frames);
        true
    }

    /// Unwinds `copy` with its process's modules, ending the stack before a return address that is no code
    /// (true when one ended it).
    fn unwind_known(&mut self, copy: &StackCopy) -> (Vec<u64>, bool) {
        let process = self.processes.get(&copy.pid).expect("known process");
        let mut frames = unwind_frames(&process.unwinder, &mut self.cache, copy);
        // A return address in no executable mapping is not one: the unwinder went astray (code whose unwind
        // information it could not follow, or a stack overwritten meanwhile). The stack ends before it rather
        // than show made-up frames.
        let astray = frames.iter().skip(1).position(|&addr| !process.knows(addr));
        if let Some(at) = astray {
            frames.truncate(at + 1);
        }
        (frames, astray.is_some())
    }

    /// Reads the modules of `copy`'s process anew; false when its mappings are not to be found.
    fn refresh(&mut self, copy: &StackCopy) -> bool {
        let pid = copy.pid;
        let Some(mappings) = self.mappings_of(copy) else { return false };
        let process = self.process_from(&mappings);
        if self.processes.insert(pid, process).is_none() {
            self.process_order.push_back(pid);
            if self.process_order.len() > KEEP_PROCESSES {
                if let Some(oldest) = self.process_order.pop_front() {
                    self.processes.remove(&oldest);
                }
            }
        }
        true
    }

    fn keep(&mut self, copy: &StackCopy, frames: Vec<u64>) {
        let frames: Arc<[u64]> = frames.into();
        let key = (copy.pid, frames);
        let frames = match self.interned.get_key_value(&key) {
            Some(((_, shared), _)) => Arc::clone(shared),
            None => {
                self.interned.insert(key.clone(), copy.handle);
                key.1
            }
        };
        self.unwound.insert(copy.handle, (copy.pid, frames));
        self.handle_order.push_back(copy.handle);
        while self.handle_order.len() > KEEP_HANDLES {
            let Some(oldest) = self.handle_order.pop_front() else { break };
            // A handle standing for its stack is kept: folded map keys hold it (distinct stacks are far
            // fewer than samples).
            self.forget(oldest);
        }
    }

    /// The executable mappings of `copy`'s process: from `/proc` while it lives, else (its files only) from the
    /// journal, caught up first where it cannot place the copy's instruction pointer.
    fn mappings_of(&self, copy: &StackCopy) -> Option<Vec<FileMapping>> {
        let pid = copy.pid;
        // A process that exited but was not reaped yet has an empty map.
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            let mappings = parse_proc_maps(pid, &text);
            if !mappings.is_empty() {
                return Some(mappings);
            }
        }
        let taken_at = handle_parts(copy.handle).1;
        let journal = self.journal.as_ref()?.placing(pid, &[copy.ip], taken_at);
        let mappings = journal.mappings(pid)?;
        Some(
            mappings
                .iter()
                .map(|m| FileMapping {
                    start: m.start,
                    end: m.end,
                    pgoff: m.pgoff,
                    path: m.path.clone(),
                    identity: m.path.clone(),
                    open_as: vec![m.path.clone()],
                })
                .collect(),
        )
    }

    fn process_from(&mut self, mappings: &[FileMapping]) -> Process {
        let mut unwinder = Native::new();
        let mut ranges = vec![];
        for mapping in mappings {
            // Code, whether or not its unwind information can be read (anonymous code has none).
            ranges.push((mapping.start, mapping.end));
            if !mapping.path.starts_with('/') {
                continue;
            }
            let sections = match self.files.get(&mapping.identity) {
                Some(sections) => Arc::clone(sections),
                None => {
                    let Some(read) =
                        mapping.open_as.iter().find_map(|path| read_sections(path, &self.debug_dirs))
                    else {
                        continue;
                    };
                    let read = Arc::new(read);
                    self.files.insert(mapping.identity.clone(), Arc::clone(&read));
                    read
                }
            };
            let Some(bias) = load_bias(&sections.segments, mapping) else { continue };
            unwinder.add_module(Module::new(
                mapping.path.clone(),
                mapping.start..mapping.end,
                bias,
                sections.info.clone(),
            ));
        }
        Process { unwinder, ranges, read_at: std::time::Instant::now() }
    }
}

/// The CPU and the time a handle was made on (see `codegen/user_stack_copy.rs`).
fn handle_parts(handle: u64) -> (u8, u64) {
    ((handle >> 56) as u8, handle & ((1 << 56) - 1))
}

/// Return addresses of `copy`, innermost first, the instruction pointer first of all.
fn unwind_frames(unwinder: &Native, cache: &mut Cache, copy: &StackCopy) -> Vec<u64> {
    if copy.ip == 0 {
        return vec![];
    }
    let (sp, stack) = (copy.sp, &copy.stack);
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
        let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
    };
    let mut frames = vec![];
    let mut iter = unwinder.iter_frames(copy.ip, native_regs(copy), cache, &mut read_stack);
    while let Ok(Some(frame)) = iter.next() {
        frames.push(frame.address());
        if frames.len() >= usize::from(copy.depth) {
            break;
        }
    }
    frames
}

#[cfg(target_arch = "x86_64")]
fn native_regs(copy: &StackCopy) -> framehop::UnwindRegsNative {
    framehop::x86_64::UnwindRegsX86_64::new(copy.ip, copy.sp, copy.fp)
}

#[cfg(target_arch = "aarch64")]
fn native_regs(copy: &StackCopy) -> framehop::UnwindRegsNative {
    // User addresses have 48 bits at most: what is above them in a return address is a pointer signature.
    let mask = framehop::aarch64::PtrAuthMask((1 << 48) - 1);
    framehop::aarch64::UnwindRegsAarch64::new_with_ptr_auth_mask(mask, copy.lr, copy.sp, copy.fp)
}

/// The executable mappings of a `/proc/PID/maps` text (files, and the anonymous code of JIT compilers, `[vdso]`).
fn parse_proc_maps(pid: u32, text: &str) -> Vec<FileMapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
            let (dev, inode) = (fields.next()?, fields.next()?);
            let path = fields.collect::<Vec<_>>().join(" ");
            if !perms.contains('x') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
            Some(FileMapping {
                start,
                end,
                pgoff: u64::from_str_radix(offset, 16).ok()?,
                identity: format!("{dev}:{inode}"),
                open_as: vec![
                    // `maps` pads addresses to 8 digits (a non-PIE binary's `00400000`); `map_files` does not.
                    format!("/proc/{pid}/map_files/{start:x}-{end:x}"),
                    format!("/proc/{pid}/root{path}"),
                    path.clone(),
                ],
                path,
            })
        })
        .collect()
}

/// Where the file's address 0 is in the process: the mapping's start less the virtual address the file
/// gives the mapped offset. The mapping is executable, so an executable segment it covers is the one mapped:
/// linkers such as lld pack segments without page alignment, so the page that starts the mapping may also
/// hold the end of the segment before. Arithmetic wraps rather than trusting a file's numbers.
fn load_bias(segments: &[Segment], mapping: &FileMapping) -> Option<u64> {
    let (from, to) = (mapping.pgoff, mapping.pgoff.saturating_add(mapping.end.saturating_sub(mapping.start)));
    let overlaps = |s: &&Segment| s.offset < to && from < s.offset.saturating_add(s.size.max(1));
    let segment = segments.iter().filter(overlaps).find(|s| s.executable).or_else(|| {
        segments.iter().find(|s| s.offset <= from && from < s.offset.saturating_add(s.size.max(1)))
    })?;
    // The segment's file offset and address agree modulo the page size: offset `pgoff` is at this address.
    let mapped_at = segment.vaddr.wrapping_sub(segment.offset).wrapping_add(mapping.pgoff);
    Some(mapping.start.wrapping_sub(mapped_at))
}

/// The unwind sections and loadable segments of the ELF file at `path`; `.debug_frame` from its separate
/// debug file where the file has no `.eh_frame`.
fn read_sections(path: &str, debug_dirs: &DebugDirs) -> Option<Sections> {
    let data = crate::sys::map_file(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let range = |name: &str| {
        let section = file.section_by_name(name)?;
        Some(section.address()..section.address().checked_add(section.size())?)
    };
    let bytes = |name: &str| -> Option<Arc<[u8]>> {
        let section = file.section_by_name(name)?;
        section.uncompressed_data().ok().map(|d| Arc::from(&*d))
    };
    let segments = file
        .segments()
        .map(|s| {
            let (offset, size) = s.file_range();
            let executable = matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0);
            Segment { offset, vaddr: s.address(), size, executable }
        })
        .collect();
    let eh_frame = bytes(".eh_frame");
    let debug_frame = match eh_frame {
        Some(_) => None,
        None => bytes(".debug_frame").or_else(|| debug_file_frame(path, &file, debug_dirs)),
    };
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: range(".text"),
        text: None,
        got_svma: range(".got"),
        eh_frame_svma: range(".eh_frame"),
        eh_frame,
        eh_frame_hdr_svma: range(".eh_frame_hdr"),
        eh_frame_hdr: bytes(".eh_frame_hdr"),
        debug_frame,
        ..Default::default()
    };
    Some(Sections { info, segments })
}

/// `.debug_frame` of the separate debug file of `path` (parsed as `file`), as `debug_dirs` finds it.
fn debug_file_frame(path: &str, file: &object::File<'_>, debug_dirs: &DebugDirs) -> Option<Arc<[u8]>> {
    let path = debug_dirs.find(Path::new(path), file)?;
    let data = crate::sys::map_file(&path.to_string_lossy()).ok()?;
    let debug = object::File::parse(&*data).ok()?;
    let section = debug.section_by_name(".debug_frame")?;
    section.uncompressed_data().ok().map(|d| Arc::from(&*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_maps_lines_give_executable_file_mappings() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /tmp/prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123 /tmp/prog
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]
7f0000002000-7f0000003000 r-xp 00028000 08:01 456 /usr/lib/libc name with spaces.so
";
        let mappings = parse_proc_maps(7, text);
        assert_eq!(mappings.len(), 3);
        assert_eq!(mappings[1].path, "[vdso]");
        let mappings = [&mappings[0], &mappings[2]];
        assert_eq!(mappings[0].start, 0x55d0c0a01000);
        assert_eq!(mappings[0].pgoff, 0x1000);
        assert_eq!(mappings[0].open_as[0], "/proc/7/map_files/55d0c0a01000-55d0c0a02000");
        let non_pie = parse_proc_maps(7, "00401000-00402000 r-xp 00001000 08:01 9 /tmp/static\n");
        assert_eq!(non_pie[0].open_as[0], "/proc/7/map_files/401000-402000");
        assert_eq!(mappings[0].open_as[1], "/proc/7/root/tmp/prog");
        assert_eq!(mappings[0].identity, "08:01:123");
        assert_eq!(mappings[1].path, "/usr/lib/libc name with spaces.so");
    }

    #[test]
    fn the_load_bias_undoes_the_segment_s_offset_and_address() {
        // A PIE's text segment: file offset 0x1000 at virtual address 0x1000, mapped at 0x55d0c0a01000.
        let segment = |offset, vaddr, size, executable| Segment { offset, vaddr, size, executable };
        let segments = [segment(0, 0, 0x600, false), segment(0x1000, 0x1000, 0x200, true)];
        let mapping = FileMapping {
            start: 0x55d0c0a01000,
            end: 0x55d0c0a02000,
            pgoff: 0x1000,
            path: "/tmp/prog".into(),
            identity: "08:01:123".into(),
            open_as: vec!["/tmp/prog".into()],
        };
        assert_eq!(load_bias(&segments, &mapping), Some(0x55d0c0a00000));
        // A non-PIE binary: text at 0x401000 from offset 0x1000, mapped where it says.
        let segments = [segment(0x1000, 0x401000, 0x2000, true)];
        let mapping = FileMapping { start: 0x401000, end: 0x403000, ..mapping };
        assert_eq!(load_bias(&segments, &mapping), Some(0));
        // lld: a read-only segment ends at 0x1234, text starts right after it at address 0x2234; the text's
        // mapping starts at its page, offset 0x1000, which the read-only segment covers too.
        let segments = [segment(0, 0, 0x1234, false), segment(0x1234, 0x2234, 0x5000, true)];
        let mapping = FileMapping { start: 0x55d0c0a02000, end: 0x55d0c0a08000, pgoff: 0x1000, ..mapping };
        assert_eq!(load_bias(&segments, &mapping), Some(0x55d0c0a00000));
        // Numbers no linker writes do not overflow.
        let segments = [segment(u64::MAX, u64::MAX, u64::MAX, true)];
        let mapping = FileMapping { pgoff: u64::MAX - 1, end: u64::MAX, ..mapping };
        let _ = load_bias(&segments, &mapping);
    }
}
