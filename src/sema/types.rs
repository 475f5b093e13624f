//! The types of values in a script, and how they are laid out in BPF memory (map keys and values,
//! records, stack slots): integers take 8 bytes, strings their size rounded up to 8, tuples the
//! concatenation of their fields.

use crate::kernel::TypeRef;
use crate::symbols::StackMode;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// An integer of `bits` bits (8, 16, 32 or 64). Whatever its width it lives in a 64-bit register
    /// and an 8-byte slot, sign- or zero-extended, so narrow values cost nothing until an operation on
    /// two of them must wrap at their width; `signed` decides division, comparison and printing.
    Int {
        signed: bool,
        bits: u8,
    },
    /// `true` or `false` (comparisons, `!`, `&&`, `||`, `(bool)x`): 0 or 1 in an 8-byte slot, printed
    /// as a word, and usable wherever an integer is (as 0 or 1).
    Bool,
    /// A string of at most `size` bytes, NUL-padded.
    Str {
        size: usize,
    },
    Tuple(Vec<Type>),
    /// A record (current bpftrace's named tuple, `(a = 1, b = "x")`): laid out as the tuple of its fields,
    /// `names[i]` naming `fields[i]`; printed `{ .a = 1, .b = x }`.
    NamedTuple {
        names: std::sync::Arc<[String]>,
        fields: Vec<Type>,
    },
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
    /// `macaddr(mac)`: 6 bytes of a MAC address, printed `18:C0:4D:08:2E:BB`.
    MacAddr,
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
    /// integer that also allows `->field`; `to` is the target, `user` says the memory is a
    /// process's (pointer arguments of system calls, casts in uprobes), not the kernel's.
    Ptr {
        to: TypeRef,
        user: bool,
    },
    /// A pointer to a value steadytrace lays out itself (`(int8 *)addr`, `&$x`, `(uint16 **)p`):
    /// printed in hex; `*p` reads the pointee, and `p + n` moves by `n` pointees. `user` as for `Ptr`.
    Pointer {
        to: Box<Type>,
        user: bool,
    },
    /// `len` elements of `elem` side by side (`(uint8[4])$x`, `(int8[])"hi"`), printed `[1,2,3,4]`.
    Array {
        elem: Box<Type>,
        len: usize,
    },
    /// A struct or union inside another (`curtask->se`): only its members can be read (`curtask->se.vruntime`).
    Record {
        record: TypeRef,
        user: bool,
    },
    /// An integer of `bits` bits typed as a script's enum (`ONE`, `(enum Foo)1`): `%s` and `print` show
    /// the name of its constant (the number when none has the value).
    Enum {
        bits: u8,
        def: std::sync::Arc<crate::lang::cdecl::EnumDef>,
    },
    /// `username`: the uid (8 bytes), printed as the name `/etc/passwd` gives it, looked up when printed.
    Username,
    /// `cgroup_path(id[, filter])`: a cgroup id, printed as its paths in the mounted cgroup hierarchies
    /// whose names match `filter` (`unified:/user.slice,...`), looked up when printed.
    CgroupPath {
        filter: std::sync::Arc<str>,
    },
    /// `container_id(id)`: a cgroup id, printed as the 64-hex id of the container whose cgroup it is (empty
    /// for no container's), looked up when printed (`output/container.rs`).
    ContainerId,
    /// `pton("1.2.3.4")`: an array of `size` bytes (4 or 16, network order), printed `[127,0,0,1]`; an
    /// address for `ntop()`.
    Bytes {
        size: usize,
    },
    /// What a statement-like call such as `printf` gives back.
    Void,
}

/// Which stack, how deep, and how it is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackType {
    pub user: bool,
    /// `dw_ustack`: the user stack's bytes are copied and unwound in userspace from the binaries' DWARF
    /// call frame information, not walked by the kernel along frame pointers.
    pub dwarf: bool,
    pub depth: u8,
    pub mode: StackMode,
}

impl StackType {
    /// The default depth: the kernel's `perf_event_max_stack`, as bpftrace's.
    pub const MAX_DEPTH: u8 = 127;

