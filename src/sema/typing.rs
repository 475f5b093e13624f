//! The type of every expression, given the maps and variables in scope.

use super::builtins::{self, Builtin};
use super::calls::{Call, FunctionTable};
use super::maps::{Agg, MapTable, MapValue};
use super::not_yet;
use super::types::{StackType, Type};
use crate::lang::ast::*;
use crate::lang::constant::constant_index;
use crate::lang::suggest::closest;
use crate::lang::{Diagnostic, Span};
use crate::probes::tracefs::{Field, FieldKind};
use crate::probes::{Arguments, AttachPoint, Context, Func};
use crate::symbols::StackMode;
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
}

/// Bytes `str()` reads at most, as bpftrace's default.
pub const STR_SIZE: usize = 64;

const AGGREGATIONS: &[&str] = &["count", "sum", "min", "max", "avg", "stats", "hist", "lhist", "tseries"];

pub fn is_aggregation(name: &str) -> bool {
    AGGREGATIONS.contains(&name)
}

/// The number a `count()`, `sum()`, `min()`, `max()` or `avg()` map's value reads as in an expression, its
/// CPUs' values merged (as current bpftrace does); `None` for the aggregations that are many numbers.
fn merged_type(agg: Agg) -> Option<Type> {
    match agg {
        Agg::Count | Agg::Sum { signed: false } => Some(Type::U64),
        Agg::Sum { signed: true } | Agg::Min | Agg::Max | Agg::Avg => Some(Type::I64),
        _ => None,
    }
}

