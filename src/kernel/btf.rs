//! The kernel's BTF (`/sys/kernel/btf/vmlinux`) as one value, [`Vmlinux`]: struct members for `ptr->field`,
//! the kernel's functions (fentry) and enum constants, and the arguments of raw tracepoints by name. The
//! prototype `btf_trace_NAME` of a tracepoint's probe function names and types its arguments after the
//! first (`void *__data`). They become fields of `args`, as a classic tracepoint's record fields are,
//! read from the raw tracepoint's context (an array of 64-bit arguments).

use super::records::{Member, MemberKind};
use super::traceable::TraceableFunction;
use crate::kernel::tracefs::{Field, FieldKind};
use crate::lang::cdecl::EnumDef;
use libbpf_rs::btf::types::{Array, Composite, Enum, Enum64, FuncProto, Int, IntEncoding, MemberAttr};
use libbpf_rs::btf::{Btf, BtfKind, BtfType, HasSize};
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A kernel enum constant: the enum it belongs to (for its name when printed) and its value.
type KernelConstant = Option<(Arc<EnumDef>, i64)>;

/// The kernel's BTF, read from its file when first asked (reading it takes tens of milliseconds, which a
/// script that asks nothing of the kernel's types does not pay), with the answers that walk every type
/// remembered.
pub struct Vmlinux {
    source: Source,
    btf: OnceCell<Result<Btf<'static>, String>>,
    raw_tracepoints: RefCell<HashMap<String, Result<Vec<Field>, String>>>,
    enum_constants: RefCell<HashMap<String, KernelConstant>>,
    traceable: OnceCell<Vec<TraceableFunction>>,
}

/// Where the BTF comes from.
enum Source {
    /// The running kernel's, `/sys/kernel/btf/vmlinux`: libbpf maps it rather than copying its megabytes.
    Running,
    File(PathBuf),
    /// A kernel module's, read whole with the kernel's when made ([`Vmlinux::module`]).
    Module,
    None,
}

/// Where the running kernel describes itself.
const RUNNING: &str = "/sys/kernel/btf/vmlinux";

impl Vmlinux {
    /// The running kernel's BTF.
    pub fn running() -> Self {
        Self::from(Source::Running)
    }

    /// The BTF in `file` (raw BTF or an ELF object with a `.BTF` section): a kernel's, or a small one made
    /// by a test.
    pub fn from_file(file: PathBuf) -> Self {
        Self::from(Source::File(file))
    }

