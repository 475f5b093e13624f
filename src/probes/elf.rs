//! ELF files for uprobes: which functions a binary or library defines, where a function's code is
//! in the file (a uprobe is placed at a file offset, not at an address), which file a short name
//! such as `libc` or `bash` means, and the data symbols `uaddr()` names. A library inside an Android APK
//! is written `APK!/ENTRY`: its symbols are read from its bytes in the APK and its offsets are the APK's.

use crate::symbols::DebugDirs;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind, SymbolSection};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A function defined in an ELF file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Symbol {
    pub name: String,
    /// The symbol's virtual address as the file states it (before any load bias).
    pub address: u64,
    /// Bytes of code; 0 when the symbol table does not say.
    pub size: u64,
}

fn parse<'a>(path: &Path, data: &'a [u8]) -> Result<object::File<'a>, String> {
    object::File::parse(data)
        .map_err(|err| format!("{} is not an ELF file steadytrace can read: {err}", path.display()))
}

/// An error unless the ELF file (parsed already) is code for the processor steadytrace runs on: a uprobe in
/// an arm64 library on an x86_64 machine would never fire (or an x86_64 one pushed to a phone).
fn for_this_machine(path: &Path, data: &[u8]) -> Result<(), String> {
    let host = bpf::arch::HOST;
    // e_machine, after the 16 bytes of e_ident and the 2 of e_type; little-endian, as both architectures are.
    let Some(&[low, high]) = data.get(18..20) else { return Ok(()) };
    let machine = u16::from_le_bytes([low, high]);
    if machine == host.elf_machine {
        return Ok(());
    }
    let theirs =
        bpf::arch::by_elf_machine(machine).map_or(format!("ELF machine {machine}"), |a| a.name.to_string());
    Err(format!("{} is code for {theirs}, not for this {} machine", path.display(), host.name))
}

/// The bytes of the ELF file `path` names, and where the ELF file is in them: the whole file, or the
/// library inside an APK for `APK!/ENTRY` ([`crate::apk`]; refused unless the loader could map it).
pub fn read_elf(path: &Path) -> Result<(Vec<u8>, Range<usize>), String> {
    let Some((apk, entry)) = crate::apk::split(path) else {
        let data = read(path)?;
        let whole = 0..data.len();
        return Ok((data, whole));
    };
    let data = read(apk)?;
    let range = crate::apk::stored_entry(&data, apk, entry)?;
    Ok((data, range))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    // A device or a FIFO would be read forever: only regular files hold code.
    let metadata =
        std::fs::metadata(path).map_err(|err| format!("could not read {}: {err}", path.display()))?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    std::fs::read(path).map_err(|err| format!("could not read {}: {err}", path.display()))
}

/// What steadytrace needs of one ELF file: its functions and its loadable segments. Parsed once per
/// run and kept (see [`load`]): a wildcard matching thousands of functions of a 100 MB library reads
/// the library once, not once per function.
#[derive(Debug)]
pub struct ElfFile {
    functions: Vec<Symbol>,
    /// Data objects (`STT_OBJECT`: globals, statics) by name.
    objects: BTreeMap<String, Symbol>,
    /// Loaded at an address of the kernel's choosing (a PIE or a shared library, `ET_DYN`): symbol
    /// addresses are relative to where it is loaded.
    relocatable: bool,
    /// `(virtual address, file offset, bytes in the file)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl ElfFile {
    /// The functions the file defines, from `.symtab` and `.dynsym` (a stripped binary keeps only
    /// the latter) and from the `.symtab` of its separate debug file when one is installed (Debian's
    /// `-dbg`/`-dbgsym` packages: with `libc6-dbg`, libc's static functions such as
    /// `malloc_consolidate` appear), sorted by name then address. A function found twice is listed
    /// once. `STT_GNU_IFUNC` resolvers (glibc's `memcpy`, `strlen`) count as functions, as bpftrace
    /// lists them; imported functions do not, unless a non-PIE executable gives them the address of
    /// their PLT stub. Names are as stored: not demangled, and a versioned `.symtab` name keeps its
    /// `@VERSION`.
    pub fn functions(&self) -> &[Symbol] {
        &self.functions
    }

    /// The data object called `name` (a global variable), from `.symtab` or `.dynsym`.
    pub fn object(&self, name: &str) -> Option<&Symbol> {
        self.objects.get(name)
    }

    /// Whether the file's addresses move with its load address (a PIE or a shared library).
    pub fn relocatable(&self) -> bool {
        self.relocatable
    }

