//! Every fact about the processor architecture that the generated programs and the probes depend on, in
//! one place: where `struct pt_regs` keeps arguments, return values, the system call number and the
//! interrupted mode; the names `reg()` knows; the system call table; how `<sys/sdt.h>` writes a USDT
//! argument's operand; whether plain `char` is signed; which ELF machine and `ldconfig` tag the
//! architecture's binaries carry.
//!
//! [`HOST`] is the architecture steadytrace was built for, which is the one it traces: a BPF program sees
//! the kernel's own registers, and the kernel runs on the same processor. Both tables are compiled into
//! every build, so that each is tested on any machine.

mod aarch64;
mod syscalls_generic;
mod syscalls_x86_64;
mod x86_64;

pub use aarch64::AARCH64;
pub use x86_64::X86_64;

/// The architecture steadytrace runs on and traces.
#[cfg(target_arch = "x86_64")]
pub const HOST: &Arch = &X86_64;
#[cfg(target_arch = "aarch64")]
pub const HOST: &Arch = &AARCH64;

/// The architecture whose binaries carry ELF machine number `machine`.
pub fn by_elf_machine(machine: u16) -> Option<&'static Arch> {
    [&X86_64, &AARCH64].into_iter().find(|arch| arch.elf_machine == machine)
}

/// The facts of one architecture. Offsets are bytes into `struct pt_regs`, the registers the kernel saved
/// where a kprobe, uprobe or perf event fired, or where a system call entered the kernel.
#[derive(Debug)]
pub struct Arch {
    /// As `uname -m` prints it.
    pub name: &'static str,
    /// Where the calling convention passes the first integer arguments.
    pub args: &'static [i16],
    /// Where a function's integer return value is.
    pub retval: i16,
    /// Where a system call's six arguments are kept, as the kernel's `syscall_get_arguments` reads them (the
    /// first survives in its own place on arm64, where the return value overwrites `x0`).
    pub syscall_args: [i16; 6],
    /// Where the system call's number is kept: read as a 32-bit value (`syscallno` is an `s32` on arm64).
    pub syscall_number: i16,
    /// How to tell that the probe interrupted user code.
    pub user_mode: UserMode,
    /// How to tell, in the registers saved at a system call, that a 32-bit process made it (`user` here
    /// meaning such a process).
    pub compat_mode: UserMode,
    /// The instruction pointer.
    pub instruction_pointer: i16,
    /// The registers a user stack is unwound from (`dw_ustack`): instruction pointer, stack pointer, frame
    /// pointer, and the link register where calls keep the return address in one (arm64's x30).
    pub unwind_registers: UnwindRegisters,
    /// The registers `reg(NAME)` reads, by the names bpftrace gives them.
    pub registers: &'static [(&'static str, i16)],
    /// How `<sys/sdt.h>` writes operands here.
    pub usdt_syntax: UsdtSyntax,
    /// A register by any name an operand may give it (`rax`, `eax`, `al`; `x3`, `w3`): its offset, plus one
    /// for x86's high byte registers (`ah`).
    pub usdt_register: fn(&str) -> Option<i16>,
    /// Whether plain `char` is signed.
    pub char_signed: bool,
    /// Kernel addresses are above this; /proc/kallsyms lines below it are not kernel symbols.
    pub kernel_addr_space: u64,
    /// How `ldconfig -p` marks this architecture's libraries (`libc6,x86-64`).
    pub ldconfig_tag: &'static str,
    /// The ELF `e_machine` of this architecture's binaries.
    pub elf_machine: u16,
    /// The first Linux release whose BPF trampolines (fentry/fexit) attach to kernel functions here.
    pub fentry_since: &'static str,
    /// The length the kernel takes for an execution breakpoint, whatever length was asked: one instruction.
    pub execute_breakpoint_length: u64,
    /// What the C compiler defines before any header here (what a script's `#ifdef` tests most often).
    pub predefined_macros: &'static [&'static str],
    /// The `open(2)` flags whose values are this architecture's own (its uapi `asm/fcntl.h`), with `O_TMPFILE`,
    /// which includes `O_DIRECTORY`.
    pub open_flags: &'static [(&'static str, i64)],
    /// System calls whose arguments come in another order here than on x86-64, as the kernel declares them.
    syscall_signatures: &'static [(&'static str, &'static [&'static str])],
    /// Which system call table the numbers come from.
    pub syscall_table: &'static str,
    syscalls: crate::code::named_numbers::NamedNumbers,
    /// Numbers `syscall_name()` knows that have no tracepoint: calls the kernel no longer implements, other ABIs'.
    other_syscall_names: &'static [(i64, &'static str)],
    /// Whether a uprobe at an instruction starting with these bytes is likely refused by the kernel.
    pub uprobe_likely_refused: fn(&[u8]) -> bool,
    /// Whether the kernel would misread an instruction starting with these bytes, accepting a uprobe there
    /// and then running another instruction in its place: never attached.
    pub uprobe_misread: fn(&[u8]) -> bool,
}

