//! What codegen asks of the builtin functions: the code of a call. `crate::functions` answers and the
//! pipeline hands its table in, so that codegen does not import the functions (which import codegen).

use super::frame::Val;
use super::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::FunctionId;

/// The code of a call, by where its result goes.
pub enum Emit {
    /// Acts and gives nothing; `Ok(false)` when control never goes past it (`exit()`).
    Statement(fn(&mut Gen, &[Expr], Span) -> Result<bool, Diagnostic>),
    /// An integer, in a [`Val`].
    Int(fn(&mut Gen, &[Expr], Span) -> Result<Val, Diagnostic>),
    /// A value written at `fp + offset`, laid out as the destination's type (strings, symbols,
    /// addresses, stacks).
    Into(EmitInto),
}

/// Writes the value of `name(args)` at `fp + offset` as the destination's type.
pub type EmitInto = fn(&mut Gen, &[Expr], i16, &Type, Span) -> Result<(), Diagnostic>;

/// The builtin functions, as codegen generates their calls.
pub trait FunctionCode: Sync {
    /// The code of a call of the function sema recorded.
    fn emit(&self, id: FunctionId) -> &Emit;
}
