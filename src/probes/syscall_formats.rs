//! `tracepoint:syscalls:*` on kernels built without per-syscall tracepoints (`CONFIG_FTRACE_SYSCALLS`, often
//! off on Android): their records are made up from [`syscall_signatures`] as the kernel would have declared them, and
//! the probes run on `raw_syscalls` (see [`super::syscall`]), which such kernels keep.

use super::syscall_signatures;
use crate::kernel::tracefs::{self, Format};
use std::path::Path;
use std::sync::OnceLock;

/// Why the probes run on `raw_syscalls`, for `-v` and `--info`.
pub const REASON: &str = "this kernel has no per-syscall tracepoints: CONFIG_FTRACE_SYSCALLS is off";

/// Whether `tracepoint:syscalls:*` must be made up here: tracefs has `raw_syscalls` but no
/// `syscalls/sys_enter_*` directory. Found out once.
pub fn made_up(root: &Path) -> bool {
    static MADE_UP: OnceLock<bool> = OnceLock::new();
    *MADE_UP.get_or_init(|| {
        let events = root.join("events");
        let has_any = std::fs::read_dir(events.join("syscalls")).is_ok_and(|entries| {
            entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("sys_enter_")))
        });
        !has_any && events.join("raw_syscalls/sys_enter").is_dir()
    })
}

/// Every tracepoint as a script sees them, sorted: tracefs's, with the made-up `syscalls` ones where needed.
pub fn all_tracepoints(root: &Path) -> Vec<(String, String)> {
    let mut list = tracefs::tracepoints(root);
    if made_up(root) {
        list.retain(|(category, _)| category != "syscalls");
        list.extend(made_up_tracepoints());
        list.sort();
    }
    list
}

/// The record of `CATEGORY:NAME`: its format file's, or the made-up one.
pub fn read_format(root: &Path, category: &str, name: &str) -> Result<Format, String> {
    if category != "syscalls" || !made_up(root) {
        return tracefs::read_format(root, category, name);
    }
    format(name).ok_or_else(|| {
        format!("there is no tracepoint `syscalls:{name}` ({REASON}, and {name} is no system call it has)")
    })
}

/// Every made-up tracepoint, as (`syscalls`, name): both of each system call this architecture has.
pub fn made_up_tracepoints() -> impl Iterator<Item = (String, String)> {
    syscall_signatures::all().filter(|(call, _)| bpf::arch::HOST.syscall_number(call).is_some()).flat_map(
        |(call, _)| ["enter", "exit"].map(|way| ("syscalls".to_string(), format!("sys_{way}_{call}"))),
    )
}

/// The record of `sys_enter_CALL` or `sys_exit_CALL`, as its format file would describe it.
pub fn format(name: &str) -> Option<Format> {
    let (exit, call) = match name.strip_prefix("sys_enter_") {
        Some(call) => (false, call),
        None => (true, name.strip_prefix("sys_exit_")?),
    };
    let arch = bpf::arch::HOST;
    arch.syscall_number(call)?;
    let args = match arch.syscall_signature(call) {
        Some(args) => args.to_vec(),
        None => syscall_signatures::of(call)?,
    };
    let mut text = format!(
        "name: {name}\nID: 0\nformat:\n\
         \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
         \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
         \tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n"
    );
    let fields: &[&str] = if exit { &["long ret"] } else { &args };
    for (i, decl) in fields.iter().enumerate() {
        let signed = u8::from(exit);
        text.push_str(&format!("\tfield:{decl};\toffset:{};\tsize:8;\tsigned:{signed};\n", 16 + 8 * i));
    }
    let mut format = tracefs::parse_format(&text).ok()?;
    format.category = "syscalls".into();
    Some(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_made_up_as_the_kernel_declares_them() {
        let enter = format("sys_enter_openat").expect("openat");
        let fields: Vec<(&str, u32)> = enter.fields.iter().map(|f| (f.name.as_str(), f.offset)).collect();
        assert_eq!(fields, [("__syscall_nr", 8), ("dfd", 16), ("filename", 24), ("flags", 32), ("mode", 40)]);
        let exit = format("sys_exit_openat").expect("openat");
        let ret = exit.field("ret").expect("ret");
        assert!((ret.offset, ret.size, ret.signed) == (16, 8, true));
        assert!(format("sys_enter_no_such_call").is_none());
        assert!(format("sched_switch").is_none());
    }

    #[test]
    fn every_call_of_this_architecture_with_a_signature_is_listed() {
        let listed: Vec<(String, String)> = made_up_tracepoints().collect();
        assert!(listed.contains(&("syscalls".into(), "sys_enter_getppid".into())));
        assert!(listed.contains(&("syscalls".into(), "sys_exit_getppid".into())));
        assert!(listed.iter().all(|(_, name)| format(name).is_some()));
    }
}
