//! The C types a script defines (`struct Foo { ... };` before its probes, read by `lang::cdecl`),
//! answering the questions [`super::btf`] answers for the kernel's types: the id of `struct NAME`, its
//! size, its members. Their ids are [`SCRIPT_IDS`] plus the record's index, apart from every BTF id,
//! so a `Type::Ptr` or `Type::Record` can hold either; a script's type wins over the kernel's of the
//! same name, as in bpftrace. The types are those of the script being compiled on this thread
//! ([`use_types`], called by sema before it checks anything).

use super::kernel_records::{kernel_record_id, Member, MemberKind};
use crate::lang::cdecl::{CType, CTypes, EnumDef};
use std::cell::RefCell;
use std::sync::Arc;

/// The first id of a script's records; BTF ids stay far below it.
pub const SCRIPT_IDS: u32 = 1 << 31;

thread_local! {
    static TYPES: RefCell<Arc<CTypes>> = RefCell::default();
}

/// Makes `types` the script's types for what this thread compiles next.
pub fn use_types(types: Arc<CTypes>) {
    TYPES.with(|t| *t.borrow_mut() = types);
}

fn with<T>(f: impl FnOnce(&CTypes) -> T) -> T {
    TYPES.with(|t| f(&t.borrow()))
}

pub fn is_script(id: u32) -> bool {
    id >= SCRIPT_IDS
}

/// The id of the script's `struct NAME` (`union NAME` with `union`).
pub fn record_id(union: bool, name: &str) -> Option<u32> {
    with(|types| types.record(union, name).map(|index| SCRIPT_IDS + index as u32))
}

/// Bytes of the script's record `id`.
pub fn record_size(id: u32) -> Option<usize> {
    with(|types| types.records.get((id - SCRIPT_IDS) as usize).map(|r| r.size as usize))
}

/// `struct NAME` / `union NAME` of record `id`.
pub fn type_name(id: u32) -> String {
    with(|types| match types.records.get((id - SCRIPT_IDS) as usize) {
        Some(record) => format!("{} {}", if record.union { "union" } else { "struct" }, record.name),
        None => format!("type {id}"),
    })
}

/// Member `name` of the script's record `id`, looking into unnamed inner records; `Err` with the
/// members there are.
pub fn member(id: u32, name: &str) -> Result<Member, Vec<String>> {
    with(|types| {
        let mut names = vec![];
        find(types, (id - SCRIPT_IDS) as usize, name, 0, &mut names).ok_or(names)
    })
}

fn find(types: &CTypes, index: usize, name: &str, base: u32, names: &mut Vec<String>) -> Option<Member> {
    for field in &types.records.get(index)?.fields {
        match (&field.name, &field.ty) {
            (Some(n), _) if n == name => {
                let kind = match field.bits {
                    Some((shift, bits)) => MemberKind::Bitfield { shift, bits },
                    None => kind(types, &field.ty),
                };
                return Some(Member { offset: base + field.offset, kind });
            }
            (Some(n), _) => names.push(n.clone()),
            (None, CType::Record(inner)) => {
                if let Some(found) = find(types, *inner, name, base + field.offset, names) {
                    return Some(found);
                }
            }
            (None, _) => {}
        }
    }
    None
}

/// The members of the script's record `id` in order, those of unnamed inner records in their place.
pub fn members(id: u32) -> Option<Vec<(String, Member)>> {
    with(|types| {
        let mut found = vec![];
        list(types, (id - SCRIPT_IDS) as usize, 0, &mut found)?;
        Some(found)
    })
}

fn list(types: &CTypes, index: usize, base: u32, found: &mut Vec<(String, Member)>) -> Option<()> {
    for field in &types.records.get(index)?.fields {
        let kind = match field.bits {
            Some((shift, bits)) => MemberKind::Bitfield { shift, bits },
            None => kind(types, &field.ty),
        };
        match (&field.name, &field.ty) {
            (Some(name), _) => found.push((name.clone(), Member { offset: base + field.offset, kind })),
            (None, CType::Record(inner)) => list(types, *inner, base + field.offset, found)?,
            (None, _) => {}
        }
    }
    Some(())
}

fn kind(types: &CTypes, ty: &CType) -> MemberKind {
    match ty {
        CType::Int { size, signed } => MemberKind::Int { size: *size, signed: *signed },
        CType::Enum { size, .. } => MemberKind::Int { size: *size, signed: false },
        CType::Pointer(to) => MemberKind::Pointer { to: pointee(types, to) },
        CType::Array(element, len) => match **element {
            CType::Int { size: 1, .. } => MemberKind::CharArray { len: *len },
            CType::Int { size, signed } => MemberKind::IntArray { size, signed, len: *len },
            _ => MemberKind::Other(types.describe(ty)),
        },
        CType::Record(index) => MemberKind::Record { id: SCRIPT_IDS + *index as u32 },
        // The kernel's struct held by value: its members are read through BTF.
        CType::Named { union, name } => match kernel_record_id(*union, name) {
            Some(id) => MemberKind::Record { id },
            None => MemberKind::Other(types.describe(ty)),
        },
        other => MemberKind::Other(types.describe(other)),
    }
}

/// The id a pointer to `to` remembers: a record of the script or the kernel's, else 0 (void).
fn pointee(types: &CTypes, to: &CType) -> u32 {
    match to {
        CType::Record(index) => SCRIPT_IDS + *index as u32,
        // Named before it was defined, or the kernel's.
        CType::Named { union, name } => types
            .record(*union, name)
            .map(|index| SCRIPT_IDS + index as u32)
            .or_else(|| kernel_record_id(*union, name))
            .unwrap_or(0),
        _ => 0,
    }
}

/// What the script's record `id` is, as a member of that type would be read.
pub fn member_kind_of(id: u32) -> MemberKind {
    MemberKind::Record { id }
}

/// The script's `enum NAME`.
pub fn enum_named(name: &str) -> Option<Arc<EnumDef>> {
    with(|types| types.enum_named(name).cloned())
}

/// The script's enum constant `name`: its enum and value.
pub fn enum_constant(name: &str) -> Option<(Arc<EnumDef>, i64)> {
    with(|types| types.enum_constant(name).map(|(e, v)| (e.clone(), v)))
}
