//! The kernel as the compiler sees it: its types (BTF), the script's own C types beside them, tracepoint
//! formats from tracefs, and its features. [`KernelTypes`] is built once per compilation and handed down,
//! as the function table is: nothing here is global or per thread, so a unit test builds one from a small
//! BTF file and compiles without a kernel.

pub mod btf;
pub mod features;
#[cfg(test)]
pub mod fixture;
pub mod module_btf;
pub mod records;
pub mod script_types;
pub mod traceable;
pub mod tracefs;

pub use btf::{KernelFunction, Vmlinux};
pub use features::{needs, release, without};
pub use records::{Member, MemberKind, TypeRef};

use crate::lang::cdecl::{CTypes, EnumDef};
use bpf::features::{Feature, Features};
use script_types::{is_script, ScriptTypes};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// The kernel's types and the script's: every name a script gives a type is looked up here, the script's
/// first (a script's `struct task_struct` wins over the kernel's, as in bpftrace).
pub struct KernelTypes {
    pub vmlinux: Vmlinux,
    /// What the kernel offers: the run's one answer table, shared with codegen and the runtime.
    pub features: Arc<Features>,
    script: Arc<CTypes>,
    /// The addresses of kernel symbols asked so far (`kaddr()`): each is checked, then compiled.
    addresses: RefCell<HashMap<String, Option<u64>>>,
}

impl KernelTypes {
    pub fn new(vmlinux: Vmlinux, features: Arc<Features>, script: Arc<CTypes>) -> Self {
        KernelTypes { vmlinux, features, script, addresses: RefCell::default() }
    }

    /// No type at all (a kernel without BTF, a script without C definitions), and every feature: what
    /// unit tests compile against.
    pub fn none() -> Self {
        KernelTypes::new(Vmlinux::none(), every_feature(), Arc::default())
    }

    fn script(&self) -> ScriptTypes<'_> {
        ScriptTypes { types: &self.script, vmlinux: &self.vmlinux }
    }

    /// The type with `id`, resolved once: its name and size go with it.
    pub fn type_ref(&self, id: u32) -> TypeRef {
        TypeRef { id, name: self.type_name(id).into(), size: self.record_size(id) }
    }

    /// The id of `struct NAME` (or `union NAME` with `union`): the script's, else the kernel's.
    pub fn record_id(&self, union: bool, name: &str) -> Option<u32> {
        self.script().record_id(union, name).or_else(|| self.vmlinux.record_id(union, name))
    }

    /// `struct NAME` / `union NAME` / `int` ...: the C name of type `id`.
    pub fn type_name(&self, id: u32) -> String {
        match is_script(id) {
            true => self.script().type_name(id),
            false => self.vmlinux.type_name(id),
        }
    }

    /// Bytes of the struct or union `id`.
    pub fn record_size(&self, id: u32) -> Option<usize> {
        match is_script(id) {
            true => self.script().record_size(id),
            false => self.vmlinux.record_size(id),
        }
    }

    /// Member `name` of the struct or union `id`, looking into unnamed inner ones as C does; `Err` with the
    /// members there are, for an error message.
    pub fn member(&self, id: u32, name: &str) -> Result<Member, Vec<String>> {
        match is_script(id) {
            true => self.script().member(id, name),
            false => self.vmlinux.member(id, name),
        }
    }

    /// The members of the struct or union `id` in order, those of unnamed inner ones in their place.
    pub fn members(&self, id: u32) -> Option<Vec<(String, Member)>> {
        match is_script(id) {
            true => self.script().members(id),
            false => self.vmlinux.members(id),
        }
    }

    /// What type `id` is, as a member of that type would be read.
    pub fn member_kind_of(&self, id: u32) -> MemberKind {
        match is_script(id) {
            true => MemberKind::Record { id },
            false => self.vmlinux.member_kind_of(id),
        }
    }

    /// Enum constant `name` with its enum: the script's, else the kernel's.
    pub fn enum_constant(&self, name: &str) -> Option<(Arc<EnumDef>, i64)> {
        self.script().enum_constant(name).or_else(|| self.vmlinux.enum_constant(name))
    }

    /// The address of kernel symbol `name` (`/proc/kallsyms`, or the file `--kallsyms` names); `None` when
    /// there is no such symbol or it shows this process no address.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        if let Some(known) = self.addresses.borrow().get(name) {
            return *known;
        }
        let found = crate::symbols::kernel::address_of(name);
        self.addresses.borrow_mut().insert(name.to_string(), found);
        found
    }

    /// The script's `enum NAME`.
    pub fn enum_named(&self, name: &str) -> Option<Arc<EnumDef>> {
        self.script().enum_named(name)
    }
}

/// Every feature, probing nothing: the same programs on any machine, without privilege.
pub fn every_feature() -> Arc<Features> {
    Arc::new(Features::probing().given(Feature::ALL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_btf_answers_for_its_records_typedefs_and_enums() {
        let kernel = fixture::kernel();
        let task = kernel.record_id(false, "task_struct").expect("the fixture's struct");
        let named = kernel.type_ref(task);
        assert_eq!((&*named.name, named.size), ("struct task_struct", Some(40)));
        let pid = kernel.member(task, "pid").expect("a member");
        assert_eq!(pid, Member { offset: 4, kind: MemberKind::Int { size: 4, signed: true } });
        let parent = kernel.member(task, "parent").expect("a member");
        assert_eq!(parent, Member { offset: 8, kind: MemberKind::Pointer { to: task } });
        assert_eq!(kernel.member(task, "comm").map(|m| m.kind), Ok(MemberKind::CharArray { len: 16 }));
        assert!(kernel.member(task, "pdi").is_err_and(|names| names.contains(&"pid".to_string())));
        assert_eq!(kernel.vmlinux.typedef_kind("pid_t"), Some(MemberKind::Int { size: 4, signed: true }));
        assert_eq!(
            kernel.enum_constant("FIXTURE_READY").map(|(e, v)| (e.name.clone(), v)),
            Some(("fixture_state".into(), 7))
        );
        assert_eq!(kernel.vmlinux.record_size_align(false, "task_struct"), Some((40, 8)));
    }

    #[test]
    fn without_btf_nothing_is_known() {
        let kernel = KernelTypes::none();
        assert_eq!(kernel.record_id(false, "task_struct"), None);
        assert!(!kernel.vmlinux.exists());
        assert!(kernel.vmlinux.kernel_function("do_nanosleep").is_err());
    }
}
