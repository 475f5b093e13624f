//! What sema asks of the builtin functions: whether a name is one, and how a call of it is checked and
//! typed. `crate::functions` answers and the pipeline hands its table in, so that sema does not import
//! the functions (whose code generation imports codegen, which imports sema).

use super::types::Type;
use super::Env;
use crate::lang::ast::Expr;
use crate::lang::{Diagnostic, Span};

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

/// A builtin function, as the checked program records it for codegen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FunctionId(pub u16);

/// The builtin functions, as sema checks their calls.
pub trait FunctionTable: Sync {
    /// The function called `name`.
    fn find(&self, name: &str) -> Option<FunctionId>;
    /// Checks the arguments and gives the type of the result ([`Type::Void`] for a statement).
    fn check(&self, id: FunctionId, env: &Env, call: &Call) -> Result<Type, Diagnostic>;
    /// Further checks where the call is a statement, each problem reported (printf formats, exit codes).
    fn check_statement(&self, id: FunctionId, env: &Env, call: &Call) -> Vec<Diagnostic>;
    /// Whether `name` is a function of bpftrace that this version does not compile yet.
    fn not_yet(&self, name: &str) -> bool;
}

/// A table without functions, for checking scripts that call none.
#[cfg(test)]
pub struct NoFunctions;

#[cfg(test)]
impl FunctionTable for NoFunctions {
    fn find(&self, _: &str) -> Option<FunctionId> {
        None
    }
    fn check(&self, _: FunctionId, _: &Env, call: &Call) -> Result<Type, Diagnostic> {
        Err(Diagnostic::error(call.span, "no functions here"))
    }
    fn check_statement(&self, _: FunctionId, _: &Env, _: &Call) -> Vec<Diagnostic> {
        vec![]
    }
    fn not_yet(&self, _: &str) -> bool {
        false
    }
}
