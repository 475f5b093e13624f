//! Builtin variables: their types, and which probes have them.

use super::types::Type;

/// Bytes of `comm`, the kernel's TASK_COMM_LEN.
pub const COMM_SIZE: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Nsecs,
    Elapsed,
    Pid,
    Tid,
    Cpu,
    Comm,
    Probe,
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "nsecs" => Builtin::Nsecs,
            "elapsed" => Builtin::Elapsed,
            "pid" => Builtin::Pid,
            "tid" => Builtin::Tid,
            "cpu" => Builtin::Cpu,
            "comm" => Builtin::Comm,
            "probe" => Builtin::Probe,
            _ => return None,
        })
    }

    pub fn ty(self) -> Type {
        match self {
            Builtin::Comm => Type::Str { size: COMM_SIZE },
            // The longest canonical probe name steadytrace makes is far shorter.
            Builtin::Probe => Type::Str { size: 64 },
            _ => Type::U64,
        }
    }
}

/// Builtins of bpftrace that this version does not compile yet.
pub const NOT_YET: &[&str] = &[
    "uid", "gid", "ncpus", "rand", "username", "cgroup", "curtask", "cpid", "func", "retval", "kstack",
    "ustack", "args", "arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "sarg0", "jiffies", "numaid", "ctx",
];
