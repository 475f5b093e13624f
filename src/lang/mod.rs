//! The language front end: text to a syntax tree, and diagnostics pointing back into the text.

pub mod ast;
pub mod cdecl;
pub mod constant;
pub mod diag;
mod headers;
pub mod lexer;
mod macros;
pub mod named;
pub mod parser;
pub mod positional;
mod preprocess;
pub mod span;
pub mod suggest;
pub mod type_name;
pub mod walk;

pub use diag::{Diagnostic, Source};
pub use parser::parse;
pub use span::Span;
