//! User-space symbols of a process, found the way bpftrace 0.17 finds them through bcc 0.26's `ProcSyms`
//! (src/cc/bcc_syms.cc): the process's mappings in `/proc/PID/maps`, each mapped ELF file's symbol tables
//! (`.symtab`, else `.dynsym`), an address belonging to the function whose `[start, start + size)` holds
//! it, the offset from that start. The ELF work is [`blazesym`]'s (see the module docs of
//! [`crate::symbols`] for why).
//!
//! Like bcc (`use_debug_file`), a mapped file's separate debug file is consulted too, so `libc6-dbg` or a
//! `-dbgsym` package lends its full symbol table to a stripped library (`__libc_start_call_main+122` rather
//! than `0x7f37d4d9724a`): found in `--debuginfo`'s directories then `/usr/lib/debug`, by build id
//! (`.build-id/xx/rest.debug`, bcc's first choice) or by `.gnu_debuglink` ([`super::debug_files`]), for a
//! file that has a build id (MiniDebugInfo is not followed). An address is looked up in
//! the file itself first and in the debug file when that finds nothing; bcc merges the two tables, so
//! where several symbols cover an address the two may name different aliases (as they may anyway: see
//! "differences" in [`crate::symbols`]).
//!
//! A library an Android process mapped from inside its APK (stored, page-aligned: see [`crate::apk`]) is
//! named through blazesym's reading of the APK, its module `base.apk!/lib/ABI/libfoo.so`.
//!
//! Names are demangled as bcc demangles them: only names starting with `_Z` or `___Z`, with libstdc++'s
//! `__cxa_demangle`, the very function bcc calls. So Rust's legacy symbols print as bpftrace prints them,
//! hash and `$u7b$` escapes included (`rspin::inner::rust_leaf::h9b8be9f85ec4b50f`), and v0 symbols
//! (`_RNv…`) stay mangled. libstdc++ is opened with `dlopen` on the first name that needs it, so
//! steadytrace does not link it and pays nothing for it otherwise; without it, names stay mangled.

use super::journal::Journal;
use super::DebugDirs;
use crate::sys;
use blazesym::helper::{read_elf_build_id, ElfResolver};
use blazesym::normalize::{Normalizer, UserMeta};
use blazesym::symbolize::source::{Apk, Process, Source};
use blazesym::symbolize::{
    FindSymOpts, Input, ProcessMemberInfo, ProcessMemberType, Reason, Resolve, ResolvedSym, Symbolize,
    Symbolized, Symbolizer, TranslateFileOffset,
};
use blazesym::Addr;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// One resolved user frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSym {
    /// Demangled as bcc demangles (see the module docs).
    pub name: String,
    /// From the start of the symbol.
    pub offset: u64,
    /// The mapped file as `/proc/PID/maps` names it (`/usr/lib/x86_64-linux-gnu/libc.so.6`), or a special
    /// name such as `[vdso]`.
    pub module: String,
}

/// Symbolizes addresses of live processes. Creating one costs nothing; files are opened and parsed on the
/// first address that needs them and kept (keyed by file, so every process running the same binary shares
/// them).
pub struct UserSymbols {
    symbolizer: Option<Symbolizer>,
    /// What processes mapped, for those that exited (see [`super::journal`]).
    journal: Option<Journal>,
    /// The files of exited processes, opened once for all their frames.
    files: ElfFiles,
    /// For `ustack(build_id)`: live processes' addresses as files' build ids and offsets.
    normalizer: Option<Normalizer>,
    /// The build id of each file of an exited process asked about (`None`: it has none).
    build_ids: HashMap<String, Option<Vec<u8>>>,
    /// Where separate debug files are looked for (`--debuginfo`).
    debug_dirs: DebugDirs,
}

impl Default for UserSymbols {
    fn default() -> Self {
        UserSymbols::new()
    }
}

impl UserSymbols {
    pub fn new() -> UserSymbols {
        UserSymbols::with(None)
    }