    /// The BTF of loaded kernel module `name`, with the kernel's it is made against: its functions and the
    /// types they name. Read now (the kernel's BTF again, then the module's).
    pub fn module(name: &str) -> Result<Self, String> {
        let unreadable = |what: &str, e: std::io::Error| format!("the BTF of {what} cannot be read ({e})");
        let base = std::fs::read(RUNNING).map_err(|e| unreadable("the kernel", e))?;
        let path = super::module_btf::path(name);
        let split = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "module `{name}` has no BTF ({} is missing): this kernel ({}) was built without \
                 CONFIG_DEBUG_INFO_BTF_MODULES, which came in Linux 5.11",
                path.display(),
                super::release()
            ),
            _ => unreadable(&format!("module `{name}`"), e),
        })?;
        let whole = super::module_btf::merged(&base, &split)?;
        // libbpf parses BTF from a file: one in memory.
        let file =
            nix::sys::memfd::memfd_create(c"steadytrace-btf", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
                .map_err(|e| unreadable(&format!("module `{name}`"), e.into()))?;
        let mut file = std::fs::File::from(file);
        std::io::Write::write_all(&mut file, &whole)
            .map_err(|e| unreadable(&format!("module `{name}`"), e))?;
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
        let btf =
            Btf::from_path(path).map_err(|e| format!("the BTF of module `{name}` cannot be read ({e})"))?;
        let module = Self::from(Source::Module);
        let _ = module.btf.set(Ok(btf));
        Ok(module)
    }

    /// The last type id of the BTF (libbpf counts void, id 0, among its types).
    pub fn last_type_id(&self) -> u32 {
        self.btf().map_or(0, |btf| (btf.len() as u32).saturating_sub(1))
    }

    /// No BTF at all (a kernel built without `CONFIG_DEBUG_INFO_BTF`).
    pub fn none() -> Self {
        Self::from(Source::None)
    }

    fn from(source: Source) -> Self {
        Vmlinux {
            source,
            btf: OnceCell::new(),
            raw_tracepoints: Default::default(),
            enum_constants: Default::default(),
            traceable: OnceCell::new(),
        }
    }

    /// Whether there is BTF to read (its file exists; not read for this).
    pub fn exists(&self) -> bool {
        match &self.source {
            Source::Running => std::path::Path::new(RUNNING).exists(),
            Source::File(file) => file.exists(),
            Source::Module => true,
            Source::None => false,
        }
    }

    fn btf(&self) -> Option<&Btf<'static>> {
        self.read().ok()
    }

    /// The BTF, read when first asked; why there is none.
    fn read(&self) -> Result<&Btf<'static>, String> {
        let read = || match &self.source {
            Source::Running => {
                Btf::from_vmlinux().map_err(|e| format!("the kernel's BTF cannot be read ({e})"))
            }
            Source::File(file) => Btf::from_path(file)
                .map_err(|e| format!("the BTF of {} cannot be read ({e})", file.display())),
            Source::Module => Err("the module's BTF was not read".to_string()),
            Source::None => Err("the kernel has no BTF".to_string()),
        };
        self.btf.get_or_init(read).as_ref().map_err(Clone::clone)
    }

    /// The kernel functions kprobes and trampolines can be put on, as `list` finds them (from tracefs, or from
    /// `/proc/kallsyms` and these types: `probes::kprobe`), listed once.
    pub fn traceable_functions(
        &self,
        list: impl FnOnce(&Self) -> Vec<TraceableFunction>,
    ) -> &[TraceableFunction] {
        self.traceable.get_or_init(|| list(self))
    }

    /// The arguments of raw tracepoint `name`, as fields at `8 * index` in its context; an error saying why
    /// there are none (no BTF, no such tracepoint). Looked up once per name.
    pub fn raw_tracepoint_args(&self, name: &str) -> Result<Vec<Field>, String> {
        if let Some(known) = self.raw_tracepoints.borrow().get(name) {
            return known.clone();
        }
        let found = self.read_args(name);
        self.raw_tracepoints.borrow_mut().insert(name.to_string(), found.clone());
        found
    }

    fn read_args(&self, name: &str) -> Result<Vec<Field>, String> {
        let btf =
            self.read().map_err(|e| format!("{e}: `args` of raw tracepoints needs CONFIG_DEBUG_INFO_BTF"))?;
        // Functions with the tracepoint's prototype and named parameters: the stub every tracepoint has since
        // Linux 6.4, or the BPF probe function of an event that is its own class. Otherwise the typedef of the
        // probe function pointer, whose parameters have types but no names (they are called argN then).
        let named = [format!("__probestub_{name}"), format!("__bpf_trace_{name}")]
            .iter()
            .find_map(|function| type_named(btf, function).filter(|t| t.kind() == BtfKind::Func))
            .and_then(|function| function.next_type());
        let unnamed = || {
            type_named(btf, &format!("btf_trace_{name}"))
                .and_then(|typedef| typedef.next_type())
                .and_then(|pointer| pointer.next_type())
        };
        let prototype = named
            .or_else(unnamed)
            .and_then(|proto| FuncProto::try_from(proto).ok())
            .ok_or_else(|| format!("the kernel's BTF does not describe a raw tracepoint `{name}`"))?;
        Ok(parameters(btf, &prototype, 1))
    }

    /// The kernel function `name` in the kernel's BTF.
    pub fn kernel_function(&self, name: &str) -> Result<KernelFunction, String> {
        let btf = self.read().map_err(|e| format!("{e}: fentry and fexit need CONFIG_DEBUG_INFO_BTF"))?;
        let function = type_named(btf, name)
            .filter(|t| t.kind() == BtfKind::Func)
            .ok_or_else(|| format!("the kernel's BTF describes no function `{name}`"))?;
        let prototype = function
            .next_type()
            .and_then(|proto| FuncProto::try_from(proto).ok())
            .ok_or_else(|| format!("the kernel's BTF has no prototype of `{name}`"))?;
        let returns = prototype
            .next_type()
            .map(|t| t.skip_mods_and_typedefs())
            .and_then(|t| scalar(&t))
            .map(|(size, signed, _)| (size, signed));
        Ok(KernelFunction {
            btf_id: function.type_id().into(),
            parameters: parameters(btf, &prototype, 0),
            returns,
        })
    }

    /// The names of the kernel's BTF functions, for wildcards.
    pub fn kernel_function_names(&self) -> Vec<String> {
        self.kernel_function_names_from(0)
    }

    /// The names of the BTF's functions whose ids come after `id` (a module's, after the kernel's types).
    pub fn kernel_function_names_from(&self, id: u32) -> Vec<String> {
        let Some(btf) = self.btf() else { return vec![] };
        btf.type_by_kind::<libbpf_rs::btf::types::Func<'_>>()
            .filter(|f| u32::from(f.type_id()) > id)
            .filter_map(|f| f.name().map(|n| n.to_string_lossy().into_owned()))
            .collect()
    }

    /// The names of the kernel's raw tracepoints: each has a typedef `btf_trace_NAME` of its probe function.
    pub fn raw_tracepoint_names(&self) -> Vec<String> {
        let Some(btf) = self.btf() else { return vec![] };
        btf.type_by_kind::<libbpf_rs::btf::types::Typedef<'_>>()
            .filter_map(|t| t.name()?.to_str()?.strip_prefix("btf_trace_").map(str::to_string))
            .collect()
    }

    /// The names of the kernel's structs that start with `prefix`, without it (`bpf_iter__` gives `task`, ...).
    pub fn struct_names_starting(&self, prefix: &str) -> std::collections::HashSet<String> {
        let Some(btf) = self.btf() else { return Default::default() };
        btf.type_by_kind::<libbpf_rs::btf::types::Struct<'_>>()
            .filter_map(|s| s.name()?.to_str()?.strip_prefix(prefix).map(str::to_string))
            .collect()
    }

    /// The BTF id of `struct NAME` (or `union NAME` with `union`), if the kernel has one.
    pub fn record_id(&self, union: bool, name: &str) -> Option<u32> {
        let btf = self.btf()?;
        let kind = if union { BtfKind::Union } else { BtfKind::Struct };
        btf.type_by_kind::<BtfType<'_>>()
            .find(|t| t.kind() == kind && t.name().is_some_and(|n| n == name))
            .map(|t| t.type_id().into())
    }

    /// The size and alignment of the kernel's `struct NAME` (`union NAME`), for a script's struct holding one
    /// by value.
    pub fn record_size_align(&self, union: bool, name: &str) -> Option<(u32, u32)> {
        let id = self.record_id(union, name)?;
        let btf = self.btf()?;
        let ty = btf.type_by_id::<BtfType<'_>>(id.into())?;
        let size = Composite::try_from(ty).ok()?.size() as u32;
        Some((size, alignment(btf, &ty, 0)))
    }

    /// What the kernel's typedef `name` stands for (`pid_t`: a signed 4-byte integer), as a member of that
    /// type would be read; none when the kernel has no such typedef.
    pub fn typedef_kind(&self, name: &str) -> Option<MemberKind> {
        let ty = type_named(self.btf()?, name).filter(|t| t.kind() == BtfKind::Typedef)?;
        Some(member_kind(&ty.skip_mods_and_typedefs()))
    }

    /// Enum constant `name` with its enum: the first of the kernel's BTF that has it (remembered, as finding
    /// it means walking every type). An unnamed kernel enum (`TASK_COMM_LEN`'s) is one too, as bpftrace
    /// types it.
    pub fn enum_constant(&self, name: &str) -> KernelConstant {
        if let Some(known) = self.enum_constants.borrow().get(name) {
            return known.clone();
        }
        let found = self.btf().and_then(|btf| find_enum_constant(btf, name));
        self.enum_constants.borrow_mut().insert(name.to_string(), found.clone());
        found
    }

    /// The BTF id of the per-CPU kernel variable `name` (a `VAR` of the `.data..percpu` section).
    pub fn percpu_var_id(&self, name: &str) -> Option<u32> {
        let btf = self.btf()?;
        let section = btf
            .type_by_kind::<libbpf_rs::btf::types::DataSec<'_>>()
            .find(|s| s.name().is_some_and(|n| n == ".data..percpu"))?;
        let found = section.iter().map(|var| var.ty).find_map(|id| {
            let var = btf.type_by_id::<BtfType<'_>>(id)?;
            (var.kind() == BtfKind::Var && var.name().is_some_and(|n| n == name)).then(|| id.into())
        });
        found
    }

    /// What BTF type `id` is, as a member of that type would be read.
    pub fn member_kind_of(&self, id: u32) -> MemberKind {
        match self.btf().and_then(|btf| btf.type_by_id::<BtfType<'_>>(id.into())) {
            Some(ty) => member_kind(&ty.skip_mods_and_typedefs()),
            None => MemberKind::Other("void".into()),
        }
    }

    /// `struct NAME` / `union NAME` / `int` ...: the C name of BTF type `id`.
    pub fn type_name(&self, id: u32) -> String {
        let Some(ty) = self.btf().and_then(|btf| btf.type_by_id::<BtfType<'_>>(id.into())) else {
            return if id == 0 { "void".to_string() } else { format!("type {id}") };
        };
        let name = ty.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match ty.kind() {
            BtfKind::Struct => format!("struct {name}"),
            BtfKind::Union => format!("union {name}"),
            _ => describe(&ty),
        }
    }

    /// Bytes of the struct or union with BTF id `record` (`sizeof(struct task_struct)`).
    pub fn record_size(&self, record: u32) -> Option<usize> {
        let ty = self.btf()?.type_by_id::<BtfType<'_>>(record.into())?.skip_mods_and_typedefs();
        Composite::try_from(ty).ok().map(|record| record.size())
    }

    /// Member `name` of the struct or union with BTF id `record`, looking into unnamed inner structs and
    /// unions as C does; `Err` with the members there are, for an error message.
    pub fn member(&self, record: u32, name: &str) -> Result<Member, Vec<String>> {
        let btf = self.btf().ok_or_else(Vec::new)?;
        let mut names = vec![];
        find_member(btf, record, name, 0, &mut names).ok_or(names)
    }

    /// The members of the struct or union `record` in order, those of unnamed inner structs and unions in
    /// their place (as C names them); `None` when `record` is no struct or union.
    pub fn members(&self, record: u32) -> Option<Vec<(String, Member)>> {
        let mut found = vec![];
        list_members(self.btf()?, record, 0, &mut found)?;
        Some(found)
    }
}

