//! `pton("127.0.0.1")`, `pton("::1")`: an address literal as its 4 or 16 bytes in network order, known at
//! compile time (an address for `ntop()`, printed as an array).

use super::{Call, Emit, Function};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::{Reg, Size};

pub const FUNCTIONS: &[Function] = &[Function {
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
}];

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
