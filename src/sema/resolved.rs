//! What a call's check resolved against the kernel's types (and the machine's registers and symbols), kept in
//! the typed program by the argument that names it: codegen reads it instead of looking anything up again.

use super::types::Type;

#[derive(Clone, Debug, PartialEq)]
pub enum Resolved {
    /// A number known when compiling: `sizeof`, `offsetof`, `kaddr`, `kfunc_exist`, `kfunc_allowed`.
    Constant(u64),
    /// The kernel's BTF id of what the argument names (`percpu_kaddr`'s variable).
    BtfId(u32),
    /// Where in the saved registers the register `reg()` names is.
    Register(i16),
    /// The type the argument names or has (`typeinfo`), or the value a struct prints as (`print`).
    Type(Type),
}