    /// Also names the frames of processes that exited, from what `journal` kept of their mappings.
    pub fn with_journal(journal: Journal) -> UserSymbols {
        UserSymbols::with(Some(journal))
    }

    fn with(journal: Option<Journal>) -> UserSymbols {
        let files = ElfFiles::default();
        let debug_dirs = DebugDirs::default();
        UserSymbols {
            symbolizer: None,
            journal,
            files,
            normalizer: None,
            build_ids: HashMap::new(),
            debug_dirs,
        }
    }

    /// Where separate debug files are looked for.
    pub fn debug_dirs(&self) -> &DebugDirs {
        &self.debug_dirs
    }

    /// Looks for separate debug files in `debug_dirs` (`--debuginfo`) before the default directory.
    pub fn use_debug_dirs(&mut self, debug_dirs: DebugDirs) {
        self.symbolizer = None;
        self.files = ElfFiles::default();
        self.debug_dirs = debug_dirs;
    }

    /// Where each address of process `pid` is: the build id of the file mapped there and the offset in that
    /// file (`ustack(build_id)`, what the kernel's `BPF_F_STACK_BUILD_ID` stack maps give); `None` where no file
    /// with a build id is mapped, or the process exited unrecorded.
    pub fn locate(&mut self, pid: u32, addrs: &[u64]) -> Vec<Option<(Vec<u8>, u64)>> {
        if pid == 0 || addrs.is_empty() {
            return vec![None; addrs.len()];
        }
        let normalizer = self
            .normalizer
            .get_or_insert_with(|| Normalizer::builder().enable_build_id_caching(true).build());
        let mut found: Vec<Option<(Vec<u8>, u64)>> = match normalizer.normalize_user_addrs(pid.into(), addrs)
        {
            Ok(output) => output
                .outputs
                .iter()
                .map(|&(offset, meta)| match output.meta.get(meta) {
                    Some(UserMeta::Elf(elf)) => elf.build_id.as_ref().map(|id| (id.to_vec(), offset)),
                    _ => None,
                })
                .collect(),
            Err(_) => vec![None; addrs.len()],
        };
        if let (Some(journal), true) = (&self.journal, found.iter().any(Option::is_none)) {
            let journal = journal.placing(pid, addrs, 0);
            for (addr, place) in addrs.iter().zip(&mut found).filter(|(_, place)| place.is_none()) {
                let Some((path, offset)) = journal.locate(pid, *addr) else { continue };
                // Bounded as the opened files are: a long trace of short-lived processes asks about many files.
                if self.build_ids.len() >= KEEP_FILES && !self.build_ids.contains_key(path) {
                    self.build_ids.clear();
                }
                let build_id = self.build_ids.entry(path.to_string()).or_insert_with(|| {
                    read_elf_build_id(&PathBuf::from(path)).ok().flatten().map(|id| id.to_vec())
                });
                *place = build_id.clone().map(|id| (id, offset));
            }
        }
        found
    }

    /// The symbol of each address in process `pid`'s address space (`None` where there is none: an
    /// address in no mapping, in a stripped part of a file, in an anonymous mapping, or in a process that
    /// has exited). Pid 0 (the idle task) has no user space.
    pub fn resolve(&mut self, pid: u32, addrs: &[u64]) -> Vec<Option<UserSym>> {
        if pid == 0 || addrs.is_empty() {
            return vec![None; addrs.len()];
        }
        let symbolizer = self.symbolizer.get_or_insert_with(|| {
            Symbolizer::builder()
                .enable_demangling(false)
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .set_process_dispatcher(debug_file_dispatcher(self.debug_dirs.clone()))
                .build()
        });
        let mut process = Process::new(pid.into());
        // ELF symbols only, as bcc: DWARF names (and inlined functions) would differ from bpftrace's.
        process.debug_syms = false;
        // `/proc/PID/map_files` opens only for CAP_SYS_ADMIN in the host's user namespace; elsewhere (a rootless
        // container) the mapped files are opened by their paths.
        process.map_files = crate::privilege::initial_user_namespace();
        let source = Source::Process(process);
        let mut found: Vec<Option<UserSym>> = match symbolizer.symbolize(&source, Input::AbsAddr(addrs)) {
            Ok(found) => found.into_iter().map(user_sym).collect(),
            Err(_) => vec![None; addrs.len()],
        };
        if let (Some(journal), true) = (&self.journal, found.iter().any(Option::is_none)) {
            let unnamed: Vec<u64> =
                addrs.iter().zip(&found).filter(|(_, sym)| sym.is_none()).map(|(&addr, _)| addr).collect();
            let journal = journal.placing(pid, &unnamed, 0);
            if journal.knows(pid) {
                for (addr, sym) in addrs.iter().zip(&mut found).filter(|(_, sym)| sym.is_none()) {
                    *sym = journal.locate(pid, *addr).and_then(|(path, offset)| match in_apk(path) {
                        true => apk_symbol(symbolizer, path, offset),
                        false => self.files.symbol(path, offset, &self.debug_dirs),
                    });
                }
            }
        }
        found
    }
}

