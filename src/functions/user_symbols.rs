//! `uaddr("name")`: the address of a global of the binary a uprobe is in, found in its ELF symbols when
//! the script is compiled. In a position-independent binary (a PIE, a shared library) the address
//! depends on where the binary was loaded: the probe's own function tells, as the instruction pointer
//! at a uprobe's entry is that function's loaded address.

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::codegen::Gen;
use crate::lang::ast::ExprKind;
use crate::lang::{Diagnostic, Span};
use crate::probes::{elf, AttachPoint, Func};
use crate::sema::types::Type;
use bpf::{Alu, Reg, Size};

pub const FUNCTIONS: &[Function] = &[Function {
    name: "uaddr",
    check: |env, call| {
        call.arity(1, 1)?;
        let mut found = None;
        for point in env.points {
            found = Some(locate(point, call)?);
        }
        let symbol = found
            .ok_or_else(|| Diagnostic::error(call.span, "`uaddr()` in a probe without attach points"))?;
        let bits = match symbol.size {
            1 | 2 | 4 | 8 => symbol.size as u8 * 8,
            _ => 64,
        };
        Ok(Type::Pointer { to: Box::new(Type::Int { signed: false, bits }), user: true })
    },
    check_statement: None,
    emit: Emit::Int(|gen, args, span| {
        let symbol = locate(gen.point, &Call { name: "uaddr", args, span })?;
        address(gen, &symbol, span)
    }),
}];

/// What `uaddr()` found for one attach point.
struct Located {
    /// The symbol's address as the file states it.
    address: u64,
    size: u64,
    /// For a position-independent file: the file's address of the function the uprobe is on.
    probed_function: Option<u64>,
}

/// The symbol `uaddr(name)` names in the binary of `point`.
fn locate(point: &AttachPoint, call: &Call) -> Result<Located, Diagnostic> {
    let arg = &call.args[0];
    let ExprKind::Str(name) = &arg.kind else {
        return Err(Diagnostic::error(arg.span, "`uaddr()` takes a symbol's name as a string literal"));
    };
    let Some(binary) = point.provider.user_binary() else {
        return Err(Diagnostic::error(
            call.span,
            format!(
                "`uaddr()` names a global of the binary a uprobe or usdt probe is in; `{}` is in none",
                point.name
            ),
        ));
    };
    let path = binary.path;
    // Data symbols come from the binary itself, never from its debug file: the default directories do.
    let file = elf::load(path, &crate::symbols::DebugDirs::default())
        .map_err(|e| Diagnostic::error(call.span, e))?;
    let symbol = file.object(name).ok_or_else(|| {
        Diagnostic::error(arg.span, format!("{} has no global `{name}`", path.display())).with_help(
            "uaddr() finds the data symbols of the binary's symbol tables (`nm -D` or `nm` lists them)",
        )
    })?;
    let mut located = Located { address: symbol.address, size: symbol.size, probed_function: None };
    if file.relocatable() {
        let context = point.provider.context();
        let entry = context.retval.is_none() && matches!(context.func, Some(Func::Name(_)));
        let function = binary
            .function
            .filter(|_| entry)
            .and_then(|f| file.functions().iter().find(|s| s.name == f).map(|s| s.address));
        let Some(function) = function else {
            return Err(Diagnostic::error(
                call.span,
                format!(
                    "{} is position-independent: `uaddr()` finds where it is loaded only in a uprobe on one named function (not `{}`)",
                    path.display(),
                    point.name
                ),
            ));
        };
        located.probed_function = Some(function);
    }
    Ok(located)
}

/// The symbol's address in the traced process: as the file states it, or moved by as much as the
/// probed function's entry (the instruction pointer) is from its own address in the file.
fn address(gen: &mut Gen, symbol: &Located, span: Span) -> Result<Val, Diagnostic> {
    let Some(function) = symbol.probed_function else { return Ok(Val::Imm(symbol.address)) };
    gen.asm.load(Size::DW, Reg::R0, Reg::R9, bpf::arch::HOST.instruction_pointer);
    gen.asm.mov_u64(Reg::R1, symbol.address.wrapping_sub(function));
    gen.asm.alu64_reg(Alu::Add, Reg::R0, Reg::R1);
    gen.take_r0(span)
}