/// Where the interrupted mode is: user mode (or, for [`Arch::compat_mode`], a 32-bit process) when
/// `register & mask == user`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserMode {
    pub register: i16,
    pub mask: i32,
    pub user: i32,
}

/// Where `struct pt_regs` keeps the registers an unwinder starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnwindRegisters {
    pub ip: i16,
    pub sp: i16,
    pub fp: i16,
    pub lr: Option<i16>,
    /// The kernel stack's size (`THREAD_SIZE`, with 4 KiB pages and without KASAN): a task's user registers are
    /// saved at its top, `task->stack + THREAD_SIZE - sizeof(struct pt_regs)`, where kernels before
    /// `bpf_task_pt_regs` (5.15) are read.
    pub kernel_stack_size: i32,
}

/// The assembler syntax of USDT operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsdtSyntax {
    /// AT&T: `%rdi`, `$5`, `-16(%rbp)`, `8(%rax,%rdx,8)`.
    Att,
    /// arm64: `x0`, `5`, `[x22]`, `[sp, 128]`.
    Arm64,
}

/// Tracepoints (`sys_enter_NAME`) named after the kernel's function rather than the system call.
const SYSCALL_ALIASES: &[(&str, &str)] = &[
    ("newstat", "stat"),
    ("newfstat", "fstat"),
    ("newlstat", "lstat"),
    ("newuname", "uname"),
    ("sendfile64", "sendfile"),
    ("umount", "umount2"),
    ("fadvise64_64", "fadvise64"),
    ("arm64_personality", "personality"),
];

