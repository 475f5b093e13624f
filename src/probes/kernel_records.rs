//! The kernel's BTF, and the members of its records as a program reads them: what `btf.rs` (which also
//! answers for the script's own types) and `script_types.rs` both build on.

use libbpf_rs::btf::{Btf, BtfKind, BtfType};

thread_local! {
    /// The kernel's BTF, read once per thread when first needed (`None` when the kernel has none).
    pub static VMLINUX: Option<Btf<'static>> = Btf::from_vmlinux().ok();
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

/// The BTF id of `struct NAME` (or `union NAME` with `union`), if the kernel has one.
pub fn kernel_record_id(union: bool, name: &str) -> Option<u32> {
    VMLINUX.with(|btf| {
        let btf = btf.as_ref()?;
        let kind = if union { BtfKind::Union } else { BtfKind::Struct };
        btf.type_by_kind::<BtfType<'_>>()
            .find(|t| t.kind() == kind && t.name().is_some_and(|n| n == name))
            .map(|t| t.type_id().into())
    })
}