    /// The stack `kstack`, `ustack` or `dw_ustack` names, at the default depth and mode.
    pub fn named(name: &str) -> StackType {
        StackType {
            user: name != "kstack",
            dwarf: name == "dw_ustack",
            depth: StackType::MAX_DEPTH,
            mode: StackMode::Bpftrace,
        }
    }
}

impl Type {
    pub const U64: Type = Type::Int { signed: false, bits: 64 };
    pub const I64: Type = Type::Int { signed: true, bits: 64 };

    /// The integer type written `name` (`uint8`, `int32`, `u16`, ...), or `bool`.
    pub fn named_int(name: &str) -> Option<Type> {
        if name == "bool" {
            return Some(Type::Bool);
        }
        let (signed, digits) = match name.strip_prefix("uint").or_else(|| name.strip_prefix('u')) {
            Some(digits) => (false, digits),
            None => (true, name.strip_prefix("int").or_else(|| name.strip_prefix('i'))?),
        };
        let bits = digits.parse::<u8>().ok().filter(|b| [8, 16, 32, 64].contains(b))?;
        Some(Type::Int { signed, bits })
    }

    /// An integer of `bytes` bytes as BTF and tracepoint formats describe it (other sizes as 64-bit).
    pub fn int_of_bytes(bytes: usize, signed: bool) -> Type {
        let bits = if matches!(bytes, 1 | 2 | 4) { 8 * bytes as u8 } else { 64 };
        Type::Int { signed, bits }
    }

    /// The type of `a op b` for an arithmetic or bitwise operator: 64 bits wide, computed and typed so, as in
    /// bpftrace (`(uint8)200 + (uint8)100` is 300): signed when [`Signs`] says so, as in bpftrace 0.27.1 (a
    /// `uint64` beside a signed operand is taken as `int64`); when a narrow one takes part, the sign of the type
    /// holding both; a difference is int64.
    pub fn arithmetic(subtraction: bool, a: Operand, b: Operand) -> Type {
        let signs = Signs::of(subtraction, a, b);
        if signs.signed() && (a.ty.bits() == 64 || b.ty.bits() == 64 || signs.taken_as_int64.contains(&true))
        {
            return Type::I64;
        }
        let as_int = |t: &Type| match t {
            Type::Int { .. } => t.clone(),
            Type::Bool => Type::Int { signed: false, bits: 8 },
            Type::Enum { bits, .. } => Type::Int { signed: false, bits: *bits },
            _ => Type::U64,
        };
        let (x, y) = (as_int(a.ty), as_int(b.ty));
        if x.bits() == 64 && y.bits() == 64 {
            return Type::U64;
        }
        if subtraction {
            return Type::I64;
        }
        Type::Int { signed: x.unify(&y).is_some_and(|t| t.is_signed()) && signs.signed(), bits: 64 }
    }

    /// Integers, booleans and pointers: what arithmetic, comparisons and `%d` take.
    pub fn is_int(&self) -> bool {
        matches!(
            self,
            Type::Int { .. } | Type::Ptr { .. } | Type::Pointer { .. } | Type::Bool | Type::Enum { .. }
        )
    }

    /// Whether this is an address (a kernel struct's or another value's): printed in hex, and moved by
    /// whole pointees in arithmetic.
    pub fn is_pointer(&self) -> bool {
        matches!(self, Type::Ptr { .. } | Type::Pointer { .. })
    }

    /// Bytes the value takes in C (what `sizeof` gives and what a pointer to it steps over): integers
    /// their width, tuples laid out as C structs (each field at its alignment, the whole padded to the
    /// largest); `None` for what has no C layout.
    pub fn c_size(&self) -> Option<usize> {
        Some(match self {
            Type::Int { bits, .. } | Type::Enum { bits, .. } => *bits as usize / 8,
            Type::Bool => 1,
            Type::Ptr { .. } | Type::Pointer { .. } => 8,
            Type::Str { size } => *size,
            Type::Array { elem, len } => elem.c_size()? * len,
            Type::Record { record, .. } => record.size?,
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => {
                let mut size: usize = 0;
                for field in fields {
                    let align = field.c_align()?;
                    size = size.next_multiple_of(align) + field.c_size()?;
                }
                size.next_multiple_of(self.c_align()?)
            }
            _ => return None,
        })
    }