/// Files of exited processes kept open (and build ids kept) at most; past it, all are dropped and found again
/// as needed.
const KEEP_FILES: usize = 256;

/// An ELF file and its separate debug file.
type OpenedFile = (Rc<ElfResolver>, Option<Rc<ElfResolver>>);

/// ELF files opened by path, each with its separate debug file (`None`: not to be opened).
#[derive(Default)]
struct ElfFiles {
    opened: HashMap<String, Option<OpenedFile>>,
}

impl ElfFiles {
    /// The symbol at `offset` of the ELF file at `path` (as a process of the journal mapped it): from the
    /// file's own symbol tables, else from its separate debug file, as for a live process.
    fn symbol(&mut self, path: &str, offset: u64, debug_dirs: &DebugDirs) -> Option<UserSym> {
        if self.opened.len() >= KEEP_FILES && !self.opened.contains_key(path) {
            self.opened.clear();
        }
        let (file, debug) = self
            .opened
            .entry(path.to_string())
            .or_insert_with(|| {
                let file = Rc::new(ElfResolver::open(path).ok()?);
                let debug = debug_dirs
                    .find_for_path(Path::new(path))
                    .and_then(|p| ElfResolver::open(p).ok())
                    .map(Rc::new);
                Some((file, debug))
            })
            .as_ref()?;
        let addr = file.file_offset_to_virt_offset(offset).ok()??;
        let named = |resolver: &ElfResolver| match resolver.find_sym(addr, &FindSymOpts::Basic) {
            Ok(Ok(sym)) => {
                Some(UserSym { name: demangle(sym.name), offset: addr - sym.addr, module: path.to_string() })
            }
            _ => None,
        };
        named(file).or_else(|| named(debug.as_deref()?))
    }
}

/// Whether a mapped file is an APK (or another zip), as blazesym tells them for a live process: by the
/// name's extension.
fn in_apk(path: &str) -> bool {
    Path::new(path).extension().is_some_and(|extension| extension == "apk" || extension == "zip")
}

/// The symbol at `offset` of an APK an exited process mapped: in the library stored at that offset, which
/// the loader mapped from the APK (blazesym reads the APK, as it does for live processes).
fn apk_symbol(symbolizer: &Symbolizer, path: &str, offset: u64) -> Option<UserSym> {
    let mut apk = Apk::new(path);
    apk.debug_syms = false;
    user_sym(symbolizer.symbolize_single(&Source::Apk(apk), Input::FileOffset(offset)).ok()?)
}

fn user_sym(symbolized: Symbolized<'_>) -> Option<UserSym> {
    match symbolized {
        Symbolized::Sym(sym) => Some(UserSym {
            name: demangle(&sym.name),
            offset: sym.offset as u64,
            module: sym.module.map(|m| m.to_string_lossy().into_owned()).unwrap_or_default(),
        }),
        Symbolized::Unknown(_) => None,
    }
}

