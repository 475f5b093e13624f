//! The builtin functions, one entry each: how a call is checked and typed, and the code it becomes.
//!
//! The pipeline hands [`TABLE`] to sema, which resolves every call to its function's [`FunctionId`] and
//! checks it with [`Function::check`] (through [`FunctionTable`]), and to codegen, which generates it with
//! [`Function::emit`] (through [`FunctionCode`]); neither imports this module. A function that prints also has a record kind in
//! `codegen/record.rs`, decoded in `output/`. Adding a function is one entry in a module here (and its
//! record and output where it prints). Aggregations (`count()`, `hist()`, ...) are map values, not
//! functions: `sema::maps::Agg`.

mod buffers;
mod capture;
mod cgroup;
mod changes;
mod cpus;
mod debugf;
mod kernel;
mod maps;
mod meta;
mod name_tables;
mod names;
mod net;
mod output;
mod percpu;
mod signals;
pub mod stacks;
mod stdlib;
mod stdlib_strings;
mod strings;
mod symbols;
mod time;
mod types;
mod user_symbols;
mod watchpoints;

use crate::codegen::calls::{Emit, FunctionCode};
use crate::codegen::Gen;
use crate::lang::{Diagnostic, Span};
use crate::sema::types::Type;
use crate::sema::{Call, Env, FunctionId, FunctionTable};
use std::sync::OnceLock;

/// One builtin function.
pub struct Function {
    pub name: &'static str,
    /// Checks the arguments and gives the type of the result ([`Type::Void`] for a statement).
    pub check: fn(&Env, &Call) -> Result<Type, Diagnostic>,
    /// Further checks where the call is a statement, each problem reported (printf formats, exit codes).
    pub check_statement: Option<fn(&Env, &Call) -> Vec<Diagnostic>>,
    pub emit: Emit,
}

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
    watchpoints::FUNCTIONS,
    debugf::FUNCTIONS,
    changes::FUNCTIONS,
    capture::FUNCTIONS,
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

/// Every builtin function, in one list: a [`FunctionId`] is a place in it.
fn all() -> &'static [&'static Function] {
    static ALL: OnceLock<Vec<&'static Function>> = OnceLock::new();
    ALL.get_or_init(|| FUNCTIONS.iter().flat_map(|group| group.iter()).collect())
}

/// The table the pipeline hands to sema (checking calls) and codegen (generating them).
pub struct Table;

/// The builtin functions.
pub static TABLE: Table = Table;

impl Table {
    fn function(&self, id: FunctionId) -> &'static Function {
        all()[usize::from(id.0)]
    }
}

impl FunctionTable for Table {
    fn find(&self, name: &str) -> Option<FunctionId> {
        let index = all().iter().position(|f| f.name == name)?;
        Some(FunctionId(u16::try_from(index).ok()?))
    }

    fn check(&self, id: FunctionId, env: &Env, call: &Call) -> Result<Type, Diagnostic> {
        (self.function(id).check)(env, call)
    }

    fn check_statement(&self, id: FunctionId, env: &Env, call: &Call) -> Vec<Diagnostic> {
        self.function(id).check_statement.map_or_else(Vec::new, |check| check(env, call))
    }

    fn not_yet(&self, name: &str) -> bool {
        NOT_YET.contains(&name)
    }
}

impl FunctionCode for Table {
    fn emit(&self, id: FunctionId) -> &Emit {
        &self.function(id).emit
    }
}

/// Functions of bpftrace that this version does not compile yet.
pub const NOT_YET: &[&str] = &[];

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
        assert!(TABLE.find("printf").is_some() && TABLE.find("frobnicate").is_none());
        assert!(NOT_YET.iter().all(|name| TABLE.find(name).is_none()));
        let printf = TABLE.find("printf").expect("printf");
        assert_eq!(TABLE.function(printf).name, "printf");
    }
}
