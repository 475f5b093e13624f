//! `skboutput(path, skb, length, offset)`: captures a socket buffer the trampoline handed over into a pcap
//! file of raw IP packets, as bpftrace's does: the first `length` bytes of the buffer are taken
//! (`bpf_skb_output`, Linux 5.5), and the file gets them without the first `offset` (14 leaves out an
//! Ethernet header). Returns 0, or the helper's negative errno.

use super::{Call, Emit, Function};
use crate::codegen::record::Capture;
use crate::lang::ast::ExprKind;
use crate::lang::constant::constant;
use crate::lang::Diagnostic;
use crate::sema::types::Type;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "skboutput",
    check: |env, call| {
        call.arity(4, 4)?;
        if let Some(point) = env.points.iter().find(|p| !p.provider.on_trampoline()) {
            return Err(Diagnostic::error(
                call.span,
                format!("`skboutput()` (the kernel's bpf_skb_output) works in fentry and fexit probes only, not in `{}`", point.name),
            )
            .with_help("the kernel takes only a buffer it handed over: `fentry:ip_rcv { skboutput(\"rx.pcap\", args.skb, args.skb->len, 0); }`"));
        }
        path(call)?;
        let skb = env.type_of(&call.args[1])?;
        let named = match &skb {
            Type::Ptr { to, .. } => to.name.to_string(),
            _ => String::new(),
        };
        if named != "struct sk_buff" {
            return Err(Diagnostic::error(
                call.args[1].span,
                format!("`skboutput()` takes a `struct sk_buff *` (e.g. `args.skb`), not {skb}"),
            ));
        }
        let length = env.type_of(&call.args[2])?;
        if !length.is_int() {
            return Err(Diagnostic::error(
                call.args[2].span,
                format!("`skboutput()` takes the number of bytes to capture, not {length}"),
            ));
        }
        offset(call)?;
        Ok(Type::Int { signed: false, bits: 32 })
    },
    check_statement: None,
    emit: Emit::Int(|gen, args, span| {
        let call = Call { name: "skboutput", args, span };
        let capture = Capture { path: path(&call)?.to_string(), offset: offset(&call)? };
        gen.capture_packet(capture, &args[1], &args[2], span)
    }),
}];

/// The pcap file: a string written in the script.
fn path<'a>(call: &Call<'a>) -> Result<&'a str, Diagnostic> {
    match &call.args[0].kind {
        ExprKind::Str(path) if !path.is_empty() => Ok(path),
        _ => {
            Err(Diagnostic::error(call.args[0].span, "`skboutput()` takes the pcap file's path as a string")
                .with_help("e.g. `skboutput(\"receive.pcap\", args.skb, args.skb->len, 0)`"))
        }
    }
}

/// The leading bytes left out: a number written in the script (userspace drops them).
fn offset(call: &Call) -> Result<u64, Diagnostic> {
    match constant(&call.args[3]) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(Diagnostic::error(
            call.args[3].span,
            "`skboutput()` takes the bytes to leave out of each packet as a number, 0 or more",
        )
        .with_help("14 leaves out an Ethernet header")),
    }
}
