//! `unwatch(address)`: removes the watchpoints on `address` (asynchronously, as in bpftrace: userspace closes
//! their breakpoints when the record arrives, so a hit already under way may still run).

use super::{Call, Emit, Function};
use crate::codegen::record::Record;
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::Env;

pub const FUNCTIONS: &[Function] = &[Function {
    name: "unwatch",
    check: |env: &Env, call: &Call| {
        call.arity(1, 1)?;
        let ty = env.type_of(&call.args[0])?;
        if !ty.is_int() && !ty.is_pointer() {
            return Err(Diagnostic::error(
                call.args[0].span,
                format!("`unwatch()` takes an address, not {ty}"),
            )
            .with_help("the address of a watchpoint, as its attach point gives it (`unwatch(0x10000000)`)"));
        }
        Ok(Type::Void)
    },
    check_statement: None,
    emit: Emit::Statement(|gen, args, span| {
        gen.send_record_with(Record::Unwatch, &args[0], span).map(|()| true)
    }),
}];
