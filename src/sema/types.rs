//! The types of values in a script.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Integers live in 64-bit registers; `signed` decides division, comparison and printing.
    Int { signed: bool },
    /// A string of at most `size` bytes, NUL-padded.
    Str { size: usize },
    /// What a statement-like call such as `printf` gives back.
    Void,
}

impl Type {
    pub const U64: Type = Type::Int { signed: false };
    pub const I64: Type = Type::Int { signed: true };
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Int { signed: true } => write!(f, "int64"),
            Type::Int { signed: false } => write!(f, "uint64"),
            Type::Str { size } => write!(f, "string[{size}]"),
            Type::Void => write!(f, "none"),
        }
    }
}
