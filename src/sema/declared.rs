//! Map declarations (`let @m = lruhash(100);`): which kind of BPF hash map keeps a map, and how many
//! keys it holds. Whether a map is per-CPU still follows from its value (aggregations are); the
//! declaration must agree with it, as in bpftrace.

use crate::lang::ast::MapDeclaration;
use crate::lang::{Diagnostic, Span};
use std::collections::HashMap;

/// The map types a declaration can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    Hash,
    LruHash,
    PercpuHash,
    PercpuLruHash,
}

const STORAGES: [(&str, Storage); 4] = [
    ("hash", Storage::Hash),
    ("lruhash", Storage::LruHash),
    ("percpuhash", Storage::PercpuHash),
    ("percpulruhash", Storage::PercpuLruHash),
];

impl Storage {
    pub fn name(self) -> &'static str {
        STORAGES.iter().find(|(_, s)| *s == self).map_or("hash", |(name, _)| name)
    }

    pub fn is_per_cpu(self) -> bool {
        matches!(self, Storage::PercpuHash | Storage::PercpuLruHash)
    }

    /// Whether a new key evicts the least recently used one when the map is full, rather than failing.
    pub fn is_lru(self) -> bool {
        matches!(self, Storage::LruHash | Storage::PercpuLruHash)
    }
}

/// One map's declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub storage: Storage,
    pub max_entries: u32,
    pub span: Span,
}

/// The declarations by map name (without `@`), and the errors of those that cannot be kept.
pub fn read(decls: &[MapDeclaration]) -> (HashMap<String, Declared>, Vec<Diagnostic>) {
    let mut declared = HashMap::new();
    let mut errors = vec![];
    for decl in decls {
        let Some(&(_, storage)) = STORAGES.iter().find(|(name, _)| *name == decl.kind) else {
            errors.push(
                Diagnostic::error(decl.kind_span, format!("invalid BPF map type `{}`", decl.kind))
                    .with_help("the map types are hash, lruhash, percpuhash and percpulruhash"),
            );
            continue;
        };
        let Some(max_entries) = u32::try_from(decl.max_entries).ok().filter(|&n| n > 0) else {
            errors.push(
                Diagnostic::error(decl.max_entries_span, "a map holds from 1 to 4294967295 entries")
                    .with_help(format!("for example `let @{} = {}(4096);`", decl.name, decl.kind)),
            );
            continue;
        };
        if declared.contains_key(&decl.name) {
            errors.push(
                Diagnostic::error(decl.span, format!("`@{}` is declared twice", decl.name))
                    .with_help("keep one declaration"),
            );
            continue;
        }
        declared.insert(decl.name.clone(), Declared { storage, max_entries, span: decl.span });
    }
    (declared, errors)
}
