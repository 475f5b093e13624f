//! `cpumask_weight(mask)`: the number of CPUs in a cpumask.

use super::{Emit, Function};
use crate::lang::Diagnostic;
use crate::sema::types::Type;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "cpumask_weight",
    check: |env, call| {
        call.arity(1, 1)?;
        match env.type_of(&call.args[0])? {
            Type::Cpumask { .. } => Ok(Type::U64),
            ty => Err(Diagnostic::error(
                call.args[0].span,
                format!("`cpumask_weight()` counts the CPUs of a cpumask, not of {ty}"),
            )),
        }
    },
    check_statement: None,
    emit: Emit::Int(|gen, args, span| gen.cpumask_weight(&args[0], span)),
}];