impl Env<'_> {
    /// Builtins that only some probes have: `args`, `arg0`.., `retval`, `func`, `cpid`. `None` for any
    /// other name; an error when this probe does not have it.
    fn probe_builtin(&self, name: &str, span: Span) -> Result<Option<Type>, Diagnostic> {
        let unavailable = |what: &str| {
            Err(Diagnostic::error(span, format!("`{name}` is only available in {what}"))
                .with_help("see docs/LANGUAGE.md for the builtins of each probe type"))
        };
        let contexts: Vec<Context> = self.points.iter().map(|p| p.provider.context()).collect();
        let all = |test: &dyn Fn(&Context) -> bool| !contexts.is_empty() && contexts.iter().all(test);
        Ok(Some(match name {
            "args" => {
                if !self.points.iter().all(|p| p.provider.fields().is_some()) || self.points.is_empty() {
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
    fn user_addresses(&self) -> bool {
        !self.points.is_empty() && self.points.iter().all(|p| p.provider.context().user_addresses)
    }

    /// `ptr->field` (or `record.field` inside it): the member in the kernel's BTF, and its type.
    pub fn member(
        &self,
        base: &Expr,
        field: &str,
        span: Span,
    ) -> Result<(crate::probes::btf::Member, Type), Diagnostic> {
        use crate::probes::btf::{self, MemberKind};
        let (record, user) = match self.type_of(base)? {
            Type::Ptr { to, user } | Type::Record { id: to, user } => (to, user),
            ty => {
                return Err(Diagnostic::error(
                    base.span,
                    format!("`{field}` is a member of a struct, but this is {ty}"),
                ))
            }
        };
        let member = btf::member(record, field).map_err(|names| {
            let diag = Diagnostic::error(span, format!("{} has no member `{field}`", btf::type_name(record)));
            match closest(field, names.iter().map(String::as_str)) {
                Some(near) => diag.with_help(format!("did you mean `{near}`?")),
                None if names.is_empty() => diag.with_help("only structs and unions have members"),
                None => diag,
            }
        })?;
        let ty = match &member.kind {
            MemberKind::Int { signed, size } => Type::int_of_bytes(*size as usize, *signed),
            // What a process's struct points to is the process's memory too.
            MemberKind::Pointer { to } => Type::Ptr { to: *to, user },
            MemberKind::CharArray { len } => Type::Str { size: *len as usize },
            MemberKind::Record { id } => Type::Record { id: *id, user },
            MemberKind::Bitfield { bits, .. } => {
                Type::int_of_bytes((*bits as usize).div_ceil(8).next_power_of_two(), false)
            }
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
            point_fields(point, span)
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
            let fields = point_fields(point, span)?;
            let Some(field) = fields.iter().find(|f| f.name == name) else {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                return Err(Diagnostic::error(span, format!("{} has no field `{name}`", point.name))
                    .with_help(format!("its fields are {}", names.join(", "))));
            };
            let ty = match &field.kind {
                FieldKind::Int => Type::int_of_bytes(field.size as usize, field.signed),
                // `struct timespec *`: followed with `->` through the kernel's BTF. A system call's pointer
                // arguments point into the calling process.
                FieldKind::Pointer => match pointed_record(&field.decl) {
                    Some(to) => Type::Ptr { to, user: point.provider.fields_point_to_user() },
                    None => Type::U64,
                },
                FieldKind::RecordPointer { to } => Type::Ptr { to: *to, user: false },
                FieldKind::CharArray { len } => Type::Str { size: *len as usize },
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

    pub fn type_of(&self, e: &Expr) -> Result<Type, Diagnostic> {
        Ok(match &e.kind {
            ExprKind::Int(n) => {
                if i64::try_from(*n).is_ok() {
                    Type::I64
                } else {
                    Type::U64
                }
            }
            ExprKind::Str(s) => Type::Str { size: s.len() + 1 },
            ExprKind::Block { value, .. } => match value {
                Some(value) => self.type_of(value)?,
                None => Type::Void,
            },
            ExprKind::Ident(name) if self.probe_builtin(name, e.span)?.is_some() => {
                self.probe_builtin(name, e.span)?.expect("just checked")
            }
            ExprKind::Ident(name) if name == "true" || name == "false" => Type::Bool,
            ExprKind::Ident(name) if name == "kstack" || name == "ustack" => Type::Stack(StackType {
                user: name == "ustack",
                depth: StackType::MAX_DEPTH,
                mode: StackMode::Bpftrace,
            }),
            ExprKind::Ident(name) => match Builtin::from_name(name) {
                Some(builtin) => builtin.ty(),
                None if builtins::NOT_YET.contains(&name.as_str()) => {
                    return Err(not_yet(e.span, &format!("`{name}` is")))
                }
                // A constant of an enum the script defines.
                None if crate::probes::script_types::enum_constant(name).is_some() => {
                    let (def, _) = crate::probes::script_types::enum_constant(name).expect("just checked");
                    Type::Enum { bits: 64, def }
                }
                // A kernel enum's constant (`SKB_DROP_REASON_NOT_SPECIFIED`), as C code would see it.
                None if crate::probes::btf::enum_value(name).is_some() => Type::I64,
                None => {
                    let builtins = [
                        "pid", "tid", "uid", "gid", "comm", "cpu", "ncpus", "nsecs", "elapsed", "rand",
                        "probe", "username",
                    ];
                    let looks_like_macro = name.len() > 1 && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                    let help = match closest(name, builtins.into_iter()) {
                        Some(near) => format!("did you mean `{near}`?"),
                        // C headers are not read: their macros are known only through the table of docs/LANGUAGE.md.
                        None if looks_like_macro => format!("`{name}` is neither a builtin nor a kernel enum constant; macros of C headers are not read (see \"Preprocessor lines\" in docs/LANGUAGE.md): write its value"),
                        None => "builtins include pid, tid, uid, gid, comm, cpu, ncpus, nsecs, elapsed, rand and probe; variables start with `$`, maps with `@`".to_string(),
                    };
                    return Err(
                        Diagnostic::error(e.span, format!("unknown identifier `{name}`")).with_help(help)
                    );
                }
            },
            ExprKind::Var(name) => match self.vars.get(name) {
                Some(ty) => ty.clone(),
                // Declared (scoping renamed it) but given no type: its assignment failed and was reported.
                None if super::scope::declared(name) => return Err(Diagnostic::error(e.span, "")),
                // A macro's own variable (`x#m1`, see lang/macros.rs) that the macro never assigns.
                None if name.contains('#') => {
                    let name = super::scope::shown(name);
                    return Err(Diagnostic::error(e.span, format!("`${name}` is used before the macro gives it a value"))
                        .with_help(format!("a macro sees only its own variables and those passed to it: add a parameter `${name}` and pass the variable")));
                }
                // Scoping renamed every declared variable (`x#1`): a plain name is declared nowhere in scope.
                None if self.vars.keys().any(|v| super::scope::shown(v) == name) => {
                    return Err(Diagnostic::error(e.span, format!("`${name}` is not defined here"))
                        .with_help(format!("a variable lives until the end of the block it is first assigned in; assign it or `let ${name};` before this block")))
                }
                None => {
                    return Err(Diagnostic::error(
                        e.span,
                        format!("`${name}` is used before it is given a value"),
                    )
                    .with_help(format!("assign it first, e.g. `${name} = 0;`")))
                }
            },
            ExprKind::Map { name, keys } => self.map_read(name, keys, e.span)?,
            ExprKind::Unary { op, operand } => match op {
                UnOp::Neg => {
                    self.int_operand(operand)?;
                    Type::I64
                }
                UnOp::Not => {
                    self.int_operand(operand)?;
                    Type::Bool
                }
                UnOp::BitNot => self.int_operand(operand)?,
                UnOp::PreInc | UnOp::PreDec | UnOp::PostInc | UnOp::PostDec => {
                    if !matches!(operand.kind, ExprKind::Var(_) | ExprKind::Map { .. }) {
                        return Err(Diagnostic::error(
                            e.span,
                            "`++` and `--` apply to a `$variable` or an `@map`",
                        ));
                    }
                    match self.type_of(operand)? {
                        ty if ty.is_pointer() => ty,
                        _ => self.int_operand(operand)?,
                    }
                }
                UnOp::Deref => match self.type_of(operand)? {
                    Type::Pointer { to, .. } => *to,
                    // `(*p).member`: the struct itself, whose members can be read (`sema::struct_value`
                    // refuses it anywhere else).
                    Type::Ptr { to, user } if crate::probes::btf::member_kind_of(to).is_record() => {
                        Type::Record { id: to, user }
                    }
                    ty if ty.is_int() => Type::U64,
                    ty => return Err(Diagnostic::error(operand.span, format!("`*` reads memory at an address, but this is {ty}"))),
                },
                UnOp::AddrOf => match &operand.kind {
                    ExprKind::Var(_) => match self.type_of(operand)? {
                        Type::Record { .. } | Type::Void => return Err(super::struct_value(operand.span)),
                        ty => Type::Pointer { to: Box::new(ty), user: false },
                    },
                    _ => {
                        return Err(Diagnostic::error(e.span, "`&` takes the address of a `$variable`")
                            .with_help("copy the value into a variable first: `$v = ...; $p = &$v;`"))
                    }
                },
            },
            ExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (self.type_of(lhs)?, self.type_of(rhs)?);
                // `p + n`, `p - n`, `n + p`: a pointer moved by n pointees.
                match (op, &a, &b) {
                    (BinOp::Add | BinOp::Sub, p, n) if p.is_pointer() && n.is_int() && !n.is_pointer() => {
                        return Ok(a)
                    }
                    (BinOp::Add, n, p) if p.is_pointer() && n.is_int() && !n.is_pointer() => return Ok(b),
                    _ => {}
                }
                // A pointer takes part as its address: an unsigned integer.
                let as_int = |t: &Type| if let Type::Ptr { .. } = t { Type::U64 } else { t.clone() };
                match (&as_int(&a), &as_int(&b)) {
                    (x, y) if x.is_int() && y.is_int() => match op {
                        BinOp::Eq
                        | BinOp::Ne
                        | BinOp::Lt
                        | BinOp::Le
                        | BinOp::Gt
                        | BinOp::Ge
                        | BinOp::And
                        | BinOp::Or => Type::Bool,
                        _ => Type::arithmetic(*op == BinOp::Sub, x, y),
                    },
                    (Type::Str { .. }, Type::Str { .. }) | (Type::Buf { .. }, Type::Buf { .. })
                        if matches!(op, BinOp::Eq | BinOp::Ne) =>
                    {
                        Type::Bool
                    }
                    _ => {
                        return Err(Diagnostic::error(
                            e.span,
                            format!("`{}` cannot combine {a} and {b}", op.symbol()),
                        )
                        .with_help(
                            "arithmetic and logic take integers; strings can be compared with == and !=",
                        ))
                    }
                }
            }
            ExprKind::Ternary { cond, then, otherwise } => {
                self.int_operand(cond)?;
                let (a, b) = (self.type_of(then)?, self.type_of(otherwise)?);
                match a.unify(&b) {
                    Some(ty) => ty,
                    None => {
                        return Err(Diagnostic::error(
                            e.span,
                            format!("the branches of `?:` have different types, {a} and {b}"),
                        ))
                    }
                }
            }
            ExprKind::Call { name, name_span, args } => self.call(name, *name_span, args, e.span)?,
            ExprKind::Tuple(items) => Type::Tuple(
                items
                    .iter()
                    .map(|item| match self.type_of(item)? {
                        Type::Void => {
                            Err(Diagnostic::error(item.span, "this gives no value to put in a tuple"))
                        }
                        Type::Record { .. } => Err(super::struct_value(item.span)),
                        ty => Ok(ty),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::NamedTuple { names, items } => Type::NamedTuple {
                names: names.clone().into(),
                fields: items
                    .iter()
                    .map(|item| match self.type_of(item)? {
                        Type::Void => {
                            Err(Diagnostic::error(item.span, "this gives no value to put in a record"))
                        }
                        Type::Record { .. } => Err(super::struct_value(item.span)),
                        ty => Ok(ty),
                    })
                    .collect::<Result<_, _>>()?,
            },
            ExprKind::Cast { ty, operand } => {
                let from = self.type_of(operand)?;
                let to = super::casts::cast(ty, &from, self.user_addresses())
                    .map_err(|refusal| Diagnostic::error(e.span, refusal.message).with_help(refusal.help))?;
                if let (Type::Enum { def, .. }, ExprKind::Int(value)) = (&to, &operand.kind) {
                    known_constant(def, *value, operand.span)?;
                }
                to
            }
            ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                self.tracepoint_field(field, e.span)?.1
            }
            ExprKind::Field { base, field } if matches!(self.type_of(base)?, Type::Ptr { .. } | Type::Record { .. }) => {
                self.member(base, field, e.span)?.1
            }
            ExprKind::Field { base, field } => match (self.type_of(base)?, field.parse::<usize>()) {
                (Type::Tuple(fields), Ok(index)) => match fields.get(index) {
                    Some(ty) => ty.clone(),
                    None => {
                        return Err(Diagnostic::error(
                            e.span,
                            format!("the tuple has {} elements, numbered from 0", fields.len()),
                        ))
                    }
                },
                (Type::NamedTuple { names, fields }, _) => match names.iter().position(|n| n == field) {
                    Some(index) => fields[index].clone(),
                    None => {
                        let diag = Diagnostic::error(e.span, format!("the record has no field `{field}`"));
                        return Err(match closest(field, names.iter().map(String::as_str)) {
                            Some(near) => diag.with_help(format!("did you mean `{near}`?")),
                            None => diag.with_help(format!("its fields are {}", names.join(", "))),
                        });
                    }
                },
                (Type::Tuple(_), Err(_)) => {
                    return Err(Diagnostic::error(e.span, "tuple elements are numbered: `$t.0`, `$t.1`, ..."))
                }
                (ty, _) => {
                    return Err(Diagnostic::error(e.span, format!("`.{field}` needs a tuple or a struct, but this is {ty}"))
                        .with_help(format!("to read a kernel struct through an address, cast it: `((struct task_struct *)$p)->{field}`")))
                }
            },
            ExprKind::Index { base, index } => self.element(base, index, e.span)?,
            ExprKind::Range { .. } => {
                return Err(Diagnostic::error(e.span, "a range `a..b` only goes in a `for` loop"))
            }
        })
    }

    /// `base[index]`: a tuple's element (the index known before the program runs), an array's or a
    /// string's element, or what a pointer points to `index` pointees further.
    fn element(&self, base: &Expr, index: &Expr, span: Span) -> Result<Type, Diagnostic> {
        let ty = self.type_of(base)?;
        let known = constant_index(index);
        if !matches!(ty, Type::Tuple(_)) {
            self.int_operand(index)?;
        }
        let (elem, len) = match ty {
            Type::Tuple(fields) => {
                let Some(at) = known else {
                    return Err(Diagnostic::error(
                        index.span,
                        "a tuple's index must be known before the program runs",
                    )
                    .with_help("use a number, like `$t[0]`"));
                };
                let len = fields.len();
                (fields.into_iter().nth(at), len)
            }
            Type::Array { elem, len } => (Some(*elem), len),
            Type::Str { size } => (Some(Type::Int { signed: true, bits: 8 }), size),
            Type::Pointer { to, .. } => return Ok(*to),
            ty => {
                return Err(Diagnostic::error(
                    span,
                    format!("`[]` takes an element of a tuple, array, string or pointer, but this is {ty}"),
                ))
            }
        };
        match (elem, known) {
            (Some(elem), Some(at)) if at < len => Ok(elem),
            (Some(elem), None) => Ok(elem),
            _ => Err(Diagnostic::error(
                index.span,
                format!("the index is out of bounds: there are {len} elements, numbered from 0"),
            )),
        }
    }

    fn int_operand(&self, e: &Expr) -> Result<Type, Diagnostic> {
        match self.type_of(e)? {
            ty @ (Type::Int { .. } | Type::Bool) => Ok(ty),
            Type::Enum { bits, .. } => Ok(Type::Int { signed: false, bits }),
            // Arithmetic on a pointer gives a plain address.
            Type::Ptr { .. } => Ok(Type::U64),
            ty => Err(Diagnostic::error(e.span, format!("expected an integer, but this is {ty}"))),
        }
    }

    fn map_read(&self, name: &str, keys: &[Expr], span: Span) -> Result<Type, Diagnostic> {
        let Some((_, decl)) = self.maps.get(name) else {
            return Err(Diagnostic::error(span, format!("`@{name}` is read but never given a value"))
                .with_help(format!("assign it somewhere, e.g. `@{name} = 0;`")));
        };
        self.check_keys(name, keys, span)?;
        match &decl.value {
            MapValue::Plain(ty) => Ok(ty.clone()),
            MapValue::Agg(agg) => merged_type(*agg).ok_or_else(|| {
                Diagnostic::error(span, format!("the value of a `{}()` map can only be printed", agg.name()))
                    .with_help(format!("use print(@{name}), or let the map be printed at exit"))
            }),
        }
    }

    /// The type of `$kv` in `for ($kv : @name)`: `(key, value)`, the key a tuple when it has several
    /// parts, the value of an aggregation its number merged over the CPUs.
    pub fn map_entry(&self, name: &str, span: Span) -> Result<Type, Diagnostic> {
        let Some((_, decl)) = self.maps.get(name) else {
            return Err(Diagnostic::error(span, format!("`@{name}` is read but never given a value"))
                .with_help(format!("assign it somewhere, e.g. `@{name}[1] = 0;`")));
        };
        let key = match decl.key.as_slice() {
            [] => {
                return Err(Diagnostic::error(span, format!("`@{name}` has no keys to iterate over"))
                    .with_help(format!("read it directly: `@{name}`")))
            }
            [one] => one.clone(),
            parts => Type::Tuple(parts.to_vec()),
        };
        let value = match &decl.value {
            MapValue::Plain(ty) => ty.clone(),
            MapValue::Agg(agg) if merged_type(*agg).is_some() => merged_type(*agg).expect("just checked"),
            MapValue::Agg(agg) => {
                return Err(Diagnostic::error(
                    span,
                    format!("`for` cannot iterate over a `{}()` map: each entry is many values", agg.name()),
                )
                .with_help(format!("print it with `print(@{name})`")))
            }
        };
        Ok(Type::Tuple(vec![key, value]))
    }

    /// Checks that `keys` fit the map's key.
    pub fn check_keys(&self, name: &str, keys: &[Expr], span: Span) -> Result<(), Diagnostic> {
        let Some((_, decl)) = self.maps.get(name) else {
            return Err(Diagnostic::error(span, format!("`@{name}` is never given a value")));
        };
        // One tuple for a map keyed by parts: its fields are the parts.
        if let [key] = keys {
            if decl.key.len() > 1 {
                let ty = self.type_of(key)?;
                let whole = Type::Tuple(decl.key.clone());
                if let Type::Tuple(_) = ty {
                    return match whole.unify(&ty) {
                        Some(_) => Ok(()),
                        None => Err(Diagnostic::error(
                            key.span,
                            format!("`@{name}` has a key of type {whole} here, not {ty}"),
                        )),
                    };
                }
            }
        }
        // Parts for a map keyed by one tuple: the parts are its fields.
        let want_parts = crate::sema::maps::as_parts(&decl.key, keys.len());
        if keys.len() != want_parts.len() {
            return Err(Diagnostic::error(
                span,
                format!(
                    "`@{name}` has {} key part{}, but {} {} given here",
                    decl.key.len(),
                    if decl.key.len() == 1 { "" } else { "s" },
                    keys.len(),
                    if keys.len() == 1 { "is" } else { "are" }
                ),
            ));
        }
        for (key, want) in keys.iter().zip(want_parts) {
            let ty = self.type_of(key)?;
            if want.unify(&ty).is_none() {
                return Err(Diagnostic::error(
                    key.span,
                    format!("`@{name}` has a key of type {want} here, not {ty}"),
                ));
            }
        }
        Ok(())
    }

    pub fn map_arg<'e>(
        &self,
        function: &str,
        arg: Option<&'e Expr>,
        span: Span,
    ) -> Result<(&'e str, &'e [Expr]), Diagnostic> {
        match arg {
            Some(Expr { kind: ExprKind::Map { name, keys }, span: map_span, .. }) => {
                if self.maps.get(name).is_none() {
                    return Err(Diagnostic::error(*map_span, format!("`@{name}` is never given a value")));
                }
                Ok((name, keys))
            }
            Some(other) => {
                Err(Diagnostic::error(other.span, format!("`{function}()` takes a map, like `@name`")))
            }
            None => Err(Diagnostic::error(span, format!("`{function}()` takes a map, like `@name`"))),
        }
    }

    /// The type of a call, checked by its function's entry.
    fn call(&self, name: &str, name_span: Span, args: &[Expr], span: Span) -> Result<Type, Diagnostic> {
        if let Some(function) = self.functions.find(name) {
            return self.functions.check(function, self, &Call { name, args, span });
        }
        if is_aggregation(name) {
            return Err(Diagnostic::error(span, format!("`{name}()` must be assigned to a map"))
                .with_help(format!("write `@name = {name}(...)`")));
        }
        if self.functions.not_yet(name) {
            return Err(not_yet(name_span, &format!("`{name}()` is")));
        }
        // The functions suggested for a misspelt name.
        let known = [
            "printf",
            "print",
            "exit",
            "clear",
            "zero",
            "delete",
            "has_key",
            "len",
            "str",
            "strncmp",
            "strcontains",
            "time",
        ];
        let diag = Diagnostic::error(name_span, format!("unknown function `{name}`"));
        Err(match closest(name, known.iter().chain(AGGREGATIONS).copied()) {
            Some(near) => diag.with_help(format!("did you mean `{near}`?")),
            None => diag,
        })
    }
}

/// The BTF id of the struct or union a tracepoint field declared `struct NAME *name` points to.
fn pointed_record(decl: &str) -> Option<u32> {
    let words: Vec<&str> =
        decl.split(|c: char| c.is_whitespace() || c == '*').filter(|w| !w.is_empty()).collect();
    let at = words.iter().position(|w| *w == "struct" || *w == "union")?;
    let name = words.get(at + 1)?;
    // The last word is the field's name, not the type's.
    if at + 2 >= words.len() || !decl.contains('*') {
        return None;
    }
    crate::probes::btf::record_id(words[at] == "union", name)
}

/// The fields of `args` at an attach point: a tracepoint's record, or a raw tracepoint's arguments as the
/// kernel's BTF names them.
fn point_fields(point: &AttachPoint, span: Span) -> Result<Vec<Field>, Diagnostic> {
    match point.provider.fields() {
        Some(fields) => fields.map_err(|why| {
            Diagnostic::error(span, why).with_help("read the arguments as `arg0`, `arg1`, ...")
        }),
        None => {
            Err(Diagnostic::error(span, "`args` is only available in tracepoint and raw tracepoint probes"))
        }
    }
}

/// `(enum NAME)value` of a number written in the script: it must be one of the enum's constants.
fn known_constant(def: &crate::lang::cdecl::EnumDef, value: u64, span: Span) -> Result<(), Diagnostic> {
    if def.variant(value as i64).is_some() {
        return Ok(());
    }
    let constants: Vec<String> = def.variants.iter().map(|(n, v)| format!("{n} = {v}")).collect();
    Err(Diagnostic::error(span, format!("`enum {}` has no constant of value {value}", def.name))
        .with_help(format!("its constants are {}", constants.join(", "))))
}
