//! What a cast's type name (`lang::type_name`'s canonical spelling) makes of its operand: an integer,
//! a script's enum (`(enum color)1`), a pointer (`(int8 *)x`, `(struct task_struct *)x`), or an array reinterpreting the operand's bytes
//! (`(uint8[4])$x`, `(int8[])"hello"`, whose length the operand's size gives).

use super::types::Type;
use crate::kernel::{KernelTypes, MemberKind};

/// Why a cast cannot be made, and what to write instead.
pub struct Refusal {
    pub message: String,
    pub help: String,
}

const TYPES_HELP: &str = "a value can be cast to int8 ... int64, uint8 ... uint64, bool, a script's enum (`enum NAME`), a pointer (`uint8 *`, `struct NAME *`) or an array (`uint8[4]`)";

/// The type of `(ty)operand` for an operand of type `from`. `user`: whether a plain address is a
/// process's (in a uprobe).
pub fn cast(ty: &str, from: &Type, user: bool, kernel: &KernelTypes) -> Result<Type, Refusal> {
    if let Some(array) = ty.strip_suffix(']') {
        let help = match from {
            Type::Int { .. } => "an integer's bytes fill an array of its size or larger, up to 8 bytes, or give no length (`uint8[]`)",
            _ => "an array cast keeps the value's bytes: give the length that fits, or none (`uint8[]`)",
        };
        return array_cast(array, from, kernel).map_err(|message| refusal(message, help));
    }
    // A string is true when it is not empty.
    if let (Type::Str { .. }, "bool") = (from, ty) {
        return Ok(Type::Bool);
    }
    // An array's bytes read as an integer of the same size (`(uint64)$a` of a `uint8[8]`), as bpftrace does.
    if let (Type::Array { .. } | Type::Bytes { .. }, Some(to)) = (from, scalar_named(ty, kernel)) {
        let have = match from {
            Type::Bytes { size } => Some(*size),
            _ => from.c_size(),
        };
        return match (have, to.c_size()) {
            (Some(have), Some(want)) if have == want && to.is_int() => Ok(to),
            (have, want) => Err(refusal(
                format!(
                    "{from} ({} bytes) cannot be cast to {ty} ({} bytes)",
                    have.unwrap_or(0),
                    want.unwrap_or(0)
                ),
                "an array is read as an integer of its own size: `(uint32)` of 4 bytes, `(uint64)` of 8",
            )),
        };
    }
    if !from.is_int() {
        let help = match from {
            Type::Str { .. } | Type::Tuple(_) if ty.ends_with('*') => {
                "a pointer to a variable's value is its address: `(int8 *)&$s`".to_string()
            }
            _ => TYPES_HELP.to_string(),
        };
        return Err(Refusal { message: format!("{from} cannot be cast to {ty}"), help });
    }
    named(ty, user, kernel)
}

fn refusal(message: String, help: &str) -> Refusal {
    Refusal { message, help: help.to_string() }
}

/// The type a canonical type name spells (no array).
pub fn named(ty: &str, user: bool, kernel: &KernelTypes) -> Result<Type, Refusal> {
    let Some(pointee) = ty.strip_suffix('*') else {
        if let Some(name) = ty.strip_prefix("enum ") {
            return match kernel.enum_named(name) {
                Some(def) => Ok(Type::Enum { bits: 64, def }),
                None => Err(refusal(
                    format!("unknown enum `{name}`"),
                    "define it before the probes: `enum NAME { A, B = 5 };`",
                )),
            };
        }
        return scalar_named(ty, kernel).ok_or_else(|| refusal(unknown(ty), TYPES_HELP));
    };
    let pointee = pointee.trim_end();
    if pointee.ends_with('*') {
        return Ok(Type::Pointer { to: Box::new(named(pointee, user, kernel)?), user });
    }
    match pointee.split_once(' ') {
        Some((keyword @ ("struct" | "union"), name)) => {
            match kernel.record_id(keyword == "union", name) {
                Some(to) => Ok(Type::Ptr { to: kernel.type_ref(to), user }),
                None => Err(refusal(
                    format!("neither the script nor the kernel's BTF defines `{keyword} {name}`"),
                    "define it before the probes (`struct NAME { int a; };`); kernel types come from /sys/kernel/btf/vmlinux, e.g. `struct task_struct *`",
                )),
            }
        }
        Some(("enum", _)) => Err(refusal(
            format!("`{ty}`: a pointer to an enum cannot be read yet"),
            "read the number through an integer pointer and cast it: `(enum NAME)*(uint32 *)p`",
        )),
        // A typedef of a struct (`spinlock_t *`) points at the struct.
        _ => match kernel.vmlinux.typedef_kind(pointee) {
            Some(MemberKind::Record { id }) => Ok(Type::Ptr { to: kernel.type_ref(id), user }),
            _ => Ok(Type::Pointer { to: Box::new(named(pointee, user, kernel)?), user }),
        },
    }
}