    /// The file offset of the code at virtual `address`, through the loadable segments' program
    /// headers: what a uprobe is attached at. (In a non-PIE executable the two differ by the load
    /// address, 0x400000 on x86-64; in a shared library or PIE they are often equal, but not always.)
    pub fn file_offset(&self, address: u64) -> Option<u64> {
        self.segments.iter().find_map(|&(start, offset, file_size)| {
            (start <= address && address - start < file_size).then(|| offset + (address - start))
        })
    }

    fn parse(path: &Path, debug_dirs: &DebugDirs) -> Result<ElfFile, String> {
        let (data, range) = read_elf(path)?;
        // In an APK, the library's file offsets are from the entry's start in the APK.
        let base = range.start as u64;
        let data = &data[range];
        let file = parse(path, data)?;
        for_this_machine(path, data)?;
        let mut functions = Vec::new();
        add_functions(&mut functions, file.symbols().chain(file.dynamic_symbols()));
        let debug = crate::apk::split(path).is_none().then(|| debug_dirs.find(path, &file)).flatten();
        if let Some(debug_data) = debug.and_then(|debug| std::fs::read(debug).ok()) {
            if let Ok(debug) = object::File::parse(&*debug_data) {
                add_functions(&mut functions, debug.symbols());
            }
        }
        // The same function in several tables: keep one, the one that knows its size.
        functions.sort_by(|a, b| {
            (&a.name, a.address, std::cmp::Reverse(a.size)).cmp(&(
                &b.name,
                b.address,
                std::cmp::Reverse(b.size),
            ))
        });
        functions.dedup_by(|later, kept| later.name == kept.name && later.address == kept.address);
        let segments = file
            .segments()
            .map(|segment| {
                let (offset, file_size) = segment.file_range();
                (segment.address(), base + offset, file_size)
            })
            .collect();
        let objects = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|sym| sym.kind() == SymbolKind::Data && sym.is_definition() && sym.address() != 0)
            .filter_map(|sym| {
                let name = sym.name().ok().filter(|name| !name.is_empty())?.to_string();
                Some((name.clone(), Symbol { name, address: sym.address(), size: sym.size() }))
            })
            .collect();
        let relocatable = file.kind() == object::ObjectKind::Dynamic;
        Ok(ElfFile { functions, objects, relocatable, segments })
    }
}

/// `path` parsed, its separate debug file looked for in `debug_dirs`, from the cache of this run when it
/// was parsed before (keyed by the path as given and the directories).
pub fn load(path: &Path, debug_dirs: &DebugDirs) -> Result<Arc<ElfFile>, String> {
    type Cache = BTreeMap<(PathBuf, DebugDirs), Arc<ElfFile>>;
    static CACHE: Mutex<Cache> = Mutex::new(BTreeMap::new());
    // A poisoned lock only means another thread panicked mid-insert; the map itself is still whole.
    let mut cache = CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key = (path.to_path_buf(), debug_dirs.clone());
    if let Some(file) = cache.get(&key) {
        return Ok(file.clone());
    }
    let file = Arc::new(ElfFile::parse(path, debug_dirs)?);
    cache.insert(key, file.clone());
    Ok(file)
}

/// The functions `path` defines: [`ElfFile::functions`] (its debug file looked for in /usr/lib/debug only).
pub fn function_symbols(path: &Path) -> Result<Vec<Symbol>, String> {
    Ok(load(path, &DebugDirs::default())?.functions().to_vec())
}

fn add_functions<'data, S: ObjectSymbol<'data>>(symbols: &mut Vec<Symbol>, table: impl Iterator<Item = S>) {
    for sym in table {
        // Not `is_definition()`: `object` says no for IFUNC symbols. An undefined function with an
        // address is the PLT stub a non-PIE executable calls it through (python3's `XML_Parse`):
        // code in this file, which bpftrace lists too.
        let here = matches!(sym.section(), SymbolSection::Section(_) | SymbolSection::Undefined);
        if sym.kind() != SymbolKind::Text || !here || sym.address() == 0 {
            continue;
        }
        if let Some(name) = sym.name().ok().filter(|name| !name.is_empty()) {
            symbols.push(Symbol { name: name.to_string(), address: sym.address(), size: sym.size() });
        }
    }
}

/// The file offset of the code at virtual `address` in `path`: [`ElfFile::file_offset`].
pub fn file_offset(path: &Path, address: u64) -> Result<u64, String> {
    load(path, &DebugDirs::default())?
        .file_offset(address)
        .ok_or_else(|| format!("address {address:#x} is in no loadable segment of {}", path.display()))
}

