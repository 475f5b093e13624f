//! Builtin variables: their types.

use super::types::Type;
use crate::kernel::KernelTypes;

/// Bytes of `comm`, the kernel's TASK_COMM_LEN.
pub const COMM_SIZE: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Nsecs,
    Elapsed,
    Pid,
    Tid,
    Uid,
    Gid,
    Cpu,
    Ncpus,
    Rand,
    Comm,
    Probe,
    /// The probe's type (`kprobe`, `interval`, ...; `special` for BEGIN and END), as current bpftrace names it.
    Probetype,
    /// The name of the current uid's user, looked up in userspace when printed.
    Username,
    /// The current task (`struct task_struct *`).
    Curtask,
    /// The kernel's jiffies counter (`bpf_jiffies64`).
    Jiffies,
    /// The NUMA node the probe runs on.
    Numaid,
    /// The id of the current task's cgroup (v2).
    Cgroup,
    /// 1 when the probe interrupted user code.
    Usermode,
    /// The address of the probe's context (its saved registers, its record), to cast to a struct pointer.
    Ctx,
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "nsecs" => Builtin::Nsecs,
            "elapsed" => Builtin::Elapsed,
            "pid" => Builtin::Pid,
            "tid" => Builtin::Tid,
            "uid" => Builtin::Uid,
            "gid" => Builtin::Gid,
            "cpu" => Builtin::Cpu,
            "ncpus" => Builtin::Ncpus,
            "rand" => Builtin::Rand,
            "comm" => Builtin::Comm,
            "probe" => Builtin::Probe,
            "probetype" => Builtin::Probetype,
            "username" => Builtin::Username,
            "curtask" => Builtin::Curtask,
            "jiffies" => Builtin::Jiffies,
            "numaid" => Builtin::Numaid,
            "cgroup" => Builtin::Cgroup,
            "usermode" => Builtin::Usermode,
            "ctx" => Builtin::Ctx,
            _ => return None,
        })
    }

    pub fn ty(self, kernel: &KernelTypes) -> Type {
        match self {
            Builtin::Comm => Type::Str { size: COMM_SIZE },
            // The longest canonical probe name steadytrace makes is far shorter.
            Builtin::Probe => Type::Str { size: 64 },
            Builtin::Username => Type::Username,
            Builtin::Probetype => Type::Str { size: 16 },
            // A plain address where the kernel has no BTF to describe the task.
            Builtin::Curtask => kernel
                .record_id(false, "task_struct")
                .map_or(Type::U64, |to| Type::Ptr { to: kernel.type_ref(to), user: false }),
            _ => Type::U64,
        }
    }
}

/// Builtins of bpftrace that this version does not compile yet.
pub const NOT_YET: &[&str] = &["sarg0", "sarg1", "sarg2"];
