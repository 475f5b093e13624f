//! What an expression is typed in: the maps, the variables, the probe's attach points, and the builtin
//! functions, which sema asks through [`FunctionTable`]: `crate::functions` answers and the pipeline hands
//! its table in, so that sema does not import the functions (whose code generation imports codegen, which
//! imports sema).

use super::maps::MapTable;
use super::resolved::Resolved;
use super::types::Type;
use crate::kernel::KernelTypes;
use crate::lang::ast::{Expr, ExprId};
use crate::lang::{Diagnostic, Span};
use crate::probes::AttachPoint;
use std::cell::RefCell;
use std::collections::HashMap;

/// What an expression can refer to.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub maps: &'a MapTable,
    pub vars: &'a HashMap<String, Type>,
    /// The probe's attach points: which builtins exist, and the fields of `args`.
    pub points: &'a [AttachPoint],
    /// The builtin functions.
    pub functions: &'static dyn FunctionTable,
    /// The kernel's types and the script's: what names of types and members stand for.
    pub kernel: &'a KernelTypes,
    /// What the walk in the probe's final environment learns (the typed program): there each expression
    /// is typed once, however deep, and what a function resolved is kept for codegen.
    pub memo: Option<&'a Learnt>,
}

/// What the final walk of a probe learns as it types: each expression's type, and what the checks of its
/// calls resolved against the kernel's types (sizes, offsets, BTF ids, registers).
#[derive(Default)]
pub struct Learnt {
    pub types: RefCell<HashMap<ExprId, Type>>,
    pub resolved: RefCell<HashMap<ExprId, Resolved>>,
}

impl Env<'_> {
    /// Keeps for codegen what the call whose argument is `arg` resolved, found by `resolve` (asked only in
    /// the final walk: a lookup can be costly, and the walks that learn map types repeat).
    pub fn resolved(&self, arg: &Expr, resolve: impl FnOnce() -> Resolved) {
        if let Some(learnt) = self.memo {
            learnt.resolved.borrow_mut().insert(arg.id, resolve());
        }
    }
}

/// Bytes `str()` reads at most, as bpftrace's default.
pub const STR_SIZE: usize = 64;

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
        let wanted = match (min, max) {
            _ if min == max => format!("{min}"),
            (0, _) => format!("at most {max}"),
            _ => format!("{min} to {max}"),
        };
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

/// Checks of small scripts through sema, for the unit tests of typing, context and map access.
#[cfg(test)]
pub(super) mod checking {
    use super::NoFunctions;
    use crate::kernel::{KernelTypes, Vmlinux};
    use crate::sema::maps::MapValue;
    use crate::sema::types::Type;

    /// The script's own C types, on a kernel without BTF.
    fn types_of(program: &crate::lang::ast::Program) -> KernelTypes {
        KernelTypes::new(Vmlinux::none(), crate::kernel::every_feature(), program.c_types.clone())
    }

    /// The error messages of `script`, empty when it checks.
    pub fn errors(script: &str) -> Vec<String> {
        let program = crate::lang::parse(script).expect("parses");
        match crate::sema::check(&program, &Default::default(), &NoFunctions, &types_of(&program)) {
            Ok(_) => vec![],
            Err(diags) => diags.into_iter().map(|d| d.message).collect(),
        }
    }

    /// The value type of map `@name` in `script`.
    pub fn map_type(script: &str, name: &str) -> Type {
        let program = crate::lang::parse(script).expect("parses");
        let checked = crate::sema::check(&program, &Default::default(), &NoFunctions, &types_of(&program))
            .unwrap_or_else(|d| panic!("{script}: {:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>()));
        match &checked.maps.get(name).expect("the map").1.value {
            MapValue::Plain(ty) => ty.clone(),
            MapValue::Agg(agg) => panic!("@{name} is a {}() map", agg.name()),
        }
    }
}
