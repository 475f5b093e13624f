//! What a probe's context offers an expression: the builtins only some probes have (`args`, `argN`,
//! `retval`, `func`, `cpid`), the fields of `args`, and the members of the kernel's and the script's structs.

use super::env::{Env, STR_SIZE};
use super::not_yet;
use super::types::Type;
use crate::kernel::tracefs::{Field, FieldKind};
use crate::kernel::{KernelTypes, Member, MemberKind, TypeRef};
use crate::lang::ast::Expr;
use crate::lang::suggest::closest;
use crate::lang::{Diagnostic, Span};
use crate::probes::{Arguments, AttachPoint, Context, Func};

impl Env<'_> {
    /// Builtins that only some probes have: `args`, `arg0`.., `retval`, `func`, `cpid`. `None` for any
    /// other name; an error when this probe does not have it.
    pub(super) fn probe_builtin(&self, name: &str, span: Span) -> Result<Option<Type>, Diagnostic> {
        let unavailable = |what: &str| {
            Err(Diagnostic::error(span, format!("`{name}` is only available in {what}"))
                .with_help("see docs/LANGUAGE.md for the builtins of each probe type"))
        };
        let contexts: Vec<Context> = self.points.iter().map(|p| p.provider.context()).collect();
        let all = |test: &dyn Fn(&Context) -> bool| !contexts.is_empty() && contexts.iter().all(test);
        Ok(Some(match name {
            "args" => {
                if !self.points.iter().all(|p| p.provider.fields(&self.kernel.vmlinux).is_some())
                    || self.points.is_empty()
                {
                    return unavailable("tracepoint, raw tracepoint, fentry and fexit probes");
                }
                return Err(Diagnostic::error(
                    span,
                    "`args` is the tracepoint's record: use one field, `args.NAME`",
                )
                .with_help("`steadytrace -lv tracepoint:CATEGORY:NAME` lists the fields"));
            }
            "retval" => {
                if !all(&|c| c.retval.is_some()) {
                    return unavailable("uretprobe, kretprobe and fexit probes");
                }
                if all(&|c| c.retval.is_some_and(|r| r.signed)) {
                    Type::I64
                } else {
                    Type::U64
                }
            }
            "func" => {
                if !all(&|c| c.func.is_some()) {
                    return unavailable("uprobe, uretprobe, kprobe, kretprobe, fentry and fexit probes");
                }
                let multi = |c: &Context| matches!(c.func, Some(Func::Address | Func::Cookie(_)));
                if all(&|c| c.func == Some(Func::Address)) {
                    // The address of the function that fired, named when printed.
                    Type::Symbol { user: false }
                } else if let [Context { func: Some(Func::Cookie(names)), .. }] = contexts.as_slice() {
                    // Which function of the link fired, named when printed.
                    Type::Function { names: names.clone() }
                } else if contexts.iter().any(multi) {
                    // Never shown: the script is then checked again with a program per function.
                    return Err(Diagnostic::error(
                        span,
                        "`func` has no single type where a kprobe_multi link shares a probe with other probes",
                    ));
                } else {
                    Type::Str { size: STR_SIZE }
                }
            }
            "cpid" => Type::U64,
            // An iterator's context is a kernel struct whose members name the object (`ctx.task`).
            "ctx" => {
                let record = contexts.first().and_then(|c| c.ctx_record.clone());
                match record.filter(|r| all(&|c| c.ctx_record.as_ref() == Some(r))) {
                    Some(record) => match self.kernel.record_id(false, &record) {
                        Some(to) => Type::Ptr { to: self.kernel.type_ref(to), user: false },
                        None => return Ok(None),
                    },
                    None => return Ok(None),
                }
            }
            _ => match name.strip_prefix("arg").and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => {
                    let Some(arguments) = contexts.first().and_then(|c| c.arguments.clone()) else {
                        return unavailable("uprobe, kprobe, usdt and rawtracepoint probes");
                    };
                    if !all(&|c| c.arguments.as_ref().is_some_and(|a| a.same_kind(&arguments))) {
                        return unavailable("uprobe, kprobe, usdt and rawtracepoint probes");
                    }
                    let limit =
                        contexts.iter().filter_map(|c| c.arguments.as_ref().map(Arguments::limit)).min();
                    match limit.unwrap_or(0) {
                        0 => return Err(Diagnostic::error(span, "this probe has no arguments")),
                        limit if n >= limit => {
                            return Err(Diagnostic::error(
                                span,
                                format!("only arg0 to arg{} are available here", limit - 1),
                            ))
                        }
                        _ => {}
                    }
                    let signed = |c: &Context| {
                        c.arguments.as_ref().and_then(|a| a.located(n)).is_some_and(|a| a.signed)
                    };
                    if contexts.iter().any(signed) {
                        Type::I64
                    } else {
                        Type::U64
                    }
                }
                None => return Ok(None),
            },
        }))
    }

    /// Whether a plain address is one of the traced process in every attach point of the probe.
    pub(super) fn user_addresses(&self) -> bool {
        !self.points.is_empty() && self.points.iter().all(|p| p.provider.context().user_addresses)
    }

    /// `ptr->field` (or `record.field` inside it): the member in the kernel's BTF, and its type.
    pub fn member(&self, base: &Expr, field: &str, span: Span) -> Result<(Member, Type), Diagnostic> {
        self.member_of(self.type_of(base)?, base, field, span)
    }

    /// [`Env::member`] of a base whose type `base_type` is known.
    pub fn member_of(
        &self,
        base_type: Type,
        base: &Expr,
        field: &str,
        span: Span,
    ) -> Result<(Member, Type), Diagnostic> {
        let kernel = self.kernel;
        let (record, user) = match base_type {
            Type::Ptr { to, user } | Type::Record { record: to, user } => (to, user),
            ty => {
                return Err(Diagnostic::error(
                    base.span,
                    format!("`{field}` is a member of a struct, but this is {ty}"),
                ))
            }
        };
        let member = kernel.member(record.id, field).map_err(|names| {
            let diag = Diagnostic::error(span, format!("{} has no member `{field}`", record.name));
            match closest(field, names.iter().map(String::as_str)) {
                Some(near) => diag.with_help(format!("did you mean `{near}`?")),
                None if names.is_empty() => diag.with_help("only structs and unions have members"),
                None => diag,
            }
        })?;
        let ty = match &member.kind {
            MemberKind::Int { signed, size } => Type::int_of_bytes(*size as usize, *signed),
            // What a process's struct points to is the process's memory too.
            MemberKind::Pointer { to } => Type::Ptr { to: kernel.type_ref(*to), user },
            MemberKind::CharArray { len } => Type::Str { size: *len as usize },
            MemberKind::Record { id } => Type::Record { record: kernel.type_ref(*id), user },
            MemberKind::RecordArray { id, len } => Type::Array {
                elem: Box::new(Type::Record { record: kernel.type_ref(*id), user }),
                len: *len as usize,
            },
            MemberKind::Bitfield { bits, .. } => {
                Type::int_of_bytes((*bits as usize).div_ceil(8).next_power_of_two(), false)
            }
            MemberKind::IntArray { size, signed, len } => Type::Array {
                elem: Box::new(Type::int_of_bytes(*size as usize, *signed)),
                len: *len as usize,
            },
            MemberKind::Other(what) => {
                return Err(not_yet(span, &format!("reading `{field}` ({what}) is")));
            }
        };
        Ok((member, ty))
    }

    /// `print(args)`: the fields of the probe's tracepoint record that a program can read, their types,
    /// and whether each is a pointer (printed in hex). The probe's tracepoints must have the same fields.
    pub fn args_record(&self, span: Span) -> Result<Vec<(String, Type, bool)>, Diagnostic> {
        let readable = |f: &&Field| !matches!(f.kind, FieldKind::Other(_));
        let mut records = self.points.iter().map(|point| {
            point_fields(point, span, self.kernel)
                .map(|fields| fields.iter().filter(readable).map(|f| f.name.clone()).collect::<Vec<String>>())
        });
        let names = records.next().unwrap_or_else(|| Ok(vec![]))?;
        for other in records {
            if other? != names {
                return Err(Diagnostic::error(span, "the tracepoints of this probe have different fields")
                    .with_help("print `args` in a probe of its own for each tracepoint"));
            }
        }
        names
            .into_iter()
            .map(|name| {
                let (field, ty) = self.tracepoint_field(&name, span)?;
                Ok((name, ty, matches!(field.kind, FieldKind::Pointer | FieldKind::RecordPointer { .. })))
            })
            .collect()
    }

    /// `args.NAME`: the field in every tracepoint of the probe (they must agree), and its type.
    pub fn tracepoint_field(&self, name: &str, span: Span) -> Result<(Field, Type), Diagnostic> {
        let mut found: Option<(Field, Type)> = None;
        for point in self.points {
            let fields = point_fields(point, span, self.kernel)?;
            let Some(field) = fields.iter().find(|f| f.name == name) else {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                let mut help = format!("its fields are {}", names.join(", "));
                if let Some(more) = point.provider.missing_field_help() {
                    help = format!("{help}; {more}");
                }
                return Err(
                    Diagnostic::error(span, format!("{} has no field `{name}`", point.name)).with_help(help)
                );
            };
            let ty = match &field.kind {
                FieldKind::Int => Type::int_of_bytes(field.size as usize, field.signed),
                // `struct timespec *`: followed with `->` through the kernel's BTF. A system call's pointer
                // arguments point into the calling process.
                FieldKind::Pointer => match pointed_record(self.kernel, &field.decl) {
                    Some(to) => Type::Ptr { to, user: point.provider.fields_point_to_user() },
                    None => Type::U64,
                },
                FieldKind::RecordPointer { to } => Type::Ptr { to: self.kernel.type_ref(*to), user: false },
                FieldKind::CharArray { len } => Type::Str { size: *len as usize },
                FieldKind::ByteArray { len } => Type::Bytes { size: *len as usize },
                FieldKind::DataLocString => Type::Str { size: STR_SIZE },
                FieldKind::DataLocCpumask => Type::Cpumask { bytes: super::types::cpumask_bytes() },
                FieldKind::Other(c_type) => {
                    return Err(not_yet(span, &format!("reading `{name}` (of type `{c_type}`) is")));
                }
            };
            match &found {
                Some((_, seen)) if *seen != ty => {
                    return Err(Diagnostic::error(
                        span,
                        format!("`args.{name}` has different types in the tracepoints of this probe"),
                    ))
                }
                Some(_) => {}
                None => found = Some((field.clone(), ty)),
            }
        }
        found.ok_or_else(|| Diagnostic::error(span, "`args` is only available in tracepoint probes"))
    }
}