impl Arch {
    /// The number of the system call whose tracepoints are `sys_enter_NAME` and `sys_exit_NAME`.
    pub fn syscall_number(&self, name: &str) -> Option<i64> {
        let name = SYSCALL_ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, real)| real);
        self.syscalls.get(name)
    }

    /// The arguments of system call `name` where this architecture has its own order.
    pub fn syscall_signature(&self, name: &str) -> Option<&'static [&'static str]> {
        self.syscall_signatures.iter().find(|(n, _)| *n == name).map(|&(_, args)| args)
    }

    /// Every system call of the table: its name and number.
    pub fn syscalls(&self) -> impl Iterator<Item = (&'static str, i64)> {
        self.syscalls.iter()
    }

    /// Every number `syscall_name()` names, with its name: the table's, then the others'.
    pub fn syscall_names(&self) -> impl Iterator<Item = (i64, &'static str)> {
        self.syscalls().map(|(name, n)| (n, name)).chain(self.other_syscall_names.iter().copied())
    }

    /// What differs here, as `--info` says it: `aarch64 (generic system call numbers, ...)`.
    pub fn summary(&self) -> String {
        let char_sign = if self.char_signed { "signed" } else { "unsigned" };
        format!(
            "{} ({} system call numbers; plain char {char_sign}; fentry/fexit from Linux {}; {} argument registers)",
            self.name,
            self.syscall_table,
            self.fentry_since,
            self.args.len()
        )
    }

    /// The offset of `reg(name)`.
    pub fn register(&self, name: &str) -> Option<i16> {
        self.registers.iter().find(|(n, _)| *n == name).map(|&(_, offset)| offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pc_is_the_instruction_pointer_on_both_architectures() {
        assert_eq!(X86_64.register("pc"), X86_64.register("ip"));
        assert_eq!(X86_64.register("pc"), Some(128));
        assert_eq!(AARCH64.register("pc"), Some(256));
    }

    #[test]
    fn syscall_tables_differ_where_the_kernels_do() {
        assert_eq!(X86_64.syscall_number("getppid"), Some(110));
        assert_eq!(AARCH64.syscall_number("getppid"), Some(173));
        assert_eq!(X86_64.syscall_number("clock_nanosleep"), Some(230));
        assert_eq!(AARCH64.syscall_number("clock_nanosleep"), Some(115));
        assert_eq!(AARCH64.syscall_number("getuid"), Some(174));
        // arm64 has no open(2), only openat(2).
        assert_eq!(X86_64.syscall_number("open"), Some(2));
        assert_eq!(AARCH64.syscall_number("open"), None);
        assert_eq!(AARCH64.syscall_number("openat"), Some(56));
        // Tracepoints named after the kernel's function.
        assert_eq!(X86_64.syscall_number("newfstat"), Some(5));
        assert_eq!(AARCH64.syscall_number("newfstat"), Some(80));
        assert_eq!(AARCH64.syscall_number("fadvise64_64"), Some(223));
        assert_eq!(AARCH64.syscall_number("arm64_personality"), Some(92));
        assert_eq!(AARCH64.syscall_number("renameat"), Some(38));
        // Newer than the C library's list: the same number everywhere since 5.1.
        assert_eq!(X86_64.syscall_number("cachestat"), Some(451));
        assert_eq!(AARCH64.syscall_number("cachestat"), Some(451));
        assert_eq!(X86_64.syscall_number("no_such_call"), None);
    }

    #[test]
    fn syscall_names_are_unique_per_number() {
        for arch in [&X86_64, &AARCH64] {
            let mut numbers: Vec<i64> = arch.syscall_names().map(|(n, _)| n).collect();
            let all = numbers.len();
            numbers.sort_unstable();
            numbers.dedup();
            assert_eq!(numbers.len(), all, "{}", arch.name);
        }
        assert_eq!(AARCH64.syscall_names().find(|(n, _)| *n == 174), Some((174, "getuid")));
        assert_eq!(X86_64.syscall_names().find(|(n, _)| *n == 174), Some((174, "create_module")));
    }

    #[test]
    fn arm64_clone_takes_tls_before_child_tidptr() {
        let clone = AARCH64.syscall_signature("clone").expect("clone");
        assert_eq!(&clone[3..], ["unsigned long tls", "int * child_tidptr"]);
        assert_eq!(X86_64.syscall_signature("clone"), None);
    }

    #[test]
    fn x86_avx_instructions_are_never_probed() {
        let misread = X86_64.uprobe_misread;
        // glibc 2.36's __strchrnul_evex: vpbroadcastb %esi,%ymm17 (EVEX), which 6.18 emulates as `jp`.
        assert!(misread(&[0x62, 0xe2, 0x7d, 0x28, 0x7a, 0xce]));
        // __memset_avx2_unaligned: vmovd %esi,%xmm0 (two-byte VEX); three-byte VEX; XOP (map 9).
        assert!(misread(&[0xc5, 0xf9, 0x6e, 0xc6]));
        assert!(misread(&[0xc4, 0xe2, 0x7d, 0x78, 0xc6]));
        assert!(misread(&[0x8f, 0xe9, 0x78, 0xe1, 0xc1]));
        // A VEX instruction behind a segment prefix.
        assert!(misread(&[0x64, 0xc5, 0xf9, 0x6e, 0xc6]));
        // endbr64, push %rbp, pop (%rax) (0x8f /0, not XOP), an empty read: probed as usual.
        assert!(!misread(&[0xf3, 0x0f, 0x1e, 0xfa]));
        assert!(!misread(&[0x55, 0x48, 0x89, 0xe5]));
        assert!(!misread(&[0x8f, 0x00]));
        assert!(!misread(&[]));
        assert!(!(AARCH64.uprobe_misread)(&[0x62, 0xe2, 0x7d, 0x28]));
    }

    #[test]
    fn host_matches_the_build() {
        assert_eq!(HOST.name, std::env::consts::ARCH);
    }

    #[test]
    fn pt_regs_offsets_are_within_the_struct() {
        for arch in [&X86_64, &AARCH64] {
            let size = arch.registers.iter().map(|&(_, at)| at).max().unwrap() + 8;
            let offsets = arch.args.iter().chain(&arch.syscall_args).chain([
                &arch.retval,
                &arch.syscall_number,
                &arch.instruction_pointer,
                &arch.user_mode.register,
            ]);
            for &at in offsets {
                // arm64's orig_x0 and syscallno follow the registers `reg()` names.
                assert!(at % 4 == 0 && at < size + 16, "{} offset {at}", arch.name);
            }
        }
    }
}
