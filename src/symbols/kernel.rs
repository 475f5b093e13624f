//! Kernel symbols from `/proc/kallsyms`, resolved exactly as bpftrace 0.17 resolves them (through bcc
//! 0.26's `KSyms`: `bcc_procutils_each_ksym` in src/cc/bcc_proc.c, `KSyms::resolve_addr` in
//! src/cc/bcc_syms.cc).
//!
//! bcc's rules, kept here:
//! - lines whose address is 0 (what an unprivileged reader sees) or, on x86-64, below
//!   `0x00ffffffffffffff` (per-CPU variables) are skipped; so are data symbols (types `b B d D r R`);
//!   everything else counts (text `t T`, weak `w W`, absolute `a A`, …), module symbols included;
//! - the symbols are sorted by address with libstdc++'s `std::sort` (see [`super::stdsort`]) and an address
//!   resolves to the last symbol at or below it (`upper_bound` minus one), however far below: an address
//!   past the end of the last function still gets its name and a large offset;
//! - an address below every symbol, or any address when no symbol was readable, does not resolve (bpftrace
//!   prints it as `0x` and lowercase hex).

use super::stdsort;

/// bcc's `kernelAddrSpace`: on x86-64 kernel addresses start above it; elsewhere it is 0.
const KERNEL_ADDR_SPACE: u64 = bpf::arch::HOST.kernel_addr_space;

/// Where kernel symbols are read from: `/proc/kallsyms`, or the file `--kallsyms` names.
static SOURCE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Reads kernel symbols from `path` (in `/proc/kallsyms`'s format) instead of `/proc/kallsyms`: a copy of the
/// host's, for a container to which the kernel shows only zeros there. Takes effect once, before any reading.
pub fn read_from(path: std::path::PathBuf) {
    let _ = SOURCE.set(path);
}

fn source() -> &'static std::path::Path {
    SOURCE.get().map_or(std::path::Path::new("/proc/kallsyms"), |path| path.as_path())
}

/// Why kernel frames print as addresses, once symbols were read and none had an address.
pub fn why_no_symbols() -> String {
    match SOURCE.get() {
        Some(path) => format!("{} holds no kernel symbols with addresses", path.display()),
        None => "/proc/kallsyms shows this process no addresses (the kernel shows them only to CAP_SYSLOG in the \
                 host's user namespace, as kernel.kptr_restrict allows): a copy of the host's /proc/kallsyms, \
                 given with --kallsyms FILE, names them until the host reboots"
            .to_string(),
    }
}

/// All kernel symbols, sorted by address, names in one arena.
#[derive(Debug, Default)]
pub struct KernelSymbols {
    /// `(address, start of the name in names, length of the name)`.
    syms: Vec<(u64, u32, u32)>,
    names: String,
}

/// The address of kernel symbol `name` (any kind: functions and data), from `/proc/kallsyms`; `None`
/// when it has no such symbol or shows zero addresses (not root). Reads the whole file (tens of
/// milliseconds): the compiler asks through `kernel::KernelTypes`, which remembers the answers.
pub fn address_of(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(source()).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (address, _kind, symbol) = (fields.next()?, fields.next()?, fields.next()?);
        (symbol == name).then(|| u64::from_str_radix(address, 16).ok()).flatten().filter(|&a| a != 0)
    })
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms` (about 40 ms for 120 000 symbols, most of it the kernel formatting the file), or
    /// the file [`read_from`] named. When it cannot be read, or shows zero addresses (not root), no address
    /// resolves.
    pub fn load() -> KernelSymbols {
        std::fs::read(source()).map(|text| KernelSymbols::parse(&text)).unwrap_or_default()
    }

    /// Symbols from text in `/proc/kallsyms`'s format (`ffffffff81000000 T _text` and, for modules,
    /// `ffffffffc0a01000 t foo\t[mod]`).
    pub fn parse(text: &[u8]) -> KernelSymbols {
        let mut syms = Vec::new();
        let mut names = String::new();
        for line in text.split(|&b| b == b'\n') {
            // strtoull(line, &end, 16): leading hex digits (bcc then looks at the byte after the next one).
            let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            let Ok(hex) = std::str::from_utf8(&line[..digits]) else { continue };
            let addr = u64::from_str_radix(hex, 16).unwrap_or(u64::MAX);
            if addr == 0 || addr == u64::MAX || addr < KERNEL_ADDR_SPACE {
                continue;
            }
            let Some(&kind) = line.get(digits + 1) else { continue };
            if matches!(kind, b'b' | b'B' | b'd' | b'D' | b'r' | b'R') {
                continue;
            }
            let rest = line.get(digits + 3..).unwrap_or(&[]);
            let name = &rest[..rest.iter().position(|b| b.is_ascii_whitespace()).unwrap_or(rest.len())];
            let start = names.len() as u32;
            names.push_str(&String::from_utf8_lossy(name));
            syms.push((addr, start, names.len() as u32 - start));
        }
        stdsort::sort_by(&mut syms, |a, b| a.0 < b.0);
        KernelSymbols { syms, names }
    }

    /// Number of symbols kept.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol `addr` falls in and the offset into it: the last symbol at or below `addr`.
    pub fn resolve(&self, addr: u64) -> Option<(&str, u64)> {
        let above = self.syms.partition_point(|&(a, _, _)| a <= addr);
        let &(start, name, len) = self.syms.get(above.checked_sub(1)?)?;
        Some((&self.names[name as usize..(name + len) as usize], addr - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_resolve() {
        let text = b"ffffffff81000000 T _text\n\
ffffffff81001000 t first_func\n\
ffffffff81002000 D some_data\n\
ffffffff81002000 r some_rodata\n\
ffffffff81003000 W weak_func\n\
0000000000001000 A fixed_percpu_data\n\
ffffffffc0a01000 t mod_func\t[mymod]\n\
ffffffffc0a01100 b mod_bss\t[mymod]\n";
        let k = KernelSymbols::parse(text);
        assert_eq!(k.len(), 4);
        assert_eq!(k.resolve(0xffffffff81000000), Some(("_text", 0)));
        assert_eq!(k.resolve(0xffffffff81001010), Some(("first_func", 0x10)));
        // Data symbols are skipped: the address still belongs to first_func.
        assert_eq!(k.resolve(0xffffffff81002004), Some(("first_func", 0x1004)));
        assert_eq!(k.resolve(0xffffffff81003000), Some(("weak_func", 0)));
        assert_eq!(k.resolve(0xffffffffc0a01105), Some(("mod_func", 0x105)));
        // Past the last symbol: still the last one. Below the first: nothing.
        assert_eq!(k.resolve(u64::MAX), Some(("mod_func", u64::MAX - 0xffffffffc0a01000)));
        assert_eq!(k.resolve(0xffffffff80ffffff), None);
        // An unprivileged reader sees zero addresses: nothing resolves.
        let k = KernelSymbols::parse(b"0000000000000000 T _text\n0000000000000000 t first_func\n");
        assert!(k.is_empty());
        assert_eq!(k.resolve(0xffffffff81000000), None);
    }
}
