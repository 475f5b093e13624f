//! `pton("127.0.0.1")`, `pton("::1")`: an address literal as its 4 or 16 bytes in network order, known at
//! compile time (an address for `ntop()`, printed as an array). `macaddr(mac)`: six bytes printed as a MAC
//! address.

use super::{Call, Emit, Function};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Reg, Size};

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "macaddr",
        check: |env: &Env, call: &Call| {
            call.arity(1, 1)?;
            let ty = env.type_of(&call.args[0])?;
            if matches!(call.args[0].kind, ExprKind::Str(_)) || !(byte_array(&ty).is_some() || ty.is_int()) {
                return Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`macaddr()` takes the 6 bytes of a MAC address (a `char[6]`) or their address, not {ty}"),
                ));
            }
            Ok(Type::MacAddr)
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, span| {
            let ty = gen.ty(&args[0])?;
            gen.zero(offset, 8);
            match byte_array(&ty) {
                Some(6) => return gen.value_into(&args[0], offset, &ty),
                // A longer array: its first 6 bytes, the rest of the slot zero.
                Some(_) => {
                    let buffer = gen.frame.alloc(ty.slot_size(), args[0].span)?;
                    gen.value_into(&args[0], buffer, &ty)?;
                    gen.copy_between(Reg::FP, buffer, Reg::FP, offset, 8);
                    gen.asm.store_imm(Size::H, Reg::FP, offset + 6, 0);
                    return Ok(());
                }
                None => {}
            }
            // An integer or a pointer is where the 6 bytes are, as bpftrace reads it: the process's memory in a
            // uprobe (or through a process's pointer), the kernel's elsewhere.
            let user = match ty {
                Type::Ptr { user, .. } | Type::Pointer { user, .. } => user,
                _ => gen.point.provider.context().user_addresses,
            };
            let address = gen.int(&args[0])?;
            gen.read_memory(address, offset, 6, user, span)
        }),
    },
    Function {
        name: "pton",
        check: |_: &Env, call: &Call| {
            call.arity(1, 1)?;
            Ok(Type::Bytes { size: address(&call.args[0])?.len() })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, _| {
            let bytes = address(&args[0])?;
            for (i, chunk) in bytes.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                gen.asm.mov_u64(Reg::R1, u64::from_le_bytes(word));
                gen.asm.store(Size::DW, Reg::FP, offset + 8 * i as i16, Reg::R1);
            }
            Ok(())
        }),
    },
];

/// The bytes of the address literal `arg`: IPv4 when it has a `.`, IPv6 when it has a `:`.
fn address(arg: &Expr) -> Result<Vec<u8>, Diagnostic> {
    let ExprKind::Str(text) = &arg.kind else {
        return Err(Diagnostic::error(arg.span, "`pton()` takes an address as a string literal")
            .with_help("for example `pton(\"127.0.0.1\")` or `pton(\"::1\")`"));
    };
    let parsed = if text.contains(':') {
        text.parse::<std::net::Ipv6Addr>().map(|a| a.octets().to_vec()).ok()
    } else if text.contains('.') {
        text.parse::<std::net::Ipv4Addr>().map(|a| a.octets().to_vec()).ok()
    } else {
        None
    };
    parsed.ok_or_else(|| {
        Diagnostic::error(arg.span, format!("`{text}` is not an IPv4 or IPv6 address"))
            .with_help("for example `pton(\"127.0.0.1\")` or `pton(\"::1\")`")
    })
}

/// An array of six 1-byte integers, six bytes, or a struct's `char[6]`.
/// The bytes of a byte array (or a struct's `char mac[6]`, read as a string of all its bytes), when it holds the
/// 6 of a MAC address or more (the first 6 are the address, as bpftrace takes them).
fn byte_array(ty: &Type) -> Option<usize> {
    let bytes = match ty {
        Type::Array { elem, len } if matches!(**elem, Type::Int { bits: 8, .. }) => *len,
        Type::Bytes { size } | Type::Str { size } => *size,
        _ => return None,
    };
    (bytes >= 6).then_some(bytes)
}
