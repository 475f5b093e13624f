//! `cgroup_path(id[, filter])`: a cgroup id whose paths are looked up when it is printed
//! (`output/cgroup.rs`), so a reused id may print another path, as in current bpftrace.

use super::{Call, Emit, Function};
use crate::lang::ast::ExprKind;
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::Env;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "cgroup_path",
    check: |env: &Env, call: &Call| {
        call.arity(1, 2)?;
        let ty = env.type_of(&call.args[0])?;
        if !ty.is_int() {
            return Err(Diagnostic::error(
                call.args[0].span,
                format!("`cgroup_path()` takes a cgroup id, not {ty}"),
            )
            .with_help("for example `cgroup_path(cgroup)`"));
        }
        let filter = match call.args.get(1).map(|a| &a.kind) {
            None => "",
            Some(ExprKind::Str(filter)) => filter,
            Some(_) => {
                return Err(Diagnostic::error(
                    call.args[1].span,
                    "the hierarchy filter of `cgroup_path()` is a string literal, such as \"unified\" or \"cpu*\"",
                ))
            }
        };
        Ok(Type::CgroupPath { filter: filter.into() })
    },
    check_statement: None,
    emit: Emit::Into(|gen, args, offset, _, _| {
        let id = gen.int(&args[0])?;
        gen.store_val(id, offset);
        Ok(())
    }),
}];
