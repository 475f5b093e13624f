//! User-space symbols of a process, found the way bpftrace 0.17 finds them through bcc 0.26's `ProcSyms`
//! (src/cc/bcc_syms.cc): the process's mappings in `/proc/PID/maps`, each mapped ELF file's symbol tables
//! (`.symtab`, else `.dynsym`), an address belonging to the function whose `[start, start + size)` holds
//! it, the offset from that start. The ELF work is [`blazesym`]'s (see the module docs of
//! [`crate::symbols`] for why).
//!
//! Names are demangled as bcc demangles them: only names starting with `_Z` or `___Z`, with libstdc++'s
//! `__cxa_demangle`, the very function bcc calls. So Rust's legacy symbols print as bpftrace prints them,
//! hash and `$u7b$` escapes included (`rspin::inner::rust_leaf::h9b8be9f85ec4b50f`), and v0 symbols
//! (`_RNv…`) stay mangled. libstdc++ is opened with `dlopen` on the first name that needs it, so
//! steadytrace does not link it and pays nothing for it otherwise; without it, names stay mangled.

use blazesym::symbolize::source::{Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

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
}

impl Default for UserSymbols {
    fn default() -> Self {
        UserSymbols::new()
    }
}

impl UserSymbols {
    pub fn new() -> UserSymbols {
        UserSymbols { symbolizer: None }
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
                .build()
        });
        let mut process = Process::new(pid.into());
        // ELF symbols only, as bcc: DWARF names (and inlined functions) would differ from bpftrace's.
        process.debug_syms = false;
        let source = Source::Process(process);
        let Ok(found) = symbolizer.symbolize(&source, Input::AbsAddr(addrs)) else {
            return vec![None; addrs.len()];
        };
        found
            .into_iter()
            .map(|symbolized| match symbolized {
                Symbolized::Sym(sym) => Some(UserSym {
                    name: demangle(&sym.name),
                    offset: sym.offset as u64,
                    module: sym.module.map(|m| m.to_string_lossy().into_owned()).unwrap_or_default(),
                }),
                Symbolized::Unknown(_) => None,
            })
            .collect()
    }
}

type CxaDemangle = unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// `abi::__cxa_demangle` from libstdc++, loaded on first use.
fn cxa_demangle() -> Option<CxaDemangle> {
    static FUNCTION: OnceLock<Option<CxaDemangle>> = OnceLock::new();
    *FUNCTION.get_or_init(|| {
        // SAFETY: dlopen and dlsym with NUL-terminated names; the library is never closed, so the function
        // pointer stays valid, and `__cxa_demangle` has the signature of `CxaDemangle`.
        unsafe {
            let handle = libc::dlopen(c"libstdc++.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return None;
            }
            let function = libc::dlsym(handle, c"__cxa_demangle".as_ptr());
            (!function.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, CxaDemangle>(function))
        }
    })
}

/// bcc's demangling: names starting with `_Z` or `___Z` through `__cxa_demangle`, the name itself when that
/// fails or for any other name.
pub fn demangle(name: &str) -> String {
    if !(name.starts_with("_Z") || name.starts_with("___Z")) {
        return name.to_string();
    }
    let (Some(function), Ok(mangled)) = (cxa_demangle(), CString::new(name)) else {
        return name.to_string();
    };
    // SAFETY: a NUL-terminated input, no caller buffer (so the result is malloc'ed by the callee), the
    // result freed with free() after copying.
    unsafe {
        let mut status: c_int = 0;
        let out = function(mangled.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), &mut status);
        if out.is_null() {
            return name.to_string();
        }
        let text = CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out.cast());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_like_bcc() {
        if cxa_demangle().is_none() {
            println!("SKIPPED: libstdc++.so.6 cannot be loaded; names stay mangled");
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
