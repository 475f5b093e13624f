//! x86-64: the kernel's `struct pt_regs` (arch/x86/include/asm/ptrace.h), the System V calling convention,
//! AT&T operands.

use super::{Arch, UsdtSyntax, UserMode};

pub const X86_64: Arch = Arch {
    name: "x86_64",
    args: &[112, 104, 96, 88, 72, 64],        // rdi, rsi, rdx, rcx, r8, r9
    retval: 80,                               // rax
    syscall_args: [112, 104, 96, 56, 72, 64], // rdi, rsi, rdx, r10, r8, r9
    syscall_number: 120,                      // orig_ax
    // cs's low two bits are the privilege level: 3 in user mode.
    user_mode: UserMode { register: 136, mask: 3, user: 3 },
    // A 32-bit process runs with cs = __USER32_CS.
    compat_mode: UserMode { register: 136, mask: 0xffff, user: 0x23 },
    instruction_pointer: 128,
    unwind_registers: super::UnwindRegisters { ip: 128, sp: 152, fp: 32, lr: None, kernel_stack_size: 16384 },
    registers: REGISTERS,
    usdt_syntax: UsdtSyntax::Att,
    usdt_register,
    char_signed: true,
    kernel_addr_space: 0x00ff_ffff_ffff_ffff,
    ldconfig_tag: "x86-64",
    elf_machine: 62, // EM_X86_64
    fentry_since: "5.5",
    execute_breakpoint_length: 8,
    // The uapi asm-generic/fcntl.h (linux-libc-dev 6.1), which x86-64's asm/fcntl.h includes unchanged.
    open_flags: &[
        ("O_DIRECT", 0o40000),
        ("O_LARGEFILE", 0o100000),
        ("O_DIRECTORY", 0o200000),
        ("O_NOFOLLOW", 0o400000),
        ("O_TMPFILE", 0o20200000),
    ],
    predefined_macros: &[
        "__linux__",
        "__unix__",
        "__GNUC__",
        "__STDC__",
        "__x86_64__",
        "__amd64__",
        "__LP64__",
        "_LP64",
    ],
    syscall_signatures: &[],
    syscall_table: "x86-64",
    syscalls: super::syscalls_x86_64::SYSCALLS,
    other_syscall_names: OTHER_SYSCALL_NAMES,
    uprobe_likely_refused,
    uprobe_misread,
};

const REGISTERS: &[(&str, i16)] = &[
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
    // bpftrace's name for the instruction pointer on every architecture (bpftrace #5272).
    ("pc", 128),
    ("cs", 136),
    ("flags", 144),
    ("sp", 152),
    ("ss", 160),
];

/// A register by any of its names (`rax`, `eax`, `ax`, `al`; `ah` is the second byte of `rax`).
fn usdt_register(name: &str) -> Option<i16> {
    const LEGACY: [(&str, i16); 8] =
        [("ax", 80), ("bx", 40), ("cx", 88), ("dx", 96), ("si", 104), ("di", 112), ("bp", 32), ("sp", 152)];
    const NUMBERED: [i16; 8] = [72, 64, 56, 48, 24, 16, 8, 0]; // r8 .. r15
    if name == "rip" {
        return Some(128);
    }
    if let Some(n) = name.strip_prefix('r').and_then(|rest| {
        let digits = rest.trim_end_matches(['d', 'w', 'b']);
        (rest.len() - digits.len() <= 1).then_some(digits)?.parse::<usize>().ok()
    }) {
        return NUMBERED.get(n.checked_sub(8)?).copied();
    }
    let wide = name.strip_prefix(['r', 'e']).filter(|rest| rest.len() == 2).unwrap_or(name);
    if let Some(&(_, offset)) = LEGACY.iter().find(|(legacy, _)| *legacy == wide) {
        return Some(offset);
    }
    // Byte registers: al, bl, cl, dl, sil, dil, bpl, spl; ah, bh, ch, dh.
    let low = name.strip_suffix('l').map(|r| if r.len() == 1 { format!("{r}x") } else { r.to_string() });
    if let Some(&(_, offset)) = low.and_then(|r| LEGACY.iter().find(|(legacy, _)| *legacy == r)) {
        return Some(offset);
    }
    let high = name.strip_suffix('h').filter(|r| matches!(*r, "a" | "b" | "c" | "d"))?;
    LEGACY.iter().find(|(legacy, _)| *legacy == format!("{high}x")).map(|&(_, offset)| offset + 1)
}