/// A kernel function as fentry and fexit see it: its BTF id, its parameters as fields of `args` (in
/// a context of 64-bit arguments), and its return value's `(size, signed)` (`None` for void or a
/// value that is not a number).
#[derive(Clone, Debug)]
pub struct KernelFunction {
    pub btf_id: u32,
    pub parameters: Vec<Field>,
    pub returns: Option<(u32, bool)>,
}

/// The type named `name`; none for a name no C type can have (libbpf would panic on a NUL in it).
fn type_named<'b>(btf: &'b Btf<'_>, name: &str) -> Option<BtfType<'b>> {
    if name.contains('\0') {
        return None;
    }
    btf.type_by_name::<BtfType<'_>>(name)
}

/// The parameters of `prototype` after the first `skip`, as fields at `8 * index` in a context that is
/// an array of 64-bit arguments (raw tracepoints, fentry); unnamed ones are called `argN`.
fn parameters(btf: &Btf<'_>, prototype: &FuncProto<'_>, skip: usize) -> Vec<Field> {
    let mut fields = vec![];
    for (index, param) in prototype.iter().enumerate().skip(skip) {
        let Some(ty) = btf.type_by_id::<BtfType<'_>>(param.ty) else { continue };
        let index = index - skip;
        let arg =
            param.name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| format!("arg{index}"));
        let c_type = ty.name().map(|n| n.to_string_lossy().into_owned());
        let (size, signed, kind) = match scalar(&ty.skip_mods_and_typedefs()) {
            Some(found) => found,
            None => (8, false, FieldKind::Other(c_type.clone().unwrap_or_else(|| "struct".into()))),
        };
        let decl = format!("{} {arg}", c_type.unwrap_or_else(|| describe(&ty.skip_mods_and_typedefs())));
        fields.push(Field { name: arg, offset: 8 * index as u32, size, signed, kind, decl });
    }
    fields
}

