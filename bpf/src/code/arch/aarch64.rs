//! arm64: the kernel's `struct pt_regs` (arch/arm64/include/asm/ptrace.h: `regs[31]`, `sp`, `pc`,
//! `pstate`, `orig_x0`, `syscallno`), the AAPCS64 calling convention, the generic system call table, and
//! the operands GCC writes for `<sys/sdt.h>` (`x0`, `[x22, 20]`).

use super::{Arch, UsdtSyntax, UserMode};

pub const AARCH64: Arch = Arch {
    name: "aarch64",
    args: &[0, 8, 16, 24, 32, 40, 48, 56],  // x0 .. x7
    retval: 0,                              // x0
    syscall_args: [272, 8, 16, 24, 32, 40], // orig_x0, x1 .. x5
    syscall_number: 280,                    // syscallno
    // pstate's low four bits are the exception level and stack pointer choice: 0 (EL0t) in user mode.
    user_mode: UserMode { register: 264, mask: 0xf, user: 0 },
    // pstate's nRW bit (PSR_MODE32_BIT): an AArch32 process.
    compat_mode: UserMode { register: 264, mask: 0x10, user: 0x10 },
    instruction_pointer: 256,
    // pc, sp, x29, x30 of `struct user_pt_regs`, the start of the kernel's `struct pt_regs`.
    unwind_registers: super::UnwindRegisters {
        ip: 256,
        sp: 248,
        fp: 232,
        lr: Some(240),
        kernel_stack_size: 16384,
    },
    registers: REGISTERS,
    usdt_syntax: UsdtSyntax::Arm64,
    usdt_register,
    char_signed: false,
    kernel_addr_space: 0,
    ldconfig_tag: "AArch64",
    elf_machine: 183, // EM_AARCH64
    // arm64 BPF trampolines came in 6.0, but attach to kernel functions only through ftrace's direct calls,
    // which arm64 has from 6.4: before that the kernel loads fentry programs and refuses to attach them.
    fentry_since: "6.4",
    execute_breakpoint_length: 4,
    // The kernel's arch/arm64/include/uapi/asm/fcntl.h, before it includes asm-generic/fcntl.h.
    open_flags: &[
        ("O_DIRECTORY", 0o40000),
        ("O_NOFOLLOW", 0o100000),
        ("O_DIRECT", 0o200000),
        ("O_LARGEFILE", 0o400000),
        ("O_TMPFILE", 0o20040000),
    ],
    predefined_macros: &["__linux__", "__unix__", "__GNUC__", "__STDC__", "__aarch64__", "__LP64__", "_LP64"],
    // CONFIG_CLONE_BACKWARDS: clone(2) takes tls before child_tidptr.
    syscall_signatures: &[(
        "clone",
        &[
            "unsigned long clone_flags",
            "unsigned long newsp",
            "int * parent_tidptr",
            "unsigned long tls",
            "int * child_tidptr",
        ],
    )],
    syscall_table: "generic",
    syscalls: super::syscalls_generic::SYSCALLS,
    other_syscall_names: &[],
    uprobe_likely_refused: |_| false,
    uprobe_misread: |_| false,
};

const REGISTERS: &[(&str, i16)] = &[
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

/// `x0`..`x30` and their lower halves `w0`..`w30` (the same place: arm64 runs little-endian), `sp`.
fn usdt_register(name: &str) -> Option<i16> {
    if name == "sp" {
        return Some(248);
    }
    let n: i16 = name.strip_prefix(['x', 'w'])?.parse().ok()?;
    (0..=30).contains(&n).then(|| 8 * n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operand_registers() {
        assert_eq!(usdt_register("x0"), Some(0));
        assert_eq!(usdt_register("w3"), Some(24));
        assert_eq!(usdt_register("x30"), Some(240));
        assert_eq!(usdt_register("sp"), Some(248));
        assert_eq!(usdt_register("x31"), None);
        // Found by the mutation test of USDT operands: the offset was computed before the range check.
        assert_eq!(usdt_register("x9999"), None);
        assert_eq!(usdt_register("r0"), None);
        assert_eq!(usdt_register("x"), None);
    }
}
