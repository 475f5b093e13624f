//! The type of every expression, given its environment ([`Env`]): literals, operators, casts, names,
//! variables, map reads, member reads and calls. What a probe's context offers is in `context.rs`, map
//! reads in `map_access.rs`.

use super::builtins::{self, Builtin};
use super::env::{Call, Env};
use super::map_access::{is_aggregation, AGGREGATIONS};
use super::not_yet;
use super::types::{is_literal, Operand, StackType, Type};
use crate::lang::ast::*;
use crate::lang::constant::constant_index;
use crate::lang::suggest::closest;
use crate::lang::{Diagnostic, Span};

impl Env<'_> {
    /// The type of `e`, from the memo where the environment keeps one.
    pub fn type_of(&self, e: &Expr) -> Result<Type, Diagnostic> {
        let Some(memo) = self.memo.filter(|_| e.id != ExprId::NONE) else { return self.find_type(e) };
        if let Some(ty) = memo.types.borrow().get(&e.id) {
            return Ok(ty.clone());
        }
        let ty = self.find_type(e)?;
        memo.types.borrow_mut().insert(e.id, ty.clone());
        Ok(ty)
    }

    fn find_type(&self, e: &Expr) -> Result<Type, Diagnostic> {
        Ok(match &e.kind {
            // The smallest signed type that holds it, as current bpftrace sizes literals (`sizeof(1)` is 1);
            // arithmetic is 64 bits wide whatever its operands.
            ExprKind::Int(n) => match *n {
                0..=0x7f => Type::Int { signed: true, bits: 8 },
                0x80..=0x7fff => Type::Int { signed: true, bits: 16 },
                0x8000..=0x7fff_ffff => Type::Int { signed: true, bits: 32 },
                n if i64::try_from(n).is_ok() => Type::I64,
                _ => Type::U64,
            },
            ExprKind::Str(s) => Type::Str { size: s.len() + 1 },
            ExprKind::Block { value, .. } => match value {
                Some(value) => self.type_of(value)?,
                None => Type::Void,
            },
            ExprKind::Ident(name) if self.probe_builtin(name, e.span)?.is_some() => {
                self.probe_builtin(name, e.span)?.expect("just checked")
            }
            ExprKind::Ident(name) if name == "true" || name == "false" => Type::Bool,
            ExprKind::Ident(name) if ["kstack", "ustack", "dw_ustack"].contains(&name.as_str()) => {
                Type::Stack(StackType::named(name))
            }
            ExprKind::Ident(name) => match Builtin::from_name(name) {
                Some(builtin) => builtin.ty(self.kernel),
                None if builtins::NOT_YET.contains(&name.as_str()) => {
                    return Err(not_yet(e.span, &format!("`{name}` is")))
                }
                // A constant of an enum the script defines, or the kernel's (`SKB_DROP_REASON_NOT_SPECIFIED`):
                // printed by its name, as bpftrace prints it.
                None if self.kernel.enum_constant(name).is_some() => {
                    let (def, _) = self.kernel.enum_constant(name).expect("just checked");
                    Type::Enum { bits: 64, def }
                }
                None => {
                    let builtins = [
                        "pid", "tid", "uid", "gid", "comm", "cpu", "ncpus", "nsecs", "elapsed", "rand",
                        "probe", "username",
                    ];
                    let looks_like_macro = name.len() > 1 && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                    let help = match closest(name, builtins.into_iter()) {
                        Some(near) => format!("did you mean `{near}`?"),
                        // Only the numeric macros of included headers are known (lang/headers.rs).
                        None if looks_like_macro => format!("`{name}` is neither a builtin, a kernel enum constant nor a number `#define`d by a header the script includes (see \"Preprocessor lines\" in docs/LANGUAGE.md): include its header, or write its value"),
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
                // Declared (`let $x;`) or assigned somewhere, but never given a type anywhere in the probe.
                None if super::scope::declared(name) => {
                    let name = super::scope::shown(name);
                    return Err(Diagnostic::error(e.span, format!("`${name}`{}", super::NEVER_GIVEN))
                        .with_help(format!("assign it before reading it, e.g. `let ${name} = 0;`")));
                }
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
                // A negative literal is of the smallest signed type holding it, as current bpftrace's are
                // (`sizeof(-1)` is 1, `(uint8 *)-1` is 0xff).
                UnOp::Neg => match operand.kind {
                    ExprKind::Int(n @ 0..=0x80) if n > 0 => Type::Int { signed: true, bits: 8 },
                    ExprKind::Int(n @ 0..=0x8000) if n > 0 => Type::Int { signed: true, bits: 16 },
                    ExprKind::Int(n @ 0..=0x8000_0000) if n > 0 => Type::Int { signed: true, bits: 32 },
                    // An unsigned 64-bit operand, an enum constant's too, stays unsigned as in current bpftrace
                    // (`-BPF_MAP_TYPE_HASH` is 18446744073709551615); a narrower one is negated as int64.
                    _ => match self.type_of(operand)? {
                        Type::Int { signed: false, bits: 64 } | Type::Enum { .. } => Type::U64,
                        // As bpftrace 0.27.1 refuses it ("The - operator can not be used on expressions of
                        // type 'bool'").
                        ty @ (Type::Bool | Type::Ptr { .. } | Type::Pointer { .. }) => {
                            return Err(Diagnostic::error(e.span, format!("`-` cannot negate a value of type {ty}"))
                                .with_help("`-` negates integers: cast the value to one first, `-(int64)x`"))
                        }
                        _ => {
                            self.int_operand(operand)?;
                            Type::I64
                        }
                    },
                },
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
                    // `(*p).member`: the struct itself, whose members can be read (`sema::struct_values`
                    // refuses it anywhere else).
                    Type::Ptr { to, user } if self.kernel.member_kind_of(to.id).is_record() => {
                        Type::Record { record: to, user }
                    }
                    ty if ty.is_int() => Type::U64,
                    ty => return Err(Diagnostic::error(operand.span, format!("`*` reads memory at an address, but this is {ty}"))),
                },
                UnOp::AddrOf => match &operand.kind {
                    ExprKind::Var(_) => match self.type_of(operand)? {
                        Type::Record { .. } | Type::Void => {
                            return Err(Diagnostic::error(operand.span, "this variable holds no value to point to"))
                        }
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
                        _ => Type::arithmetic(
                            *op == BinOp::Sub,
                            Operand { ty: x, literal: is_literal(lhs) },
                            Operand { ty: y, literal: is_literal(rhs) },
                        ),
                    },
                    (Type::Str { .. }, Type::Str { .. }) | (Type::Buf { .. }, Type::Buf { .. })
                        if matches!(op, BinOp::Eq | BinOp::Ne) =>
                    {
                        Type::Bool
                    }
                    (x, y) if x.array_parts().is_some() && y.array_parts().is_some() => {
                        if !matches!(op, BinOp::Eq | BinOp::Ne) {
                            return Err(Diagnostic::error(
                                e.span,
                                format!("`{}` cannot compare arrays", op.symbol()),
                            )
                            .with_help("arrays are compared whole, with == and !="));
                        }
                        if let Some(why) = x.arrays_incomparable(y) {
                            return Err(Diagnostic::error(
                                e.span,
                                format!("`{}` cannot compare {a} and {b}: {why}", op.symbol()),
                            )
                            .with_help("== and != compare arrays of the same length and integer element type"));
                        }
                        Type::Bool
                    }
                    (x @ (Type::Tuple(_) | Type::NamedTuple { .. }), y)
                        if matches!(op, BinOp::Eq | BinOp::Ne) && x.comparable(y) =>
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
                // Two structs, or a struct and a copy of one: their values.
                let (a, b) = match (&a, &b) {
                    (Type::Record { .. }, _) | (_, Type::Record { .. }) => (
                        super::struct_values::as_value(a, then.span, self.kernel)?,
                        super::struct_values::as_value(b, otherwise.span, self.kernel)?,
                    ),
                    _ => (a, b),
                };
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
            ExprKind::Call { name, name_span, args, .. } => self.call(name, *name_span, args, e.span)?,
            ExprKind::Tuple(items) => Type::Tuple(
                items
                    .iter()
                    .map(|item| match self.type_of(item)? {
                        Type::Void => {
                            Err(Diagnostic::error(item.span, "this gives no value to put in a tuple"))
                        }
                        ty => super::struct_values::as_value(ty, item.span, self.kernel),
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
                        ty => super::struct_values::as_value(ty, item.span, self.kernel),
                    })
                    .collect::<Result<_, _>>()?,
            },
            ExprKind::Cast { ty, operand } => {
                let from = self.type_of(operand)?;
                let to = super::casts::cast(ty, &from, self.user_addresses(), self.kernel)
                    .map_err(|refusal| Diagnostic::error(e.span, refusal.message).with_help(refusal.help))?;
                if let (Type::Enum { def, .. }, ExprKind::Int(value)) = (&to, &operand.kind) {
                    known_constant(def, *value, operand.span)?;
                }
                to
            }
            ExprKind::Field { base, field } if matches!(&base.kind, ExprKind::Ident(n) if n == "args") => {
                self.tracepoint_field(field, e.span)?.1
            }
            // The base's type is found once: each level of `a.b.c...` would otherwise find it twice over.
            ExprKind::Field { base, field } => match (self.type_of(base)?, field.parse::<usize>()) {
                (ty @ (Type::Ptr { .. } | Type::Record { .. }), _) => self.member_of(ty, base, field, e.span)?.1,
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
            Type::Bytes { size } => (Some(Type::Int { signed: false, bits: 8 }), size),
            Type::Pointer { to, .. } => return Ok(*to),
            ty => {
                return Err(Diagnostic::error(
                    span,
                    format!("`[]` takes an element of a tuple, array, string or pointer, but this is {ty}"),
                ))
            }
        };
        match (elem, known) {
            (Some(Type::Record { .. }), None) => Err(Diagnostic::error(
                index.span,
                "an element of an array of structs needs an index known before the program runs",
            )
            .with_help("use a number, like `action[1].sa`")),
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

/// `(enum NAME)value` of a number written in the script: it must be one of the enum's constants.
fn known_constant(def: &crate::lang::cdecl::EnumDef, value: u64, span: Span) -> Result<(), Diagnostic> {
    if def.variant(value as i64).is_some() {
        return Ok(());
    }
    let constants: Vec<String> = def.variants.iter().map(|(n, v)| format!("{n} = {v}")).collect();
    Err(Diagnostic::error(span, format!("`enum {}` has no constant of value {value}", def.name))
        .with_help(format!("its constants are {}", constants.join(", "))))
}

#[cfg(test)]
mod tests {
    use crate::sema::env::checking::{errors, map_type};
    use crate::sema::types::Type;

    #[test]
    fn literals_and_operators_have_their_types() {
        assert_eq!(map_type("BEGIN { @ = 1 + 2 * 3; }", ""), Type::I64);
        assert_eq!(map_type("BEGIN { @ = 0xffffffffffffffff; }", ""), Type::U64);
        assert_eq!(map_type(r#"BEGIN { @ = "ab"; }"#, ""), Type::Str { size: 3 });
        assert_eq!(map_type("BEGIN { @ = (1, \"x\"); }", "").to_string(), "(int8, string[2])");
        assert_eq!(map_type("BEGIN { @ = pid > 1 ? 5 : 300; }", ""), Type::Int { signed: true, bits: 16 });
        assert_eq!(map_type("BEGIN { @ = 70000; }", ""), Type::Int { signed: true, bits: 32 });
    }

    #[test]
    fn negating_an_unsigned_64_bit_value_or_an_enum_constant_stays_unsigned() {
        let enums = "enum E { A = 1 };";
        assert_eq!(map_type(&format!("{enums} BEGIN {{ @ = -A; }}"), ""), Type::U64);
        assert_eq!(map_type("BEGIN { @ = -(uint64)1; }", ""), Type::U64);
        assert_eq!(map_type("BEGIN { @ = -(int64)1; }", ""), Type::I64);
        assert_eq!(map_type("BEGIN { @ = -(uint32)1; }", ""), Type::I64);
        assert_eq!(map_type("BEGIN { @ = -1; }", ""), Type::Int { signed: true, bits: 8 });
    }

    #[test]
    fn operands_must_fit_their_operators() {
        assert_eq!(errors(r#"BEGIN { @ = "ab" * 2; }"#), ["`*` cannot combine string[3] and int8"]);
        let refused = errors(r#"BEGIN { @ = -"ab"; }"#);
        assert!(refused[0].starts_with("expected an integer"), "{refused:?}");
        let refused = errors("BEGIN { $t = (1, 2); @ = $t[5]; }");
        assert_eq!(refused, ["the index is out of bounds: there are 2 elements, numbered from 0"]);
    }

    #[test]
    fn arrays_compare_whole_when_bpftrace_would() {
        let compared =
            "BEGIN { $a = (uint8[4])(uint32)1; @ = $a == (uint8[4])(uint32)2; @b = ($a, 1) != ($a, 1); }";
        assert_eq!(map_type(compared, ""), Type::Bool);
        assert_eq!(errors("BEGIN { @ = (uint8[4])1 < (uint8[4])2; }"), ["`<` cannot compare arrays"]);
        assert_eq!(
            errors("BEGIN { @ = (uint8[4])1 == (uint8[8])1; }"),
            ["`==` cannot compare uint8[4] and uint8[8]: arrays of different lengths"]
        );
        for other in ["(int8[4])1", "(bool[4])(uint32)1", "(uint16[2])1"] {
            let refused = errors(&format!("BEGIN {{ @ = (uint8[4])(uint32)1 != {other}; }}"));
            assert!(refused[0].starts_with("`!=` cannot compare uint8[4] and"), "{other}: {refused:?}");
        }
        let refused = errors("BEGIN { $b = (bool[2])(uint16)1; @ = $b == $b; }");
        assert_eq!(
            refused,
            ["`==` cannot compare bool[2] and bool[2]: arrays whose elements are not integers of one type"]
        );
        assert_eq!(errors("BEGIN { @ = (uint8[4])1 == 1; }"), ["`==` cannot combine uint8[4] and int8"]);
    }

    #[test]
    fn unknown_functions_suggest_near_names() {
        let refused = errors("BEGIN { cuont(); }");
        assert_eq!(refused, ["unknown function `cuont`"]);
        let refused = errors("BEGIN { count(); }");
        assert_eq!(refused, ["`count()` must be assigned to a map"]);
    }
}
