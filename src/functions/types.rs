//! Functions about types: `bswap(x)`, `sizeof(TYPE or expression)`, `offsetof(struct NAME, member)`,
//! `typeinfo(TYPE or expression)`.

use super::{Emit, Function};
use crate::codegen::frame::Val;
use crate::kernel::MemberKind;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use crate::sema::typed::Resolved;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::Reg;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "bswap",
        check: |env, call| {
            call.arity(1, 1)?;
            match env.type_of(&call.args[0])? {
                ty @ Type::Int { .. } => Ok(ty),
                Type::Ptr { .. } => Ok(Type::U64),
                ty => Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`bswap()` reverses the bytes of an integer, not of {ty}"),
                )),
            }
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| {
            let (signed, bits) = match gen.ty(&args[0])? {
                Type::Int { signed, bits } => (signed, bits),
                _ => (false, 64),
            };
            let val = gen.int(&args[0])?;
            if bits == 8 {
                return Ok(val);
            }
            if let Val::Imm(v) = val {
                let swapped = v.swap_bytes() >> (64 - bits);
                return gen.narrow(Val::Imm(swapped), bits, signed, span);
            }
            let home = gen.writable(val, span)?;
            let reg = gen.reg_of(home, Reg::R0);
            gen.asm.byte_swap(reg, bits.into());
            gen.put(home, reg);
            if signed && bits < 64 {
                return gen.narrow(home, bits, signed, span);
            }
            Ok(home)
        }),
    },
    Function {
        name: "sizeof",
        check: |env, call| {
            call.arity(1, 1)?;
            let size = size_of(&call.args[0], env)?;
            env.resolved(&call.args[0], || Resolved::Constant(size as u64));
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.probe_constant(&args[0]).map(Val::Imm)),
    },
    Function {
        name: "offsetof",
        check: |env, call| {
            call.arity(2, 2)?;
            let offset = offset_of(call.args, call.span, env)?;
            env.resolved(&call.args[0], || Resolved::Constant(offset.into()));
            Ok(Type::U64)
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, _| gen.probe_constant(&args[0]).map(Val::Imm)),
    },
    Function {
        name: "typeinfo",
        check: |env, call| {
            call.arity(1, 1)?;
            let described = type_named_or_of(&call.args[0], env)?;
            let record = type_info(&described).0;
            env.resolved(&call.args[0], || Resolved::Type(described));
            Ok(record)
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, ty, span| {
            let Resolved::Type(described) = gen.resolved(&args[0])? else {
                return Err(Diagnostic::error(span, "internal error: typeinfo() without its type"));
            };
            let (_, base, full) = type_info(&described);
            let Type::NamedTuple { fields, .. } = ty else {
                return Err(Diagnostic::error(span, "internal error: typeinfo() into a non-record"));
            };
            let at = Type::field_offsets(fields);
            // No global numbering of types: the id is 0, as in bpftrace.
            gen.store_val(Val::Imm(0), offset);
            gen.constant_into(base.as_bytes(), offset + at[1] as i16, fields[1].slot_size());
            gen.constant_into(full.as_bytes(), offset + at[2] as i16, fields[2].slot_size());
            Ok(())
        }),
    },
];

/// `typeinfo()`'s record `(btf_id, base_type, full_type)` for a type, with its two strings: the kind of
/// type in bpftrace's words (`int`, `string`, `tuple`) and the type in full (`uint32`, `string[9]`).
fn type_info(ty: &Type) -> (Type, String, String) {
    let base = match ty {
        Type::Int { .. } | Type::Enum { .. } => "int",
        Type::Bool => "bool",
        Type::Str { .. } => "string",
        Type::Ptr { .. } | Type::Pointer { .. } => "pointer",
        Type::Tuple(_) => "tuple",
        Type::NamedTuple { .. } => "record",
        Type::Record { .. } => "c_type",
        Type::Array { .. } | Type::Bytes { .. } => "array",
        Type::Buf { .. } => "buffer",
        Type::Inet => "inet",
        Type::MacAddr => "mac_address",
        Type::Stack(stack) if stack.user => "ustack",
        Type::Stack(_) => "kstack",
        Type::Symbol { user: true } => "usym_t",
        Type::Symbol { user: false } => "ksym_t",
        Type::Timestamp { .. } => "timestamp",
        Type::Username => "username_t",
        Type::CgroupPath { .. } => "cgroup_path_t",
        Type::ContainerId => "container_id_t",
        Type::Cpumask { .. } => "cpumask",
        Type::Function { .. } => "func",
        Type::Void => "none",
    }
    .to_string();
    let full = ty.to_string();
    let record = Type::NamedTuple {
        names: vec!["btf_id".into(), "base_type".into(), "full_type".into()].into(),
        fields: vec![Type::I64, Type::Str { size: base.len() + 1 }, Type::Str { size: full.len() + 1 }],
    };
    (record, base, full)
}

/// The type named as the argument (`uint32`) or that of an expression's value.
fn type_named_or_of(e: &Expr, env: &Env) -> Result<Type, Diagnostic> {
    match &e.kind {
        ExprKind::Ident(name) => match crate::sema::casts::scalar_named(name, env.kernel) {
            Some(ty) => Ok(ty),
            None => env.type_of(e),
        },
        _ => env.type_of(e),
    }
}

