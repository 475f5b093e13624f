//! `cpumask_weight(mask)`: the number of CPUs in a cpumask; `cpumask_test(mask, cpu)`: whether a CPU is in it,
//! as trace-cmd users filter IPIs on a target CPU (`/cpumask_test(args.cpumask, 2)/`).

use super::{Emit, Function};
use crate::lang::Diagnostic;
use crate::sema::types::Type;

pub const FUNCTIONS: &[Function] = &[
    Function {
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
    },
    Function {
        name: "cpumask_test",
        check: |env, call| {
            call.arity(2, 2)?;
            match env.type_of(&call.args[0])? {
                Type::Cpumask { .. } => {}
                ty => {
                    return Err(Diagnostic::error(
                        call.args[0].span,
                        format!("`cpumask_test()` looks for a CPU in a cpumask, not in {ty}"),
                    ))
                }
            }
            match env.type_of(&call.args[1])? {
                ty if ty.is_int() => Ok(Type::Bool),
                ty => Err(Diagnostic::error(call.args[1].span, format!("a CPU is a number, not {ty}"))),
            }
        },
        check_statement: None,
        emit: Emit::Int(|gen, args, span| gen.cpumask_test(&args[0], &args[1], span)),
    },
];
