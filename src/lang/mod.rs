//! The language front end: text to a syntax tree, and diagnostics pointing back into the text.

pub mod ast;
pub mod cdecl;
pub mod comptime;
pub mod constant;
pub mod diag;
pub mod format;
pub mod headers;
// Written by scripts/header-constants, as the script writes it.
#[rustfmt::skip]
mod header_tables;
mod imports;
pub mod lexer;
mod macros;
pub mod named;
pub mod parser;
pub mod positional;
mod preprocess;
pub mod span;
pub mod suggest;
pub mod surroundings;
pub mod type_name;
pub mod walk;

pub use diag::{Diagnostic, Source, Sources};
pub use imports::load;
pub use span::Span;
pub use surroundings::Surroundings;

/// Parses a script given as text (named `stdin`, its imports relative to the current directory), with
/// nothing from outside it: no header options, no kernel types.
pub fn parse(text: &str) -> Result<ast::Program, Diagnostic> {
    load(&mut Sources::new(&Source { name: "stdin", text }), &Surroundings::nothing())
}
