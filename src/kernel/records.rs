//! The records (structs and unions) of the kernel and of the script as a program reads them: a member's
//! place and kind, and a record named once and for all ([`TypeRef`]). What `btf.rs` and `script_types.rs`
//! both answer in.

use std::sync::Arc;

/// A type a pointer or a value of a script names (`struct task_struct`), as sema resolved it: its id (the
/// kernel's BTF id, or a script type's, [`super::script_types::SCRIPT_IDS`] and up), its C name and its size.
/// Carried by the script's types, so that printing and sizing them needs no kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeRef {
    pub id: u32,
    pub name: Arc<str>,
    /// Bytes of a struct or union; `None` for what has no size (void, an incomplete struct).
    pub size: Option<usize>,
}

/// A member of a kernel struct or union, as a program reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Bytes from the start of the struct.
    pub offset: u32,
    pub kind: MemberKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberKind {
    /// An integer (also enums and bool) of `size` bytes.
    Int { size: u32, signed: bool },
    /// A pointer; `to` is the BTF id of what it points to (modifiers and typedefs skipped; 0 for void).
    Pointer { to: u32 },
    /// `char name[len]`.
    CharArray { len: u32 },
    /// A struct or union inside the struct: only its own members can be read.
    Record { id: u32 },
    /// An array of `len` structs or unions (`id`): an element's members can be read (`action[1].sa`).
    RecordArray { id: u32, len: u32 },
    /// An array of `len` integers of `size` bytes: part of a whole struct's value (`print(*p)`).
    IntArray { size: u32, signed: bool, len: u32 },
    /// `bits` bits from bit `shift` of the bytes at the member's offset, read as an unsigned number also
    /// when declared signed (as bpftrace reads them: shifted and masked, never sign-extended).
    Bitfield { shift: u32, bits: u32 },
    /// Anything else (other arrays, bitfields, function pointers), described for an error message.
    Other(String),
}

impl MemberKind {
    pub fn is_record(&self) -> bool {
        matches!(self, MemberKind::Record { .. })
    }
}