/// C's alignment of a BTF type: its widest scalar's, looking into members and array elements.
fn alignment(btf: &Btf<'_>, ty: &BtfType<'_>, depth: u32) -> u32 {
    let ty = ty.skip_mods_and_typedefs();
    match ty.kind() {
        BtfKind::Struct | BtfKind::Union if depth < 16 => Composite::try_from(ty).map_or(1, |record| {
            record
                .iter()
                .filter_map(|member| btf.type_by_id::<BtfType<'_>>(member.ty))
                .map(|member| alignment(btf, &member, depth + 1))
                .max()
                .unwrap_or(1)
        }),
        BtfKind::Array => Array::try_from(ty).map_or(1, |a| alignment(btf, &a.contained_type(), depth + 1)),
        _ => scalar(&ty).map_or(1, |(size, _, _)| size.min(8)),
    }
}

/// `(size, signed, kind)` of a type a program can read as a number.
fn scalar(ty: &BtfType<'_>) -> Option<(u32, bool, FieldKind)> {
    match ty.kind() {
        BtfKind::Ptr => {
            let target = ty.next_type().map(|t| t.skip_mods_and_typedefs());
            Some(match target {
                Some(t) if matches!(t.kind(), BtfKind::Struct | BtfKind::Union) => {
                    (8, false, FieldKind::RecordPointer { to: t.type_id().into() })
                }
                _ => (8, false, FieldKind::Pointer),
            })
        }
        BtfKind::Int => {
            let int = Int::try_from(*ty).ok()?;
            Some((
                (int.bits as u32).div_ceil(8).max(1),
                matches!(int.encoding, IntEncoding::Signed),
                FieldKind::Int,
            ))
        }
        BtfKind::Enum => {
            let e = Enum::try_from(*ty).ok()?;
            Some((e.size() as u32, e.is_signed(), FieldKind::Int))
        }
        BtfKind::Enum64 => {
            let e = Enum64::try_from(*ty).ok()?;
            Some((e.size() as u32, e.is_signed(), FieldKind::Int))
        }
        _ => None,
    }
}

/// A C-like name for an unnamed type (`struct task_struct *` is a pointer to a named struct).
fn describe(ty: &BtfType<'_>) -> String {
    match ty.kind() {
        BtfKind::Ptr => {
            let target = ty.next_type().map(|t| t.skip_mods_and_typedefs());
            let name = target.as_ref().and_then(|t| t.name()).map(|n| n.to_string_lossy().into_owned());
            match (target.map(|t| t.kind()), name) {
                (Some(BtfKind::Struct), Some(name)) => format!("struct {name} *"),
                (Some(BtfKind::Union), Some(name)) => format!("union {name} *"),
                (_, Some(name)) => format!("{name} *"),
                _ => "void *".into(),
            }
        }
        _ => ty.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "?".into()),
    }
}