/// The integer (or `bool`) type written `name`: the script's names (`uint8`, `int32`, `u16`), or a kernel
/// typedef of an integer (`pid_t`, `size_t`), as bpftrace reads type names through BTF.
pub fn scalar_named(name: &str, kernel: &KernelTypes) -> Option<Type> {
    Type::named_int(name).or_else(|| match kernel.vmlinux.typedef_kind(name)? {
        MemberKind::Int { size, signed } if matches!(size, 1 | 2 | 4 | 8) => {
            Some(Type::Int { signed, bits: 8 * size as u8 })
        }
        _ => None,
    })
}

/// The message for a type name that names nothing.
fn unknown(name: &str) -> String {
    if name.ends_with("_t") {
        format!("unknown type `{name}`: the kernel's BTF has no typedef of an integer by that name")
    } else {
        format!("unknown type `{name}`")
    }
}

/// `(elem[len])from`, `len` empty for "as many as fit": the operand's bytes as an array. An integer may
/// also fill a larger array of up to 8 bytes, the rest zero, as in current bpftrace (`(int8[4])-2` is
/// `[-2,0,0,0]`, `(uint8[8])1234` `[210,4,0,0,0,0,0,0]`).
fn array_cast(array: &str, from: &Type, kernel: &KernelTypes) -> Result<Type, String> {
    let (elem_name, len) = array.split_once('[').ok_or("unknown array type")?;
    let elem = scalar_named(elem_name, kernel).ok_or_else(|| unknown(elem_name))?;
    let elem_size = elem.c_size().unwrap_or(8);
    let bytes = match from {
        Type::Int { .. } | Type::Bool | Type::Str { .. } | Type::Array { .. } => from.c_size(),
        Type::Bytes { size } => Some(*size),
        _ => None,
    }
    .ok_or_else(|| format!("{from} cannot be cast to an array: only integers, strings and arrays can"))?;
    let len = match len {
        "" if bytes % elem_size == 0 => bytes / elem_size,
        "" => return Err(format!("{from} ({bytes} bytes) is no whole number of {elem_name}")),
        digits => {
            let len: usize = digits.parse().map_err(|_| format!("bad array length `{digits}`"))?;
            let fits = match from {
                Type::Int { .. } => (bytes..=8).contains(&(len * elem_size)),
                _ => len * elem_size == bytes,
            };
            if !fits {
                return Err(format!(
                    "{from} ({bytes} bytes) cannot be cast to {elem_name}[{len}] ({} bytes)",
                    len * elem_size
                ));
            }
            len
        }
    };
    if len == 0 {
        return Err("an array needs at least one element".into());
    }
    Ok(Type::Array { elem: Box::new(elem), len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast_ok(ty: &str, from: &Type, user: bool) -> Result<Type, String> {
        cast(ty, from, user, &KernelTypes::none()).map_err(|r| r.message)
    }

    #[test]
    fn arrays_take_their_length_from_the_operand() {
        let int8 = Box::new(Type::Int { signed: true, bits: 8 });
        assert_eq!(
            cast_ok("int8[]", &Type::Str { size: 6 }, false),
            Ok(Type::Array { elem: int8.clone(), len: 6 })
        );
        assert_eq!(cast_ok("int8[8]", &Type::I64, false), Ok(Type::Array { elem: int8.clone(), len: 8 }));
        assert!(cast("int8[4]", &Type::I64, false, &KernelTypes::none())
            .is_err_and(|r| r.message.contains("8 bytes")));
        assert!(cast("int8[2]", &Type::Str { size: 1 }, false, &KernelTypes::none()).is_err());
        assert_eq!(
            cast_ok("bool[2]", &Type::Int { signed: false, bits: 16 }, false),
            Ok(Type::Array { elem: Box::new(Type::Bool), len: 2 })
        );
    }

    #[test]
    fn an_integer_fills_a_larger_array_of_up_to_8_bytes() {
        let int8 = Type::Int { signed: true, bits: 8 };
        let int32 = Type::Int { signed: true, bits: 32 };
        let array = |elem: &Type, len| Ok(Type::Array { elem: Box::new(elem.clone()), len });
        assert_eq!(cast_ok("int8[4]", &int8, false), array(&int8, 4));
        assert_eq!(cast_ok("int8[3]", &int8, false), array(&int8, 3));
        assert_eq!(cast_ok("int8[8]", &int32, false), array(&int8, 8));
        assert_eq!(cast_ok("int32[2]", &int8, false), array(&int32, 2));
        for (ty, from) in [("int8[9]", &int8), ("int8[2]", &int32), ("int8[16]", &Type::I64)] {
            assert!(cast_ok(ty, from, false).is_err(), "{ty} of {from}");
        }
        // A bool fills only an array of its own size, as current bpftrace refuses `(bool[4])true`.
        assert!(cast_ok("bool[4]", &Type::Bool, false).is_err());
    }

    #[test]
    fn pointers_nest() {
        let int16 = Type::Int { signed: true, bits: 16 };
        let inner = Type::Pointer { to: Box::new(int16), user: false };
        assert_eq!(
            cast_ok("int16 **", &Type::I64, false),
            Ok(Type::Pointer { to: Box::new(inner), user: false })
        );
        assert!(cast("int16 *", &Type::Str { size: 3 }, false, &KernelTypes::none()).is_err());
    }
}