/// The file a uprobe target names. A name with a `/` is a path and stays as it is (it must exist).
/// A bare name is looked up as a command in `$PATH` (`bash` → `/usr/bin/bash`), then as a library
/// in the dynamic linker's cache (`ldconfig -p`) and in the standard library directories: `libc`,
/// `c`, `libc.so` and `libc.so.6` all mean `/lib/x86_64-linux-gnu/libc.so.6`.
pub fn resolve_library(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        let on_disk = crate::apk::file_on_disk(&path);
        return match on_disk.exists() {
            true => Ok(path),
            false => Err(format!("{} does not exist", on_disk.display())),
        };
    }
    if name.is_empty() {
        return Err("the file name is empty".to_string());
    }
    if let Some(path) = crate::executable::find_in_path(name) {
        return Ok(path);
    }
    let soname = library_soname(name);
    if let Some(path) = ldconfig_cache().and_then(|cache| find_in_ldconfig(&cache, &soname)) {
        return Ok(path);
    }
    let dirs = library_dirs();
    if let Some(path) = dirs.iter().find_map(|dir| find_in_dir(Path::new(dir), &soname)) {
        return Ok(path);
    }
    Err(format!(
        "no command or library called `{name}` was found in $PATH, the ldconfig cache or {}: \
         give its full path",
        dirs.join(", ")
    ))
}

/// What a library's file name starts with: `c` and `libc` give `libc.so`; `libc.so` and
/// `libc.so.6` stay as they are.
fn library_soname(name: &str) -> String {
    let name = if name.starts_with("lib") { name.to_string() } else { format!("lib{name}") };
    if name.contains(".so") {
        name
    } else {
        format!("{name}.so")
    }
}

/// Whether a file called `file` is the library `soname` (`libc.so` is `libc.so` or `libc.so.6`, not
/// `libc.so-foo`).
fn is_library(file: &str, soname: &str) -> bool {
    file.strip_prefix(soname).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// `ldconfig -p`'s output. It is in /sbin, which a user's `$PATH` may not have.
fn ldconfig_cache() -> Option<String> {
    ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"].iter().find_map(|program| {
        let output = Command::new(program).arg("-p").output().ok()?;
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    })
}

/// The path of library `soname` in `ldconfig -p` output (lines like `\tlibc.so.6 (libc6,x86-64) =>
/// /lib/x86_64-linux-gnu/libc.so.6`), preferring this machine's architecture over, say, the i386
/// copy, and an exact name over a versioned one.
fn find_in_ldconfig(cache: &str, soname: &str) -> Option<PathBuf> {
    let native = bpf::arch::HOST.ldconfig_tag;
    let mut best: Option<(bool, bool, &str)> = None;
    for line in cache.lines() {
        let Some((head, path)) = line.split_once("=>") else { continue };
        let Some((file, flags)) = head.trim().split_once(' ') else { continue };
        if !is_library(file, soname) {
            continue;
        }
        let rank = (flags.contains(native), file == soname, path.trim());
        if best.is_none_or(|best| (rank.0, rank.1) > (best.0, best.1)) {
            best = Some(rank);
        }
    }
    best.map(|(.., path)| PathBuf::from(path))
}

/// The standard library directories, this machine's multiarch ones first.
fn library_dirs() -> Vec<String> {
    let triple = format!("{}-linux-gnu", std::env::consts::ARCH);
    vec![
        format!("/lib/{triple}"),
        format!("/usr/lib/{triple}"),
        "/lib64".to_string(),
        "/usr/lib64".to_string(),
        "/lib".to_string(),
        "/usr/lib".to_string(),
    ]
}

