//! The builtin functions, one entry each: how a call is checked and typed, and the code it becomes.
//!
//! Sema resolves every call to its [`Function`] ([`lookup`]) and checks it with [`Function::check`];
//! codegen generates it with [`Function::emit`]. A function that prints also has a record kind in
//! `codegen/record.rs`, decoded in `output/`. Adding a function is one entry in a module here (and its
//! record and output where it prints). Aggregations (`count()`, `hist()`, ...) are map values, not
//! functions: `sema::maps::Agg`.

mod buffers;
mod cgroup;
mod cpus;
mod kernel;
pub(crate) mod maps;
mod meta;
mod name_tables;
mod names;
mod net;
mod output;
mod percpu;
mod signals;
mod stacks;
mod stdlib;
mod stdlib_strings;
mod strings;
mod symbols;
pub(crate) mod time;
mod types;
mod user_symbols;

use crate::codegen::frame::Val;
use crate::codegen::Gen;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::Env;

/// A call as written: `name(args)`.
#[derive(Clone, Copy)]
pub struct Call<'e> {
    pub name: &'e str,
    pub args: &'e [Expr],
    /// The whole call.
    pub span: Span,
}

impl Call<'_> {
    /// An error unless the call has from `min` to `max` arguments.
    pub fn arity(&self, min: usize, max: usize) -> Result<(), Diagnostic> {
        if (min..=max).contains(&self.args.len()) {
            return Ok(());
        }
        let wanted = if min == max { format!("{min}") } else { format!("{min} to {max}") };
        Err(Diagnostic::error(
            self.span,
            format!(
                "`{}()` takes {wanted} argument{}, not {}",
                self.name,
                if max == 1 { "" } else { "s" },
                self.args.len()
            ),
        ))
    }
}

/// One builtin function.
pub struct Function {
    pub name: &'static str,
    /// Checks the arguments and gives the type of the result ([`Type::Void`] for a statement).
    pub check: fn(&Env, &Call) -> Result<Type, Diagnostic>,
    /// Further checks where the call is a statement, each problem reported (printf formats, exit codes).
    pub check_statement: Option<fn(&Env, &Call) -> Vec<Diagnostic>>,
    pub emit: Emit,
}

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

/// Every builtin function.
const FUNCTIONS: &[&[Function]] = &[
    output::FUNCTIONS,
    maps::FUNCTIONS,
    strings::FUNCTIONS,
    symbols::FUNCTIONS,
    stacks::FUNCTIONS,
    cpus::FUNCTIONS,
    types::FUNCTIONS,
    buffers::FUNCTIONS,
    time::FUNCTIONS,
    stdlib::FUNCTIONS,
    names::FUNCTIONS,
    net::FUNCTIONS,
    percpu::FUNCTIONS,
    cgroup::FUNCTIONS,
    meta::FUNCTIONS,
    stdlib_strings::FUNCTIONS,
    kernel::FUNCTIONS,
    signals::FUNCTIONS,
    user_symbols::FUNCTIONS,
];

/// An error unless `--unsafe` allows the functions that act on the system (`system`, `signal`).
fn require_unsafe(gen: &Gen, name: &str, span: Span) -> Result<(), Diagnostic> {
    if gen.options.allow_unsafe {
        return Ok(());
    }
    Err(Diagnostic::error(
        span,
        format!("`{name}()` acts on the system, which steadytrace does only when told"),
    )
    .with_help("run with --unsafe"))
}

/// The function called `name`.
pub fn lookup(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().flat_map(|group| group.iter()).find(|f| f.name == name)
}

/// Functions of bpftrace that this version does not compile yet.
pub const NOT_YET: &[&str] = &[
    "override",
    "skboutput",
    "debugf",
    "unwatch",
    "socket_cookie",
    "write_user",
    "dw_ustack",
    "kfunc_allowed",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_has_one_entry() {
        let mut names: Vec<&str> = FUNCTIONS.iter().flat_map(|group| group.iter()).map(|f| f.name).collect();
        let all = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all);
        assert!(lookup("printf").is_some() && lookup("frobnicate").is_none());
        assert!(NOT_YET.iter().all(|name| lookup(name).is_none()));
    }
}
