//! The types of values in a script, and how they are laid out in BPF memory (map keys and values,
//! records, stack slots): integers take 8 bytes, strings their size rounded up to 8, tuples the
//! concatenation of their fields.

use crate::symbols::StackMode;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// Integers live in 64-bit registers; `signed` decides division, comparison and printing.
    Int {
        signed: bool,
    },
    /// A string of at most `size` bytes, NUL-padded.
    Str {
        size: usize,
    },
    Tuple(Vec<Type>),
    /// `kstack` or `ustack`: the id of a stack in a stack-trace map (and for a user stack, the pid whose
    /// addresses they are), symbolized in userspace.
    Stack(StackType),
    /// A CPU bitmap (`__data_loc cpumask_t` tracepoint fields) of `bytes` bytes: printed as a CPU list
    /// (`0-3,8`), usable as a map key, iterable with `for`.
    Cpumask {
        bytes: usize,
    },
    /// `ksym(addr)` / `usym(addr)`: an address (and for a user one, the pid whose it is), printed as the
    /// name of the function containing it.
    Symbol {
        user: bool,
    },
    /// `func` under a uprobe_multi link: the index of the function that fired among `names` (the
    /// link's cookie), printed as its name.
    Function {
        names: std::sync::Arc<[String]>,
    },
    /// `ntop([af, ]addr)`: an address family (`AF_INET`, `AF_INET6`) and 16 bytes of address, printed as
    /// `inet_ntop` prints them (`127.0.0.1`, `::1`).
    Inet,
    /// `buf(data, len)`: a length (8 bytes) and up to `size` bytes, printed with `\xNN` escapes for
    /// bytes outside printable ASCII (`%r`), or all in hex (`%rx`, `%rh`).
    Buf {
        size: usize,
    },
    /// `strftime(format, nsecs)`: nanoseconds since boot, printed as the wall-clock time `format`
    /// (strftime(3), plus `%f` for microseconds) gives.
    Timestamp {
        format: std::sync::Arc<str>,
    },
    /// A pointer whose target the kernel's BTF describes (`curtask`, `(struct sock *)arg0`): an unsigned
    /// integer that also allows `->field`; `to` is the BTF id of the target, `user` says the memory is a
    /// process's (pointer arguments of system calls, casts in uprobes), not the kernel's.
    Ptr {
        to: u32,
        user: bool,
    },
    /// A struct or union inside another (`curtask->se`): only its members can be read (`curtask->se.vruntime`).
    Record {
        id: u32,
        user: bool,
    },
    /// What a statement-like call such as `printf` gives back.
    Void,
}

/// Which stack, how deep, and how it is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackType {
    pub user: bool,
    pub depth: u8,
    pub mode: StackMode,
}

impl StackType {
    /// The default depth: the kernel's `perf_event_max_stack`, as bpftrace's.
    pub const MAX_DEPTH: u8 = 127;
}

impl Type {
    pub const U64: Type = Type::Int { signed: false };
    pub const I64: Type = Type::Int { signed: true };

    /// Integers and pointers: what arithmetic, comparisons and `%d` take.
    pub fn is_int(&self) -> bool {
        matches!(self, Type::Int { .. } | Type::Ptr { .. })
    }

    pub fn is_signed(&self) -> bool {
        matches!(self, Type::Int { signed: true })
    }

    /// Bytes this type takes in BPF memory (8-byte aligned).
    pub fn slot_size(&self) -> usize {
        match self {
            Type::Int { .. } | Type::Ptr { .. } => 8,
            Type::Inet => 24,
            Type::Buf { size } => 8 + size.div_ceil(8) * 8,
            Type::Timestamp { .. } => 8,
            Type::Function { .. } => 8,
            Type::Record { .. } => 0,
            Type::Str { size } => size.div_ceil(8) * 8,
            Type::Tuple(fields) => fields.iter().map(Type::slot_size).sum(),
            Type::Stack(stack) => {
                if stack.user {
                    16
                } else {
                    8
                }
            }
            Type::Cpumask { bytes } => *bytes,
            Type::Symbol { user } => {
                if *user {
                    16
                } else {
                    8
                }
            }
            Type::Void => 0,
        }
    }

