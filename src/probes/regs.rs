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

/// The registers `reg(name)` reads, by the names bpftrace gives them, with their byte offsets in
/// `struct pt_regs`.
#[cfg(target_arch = "x86_64")]
pub const NAMED: &[(&str, i16)] = &[
    ("r15", 0),
    ("r14", 8),
    ("r13", 16),
    ("r12", 24),
    ("bp", 32),
    ("bx", 40),
    ("r11", 48),
    ("r10", 56),
    ("r9", 64),
    ("r8", 72),
    ("ax", 80),
    ("cx", 88),
    ("dx", 96),
    ("si", 104),
    ("di", 112),
    ("orig_ax", 120),
    ("ip", 128),
    ("cs", 136),
    ("flags", 144),
    ("sp", 152),
    ("ss", 160),
];
#[cfg(target_arch = "aarch64")]
pub const NAMED: &[(&str, i16)] = &[
    ("r0", 0),
    ("r1", 8),
    ("r2", 16),
    ("r3", 24),
    ("r4", 32),
    ("r5", 40),
    ("r6", 48),
    ("r7", 56),
    ("r8", 64),
    ("r9", 72),
    ("r10", 80),
    ("r11", 88),
    ("r12", 96),
    ("r13", 104),
    ("r14", 112),
    ("r15", 120),
    ("r16", 128),
    ("r17", 136),
    ("r18", 144),
    ("r19", 152),
    ("r20", 160),
    ("r21", 168),
    ("r22", 176),
    ("r23", 184),
    ("r24", 192),
    ("r25", 200),
    ("r26", 208),
    ("r27", 216),
    ("r28", 224),
    ("r29", 232),
    ("r30", 240),
    ("sp", 248),
    ("pc", 256),
    ("pstate", 264),
];
