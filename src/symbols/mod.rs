//! Symbolization of stack addresses (`kstack`, `ustack`) into frames, as bpftrace 0.17 writes them.
//!
//! The BPF side hands over a stack as the instruction pointers of a stack-trace map entry (a 0 ends it) and,
//! for a user stack, the pid; [`symbolize_kernel`] and [`symbolize_user`] turn them into frame texts that
//! the output model ([`crate::output::value::Stack`]) carries, so the formatters stay pure.
//!
//! Frame texts per [`StackMode`] (bpftrace 0.17 `BPFtrace::get_stack`, `resolve_ksym`, `resolve_usym` in
//! src/bpftrace.cpp; `raw` from bpftrace 0.18, commit 8e9853fb0):
//!
//! | mode       | resolved frame                             | frame that does not resolve                   |
//! |------------|--------------------------------------------|-----------------------------------------------|
//! | `bpftrace` | `leaf+8`                                   | `0x559e1b52f131`                              |
//! | `perf`     | `559e1b52f131 leaf+8 (/tmp/st/spin)`       | `559e1b52f131 0x559e1b52f131 ([unknown])`     |
//! | `raw`      | `559e1b52f131`                             | `559e1b52f131`                                |
//!
//! Offsets are decimal, addresses lowercase hex. Kernel frames never show a module, in perf mode neither
//! (`ffffffff8225fe6b pv_native_safe_halt+11`). A user frame does not resolve when its process has exited
//! by the time the stack is printed (bpftrace resolves at print time too, so it shows the same), when the
//! address is in a stripped part of a binary, or in an anonymous mapping. How a frame is laid out on its
//! line (indent, tab) is the formatters' business: see [`crate::output::value::Stack`].
//!
//! ## Why blazesym
//! User symbolization means: reading `/proc/PID/maps` (or the `PROCMAP_QUERY` ioctl), opening each mapped
//! file through `/proc/PID/map_files` (so it works across mount namespaces and for deleted files), undoing
//! the load bias of position-independent code and ASLR per segment (file offset to virtual address through
//! the program headers), parsing ELF symbol tables (`.symtab`, falling back to `.dynsym` in stripped
//! binaries), the vDSO, perf maps of JIT runtimes (`/tmp/perf-PID.map`), and caching all of it per file.
//! Each is a known source of subtle bugs (prelinked libraries, multiple executable segments, sizeless
//! symbols, huge symbol tables). [blazesym](https://github.com/libbpf/blazesym) is the libbpf project's
//! symbolizer, written for exactly this job (BPF stack symbolization), maintained alongside libbpf-rs,
//! which steadytrace already depends on, and well tested on real binaries. Built with
//! `default-features = false` it brings in only `libc` and `memmap2`: no DWARF parser, no demanglers, no
//! decompressors (bcc, and so bpftrace, uses ELF symbol tables only, so DWARF would only make names differ).
//! Version 0.2.3 is the last with a minimum Rust version (1.75) within steadytrace's (1.85).
//!
//! Kernel symbols need none of that — `/proc/kallsyms` is text — and must follow bcc's tie-breaking to the
//! letter, so they are read here ([`KernelSymbols`]).
//!
//! ## Checked against bpftrace 0.17 here
//! The same addresses through bpftrace and through this module, same processes still running: idle and
//! interrupt kernel stacks in all three modes; user stacks (perf and bpftrace modes) of a C program, the same
//! program stripped (its frames unresolved, libc's resolved), a Rust program (legacy names with hash, a v0
//! name left mangled), a C++ program (templates demangled), libc frames named through `libc6-dbg`'s debug
//! file; frames of exited processes. 173 stacks, all identical.
//!
//! ## Differences
//! - Several kernel symbols at one address (`__do_sys_fork`, `__ia32_sys_fork`, `__x64_sys_fork`): bcc
//!   names the address after whichever alias its unstable sort leaves last; [`KernelSymbols`] runs the same
//!   sort, and with the same `/proc/kallsyms` text gives the same names (checked against bcc's own
//!   resolver on all 156 aliased addresses of this kernel). But that text includes the JIT-ed BPF programs
//!   loaded at the moment (`bpf_prog_…_name [bpf]`), bpftrace's own among them, and one line more or less
//!   moves every pivot: bpftrace itself names a different alias for some of those addresses from one run to
//!   the next. No tracer can match it there; the function is the same either way.
//! - User symbols: where several symbols cover an address (aliases such as `write`/`__write`), blazesym and
//!   bcc may pick different ones; a debug file is found by build id or `.gnu_debuglink`, in `--debuginfo`'s
//!   directories and then `/usr/lib/debug` ([`debug_files`]); perf maps and the vDSO are handled by blazesym's rules.
//!
//! ## Start-up cost
//! Nothing is read before a stack is symbolized: [`Symbols::new`] allocates nothing, `/proc/kallsyms` is
//! read on the first kernel frame, blazesym's state is created on the first user frame.

