//! The C types a script defines (`struct Foo { ... };` before its probes, read by `lang::cdecl`),
//! answering the questions [`super::btf`] answers for the kernel's types: the id of `struct NAME`, its
//! size, its members. Their ids are [`SCRIPT_IDS`] plus the record's index, apart from every BTF id,
//! so a `Type::Ptr` or `Type::Record` can hold either; a script's type wins over the kernel's of the
//! same name, as in bpftrace ([`super::KernelTypes`] asks here first). A script's struct may hold or
//! point to the kernel's, which `vmlinux` names.

use super::btf::Vmlinux;
use super::records::{Member, MemberKind};
use crate::lang::cdecl::{CType, CTypes, EnumDef};
use std::sync::Arc;

/// The first id of a script's records; BTF ids stay far below it.
pub const SCRIPT_IDS: u32 = 1 << 31;

/// The script's C types, and the kernel's they name.
pub struct ScriptTypes<'k> {
    pub types: &'k CTypes,
    pub vmlinux: &'k Vmlinux,
}

pub fn is_script(id: u32) -> bool {
    id >= SCRIPT_IDS
}

impl ScriptTypes<'_> {
    /// The id of the script's `struct NAME` (`union NAME` with `union`).
    pub fn record_id(&self, union: bool, name: &str) -> Option<u32> {
        self.types.record(union, name).map(|index| SCRIPT_IDS + index as u32)
    }

    /// Bytes of the script's record `id`.
    pub fn record_size(&self, id: u32) -> Option<usize> {
        self.types.records.get((id - SCRIPT_IDS) as usize).map(|r| r.size as usize)
    }

    /// `struct NAME` / `union NAME` of record `id`.
    pub fn type_name(&self, id: u32) -> String {
        match self.types.records.get((id - SCRIPT_IDS) as usize) {
            Some(record) => format!("{} {}", if record.union { "union" } else { "struct" }, record.name),
            None => format!("type {id}"),
        }
    }

    /// Member `name` of the script's record `id`, looking into unnamed inner records; `Err` with the
    /// members there are.
    pub fn member(&self, id: u32, name: &str) -> Result<Member, Vec<String>> {
        let mut names = vec![];
        self.find((id - SCRIPT_IDS) as usize, name, 0, &mut names).ok_or(names)
    }

    fn find(&self, index: usize, name: &str, base: u32, names: &mut Vec<String>) -> Option<Member> {
        for field in &self.types.records.get(index)?.fields {
            match (&field.name, &field.ty) {
                (Some(n), _) if n == name => {
                    let kind = match field.bits {
                        Some((shift, bits)) => MemberKind::Bitfield { shift, bits },
                        None => self.kind(&field.ty),
                    };
                    return Some(Member { offset: base + field.offset, kind });
                }
                (Some(n), _) => names.push(n.clone()),
                (None, CType::Record(inner)) => {
                    if let Some(found) = self.find(*inner, name, base + field.offset, names) {
                        return Some(found);
                    }
                }
                (None, _) => {}
            }
        }
        None
    }

    /// The members of the script's record `id` in order, those of unnamed inner records in their place.
    pub fn members(&self, id: u32) -> Option<Vec<(String, Member)>> {
        let mut found = vec![];
        self.list((id - SCRIPT_IDS) as usize, 0, &mut found)?;
        Some(found)
    }

    fn list(&self, index: usize, base: u32, found: &mut Vec<(String, Member)>) -> Option<()> {
        for field in &self.types.records.get(index)?.fields {
            let kind = match field.bits {
                Some((shift, bits)) => MemberKind::Bitfield { shift, bits },
                None => self.kind(&field.ty),
            };
            match (&field.name, &field.ty) {
                (Some(name), _) => found.push((name.clone(), Member { offset: base + field.offset, kind })),
                (None, CType::Record(inner)) => self.list(*inner, base + field.offset, found)?,
                (None, _) => {}
            }
        }
        Some(())
    }

    fn kind(&self, ty: &CType) -> MemberKind {
        let types = self.types;
        match ty {
            CType::Int { size, signed } => MemberKind::Int { size: *size, signed: *signed },
            CType::Char { signed } => MemberKind::Int { size: 1, signed: *signed },
            CType::Enum { size, .. } => MemberKind::Int { size: *size, signed: false },
            CType::Pointer(to) => MemberKind::Pointer { to: self.pointee(to) },
            // Only plain `char` arrays are strings: `signed char`, `unsigned char` and `u8` arrays are
            // integers, printed `[1,-2,3]`, as bpftrace has them.
            CType::Array(element, len) => match **element {
                CType::Char { .. } => MemberKind::CharArray { len: *len },
                CType::Int { size, signed } => MemberKind::IntArray { size, signed, len: *len },
                _ => MemberKind::Other(types.describe(ty)),
            },
            CType::Record(index) => MemberKind::Record { id: SCRIPT_IDS + *index as u32 },
            // The kernel's struct held by value: its members are read through BTF.
            CType::Named { union, name } => match self.vmlinux.record_id(*union, name) {
                Some(id) => MemberKind::Record { id },
                None => MemberKind::Other(types.describe(ty)),
            },
            other => MemberKind::Other(types.describe(other)),
        }
    }

    /// The id a pointer to `to` remembers: a record of the script or the kernel's, else 0 (void).
    fn pointee(&self, to: &CType) -> u32 {
        match to {
            CType::Record(index) => SCRIPT_IDS + *index as u32,
            // Named before it was defined, or the kernel's.
            CType::Named { union, name } => self
                .types
                .record(*union, name)
                .map(|index| SCRIPT_IDS + index as u32)
                .or_else(|| self.vmlinux.record_id(*union, name))
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// The script's `enum NAME`.
    pub fn enum_named(&self, name: &str) -> Option<Arc<EnumDef>> {
        self.types.enum_named(name).cloned()
    }

    /// The script's enum constant `name`: its enum and value.
    pub fn enum_constant(&self, name: &str) -> Option<(Arc<EnumDef>, i64)> {
        self.types.enum_constant(name).map(|(e, v)| (e.clone(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_char_arrays_are_strings() {
        let script = "struct S { signed char a[3]; unsigned char b[3]; char c[3]; const char d[3]; __u8 e[2]; int8_t f[2]; } BEGIN {}";
        let program = crate::lang::parse(script).expect("parses");
        let kernel = crate::kernel::fixture::kernel_with(program.c_types.clone());
        let id = kernel.record_id(false, "S").expect("the script's struct");
        let kind = |name| kernel.member(id, name).expect("a member").kind;
        assert_eq!(kind("a"), MemberKind::IntArray { size: 1, signed: true, len: 3 });
        assert_eq!(kind("b"), MemberKind::IntArray { size: 1, signed: false, len: 3 });
        assert_eq!(kind("c"), MemberKind::CharArray { len: 3 });
        assert_eq!(kind("d"), MemberKind::CharArray { len: 3 });
        assert_eq!(kind("e"), MemberKind::IntArray { size: 1, signed: false, len: 2 });
        assert_eq!(kind("f"), MemberKind::IntArray { size: 1, signed: true, len: 2 });
    }
}
