//! Where function arguments and return values are in a uprobe's or kprobe's context
//! (`struct pt_regs`), by architecture.

/// Byte offsets of the first six integer arguments.
#[cfg(target_arch = "x86_64")]
pub const ARGS: [i16; 6] = [112, 104, 96, 88, 72, 64]; // rdi, rsi, rdx, rcx, r8, r9
#[cfg(target_arch = "aarch64")]
pub const ARGS: [i16; 6] = [0, 8, 16, 24, 32, 40]; // x0..x5

/// Byte offset of the return value.
#[cfg(target_arch = "x86_64")]
pub const RETVAL: i16 = 80; // rax
#[cfg(target_arch = "aarch64")]
pub const RETVAL: i16 = 0; // x0

/// Byte offsets of a system call's six arguments in its saved registers (as `syscall_get_arguments`
/// reads them).
#[cfg(target_arch = "x86_64")]
pub const SYSCALL_ARGS: [i16; 6] = [112, 104, 96, 56, 72, 64]; // rdi, rsi, rdx, r10, r8, r9

/// Byte offset of the system call's number in its saved registers (`orig_ax`).
#[cfg(target_arch = "x86_64")]
pub const SYSCALL_NR: i16 = 120;

/// Byte offset of the register telling the CPU mode the probe interrupted: `cs` (user mode when its low
/// two bits are 3), `pstate` on arm64 (user mode when its mode bits are 0).
#[cfg(target_arch = "x86_64")]
pub const MODE: i16 = 136;
#[cfg(target_arch = "aarch64")]
pub const MODE: i16 = 264;
