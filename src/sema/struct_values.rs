//! A whole struct or union as a value (`$f = *p`, `@s[*p] = 1`, `print(curtask->se)`): the named tuple of its
//! members, in their order, printed `{ .m = 2, .n = 3 }` as bpftrace prints a struct. The members keep their own
//! types (integers of their width, bitfields as unsigned numbers, pointers, `char[N]` as strings, arrays of
//! integers, inner structs as inner named tuples); codegen copies the struct once and lays each member into its
//! field (`codegen::record_values`).

use super::types::Type;
use crate::kernel::{KernelTypes, MemberKind};
use crate::lang::{Diagnostic, Span};

/// `ty` where a value is stored, printed or used as a key: a struct or union becomes the named tuple of its
/// members; other types stay as they are.
pub fn as_value(ty: Type, span: Span, kernel: &KernelTypes) -> Result<Type, Diagnostic> {
    match ty {
        Type::Record { record, user } => record_value(record.id, user, span, kernel),
        ty => Ok(ty),
    }
}

/// The named tuple of record `id`'s members.
fn record_value(id: u32, user: bool, span: Span, kernel: &KernelTypes) -> Result<Type, Diagnostic> {
    let Some(members) = kernel.members(id) else {
        return Err(Diagnostic::error(span, format!("{} has no members to copy", kernel.type_name(id))));
    };
    let mut names = Vec::with_capacity(members.len());
    let mut fields = Vec::with_capacity(members.len());
    for (name, member) in members {
        let cannot = |what: String| {
            Diagnostic::error(
                span,
                format!("{} cannot be a value yet: its member `{name}` is {what}", kernel.type_name(id)),
            )
            .with_help("read the members you need instead, e.g. `(*p).member`")
        };
        let ty = match member.kind {
            MemberKind::Int { size, signed } if size <= 8 => Type::int_of_bytes(size as usize, signed),
            MemberKind::Int { size, .. } => return Err(cannot(format!("an integer of {size} bytes"))),
            MemberKind::Bitfield { bits, .. } => {
                Type::int_of_bytes((bits as usize).div_ceil(8).next_power_of_two(), false)
            }
            MemberKind::Pointer { to } => Type::Ptr { to: kernel.type_ref(to), user },
            MemberKind::CharArray { len } => Type::Str { size: len as usize },
            MemberKind::IntArray { size, signed, len } if size <= 8 => {
                Type::Array { elem: Box::new(Type::int_of_bytes(size as usize, signed)), len: len as usize }
            }
            MemberKind::IntArray { size, .. } => {
                return Err(cannot(format!("an array of {size}-byte integers")))
            }
            MemberKind::Record { id: inner } => record_value(inner, user, span, kernel)?,
            MemberKind::RecordArray { id: inner, .. } => {
                return Err(cannot(format!("an array of {}", kernel.type_name(inner))))
            }
            MemberKind::Other(what) => return Err(cannot(what)),
        };
        names.push(name);
        fields.push(ty);
    }
    Ok(Type::NamedTuple { names: names.into(), fields })
}