/// A first instruction with a lock or segment prefix, or an `int3`: the kernel's uprobes refuse those.
fn uprobe_likely_refused(bytes: &[u8]) -> bool {
    // Operand-size, address-size and repeat prefixes and REX say nothing; what follows them does.
    let opcode = bytes.iter().find(|&&b| !matches!(b, 0x66 | 0x67 | 0xf2 | 0xf3 | 0x40..=0x4f));
    matches!(opcode, Some(0xf0 | 0x26 | 0x2e | 0x36 | 0x3e | 0xcc))
}

/// A first instruction in VEX, EVEX or XOP encoding (AVX code, as at the start of glibc's `__strchr_avx2`
/// and `__strchrnul_evex`). Linux's x86 uprobes look such an instruction up by its opcode byte alone, as
/// if it were a legacy one-byte opcode. Most are refused that way, but where that byte is a branch's
/// (0x70-0x7f, 0xe8, 0xe9, 0xeb) the kernel accepts the uprobe and emulates a branch in the instruction's
/// place, so every process that runs the function computes wrong results: on 6.18, `vpbroadcastb`
/// (EVEX, opcode 0x7a) at `__strchrnul_evex` is taken for `jp`, and printf in every program prints its
/// format unformatted. So steadytrace never asks for a uprobe there, whatever the kernel would answer.
fn uprobe_misread(bytes: &[u8]) -> bool {
    // Segment and address-size prefixes may stand before a VEX prefix; no other prefix may.
    let Some(start) = bytes.iter().position(|b| !matches!(b, 0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0x67))
    else {
        return false;
    };
    match bytes[start] {
        0xc4 | 0xc5 | 0x62 => true,
        // XOP shares its first byte with `pop r/m`; its map field (the low five bits after it) is 8 or more.
        0x8f => bytes.get(start + 1).is_some_and(|b| b & 0x1f >= 8),
        _ => false,
    }
}

/// `syscall_name()` beyond the table: numbers of calls the kernel no longer implements, and the x32 ABI's own.
#[rustfmt::skip]
const OTHER_SYSCALL_NAMES: &[(i64, &str)] = &[
    (174, "create_module"), (177, "get_kernel_syms"), (178, "query_module"),
    (512, "rt_sigaction"), (513, "rt_sigreturn"), (514, "ioctl"), (515, "readv"),
    (516, "writev"), (517, "recvfrom"), (518, "sendmsg"), (519, "recvmsg"), (520, "execve"), (521, "ptrace"),
    (522, "rt_sigpending"), (523, "rt_sigtimedwait"), (524, "rt_sigqueueinfo"), (525, "sigaltstack"),
    (526, "timer_create"), (527, "mq_notify"), (528, "kexec_load"), (529, "waitid"), (530, "set_robust_list"),
    (531, "get_robust_list"), (532, "vmsplice"), (533, "move_pages"), (534, "preadv"), (535, "pwritev"),
    (536, "rt_tgsigqueueinfo"), (537, "recvmmsg"), (538, "sendmmsg"), (539, "process_vm_readv"),
    (540, "process_vm_writev"), (541, "setsockopt"), (542, "getsockopt"), (543, "io_setup"), (544, "io_submit"),
    (545, "execveat"), (546, "preadv2"), (547, "pwritev2"),
];
