//! The arguments of raw tracepoints by name, from the kernel's BTF (`/sys/kernel/btf/vmlinux`): the
//! prototype `btf_trace_NAME` of a tracepoint's probe function names and types its arguments after the
//! first (`void *__data`). They become fields of `args`, as a classic tracepoint's record fields are,
//! read from the raw tracepoint's context (an array of 64-bit arguments).

use super::tracefs::{Field, FieldKind};
use libbpf_rs::btf::types::{Enum, Enum64, FuncProto, Int, IntEncoding};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, HasSize};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The arguments of raw tracepoint `name`, as fields at `8 * index` in its context; an error saying why
/// there are none (no BTF, no such tracepoint). Looked up once per name: reading the kernel's BTF takes
/// tens of milliseconds, and only scripts that use `args` in a raw tracepoint pay for it.
pub fn raw_tracepoint_args(name: &str) -> Result<Vec<Field>, String> {
    type Found = Result<Vec<Field>, String>;
    static CACHE: OnceLock<Mutex<HashMap<String, Found>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(name.to_string()).or_insert_with(|| read_args(name)).clone()
}

fn read_args(name: &str) -> Result<Vec<Field>, String> {
    let btf = Btf::from_vmlinux().map_err(|e| {
        format!(
            "the kernel's BTF cannot be read ({e}): `args` of raw tracepoints needs CONFIG_DEBUG_INFO_BTF"
        )
    })?;
    // Functions with the tracepoint's prototype and named parameters: the stub every tracepoint has since
    // Linux 6.4, or the BPF probe function of an event that is its own class. Otherwise the typedef of the
    // probe function pointer, whose parameters have types but no names (they are called argN then).
    let named = [format!("__probestub_{name}"), format!("__bpf_trace_{name}")]
        .iter()
        .find_map(|function| btf.type_by_name::<BtfType<'_>>(function).filter(|t| t.kind() == BtfKind::Func))
        .and_then(|function| function.next_type());
    let unnamed = || {
        btf.type_by_name::<BtfType<'_>>(&format!("btf_trace_{name}"))
            .and_then(|typedef| typedef.next_type())
            .and_then(|pointer| pointer.next_type())
    };
    let prototype = named
        .or_else(unnamed)
        .and_then(|proto| FuncProto::try_from(proto).ok())
        .ok_or_else(|| format!("the kernel's BTF does not describe a raw tracepoint `{name}`"))?;
    let mut fields = vec![];
    for (index, param) in prototype.iter().enumerate().skip(1) {
        let Some(ty) = btf.type_by_id::<BtfType<'_>>(param.ty) else { continue };
        let arg = param
            .name
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("arg{}", index - 1));
        let c_type = ty.name().map(|n| n.to_string_lossy().into_owned());
        let (size, signed, kind) = match scalar(&ty.skip_mods_and_typedefs()) {
            Some(found) => found,
            None => (8, false, FieldKind::Other(c_type.clone().unwrap_or_else(|| "struct".into()))),
        };
        let decl = format!("{} {arg}", c_type.unwrap_or_else(|| describe(&ty.skip_mods_and_typedefs())));
        fields.push(Field { name: arg, offset: 8 * (index as u32 - 1), size, signed, kind, decl });
    }
    Ok(fields)
}

/// `(size, signed, kind)` of an argument a program can read as a number.
fn scalar(ty: &BtfType<'_>) -> Option<(u32, bool, FieldKind)> {
    match ty.kind() {
        BtfKind::Ptr => Some((8, false, FieldKind::Pointer)),
        BtfKind::Int => {
            let int = Int::try_from(*ty).ok()?;
            Some((
                (int.bits as u32).div_ceil(8).max(1),
                matches!(int.encoding, IntEncoding::Signed),
                FieldKind::Int,
            ))
        }
        BtfKind::Enum => {
            let e = Enum::try_from(*ty).ok()?;
            Some((e.size() as u32, e.is_signed(), FieldKind::Int))
        }
        BtfKind::Enum64 => {
            let e = Enum64::try_from(*ty).ok()?;
            Some((e.size() as u32, e.is_signed(), FieldKind::Int))
        }
        _ => None,
    }
}

/// A C-like name for an unnamed type (`struct task_struct *` is a pointer to a named struct).
fn describe(ty: &BtfType<'_>) -> String {
    match ty.kind() {
        BtfKind::Ptr => {
            let target = ty.next_type().map(|t| t.skip_mods_and_typedefs());
            let name = target.as_ref().and_then(|t| t.name()).map(|n| n.to_string_lossy().into_owned());
            match (target.map(|t| t.kind()), name) {
                (Some(BtfKind::Struct), Some(name)) => format!("struct {name} *"),
                (Some(BtfKind::Union), Some(name)) => format!("union {name} *"),
                (_, Some(name)) => format!("{name} *"),
                _ => "void *".into(),
            }
        }
        _ => ty.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "?".into()),
    }
}