fn find_in_dir(dir: &Path, soname: &str) -> Option<PathBuf> {
    let exact = dir.join(soname);
    if exact.is_file() {
        return Some(exact);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|entry| entry.file_name().to_str().is_some_and(|file| is_library(file, soname)))
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    found.sort();
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function with a known name in the test binary's symbol table.
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn steadytrace_elf_test_marker(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(3))
    }

    /// The file offset of `address` in this process's own executable, from `/proc/self/maps`.
    fn mapped_offset(exe: &Path, address: u64) -> u64 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (start, end) = fields[0].split_once('-').unwrap();
            let start = u64::from_str_radix(start, 16).unwrap();
            let end = u64::from_str_radix(end, 16).unwrap();
            if (start..end).contains(&address) && fields.get(5).is_some_and(|path| Path::new(path) == exe) {
                return address - start + u64::from_str_radix(fields[2], 16).unwrap();
            }
        }
        panic!("{address:#x} is not in a mapping of {}", exe.display());
    }

    #[test]
    fn finds_a_function_of_its_own_binary_and_its_file_offset() {
        let exe = std::env::current_exe().unwrap();
        let symbols = function_symbols(&exe).unwrap();
        let marker = symbols.iter().find(|sym| sym.name == "steadytrace_elf_test_marker").unwrap();
        assert!(marker.size > 0);
        assert_eq!(symbols.iter().filter(|sym| sym.name == "steadytrace_elf_test_marker").count(), 1);
        let offset = file_offset(&exe, marker.address).unwrap();
        // Where the running code of the function is, mapped back to the file.
        let running = steadytrace_elf_test_marker as *const () as u64;
        assert_eq!(mapped_offset(&exe.canonicalize().unwrap(), running), offset);
        assert_eq!(steadytrace_elf_test_marker(2), 6);
        assert!(file_offset(&exe, u64::MAX - 1).unwrap_err().contains("no loadable segment"));
    }

    #[test]
    fn parses_each_file_once_per_run() {
        let exe = std::env::current_exe().unwrap();
        let first = load(&exe, &DebugDirs::default()).unwrap();
        let marker = first.functions().iter().find(|sym| sym.name == "steadytrace_elf_test_marker").unwrap();
        // Looking up functions and offsets again reuses the parsed file instead of reading it again.
        assert_eq!(file_offset(&exe, marker.address).unwrap(), first.file_offset(marker.address).unwrap());
        assert!(function_symbols(&exe).unwrap().contains(marker));
        assert!(Arc::ptr_eq(&first, &load(&exe, &DebugDirs::default()).unwrap()));
        assert!(load(Path::new("/no/such/file"), &DebugDirs::default()).is_err());
    }

    #[test]
    fn resolves_libraries_and_commands() {
        let libc = resolve_library("libc").unwrap();
        assert!(libc.is_absolute() && libc.to_str().unwrap().contains("libc.so"), "{}", libc.display());
        assert_eq!(resolve_library("libc.so.6").unwrap(), libc);
        assert_eq!(resolve_library("c").unwrap(), libc);
        let symbols = function_symbols(&libc).unwrap();
        assert!(symbols.iter().any(|sym| sym.name == "malloc"));
        assert!(symbols.iter().any(|sym| sym.name == "memcpy"), "IFUNC resolvers are functions");
        if DebugDirs::default().find(&libc, &parse(&libc, &std::fs::read(&libc).unwrap()).unwrap()).is_some()
        {
            assert!(
                symbols.iter().any(|sym| sym.name == "malloc_consolidate"),
                "static functions from libc6-dbg"
            );
        } else {
            bpf::testing::skip("libc's static functions", "no debug file for libc (install libc6-dbg)");
        }
        let sh = resolve_library("sh").unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(resolve_library("/bin/sh").unwrap(), PathBuf::from("/bin/sh"));
        assert!(resolve_library("/no/such/file").unwrap_err().contains("does not exist"));
        assert!(resolve_library("no-such-library-xyz").unwrap_err().contains("give its full path"));
        assert!(function_symbols(Path::new("/etc/hostname")).is_err());
    }

    #[test]
    fn reads_ldconfig_output() {
        let cache = "561 libs found in cache `/etc/ld.so.cache'\n\
            \tlibcap.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcap.so.2\n\
            \tlibc.so.6 (libc6) => /lib/i386-linux-gnu/libc.so.6\n\
            \tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n\
            \tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n\
            \tlibz.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libz.so\n";
        let find = |name| find_in_ldconfig(cache, &library_soname(name)).map(|p| p.display().to_string());
        if std::env::consts::ARCH == "x86_64" {
            assert_eq!(find("libc").as_deref(), Some("/lib/x86_64-linux-gnu/libc.so.6"));
        }
        assert_eq!(find("z").as_deref(), Some("/usr/lib/x86_64-linux-gnu/libz.so"));
        assert_eq!(find("libz.so.1").as_deref(), Some("/lib/x86_64-linux-gnu/libz.so.1"));
        assert_eq!(find("libca"), None);
        assert!(is_library("libc.so.6", "libc.so") && !is_library("libcap.so.2", "libc.so"));
    }
}