/// Whether `e` names a type: `uint8 *`, `struct NAME` or `typeof(TYPE)`.
fn names_a_type(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Ident(name) => crate::lang::type_name::is_type(name),
        ExprKind::Call { name, args, .. } if name == "typeof" && args.len() == 1 => names_a_type(&args[0]),
        _ => false,
    }
}

/// The kernel's struct or union written `struct NAME` / `union NAME` (the parser's identifier for it).
fn record_named(e: &Expr, env: &Env) -> Option<Result<u32, Diagnostic>> {
    let ExprKind::Ident(written) = &e.kind else { return None };
    let (keyword, name) = written.split_once(' ')?;
    Some(env.kernel.record_id(keyword == "union", name).ok_or_else(|| {
        Diagnostic::error(e.span, format!("neither the script nor the kernel's BTF defines `{written}`"))
            .with_help(
                "define it before the probes (`struct NAME { int a; };`), or check the kernel type's name",
            )
    }))
}

/// Bytes of a type named as the argument (`uint32`, `struct task_struct`) or of an expression's value.
pub(super) fn size_of(e: &Expr, env: &Env) -> Result<usize, Diagnostic> {
    match &e.kind {
        // `sizeof(typeof(x))` is `sizeof(x)`.
        ExprKind::Call { name, args, .. } if name == "typeof" && args.len() == 1 => {
            return size_of(&args[0], env)
        }
        // `t[2]` of a type `t` (a macro's parameter given `typeof(T)`): an array of two.
        ExprKind::Index { base, index } if names_a_type(base) => {
            let len =
                crate::sema::constant(index).and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                    Diagnostic::error(index.span, "an array type's length is a number written in the script")
                })?;
            return Ok(len * size_of(base, env)?);
        }
        ExprKind::Ident(name) if name.ends_with('*') => return Ok(8),
        ExprKind::Ident(name) if name.ends_with(']') => {
            let (element, len) = name[..name.len() - 1].rsplit_once('[').unwrap_or((name, ""));
            let len = len.parse::<usize>().map_err(|_| {
                Diagnostic::error(e.span, format!("`{name}` has no length: `sizeof()` needs one"))
            })?;
            let element = Expr { kind: ExprKind::Ident(element.to_string()), ..e.clone() };
            return Ok(len * size_of(&element, env)?);
        }
        _ => {}
    }
    if let Some(record) = record_named(e, env) {
        let record = record?;
        return env
            .kernel
            .record_size(record)
            .ok_or_else(|| Diagnostic::error(e.span, "the kernel's BTF gives this type no size"));
    }
    let ty = match &e.kind {
        ExprKind::Ident(name) => match crate::sema::casts::scalar_named(name, env.kernel) {
            Some(ty) => ty,
            None => env.type_of(e)?,
        },
        _ => env.type_of(e)?,
    };
    match ty {
        Type::Int { bits, .. } | Type::Enum { bits, .. } => Ok(bits as usize / 8),
        Type::Bool => Ok(1),
        Type::Ptr { .. } => Ok(8),
        Type::Str { size } => Ok(size),
        Type::Record { record, .. } => {
            record.size.ok_or_else(|| Diagnostic::error(e.span, "the kernel's BTF gives this type no size"))
        }
        // Tuples as C structs, as current bpftrace lays them out; arrays and typed pointers.
        ty @ (Type::Tuple(_) | Type::NamedTuple { .. } | Type::Array { .. } | Type::Pointer { .. })
            if ty.c_size().is_some() =>
        {
            Ok(ty.c_size().expect("just checked"))
        }
        ty => Err(crate::sema::not_yet(e.span, &format!("`sizeof()` of {ty} is"))),
    }
}

/// `offsetof(struct NAME, member)`: where the member starts in the kernel's struct, in bytes.
fn offset_of(args: &[Expr], span: Span, env: &Env) -> Result<u32, Diagnostic> {
    let kernel = env.kernel;
    let [record, member] = args else {
        return Err(Diagnostic::error(span, "`offsetof()` takes 2 arguments"));
    };
    let Some(id) = record_named(record, env) else {
        return Err(Diagnostic::error(
            record.span,
            "`offsetof()` takes a kernel type first, like `struct task_struct`",
        ));
    };
    let mut path = vec![];
    if !member_path(member, &mut path) {
        return Err(Diagnostic::error(member.span, "`offsetof()` takes a member's name second")
            .with_help("name a member, or a member of a member: `offsetof(struct Foo, bar.x)`"));
    }
    let mut id = id?;
    let mut offset = 0;
    for (i, name) in path.iter().enumerate() {
        let found = kernel.member(id, name).map_err(|_| {
            Diagnostic::error(member.span, format!("{} has no member `{name}`", kernel.type_name(id)))
        })?;
        offset += found.offset;
        match found.kind {
            MemberKind::Record { id: inner } => id = inner,
            _ if i + 1 < path.len() => {
                return Err(Diagnostic::error(member.span, format!("`{name}` is no struct or union")))
            }
            _ => {}
        }
    }
    Ok(offset)
}

/// `a.b.c` as the names `a`, `b`, `c`; false for anything else.
fn member_path<'e>(e: &'e Expr, path: &mut Vec<&'e str>) -> bool {
    match &e.kind {
        ExprKind::Ident(name) => {
            path.push(name);
            true
        }
        ExprKind::Field { base, field } if member_path(base, path) => {
            path.push(field);
            true
        }
        _ => false,
    }
}