pub mod debug_files;
pub mod journal;
pub mod kernel;
mod stdsort;
pub mod unwind;
pub mod user;

pub use debug_files::DebugDirs;
pub use kernel::KernelSymbols;
pub use user::{UserSym, UserSymbols};

use std::fmt::Write as _;

/// How stack frames are written: `kstack(perf)`, `ustack(raw, 5)` (bpftrace's `StackMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StackMode {
    /// `func+offset`, one per line, indented (the default).
    #[default]
    Bpftrace,
    /// Like `perf script`: a tab, the address in hex, the symbol, and for user frames the module.
    Perf,
    /// The address in hex alone (bpftrace 0.18+; 0.17 does not have it).
    Raw,
    /// User stacks only: the build id of the file mapped at the address and the offset in that file
    /// (`1f0e…9a 0x1139`), for symbolizing on another machine; the address in hex where there is none.
    BuildId,
}

impl StackMode {
    /// The mode of a stack argument as the script names it (`bpftrace`, `perf`, `raw`).
    pub fn from_name(name: &str) -> Option<StackMode> {
        match name {
            "bpftrace" => Some(StackMode::Bpftrace),
            "perf" => Some(StackMode::Perf),
            "raw" => Some(StackMode::Raw),
            "build_id" => Some(StackMode::BuildId),
            _ => None,
        }
    }
}

/// The addresses of a stack: up to the first 0, as bpftrace reads a stack-trace map entry.
fn live(addrs: &[u64]) -> &[u64] {
    &addrs[..addrs.iter().position(|&a| a == 0).unwrap_or(addrs.len())]
}

/// Kernel stack frames, innermost first (see the module docs for their text).
pub fn symbolize_kernel(symbols: &KernelSymbols, addrs: &[u64], mode: StackMode) -> Vec<String> {
    live(addrs)
        .iter()
        .map(|&addr| {
            let mut frame = String::new();
            if mode != StackMode::Bpftrace {
                let _ = write!(frame, "{addr:x}");
                if matches!(mode, StackMode::Raw | StackMode::BuildId) {
                    return frame;
                }
                frame.push(' ');
            }
            match symbols.resolve(addr) {
                Some((name, offset)) => {
                    let _ = write!(frame, "{name}+{offset}");
                }
                None => {
                    let _ = write!(frame, "{addr:#x}");
                }
            }
            frame
        })
        .collect()
}