/// A mapped file together with its separate debug file: symbols from the file, else from the debug file;
/// addresses translated with the file's own program headers (a debug file's segment offsets differ).
#[derive(Debug)]
struct WithDebugFile {
    file: Rc<ElfResolver>,
    debug: Rc<ElfResolver>,
    /// The path as `/proc/PID/maps` names it, reported as the module.
    module: OsString,
}

impl Symbolize for WithDebugFile {
    fn find_sym(&self, addr: Addr, opts: &FindSymOpts) -> blazesym::Result<Result<ResolvedSym<'_>, Reason>> {
        let found = match self.file.find_sym(addr, opts)? {
            Ok(sym) => Ok(sym),
            Err(_) => self.debug.find_sym(addr, opts)?,
        };
        Ok(found.map(|mut sym| {
            sym.module = Some(&self.module);
            sym
        }))
    }
}

impl TranslateFileOffset for WithDebugFile {
    fn file_offset_to_virt_offset(&self, file_offset: u64) -> blazesym::Result<Option<Addr>> {
        self.file.file_offset_to_virt_offset(file_offset)
    }
}

/// The parsed files of one build id: the file and its debug file, or nothing when it has none.
type DebugPair = Option<(Rc<ElfResolver>, Rc<ElfResolver>)>;

/// blazesym's hook for each file mapped in a process: a [`WithDebugFile`] where a debug file exists,
/// blazesym's own handling (`None`) otherwise. Parsed files are kept by build id for the whole run.
fn debug_file_dispatcher(
    debug_dirs: DebugDirs,
) -> impl Fn(ProcessMemberInfo<'_>) -> blazesym::Result<Option<Box<dyn Resolve>>> + 'static {
    let parsed: RefCell<HashMap<Vec<u8>, DebugPair>> = RefCell::new(HashMap::new());
    move |info: ProcessMemberInfo<'_>| {
        let ProcessMemberType::Path(entry) = info.member_entry else { return Ok(None) };
        let Ok(Some(build_id)) = read_elf_build_id(&entry.maps_file) else { return Ok(None) };
        let mut parsed = parsed.borrow_mut();
        let pair = parsed.entry(build_id.to_vec()).or_insert_with(|| {
            let debug = debug_dirs.find_for_path(&entry.maps_file)?;
            let debug = ElfResolver::open(debug).ok()?;
            let file = ElfResolver::open(&entry.maps_file).ok()?;
            Some((Rc::new(file), Rc::new(debug)))
        });
        Ok(pair.as_ref().map(|(file, debug)| {
            Box::new(WithDebugFile {
                file: Rc::clone(file),
                debug: Rc::clone(debug),
                module: entry.symbolic_path.clone().into_os_string(),
            }) as Box<dyn Resolve>
        }))
    }
}

/// bcc's demangling: names starting with `_Z` or `___Z` through `__cxa_demangle`, the name itself when that
/// fails or for any other name.
pub fn demangle(name: &str) -> String {
    if !(name.starts_with("_Z") || name.starts_with("___Z")) {
        return name.to_string();
    }
    CString::new(name)
        .ok()
        .and_then(|mangled| sys::cxa_demangle(&mangled))
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_like_bcc() {
        if sys::cxa_demangle(c"_Z1fv").is_none() {
            bpf::testing::skip("demangles_like_bcc", "libstdc++.so.6 cannot be loaded; names stay mangled");
            return;
        }
        // Legacy Rust symbols keep their hash and escapes, as bpftrace prints them.
        assert_eq!(
            demangle("_ZN5rspin5inner9rust_leaf17h9b8be9f85ec4b50fE"),
            "rspin::inner::rust_leaf::h9b8be9f85ec4b50f"
        );
        assert_eq!(
            demangle("_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17hb51d284d5ca79a65E"),
            "std::rt::lang_start::_$u7b$$u7b$closure$u7d$$u7d$::hb51d284d5ca79a65"
        );
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        // Not mangled, v0 Rust mangling, and names __cxa_demangle rejects: unchanged.
        assert_eq!(demangle("main"), "main");
        assert_eq!(
            demangle("_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal"),
            "_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal"
        );
        assert_eq!(demangle("_Zfoo"), "_Zfoo");
    }
}