    /// Offsets of a tuple's fields within its slot.
    pub fn field_offsets(fields: &[Type]) -> Vec<usize> {
        fields
            .iter()
            .scan(0, |offset, field| {
                let at = *offset;
                *offset += field.slot_size();
                Some(at)
            })
            .collect()
    }

    /// The type that holds values of both: the same shape, strings as long as the longer one, integers
    /// signed only when both are. `None` when the shapes differ.
    pub fn unify(&self, other: &Type) -> Option<Type> {
        Some(match (self, other) {
            (Type::Int { signed: a }, Type::Int { signed: b }) => Type::Int { signed: *a && *b },
            (Type::Ptr { to: a, user: x }, Type::Ptr { to: b, user: y }) if a == b && x == y => {
                Type::Ptr { to: *a, user: *x }
            }
            (Type::Ptr { .. } | Type::Int { .. }, Type::Ptr { .. } | Type::Int { .. }) => Type::U64,
            (Type::Str { size: a }, Type::Str { size: b }) => Type::Str { size: (*a).max(*b) },
            (Type::Tuple(a), Type::Tuple(b)) if a.len() == b.len() => {
                Type::Tuple(a.iter().zip(b).map(|(x, y)| x.unify(y)).collect::<Option<_>>()?)
            }
            (Type::Stack(a), Type::Stack(b)) if a == b => Type::Stack(*a),
            (Type::Cpumask { bytes: a }, Type::Cpumask { bytes: b }) if a == b => Type::Cpumask { bytes: *a },
            (Type::Symbol { user: a }, Type::Symbol { user: b }) if a == b => Type::Symbol { user: *a },
            (Type::Void, Type::Void) => Type::Void,
            (Type::Inet, Type::Inet) => Type::Inet,
            (Type::Buf { size: a }, Type::Buf { size: b }) => Type::Buf { size: (*a).max(*b) },
            (Type::Timestamp { format: a }, Type::Timestamp { format: b }) if a == b => {
                Type::Timestamp { format: a.clone() }
            }
            (Type::Function { names: a }, Type::Function { names: b }) if a == b => {
                Type::Function { names: a.clone() }
            }
            _ => return None,
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Int { signed: true } => write!(f, "int64"),
            Type::Int { signed: false } => write!(f, "uint64"),
            Type::Str { size } => write!(f, "string[{size}]"),
            Type::Tuple(fields) => {
                write!(f, "(")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{field}")?;
                }
                write!(f, ")")
            }
            Type::Stack(stack) => write!(f, "{}", if stack.user { "ustack" } else { "kstack" }),
            Type::Cpumask { .. } => write!(f, "cpumask"),
            Type::Inet => write!(f, "inet"),
            Type::Buf { size } => write!(f, "buffer[{size}]"),
            Type::Timestamp { .. } => write!(f, "timestamp"),
            Type::Function { .. } => write!(f, "func"),
            Type::Symbol { user } => write!(f, "{}", if *user { "usym" } else { "ksym" }),
            Type::Ptr { to, .. } => write!(f, "{} *", crate::probes::btf::type_name(*to)),
            Type::Record { id, .. } => write!(f, "{}", crate::probes::btf::type_name(*id)),
            Type::Void => write!(f, "none"),
        }
    }
}

/// CPUs this machine can ever have (the highest possible CPU number plus one): per-CPU maps hold a
/// value for each.
pub fn possible_cpus() -> usize {
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    possible.trim().rsplit([',', '-']).next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(63) + 1
}

/// Bytes of a cpumask value on this machine: the kernel's bitmap of every possible CPU, in 64-bit words.
pub fn cpumask_bytes() -> usize {
    ((possible_cpus() - 1) / 64 + 1) * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_lay_out_fields_in_8_byte_slots() {
        let fields = vec![Type::I64, Type::Str { size: 5 }, Type::U64];
        assert_eq!(Type::Tuple(fields.clone()).slot_size(), 24);
        assert_eq!(Type::field_offsets(&fields), [0, 8, 16]);
    }

    #[test]
    fn unify_widens_strings_and_rejects_other_shapes() {
        assert_eq!(Type::Str { size: 4 }.unify(&Type::Str { size: 16 }), Some(Type::Str { size: 16 }));
        assert_eq!(Type::I64.unify(&Type::U64), Some(Type::U64));
        assert_eq!(Type::I64.unify(&Type::Str { size: 4 }), None);
    }
}