fn list_members(btf: &Btf<'_>, record: u32, base: u32, found: &mut Vec<(String, Member)>) -> Option<()> {
    let ty = btf.type_by_id::<BtfType<'_>>(record.into())?.skip_mods_and_typedefs();
    for m in Composite::try_from(ty).ok()?.iter() {
        let member_ty = btf.type_by_id::<BtfType<'_>>(m.ty)?.skip_mods_and_typedefs();
        let (offset, kind) = match m.attr {
            MemberAttr::Normal { offset } => (offset / 8, member_kind(&member_ty)),
            MemberAttr::BitField { size, offset } => {
                (offset / 8, MemberKind::Bitfield { shift: offset % 8, bits: size.into() })
            }
        };
        match m.name.map(|n| n.to_string_lossy().into_owned()).filter(|n| !n.is_empty()) {
            Some(name) => found.push((name, Member { offset: base + offset, kind })),
            None => list_members(btf, member_ty.type_id().into(), base + offset, found)?,
        }
    }
    Some(())
}

fn find_member(btf: &Btf<'_>, record: u32, name: &str, base: u32, names: &mut Vec<String>) -> Option<Member> {
    let ty = btf.type_by_id::<BtfType<'_>>(record.into())?.skip_mods_and_typedefs();
    let composite = Composite::try_from(ty).ok()?;
    for m in composite.iter() {
        let offset = match m.attr {
            MemberAttr::Normal { offset } => offset / 8,
            MemberAttr::BitField { offset, .. } => offset / 8,
        };
        let member_ty = btf.type_by_id::<BtfType<'_>>(m.ty)?.skip_mods_and_typedefs();
        match m.name.map(|n| n.to_string_lossy().into_owned()).filter(|n| !n.is_empty()) {
            Some(member_name) if member_name == name => {
                let kind = match m.attr {
                    MemberAttr::BitField { size, offset } => {
                        MemberKind::Bitfield { shift: offset % 8, bits: size.into() }
                    }
                    MemberAttr::Normal { .. } => member_kind(&member_ty),
                };
                return Some(Member { offset: base + offset, kind });
            }
            Some(member_name) => names.push(member_name),
            // An unnamed struct or union: its members belong to this one.
            None => {
                if let Some(found) = find_member(btf, member_ty.type_id().into(), name, base + offset, names)
                {
                    return Some(found);
                }
            }
        }
    }
    None
}

