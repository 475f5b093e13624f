//! Maps read in expressions: the type a read gives (an aggregation's number merged over the CPUs), the
//! entries `for` iterates over, keys checked against the map's, and maps passed to functions.

use super::env::Env;
use super::maps::{Agg, MapValue};
use super::types::Type;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};

pub(super) const AGGREGATIONS: &[&str] =
    &["count", "sum", "min", "max", "avg", "stats", "hist", "lhist", "tseries"];

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

/// One entry of a `stats()` map as `print(@m[k])` prints it: `{ .count = N, .average = A, .total = T }`.
pub fn stats_entry() -> Type {
    let names = ["count", "average", "total"].map(String::from);
    Type::NamedTuple { names: names.into(), fields: vec![Type::U64, Type::I64, Type::I64] }
}

impl Env<'_> {
    pub(super) fn map_read(&self, name: &str, keys: &[Expr], span: Span) -> Result<Type, Diagnostic> {
        let Some((_, decl)) = self.maps.get(name) else {
            return Err(Diagnostic::error(span, format!("`@{name}` is read but never given a value"))
                .with_help(format!("assign it somewhere, e.g. `@{name} = 0;`")));
        };
        self.check_keys(name, keys, span)?;
        match &decl.value {
            MapValue::Plain(ty) => Ok(ty.clone()),
            MapValue::Agg(agg) => {
                merged_type(*agg).map(|ty| self.aggregation_read(name, ty)).ok_or_else(|| {
                    Diagnostic::error(
                        span,
                        format!("the value of a `{}()` map can only be printed", agg.name()),
                    )
                    .with_help(format!("use print(@{name}), or let the map be printed at exit"))
                })
            }
        }
    }

    /// `print(@name[keys])` of a `stats()` map: the entry's count, average and total, its CPUs' values
    /// merged, printed as the record [`stats_entry`] (bpftrace 0.27.1 prints this layout with zeros).
    pub fn stats_entry_read(&self, name: &str, keys: &[Expr], span: Span) -> Result<Type, Diagnostic> {
        self.check_keys(name, keys, span)?;
        Ok(self.aggregation_read(name, stats_entry()))
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
            MapValue::Agg(agg) if merged_type(*agg).is_some() => {
                self.aggregation_read(name, merged_type(*agg).expect("just checked"))
            }
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

    /// `ty`, the number aggregation `name` reads as, noting the read (not in the walk that records the typed
    /// program, which types every expression, read or not: the argument of `delete(@m[k])` too).
    fn aggregation_read(&self, name: &str, ty: Type) -> Type {
        if self.memo.is_none() {
            self.maps.note_aggregation_read(name);
        }
        ty
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
            let ty = super::struct_values::as_value(self.type_of(key)?, key.span, self.kernel)?;
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
}

#[cfg(test)]
mod tests {
    use super::is_aggregation;
    use crate::sema::env::checking::{errors, map_type};
    use crate::sema::types::Type;

    #[test]
    fn a_count_reads_as_its_merged_number_and_a_histogram_not_at_all() {
        assert_eq!(map_type("BEGIN { @c = count(); @v = @c; }", "v"), Type::U64);
        assert_eq!(map_type("BEGIN { @m = min(-1); @v = @m; }", "v"), Type::I64);
        let refused = errors("BEGIN { @h = hist(1); @v = @h; }");
        assert_eq!(refused, ["the value of a `hist()` map can only be printed"]);
        assert!(is_aggregation("lhist") && !is_aggregation("printf"));
    }

    #[test]
    fn maps_are_read_with_the_keys_they_were_given() {
        assert_eq!(errors("BEGIN { @x = @y; }"), ["`@y` is read but never given a value"]);
        let refused = errors("BEGIN { @m[1, 2] = 1; @n = @m[1]; }");
        assert_eq!(refused, ["`@m` has 2 key parts, but 1 is given here"]);
        let refused = errors(r#"BEGIN { @m[1] = 1; @n = @m["a"]; }"#);
        assert!(refused[0].starts_with("`@m` has a key of type"), "{refused:?}");
        // Literals take their smallest type, as in current bpftrace.
        assert_eq!(
            map_type("BEGIN { @m[1, 2] = 1; @n = @m[(1, 2)]; }", "n"),
            Type::Int { signed: true, bits: 8 }
        );
    }

    #[test]
    fn for_iterates_over_key_and_value_pairs() {
        let script = "BEGIN { @m[1, 2] = 3; for ($kv : @m) { @k = $kv.0; @v = $kv.1; } }";
        assert_eq!(
            map_type(script, "k"),
            Type::Tuple(vec![Type::Int { signed: true, bits: 8 }, Type::Int { signed: true, bits: 8 }])
        );
        assert_eq!(map_type(script, "v"), Type::Int { signed: true, bits: 8 });
        let refused = errors("BEGIN { @x = 1; for ($kv : @x) { } }");
        assert_eq!(refused, ["`@x` has no keys to iterate over"]);
    }
}