/// User stack frames of process `pid`, innermost first (see the module docs for their text).
pub fn symbolize_user(symbols: &mut UserSymbols, pid: u32, addrs: &[u64], mode: StackMode) -> Vec<String> {
    let addrs = live(addrs);
    if mode == StackMode::Raw {
        return addrs.iter().map(|addr| format!("{addr:x}")).collect();
    }
    if mode == StackMode::BuildId {
        let places = symbols.locate(pid, addrs);
        return addrs
            .iter()
            .zip(places)
            .map(|(addr, place)| match place {
                Some((build_id, offset)) => {
                    let mut frame: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
                    let _ = write!(frame, " {offset:#x}");
                    frame
                }
                None => format!("{addr:x}"),
            })
            .collect();
    }
    let found = symbols.resolve(pid, addrs);
    addrs
        .iter()
        .zip(found)
        .map(|(&addr, sym)| {
            let mut frame = String::new();
            if mode == StackMode::Perf {
                let _ = write!(frame, "{addr:x} ");
            }
            match sym {
                Some(sym) => {
                    let _ = write!(frame, "{}+{}", sym.name, sym.offset);
                    if mode == StackMode::Perf {
                        let _ = write!(frame, " ({})", sym.module);
                    }
                }
                None => {
                    let _ = write!(frame, "{addr:#x}");
                    if mode == StackMode::Perf {
                        frame.push_str(" ([unknown])");
                    }
                }
            }
            frame
        })
        .collect()
}

/// Kernel and user symbols together, each loaded on first use: what the runtime keeps for a whole run.
#[derive(Default)]
pub struct Symbols {
    kernel: Option<KernelSymbols>,
    user: UserSymbols,
    /// Whether stderr was told why kernel frames print as addresses.
    told_why_no_kernel_symbols: bool,
}

impl Symbols {
    /// Costs nothing: no file is read until a stack is symbolized.
    pub fn new() -> Symbols {
        Symbols::default()
    }

    /// Also names the user frames of processes that exited, from `journal`.
    pub fn with_journal(journal: journal::Journal) -> Symbols {
        Symbols { user: UserSymbols::with_journal(journal), ..Symbols::default() }
    }

    /// Looks for separate debug files of user binaries in `debug_dirs` (`--debuginfo`) first.
    pub fn use_debug_dirs(&mut self, debug_dirs: DebugDirs) {
        self.user.use_debug_dirs(debug_dirs);
    }

    /// Where separate debug files of user binaries are looked for.
    pub fn debug_dirs(&self) -> &DebugDirs {
        self.user.debug_dirs()
    }

    /// [`symbolize_kernel`], reading `/proc/kallsyms` the first time (raw mode never reads it).
    pub fn kernel_stack(&mut self, addrs: &[u64], mode: StackMode) -> Vec<String> {
        if mode == StackMode::Raw {
            return symbolize_kernel(&KernelSymbols::default(), addrs, mode);
        }
        let symbols = self.kernel.get_or_insert_with(KernelSymbols::load);
        if symbols.is_empty() && !addrs.is_empty() && !self.told_why_no_kernel_symbols {
            self.told_why_no_kernel_symbols = true;
            use std::io::Write as _;
            let why = kernel::why_no_symbols();
            let _ = writeln!(
                std::io::stderr(),
                "steadytrace: note: kernel stack frames print as addresses: {why}"
            );
        }
        symbolize_kernel(symbols, addrs, mode)
    }

    /// [`symbolize_user`].
    pub fn user_stack(&mut self, pid: u32, addrs: &[u64], mode: StackMode) -> Vec<String> {
        symbolize_user(&mut self.user, pid, addrs, mode)
    }

    /// `ksym(addr)`: the kernel function containing `addr`, or the address in hex.
    pub fn kernel_symbol(&mut self, addr: u64) -> String {
        let symbols = self.kernel.get_or_insert_with(KernelSymbols::load);
        symbols.resolve(addr).map_or_else(|| format!("{addr:#x}"), |(name, _)| name.to_string())
    }