    /// The alignment of the value in C.
    fn c_align(&self) -> Option<usize> {
        Some(match self {
            Type::Str { .. } => 1,
            Type::Array { elem, .. } => elem.c_align()?,
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => {
                fields.iter().map(Type::c_align).try_fold(1, |a, f| f.map(|f| a.max(f)))?
            }
            Type::Record { .. } => 8,
            _ => self.c_size()?,
        })
    }

    pub fn is_signed(&self) -> bool {
        matches!(self, Type::Int { signed: true, .. })
    }

    /// Bits of an integer value (a boolean's 8, a pointer's 64).
    pub fn bits(&self) -> u8 {
        match self {
            Type::Int { bits, .. } | Type::Enum { bits, .. } => *bits,
            Type::Bool => 8,
            _ => 64,
        }
    }

    /// Whether a value of this type holds a `dw_ustack` (a handle of a copied stack).
    pub fn holds_copied_stack(&self) -> bool {
        match self {
            Type::Stack(stack) => stack.dwarf,
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => {
                fields.iter().any(Type::holds_copied_stack)
            }
            _ => false,
        }
    }

    /// Bytes this type takes in BPF memory (8-byte aligned).
    pub fn slot_size(&self) -> usize {
        match self {
            Type::Int { .. } | Type::Ptr { .. } | Type::Pointer { .. } | Type::Bool | Type::Enum { .. } => 8,
            Type::Array { elem, len } => (elem.c_size().unwrap_or(8) * len).div_ceil(8) * 8,
            Type::Inet => 24,
            Type::MacAddr => 8,
            Type::Bytes { size } => size.div_ceil(8) * 8,
            Type::Buf { size } => 8 + size.div_ceil(8) * 8,
            Type::Timestamp { .. } | Type::CgroupPath { .. } | Type::ContainerId | Type::Username => 8,
            Type::Function { .. } => 8,
            Type::Record { .. } => 0,
            Type::Str { size } => size.div_ceil(8) * 8,
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => fields.iter().map(Type::slot_size).sum(),
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

    /// The fields of a tuple or a record.
    pub fn tuple_fields(&self) -> Option<&[Type]> {
        match self {
            Type::Tuple(fields) | Type::NamedTuple { fields, .. } => Some(fields),
            _ => None,
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

    /// An array's element type and length; `pton()`'s bytes are `uint8[size]`.
    pub fn array_parts(&self) -> Option<(Type, usize)> {
        match self {
            Type::Array { elem, len } => Some(((**elem).clone(), *len)),
            Type::Bytes { size } => Some((Type::Int { signed: false, bits: 8 }, *size)),
            _ => None,
        }
    }

    /// Why `==` or `!=` cannot compare two arrays, as bpftrace decides it: they must have the same
    /// length and the same integer element type (`uint8[4]` and `int8[4]` differ; `bool[2]` is refused).
    pub fn arrays_incomparable(&self, other: &Type) -> Option<&'static str> {
        let ((a, x), (b, y)) = (self.array_parts()?, other.array_parts()?);
        if x != y {
            Some("arrays of different lengths")
        } else if !matches!(a, Type::Int { .. }) || a != b {
            Some("arrays whose elements are not integers of one type")
        } else {
            None
        }
    }

    /// Whether `==` and `!=` can compare values of the two types as wholes (tuples and records, field by
    /// field; a record's fields by name, in any order; arrays of one integer type and length).
    pub fn comparable(&self, other: &Type) -> bool {
        let scalar = |t: &Type| {
            matches!(
                t,
                Type::Int { .. } | Type::Bool | Type::Enum { .. } | Type::Ptr { .. } | Type::Pointer { .. }
            )
        };
        match (self, other) {
            (a, b) if scalar(a) && scalar(b) => true,
            (Type::Str { .. }, Type::Str { .. }) => true,
            (Type::Array { .. } | Type::Bytes { .. }, Type::Array { .. } | Type::Bytes { .. }) => {
                self.arrays_incomparable(other).is_none()
            }
            (Type::Tuple(a), Type::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.comparable(y))
            }
            (Type::NamedTuple { names: m, fields: a }, Type::NamedTuple { names: n, fields: b }) => {
                m.len() == n.len()
                    && m.iter().zip(a).all(|(name, x)| {
                        n.iter().position(|o| o == name).is_some_and(|i| x.comparable(&b[i]))
                    })
            }
            _ => false,
        }
    }

    /// Whether a value of type `a` stored as type `b` (the same shape) is laid out otherwise: a field
    /// at another offset, or a record's fields in another order. Where not, the bytes copy as they are.
    pub fn field_offsets_differ(a: &Type, b: &Type) -> bool {
        match (a, b) {
            (Type::Tuple(x), Type::Tuple(y)) => {
                x.len() != y.len()
                    || Type::field_offsets(x) != Type::field_offsets(y)
                    || x.iter().zip(y).any(|(p, q)| Type::field_offsets_differ(p, q))
            }
            (Type::NamedTuple { names: m, fields: x }, Type::NamedTuple { names: n, fields: y }) => {
                m != n
                    || Type::field_offsets(x) != Type::field_offsets(y)
                    || x.iter().zip(y).any(|(p, q)| Type::field_offsets_differ(p, q))
            }
            _ => false,
        }
    }

    /// The type that holds values of both: the same shape, strings as long as the longer one, integers
    /// signed only when both are. `None` when the shapes differ.
    pub fn unify(&self, other: &Type) -> Option<Type> {
        Some(match (self, other) {
            (Type::Int { signed: a, bits: x }, Type::Int { signed: b, bits: y }) => {
                int_holding(*a, *x, *b, *y)
            }
            (Type::Bool, Type::Bool) => Type::Bool,
            (Type::Enum { bits: x, def: a }, Type::Enum { bits: y, def: b }) if a == b => {
                Type::Enum { bits: (*x).max(*y), def: a.clone() }
            }
            // Two enums' values mixed (constants of the kernel's `bpf_map_type` and `bpf_prog_type`) are plain
            // integers, as bpftrace stores them.
            (Type::Enum { bits: x, .. }, Type::Enum { bits: y, .. }) => {
                Type::Int { signed: false, bits: (*x).max(*y) }
            }
            // Mixed with plain integers, an enum's values are plain integers.
            (Type::Enum { bits, .. }, other @ Type::Int { .. })
            | (other @ Type::Int { .. }, Type::Enum { bits, .. }) => {
                return Type::Int { signed: false, bits: *bits }.unify(other)
            }
            // A boolean stored where integers are is 0 or 1.
            (Type::Bool, Type::Int { .. }) => other.clone(),
            (Type::Int { .. }, Type::Bool) => self.clone(),
            (Type::Ptr { to: a, user: x }, Type::Ptr { to: b, user: y }) if a == b && x == y => {
                Type::Ptr { to: a.clone(), user: *x }
            }
            (Type::Pointer { to: a, user: x }, Type::Pointer { to: b, user: y }) if a == b && x == y => {
                self.clone()
            }
            (Type::Array { elem: a, len: x }, Type::Array { elem: b, len: y }) if a == b && x == y => {
                self.clone()
            }
            (
                Type::Ptr { .. } | Type::Pointer { .. } | Type::Int { .. },
                Type::Ptr { .. } | Type::Pointer { .. } | Type::Int { .. },
            ) => Type::U64,
            (Type::Str { size: a }, Type::Str { size: b }) => Type::Str { size: (*a).max(*b) },
            (Type::Tuple(a), Type::Tuple(b)) if a.len() == b.len() => {
                Type::Tuple(a.iter().zip(b).map(|(x, y)| x.unify(y)).collect::<Option<_>>()?)
            }
            // The same fields, maybe in another order: the first order.
            (Type::NamedTuple { names: m, fields: a }, Type::NamedTuple { names: n, fields: b })
                if m.len() == n.len() =>
            {
                let fields = m
                    .iter()
                    .zip(a)
                    .map(|(name, x)| x.unify(&b[n.iter().position(|other| other == name)?]))
                    .collect::<Option<_>>()?;
                Type::NamedTuple { names: m.clone(), fields }
            }
            (Type::Stack(a), Type::Stack(b)) if a == b => Type::Stack(*a),
            (Type::Cpumask { bytes: a }, Type::Cpumask { bytes: b }) if a == b => Type::Cpumask { bytes: *a },
            (Type::Symbol { user: a }, Type::Symbol { user: b }) if a == b => Type::Symbol { user: *a },
            (Type::Void, Type::Void) => Type::Void,
            (Type::Inet, Type::Inet) => Type::Inet,
            (Type::MacAddr, Type::MacAddr) => Type::MacAddr,
            (Type::Username, Type::Username) => Type::Username,
            (Type::ContainerId, Type::ContainerId) => Type::ContainerId,
            (Type::Bytes { size: a }, Type::Bytes { size: b }) if a == b => Type::Bytes { size: *a },
            (Type::CgroupPath { filter: a }, Type::CgroupPath { filter: b }) if a == b => {
                Type::CgroupPath { filter: a.clone() }
            }
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
            Type::Int { signed, bits } => write!(f, "{}int{bits}", if *signed { "" } else { "u" }),
            Type::Bool => write!(f, "bool"),
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
            Type::NamedTuple { names, fields } => {
                write!(f, "record {{ ")?;
                for (i, (name, field)) in names.iter().zip(fields).enumerate() {
                    write!(f, "{}{field} {name}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, " }}")
            }
            Type::Stack(stack) => {
                write!(
                    f,
                    "{}",
                    if stack.dwarf {
                        "dw_ustack"
                    } else if stack.user {
                        "ustack"
                    } else {
                        "kstack"
                    }
                )
            }
            Type::Cpumask { .. } => write!(f, "cpumask"),
            Type::Inet => write!(f, "inet"),
            Type::MacAddr => write!(f, "macaddr_t"),
            Type::Bytes { size } => write!(f, "uint8[{size}]"),
            Type::CgroupPath { .. } => write!(f, "cgroup_path_t"),
            Type::ContainerId => write!(f, "container_id_t"),
            Type::Buf { size } => write!(f, "buffer[{size}]"),
            Type::Timestamp { .. } => write!(f, "timestamp"),
            Type::Username => write!(f, "username_t"),
            Type::Function { .. } => write!(f, "func"),
            Type::Symbol { user } => write!(f, "{}", if *user { "usym" } else { "ksym" }),
            Type::Ptr { to, .. } => write!(f, "{} *", to.name),
            Type::Record { record, .. } => write!(f, "{}", record.name),
            Type::Enum { def, .. } => write!(f, "enum {}", def.name),
            Type::Pointer { to, .. } if to.is_pointer() => write!(f, "{to}*"),
            Type::Pointer { to, .. } => write!(f, "{to} *"),
            Type::Array { elem, len } => write!(f, "{elem}[{len}]"),
            Type::Void => write!(f, "none"),
        }
    }
}

/// The integer type two integers unify to: the wider width; when the signs differ, the signed one if it
/// is wider (it holds every value of the other), else int64 when that holds both, else uint64 (as
/// bpftrace 0.17 mixed its 64-bit integers).
fn int_holding(a_signed: bool, a_bits: u8, b_signed: bool, b_bits: u8) -> Type {
    if a_signed == b_signed {
        return Type::Int { signed: a_signed, bits: a_bits.max(b_bits) };
    }
    let (signed_bits, unsigned_bits) = if a_signed { (a_bits, b_bits) } else { (b_bits, a_bits) };
    if signed_bits > unsigned_bits {
        Type::Int { signed: true, bits: signed_bits }
    } else if unsigned_bits < 64 {
        Type::I64
    } else {
        Type::U64
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

/// Whether `e` is written as an integer literal that is not negative (`5`): it takes the sign of an unsigned
/// 64-bit operand beside it (`sema::types::Signs`).
pub fn is_literal(e: &crate::lang::ast::Expr) -> bool {
    matches!(e.kind, crate::lang::ast::ExprKind::Int(_))
}

/// One operand of a binary operation, as far as its sign goes: its type, and whether it is written as a
/// literal that is not negative (`5`, not `-5` or `(uint64)5`).
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    pub ty: &'a Type,
    pub literal: bool,
}

/// How a binary operation mixes signs, as bpftrace 0.27.1 does (found by running it): the operation is signed
/// when either operand is (a comparison too: `(uint32)5 > -1` is true); an unsigned 64-bit operand (`uint64`,
/// an enum constant) beside a signed one is taken as `int64` (`A * -1` is -3 for `enum E { A = 3 }`,
/// `(uint64)5 > -1` is true), with a warning; a literal that is not negative takes the sign of an unsigned
/// 64-bit operand beside it (`$u > 2` is unsigned and warns of nothing), but in a difference, which is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signs {
    /// Whether each side, after a literal took its neighbour's sign, is signed.
    pub sides: [bool; 2],
    /// Whether each side is an unsigned 64-bit value taken as `int64` (a warning at it).
    pub taken_as_int64: [bool; 2],
    /// Whether an address takes part: then the operation stays unsigned, and nothing is taken as `int64`.
    pub pointers: bool,
}

impl Signs {
    pub fn of(subtraction: bool, a: Operand, b: Operand) -> Signs {
        let wide_unsigned = |t: &Type| {
            matches!(
                t,
                Type::Int { signed: false, bits: 64 }
                    | Type::Enum { .. }
                    | Type::Ptr { .. }
                    | Type::Pointer { .. }
            )
        };
        let signed = |side: Operand, other: Operand| {
            side.ty.is_signed() && !(side.literal && !subtraction && wide_unsigned(other.ty))
        };
        let sides = [signed(a, b), signed(b, a)];
        let taken = |side: Operand, other_signed: bool| {
            other_signed && matches!(side.ty, Type::Int { signed: false, bits: 64 } | Type::Enum { .. })
        };
        Signs {
            sides,
            taken_as_int64: [taken(a, sides[1]), taken(b, sides[0])],
            pointers: a.ty.is_pointer() || b.ty.is_pointer(),
        }
    }

    /// Whether the operation (a comparison's too) is signed.
    pub fn signed(&self) -> bool {
        self.sides.contains(&true) && !self.pointers
    }
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
    fn arrays_are_comparable_with_one_integer_element_type_and_length() {
        let bytes = |len| Type::Array { elem: Box::new(Type::Int { signed: false, bits: 8 }), len };
        assert!(bytes(4).comparable(&Type::Bytes { size: 4 }));
        assert!(Type::Tuple(vec![bytes(16), Type::I64])
            .comparable(&Type::Tuple(vec![Type::Bytes { size: 16 }, Type::U64])));
        assert!(!bytes(4).comparable(&bytes(8)));
        let signed = Type::Array { elem: Box::new(Type::Int { signed: true, bits: 8 }), len: 4 };
        assert!(!bytes(4).comparable(&signed));
        let flags = Type::Array { elem: Box::new(Type::Bool), len: 4 };
        assert!(!flags.comparable(&flags));
    }

    #[test]
    fn unify_widens_strings_and_rejects_other_shapes() {
        assert_eq!(Type::Str { size: 4 }.unify(&Type::Str { size: 16 }), Some(Type::Str { size: 16 }));
        assert_eq!(Type::I64.unify(&Type::U64), Some(Type::U64));
        assert_eq!(Type::I64.unify(&Type::Str { size: 4 }), None);
    }
}
