//! Map declarations, inferred from how a script uses each map: key types, and a value that is either a
//! plain value or an aggregation.

use super::builtins::Builtin;
use super::declared::Declared;
use super::tseries::Tseries;
use super::types::Type;
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::{Diagnostic, Span};
use bpf::features::{Feature, Features};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

/// The aggregating functions: their maps hold one value per CPU, merged when read, so concurrent
/// updates from several CPUs never race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agg {
    Count,
    Sum {
        signed: bool,
    },
    Min,
    Max,
    Avg,
    Stats,
    /// `hist(v, bits)`: each power of 2 split into `2^bits` buckets (0 to 5; `hist(v)` is 0).
    Hist {
        bits: u32,
    },
    Lhist {
        min: i64,
        max: i64,
        step: i64,
    },
    /// Keyed by (key, interval slot); one `(value, meta, epoch)` triple per slot and CPU.
    Tseries(Tseries),
}

impl Agg {
    pub fn name(self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum { .. } => "sum",
            Agg::Min => "min",
            Agg::Max => "max",
            Agg::Avg => "avg",
            Agg::Stats => "stats",
            Agg::Hist { .. } => "hist",
            Agg::Lhist { .. } => "lhist",
            Agg::Tseries(_) => "tseries",
        }
    }

    /// Bytes of one CPU's value: a counter, or (value, set) for min/max, (count, total) for avg/stats.
    pub fn value_size(self) -> usize {
        match self {
            Agg::Min | Agg::Max | Agg::Avg | Agg::Stats => 16,
            Agg::Tseries(_) => 24,
            _ => 8,
        }
    }

    /// Whether the key gets a bucket index after the user's key parts.
    pub fn has_buckets(self) -> bool {
        matches!(self, Agg::Hist { .. } | Agg::Lhist { .. } | Agg::Tseries(_))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapValue {
    Plain(Type),
    Agg(Agg),
}

impl MapValue {
    pub fn describe(&self) -> String {
        match self {
            MapValue::Plain(ty) => ty.to_string(),
            MapValue::Agg(Agg::Hist { bits }) if *bits > 0 => format!("hist(_, {bits})"),
            MapValue::Agg(Agg::Tseries(series)) => series.describe(),
            MapValue::Agg(agg) => format!("{}()", agg.name()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDecl {
    /// Without the `@` (empty for the anonymous map `@`).
    pub name: String,
    /// Empty for a map used without keys, like `@x`.
    pub key: Vec<Type>,
    /// What each key part is called in the script, from the map's first assignment, where the part's
    /// expression names something ([`key_name`]); `--metrics` makes labels of them.
    pub key_names: Vec<Option<String>>,
    /// Which key parts are cgroup ids, from the map's first assignment: the `cgroup` builtin, and parts typed
    /// `cgroup_path_t` or `container_id_t` ([`cgroup_part`]); `--metrics` makes container labels of them.
    pub cgroup_parts: Vec<bool>,
    pub value: MapValue,
    /// Where the map was first given its value type.
    pub span: Span,
    /// An aggregation kept in one value for all CPUs, updated with atomic adds: a map read in expressions
    /// on a kernel that cannot read other CPUs' values of a per-CPU map (no `bpf_map_lookup_percpu_elem`).
    pub shared: bool,
    /// Every write of a plain value adds to it (`++`, `--`, `+=`, `-=`): values under keys that turn out
    /// equal (copied stacks, `dw_ustack`) are merged by adding them.
    pub counter: bool,
}

impl MapDecl {
    /// Bytes of the BPF key: the key parts, then the bucket index for histograms; 8 bytes of zero for a
    /// map without keys.
    pub fn key_size(&self) -> usize {
        let parts: usize = self.key.iter().map(Type::slot_size).sum::<usize>().max(8);
        match &self.value {
            MapValue::Agg(agg) if agg.has_buckets() => parts + 8,
            _ => parts,
        }
    }

    pub fn value_size(&self) -> usize {
        match &self.value {
            MapValue::Plain(ty) => ty.slot_size(),
            MapValue::Agg(agg) => agg.value_size(),
        }
    }

    pub fn is_per_cpu(&self) -> bool {
        matches!(self.value, MapValue::Agg(_)) && !self.shared
    }
}

/// A key written as one tuple (`@m[$t]`, `@m[(a, b)]`) is the same key as its fields written as parts
/// (`@m[a, b]`), as in bpftrace: the tuple's fields, when the other use has that many parts.
pub fn as_parts(key: &[Type], other_parts: usize) -> &[Type] {
    match key {
        [Type::Tuple(fields)] if other_parts > 1 && fields.len() == other_parts => fields,
        _ => key,
    }
}

/// Every map of a script, numbered in the order they are declared.
#[derive(Clone, Debug, Default)]
pub struct MapTable {
    pub decls: Vec<MapDecl>,
    by_name: HashMap<String, usize>,
    /// The maps declared at the top level (`let @m = lruhash(100);`), by name.
    pub declared: HashMap<String, Declared>,
    /// The aggregations whose number some compiled expression reads (`@n > 0`, `for ($kv : @m)`), as the
    /// checking walk of the compiled probes found them.
    aggregations_read: RefCell<BTreeSet<String>>,
}

impl MapTable {
    /// Notes that an expression reads aggregation `name`'s number.
    pub fn note_aggregation_read(&self, name: &str) {
        self.aggregations_read.borrow_mut().insert(name.to_string());
    }

    /// Forgets the reads noted so far: the walks that only learn map types are over.
    pub fn forget_aggregation_reads(&self) {
        self.aggregations_read.borrow_mut().clear();
    }

    /// The one decision of the per-CPU lookup fallback, made before codegen: on a kernel that cannot merge
    /// the CPUs' values of a per-CPU map in BPF (no `bpf_map_lookup_percpu_elem`, Linux 5.19), each
    /// aggregation read in an expression becomes a shared map, updated atomically. Not a declared map
    /// (`let @m = percpuhash()` says per-CPU), nor min()/max() without `BPF_CMPXCHG` (Linux 5.12): codegen
    /// refuses those reads, naming the feature. A script that reads none asks the kernel nothing (the probe
    /// is two program loads, one with the verifier's log).
    pub fn share_aggregations_read(&mut self, features: &Features) {
        if self.aggregations_read.borrow().is_empty() || features.has(Feature::PercpuLookup) {
            return;
        }
        let cmpxchg = features.has(Feature::Cmpxchg);
        for name in self.aggregations_read.take() {
            let Some(&index) = self.by_name.get(&name) else { continue };
            let decl = &mut self.decls[index];
            let extreme = matches!(decl.value, MapValue::Agg(Agg::Min | Agg::Max));
            if !self.declared.contains_key(&name) && (cmpxchg || !extreme) {
                decl.shared = true;
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<(usize, &MapDecl)> {
        self.by_name.get(name).map(|&i| (i, &self.decls[i]))
    }

    /// Declares a map, or merges a new use into its declaration; `Err` with the existing declaration when
    /// the two do not fit together.
    pub fn declare(&mut self, decl: MapDecl) -> Result<(), Box<MapDecl>> {
        let Some(&index) = self.by_name.get(&decl.name) else {
            self.by_name.insert(decl.name.clone(), self.decls.len());
            self.decls.push(decl);
            return Ok(());
        };
        let existing = &mut self.decls[index];
        let (old_key, new_key) =
            (as_parts(&existing.key, decl.key.len()), as_parts(&decl.key, existing.key.len()));
        let key = if old_key.len() == new_key.len() {
            old_key.iter().zip(new_key).map(|(a, b)| a.unify(b)).collect::<Option<Vec<_>>>()
        } else {
            None
        };
        let value = match (&existing.value, &decl.value) {
            (MapValue::Plain(a), MapValue::Plain(b)) => a.unify(b).map(MapValue::Plain),
            (MapValue::Agg(Agg::Sum { signed: a }), MapValue::Agg(Agg::Sum { signed: b })) => {
                Some(MapValue::Agg(Agg::Sum { signed: *a && *b }))
            }
            // Signed when any value is: a negative value must not print as a huge one.
            (MapValue::Agg(Agg::Tseries(a)), MapValue::Agg(Agg::Tseries(b)))
                if Tseries { signed: b.signed, ..*a } == *b =>
            {
                Some(MapValue::Agg(Agg::Tseries(Tseries { signed: a.signed || b.signed, ..*a })))
            }
            (a, b) if a == b => Some(a.clone()),
            _ => None,
        };
        match (key, value) {
            (Some(key), Some(value)) => {
                existing.key = key;
                existing.value = value;
                existing.counter &= decl.counter;
                Ok(())
            }
            _ => Err(Box::new(existing.clone())),
        }
    }
}

/// What a key part's expression is called, where it names something: a builtin (`comm`), a variable (`$fd`:
/// `fd`), a field (`args.filename`: `filename`), a call by its argument's name (`str(args.filename)`:
/// `filename`) or else by its own (`kstack`, `ustack(5)`: `ustack`).
pub fn key_name(key: &Expr) -> Option<String> {
    match &key.kind {
        ExprKind::Ident(name) => Some(name.clone()),
        // Scopes and macros rename variables apart (`$fd#1`): the label is the name as written.
        ExprKind::Var(name) => name.trim_start_matches('$').split('#').next().map(String::from),
        ExprKind::Field { field, .. } => Some(field.clone()),
        ExprKind::Call { name, args, .. } => args.first().and_then(key_name).or_else(|| Some(name.clone())),
        ExprKind::Cast { operand, .. } => key_name(operand),
        _ => None,
    }
}

/// Whether a key part holds a cgroup id: the `cgroup` builtin, `cgroup_path()`, `container_id()`.
pub fn cgroup_part(key: &Expr, ty: &Type) -> bool {
    let builtin =
        matches!(&key.kind, ExprKind::Ident(name) if Builtin::from_name(name) == Some(Builtin::Cgroup));
    builtin || matches!(ty, Type::CgroupPath { .. } | Type::ContainerId)
}

/// The key parts `has_key(@m, key)` looks up: a tuple `(a, b)` is the parts `a`, `b` of a map keyed
/// `@m[a, b]`, and one tuple part of a map keyed by tuples (`@m[(a, b)]`, `@m[$tuple]`).
pub fn key_parts(parts: usize, key: &Expr) -> Vec<Expr> {
    match &key.kind {
        ExprKind::Tuple(elements) if parts > 1 => elements.clone(),
        _ => vec![key.clone()],
    }
}

/// Checks the declarations against how the script uses its maps: errors for a per-CPU declaration of a
/// map holding plain values (or the reverse), and warnings for maps declared but never used.
pub fn check_declared(
    declared: &HashMap<String, Declared>,
    maps: &MapTable,
) -> (Vec<Diagnostic>, Vec<Diagnostic>) {
    let (mut errors, mut warnings) = (vec![], vec![]);
    let mut names: Vec<_> = declared.iter().collect();
    names.sort_by_key(|(_, d)| d.span.start);
    for (name, declaration) in names {
        let Some((_, map)) = maps.get(name) else {
            warnings.push(Diagnostic::warning(declaration.span, format!("Unused map: @{name}")));
            continue;
        };
        let storage = declaration.storage;
        if storage.is_per_cpu() == map.is_per_cpu() {
            continue;
        }
        let (holds, other) = if storage.is_per_cpu() {
            ("only aggregations (`count()`, `sum()`, ...)", "`hash` or `lruhash`")
        } else {
            ("no aggregations", "`percpuhash` or `percpulruhash`")
        };
        errors.push(
            Diagnostic::error(
                map.span,
                format!(
                    "`@{name}` is declared as `{}`, which holds {holds}, but is given {}",
                    storage.name(),
                    map.value.describe()
                ),
            )
            .with_help(format!("declare it {other}")),
        );
    }
    (errors, warnings)
}