    /// `usym(addr)`: the function of process `pid` containing `addr`, or the address in hex.
    pub fn user_symbol(&mut self, pid: u32, addr: u64) -> String {
        match self.user.resolve(pid, &[addr]).pop().flatten() {
            Some(symbol) => symbol.name,
            None => format!("{addr:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kallsyms() -> Option<KernelSymbols> {
        let symbols = KernelSymbols::load();
        if symbols.is_empty() {
            bpf::testing::skip("kallsyms", "/proc/kallsyms shows no addresses (not root?)");
            return None;
        }
        Some(symbols)
    }

    /// The address of a symbol named `name` in `/proc/kallsyms`.
    fn kallsyms_addr(name: &str) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
        text.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
            (fields.nth(1)? == name).then_some(addr)
        })
    }

    #[test]
    fn kernel_frames() {
        let Some(symbols) = kallsyms() else { return };
        // A function that exists on every kernel, and has no alias at its address.
        let addr = kallsyms_addr("schedule").expect("schedule in kallsyms");
        assert_eq!(symbols.resolve(addr + 35), Some(("schedule", 35)));
        let stack = [addr + 35, addr, 0, addr + 99];
        assert_eq!(symbolize_kernel(&symbols, &stack, StackMode::Bpftrace), ["schedule+35", "schedule+0"]);
        assert_eq!(
            symbolize_kernel(&symbols, &stack, StackMode::Perf),
            [format!("{:x} schedule+35", addr + 35), format!("{addr:x} schedule+0")]
        );
        assert_eq!(
            symbolize_kernel(&symbols, &stack, StackMode::Raw),
            [format!("{:x}", addr + 35), format!("{addr:x}")]
        );
        // Below every kernel symbol: the address, as `(void *)addr` prints.
        assert_eq!(symbolize_kernel(&symbols, &[0x1234], StackMode::Bpftrace), ["0x1234"]);
        assert_eq!(symbolize_kernel(&symbols, &[0xabc], StackMode::Perf), ["abc 0xabc"]);
    }

    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn steadytrace_symbols_test_target(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(3)
    }

    #[test]
    fn user_frames_of_this_process() {
        let addr = steadytrace_symbols_test_target as *const () as u64;
        let pid = std::process::id();
        let mut symbols = UserSymbols::new();
        let stack = [addr + 4, addr, 0, 1];
        assert_eq!(
            symbolize_user(&mut symbols, pid, &stack, StackMode::Bpftrace),
            ["steadytrace_symbols_test_target+4", "steadytrace_symbols_test_target+0"]
        );
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(
            symbolize_user(&mut symbols, pid, &stack[..1], StackMode::Perf),
            [format!("{:x} steadytrace_symbols_test_target+4 ({})", addr + 4, exe.display())]
        );
        assert_eq!(
            symbolize_user(&mut symbols, pid, &stack, StackMode::Raw),
            [format!("{:x}", addr + 4), format!("{addr:x}")]
        );
        // A Rust function of the test binary, demangled as bcc would (legacy mangling keeps its hash).
        let rust_fn = live as fn(&[u64]) -> &[u64] as *const () as u64;
        let frame = &symbolize_user(&mut symbols, pid, &[rust_fn], StackMode::Bpftrace)[0];
        assert!(frame.contains("symbols::live") && frame.ends_with("+0"), "{frame}");
    }

    #[test]
    fn user_frames_that_do_not_resolve() {
        let mut symbols = UserSymbols::new();
        let pid = std::process::id();
        // Not mapped at all.
        assert_eq!(symbolize_user(&mut symbols, pid, &[0x10], StackMode::Bpftrace), ["0x10"]);
        assert_eq!(symbolize_user(&mut symbols, pid, &[0x10], StackMode::Perf), ["10 0x10 ([unknown])"]);
        // A process that has exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let addr = steadytrace_symbols_test_target as *const () as u64;
        assert_eq!(
            symbolize_user(&mut symbols, gone, &[addr], StackMode::Perf),
            [format!("{addr:x} {addr:#x} ([unknown])")]
        );
        // Pid 0 (a kernel thread's "user" stack) never resolves, and never means this process.
        assert_eq!(symbolize_user(&mut symbols, 0, &[addr], StackMode::Bpftrace), [format!("{addr:#x}")]);
    }

    #[test]
    fn mode_names() {
        assert_eq!(StackMode::from_name("perf"), Some(StackMode::Perf));
        assert_eq!(StackMode::from_name("raw"), Some(StackMode::Raw));
        assert_eq!(StackMode::from_name("bpftrace"), Some(StackMode::Bpftrace));
        assert_eq!(StackMode::from_name("x"), None);
    }
}