/// The struct or union a tracepoint field declared `struct NAME *name` points to.
fn pointed_record(kernel: &KernelTypes, decl: &str) -> Option<TypeRef> {
    let words: Vec<&str> =
        decl.split(|c: char| c.is_whitespace() || c == '*').filter(|w| !w.is_empty()).collect();
    let at = words.iter().position(|w| *w == "struct" || *w == "union")?;
    let name = words.get(at + 1)?;
    // The last word is the field's name, not the type's.
    if at + 2 >= words.len() || !decl.contains('*') {
        return None;
    }
    kernel.record_id(words[at] == "union", name).map(|id| kernel.type_ref(id))
}

/// The fields of `args` at an attach point: a tracepoint's record, or a raw tracepoint's arguments as the
/// kernel's BTF names them.
fn point_fields(point: &AttachPoint, span: Span, kernel: &KernelTypes) -> Result<Vec<Field>, Diagnostic> {
    match point.provider.fields(&kernel.vmlinux) {
        Some(fields) => fields.map_err(|why| {
            Diagnostic::error(span, why).with_help("read the arguments as `arg0`, `arg1`, ...")
        }),
        None => {
            Err(Diagnostic::error(span, "`args` is only available in tracepoint and raw tracepoint probes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sema::env::checking::{errors, map_type};
    use crate::sema::types::Type;

    #[test]
    fn builtins_of_other_probes_are_refused_by_name() {
        let refused = errors("BEGIN { @ = retval; }");
        assert!(refused[0].starts_with("`retval` is only available in"), "{refused:?}");
        let refused = errors("BEGIN { @ = arg0; }");
        assert!(refused[0].starts_with("`arg0` is only available in"), "{refused:?}");
        let refused = errors("BEGIN { @ = args.x; }");
        assert!(refused[0].contains("`args` is only available in"), "{refused:?}");
    }

    #[test]
    fn members_of_a_scripts_struct_are_typed_and_misspellings_suggested() {
        let script = "struct s { int a; long b; char name[8]; } BEGIN { $p = (struct s *)0; @b = $p->b; @n = $p->name; }";
        assert_eq!(map_type(script, "b"), Type::I64);
        assert_eq!(map_type(script, "n"), Type::Str { size: 8 });
        let refused = errors("struct s { int alpha; } BEGIN { $p = (struct s *)0; @ = $p->alpah; }");
        assert_eq!(refused, ["struct s has no member `alpah`"]);
    }

    #[test]
    fn kernel_members_are_typed_from_the_kernels_btf() {
        let check = |script: &str| {
            let program = crate::lang::parse(script).expect("parses");
            let kernel = crate::kernel::fixture::kernel_with(program.c_types.clone());
            crate::sema::check(&program, &Default::default(), &crate::sema::env::NoFunctions, &kernel)
                .map_err(|d| d.into_iter().map(|d| (d.message, d.help)).collect::<Vec<_>>())
        };
        let checked = check("BEGIN { @p = curtask->parent->pid; @c = curtask->comm; }").expect("checks");
        assert_eq!(
            checked.maps.get("p").map(|(_, d)| format!("{:?}", d.value)),
            Some("Plain(Int { signed: true, bits: 32 })".into())
        );
        assert_eq!(
            checked.maps.get("c").map(|(_, d)| format!("{:?}", d.value)),
            Some("Plain(Str { size: 16 })".into())
        );
        let Err(refused) = check("BEGIN { @ = curtask->paernt; }") else { panic!("`paernt` is no member") };
        assert_eq!(
            refused,
            [("struct task_struct has no member `paernt`".into(), Some("did you mean `parent`?".into()))]
        );
    }
}