fn member_kind(ty: &BtfType<'_>) -> MemberKind {
    match ty.kind() {
        BtfKind::Ptr => MemberKind::Pointer {
            to: ty.next_type().map_or(0, |t| t.skip_mods_and_typedefs().type_id().into()),
        },
        BtfKind::Struct | BtfKind::Union => MemberKind::Record { id: ty.type_id().into() },
        BtfKind::Array => {
            let Ok(array) = Array::try_from(*ty) else { return MemberKind::Other("an array".into()) };
            let element = array.contained_type().skip_mods_and_typedefs();
            match Int::try_from(element) {
                Ok(int) if int.bits == 8 => MemberKind::CharArray { len: array.capacity() as u32 },
                _ if matches!(element.kind(), BtfKind::Struct | BtfKind::Union) => {
                    MemberKind::RecordArray { id: element.type_id().into(), len: array.capacity() as u32 }
                }
                _ => match scalar(&element) {
                    Some((size, signed, FieldKind::Int)) => {
                        MemberKind::IntArray { size, signed, len: array.capacity() as u32 }
                    }
                    _ => MemberKind::Other(format!("an array of {}", describe(&element))),
                },
            }
        }
        _ => match scalar(ty) {
            Some((size, signed, _)) => MemberKind::Int { size, signed },
            None => MemberKind::Other(describe(ty)),
        },
    }
}

fn find_enum_constant(btf: &Btf<'_>, name: &str) -> KernelConstant {
    {
        let named =
            |n: Option<&std::ffi::OsStr>| n.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let found = btf.type_by_kind::<Enum<'_>>().find_map(|e| {
            e.iter().find(|m| m.name.is_some_and(|n| n == name)).map(|m| {
                let variants = e.iter().map(|v| (named(v.name), v.value)).collect();
                (EnumDef { name: named(e.name()), variants }, m.value)
            })
        });
        let found = found.or_else(|| {
            btf.type_by_kind::<Enum64<'_>>().find_map(|e| {
                // An unsigned 64-bit constant keeps its bit pattern.
                e.iter().find(|m| m.name.is_some_and(|n| n == name)).map(|m| {
                    let variants = e.iter().map(|v| (named(v.name), v.value as i64)).collect();
                    (EnumDef { name: named(e.name()), variants }, m.value as i64)
                })
            })
        });
        found.map(|(def, value)| (Arc::new(def), value))
    }
}
