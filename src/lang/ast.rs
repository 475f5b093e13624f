//! The syntax tree. Every node carries the span of the text it came from.

use super::span::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The settings of a `config = { key = value; ... }` block at the top of the script, in order.
    pub config: Vec<ConfigSetting>,
    /// The C types (`struct`, `union`, `enum`, `typedef`) defined before the probes.
    pub c_types: std::sync::Arc<super::cdecl::CTypes>,
    /// `let @m = lruhash(100);` at the top level, in order.
    pub map_decls: Vec<MapDeclaration>,
    pub probes: Vec<Probe>,
    /// The `#include`d headers found nowhere (no such file, no built-in table), each with its line: bpftrace
    /// stops at them; steadytrace warns, as they matter only where a constant of theirs is used.
    pub missing_headers: Vec<(String, Span)>,
    /// The `#include`d headers not installed whose constants come from steadytrace's tables alone: an unknown
    /// name like a macro may be one the tables lack.
    pub built_in_headers: Vec<String>,
}

/// `let @name = kind(max_entries);` at the top level: the BPF map a map is kept in (read by
/// [`crate::sema::declared`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDeclaration {
    /// Without the `@`.
    pub name: String,
    /// `hash`, `lruhash`, ... as written.
    pub kind: String,
    pub kind_span: Span,
    pub max_entries: u64,
    pub max_entries_span: Span,
    /// From `let` to `;`.
    pub span: Span,
}

/// `key = value` in the config block, as written (read by [`crate::config`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSetting {
    pub key: String,
    pub key_span: Span,
    pub value: ConfigValue,
    pub value_span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigValue {
    Int(u64),
    Str(String),
    /// A bare word: `perf`, `true`, `warn`.
    Word(String),
}

/// `ATTACH_POINT[, ATTACH_POINT...] [/predicate/] { body }`
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub attach_points: Vec<AttachPointText>,
    pub predicate: Option<Expr>,
    pub body: Block,
}

/// An attach point as written, before its provider reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachPointText {
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Expr(Expr),
    /// `$x = e`, `@m[k] += e`, `$x++` (an `Add` of 1): `op` is `None` for plain assignment.
    Assign {
        target: Expr,
        op: Option<BinOp>,
        value: Expr,
    },
    /// `let $x [= e]`
    Let {
        name: String,
        /// `let $x`, without its type or value: what a shadowing error points at.
        decl_span: Span,
        value: Option<Expr>,
    },
    If {
        cond: Expr,
        then: Block,
        otherwise: Option<Block>,
    },
    Unroll {
        count: Expr,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    /// `for ($x : iterable) { ... }`: a map, a range `a..b`, or a cpumask.
    For {
        var: String,
        var_span: Span,
        iterable: Expr,
        body: Block,
    },
    Break,
    Continue,
    /// `return;`, or `return value;`: the value is what a test or benchmark probe returns.
    Return(Option<Expr>),
    Block(Block),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Names the expression in the checked program's tables ([`crate::sema::ExprTypes`]). The parser gives
    /// [`ExprId::NONE`]; sema numbers every expression of the program once, after scoping.
    pub id: ExprId,
}

/// The number of an expression, unique in a checked program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExprId(pub u32);

impl ExprId {
    /// Not numbered: an expression made up after checking, never looked up.
    pub const NONE: ExprId = ExprId(0);
}

/// The function `let $x: typeof(e) [= value]` is read as: `typeof:let(e [, value])`, a name no script can write.
pub const TYPEOF_LET: &str = "typeof:let";

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(u64),
    Str(String),
    /// A bare identifier: a builtin such as `pid`, or `args`.
    Ident(String),
    Var(String),
    /// `@name[keys]`; `keys` is empty for `@name`.
    Map {
        name: String,
        keys: Vec<Expr>,
    },
    Call {
        name: String,
        name_span: Span,
        args: Vec<Expr>,
        /// For a call macro expansions brought (`errorf` in `macro bad() { errorf("x"); }`): the macro calls it
        /// came from, innermost first, which a run-time message names after its own place ("expanded from").
        expanded_from: Vec<Span>,
    },
    Unary {
        op: UnOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// `e.field` or `e->field`
    Field {
        base: Box<Expr>,
        field: String,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    Tuple(Vec<Expr>),
    /// A record, current bpftrace's named tuple: `(a = 1, b = "x")`; `names[i]` names `items[i]`.
    NamedTuple {
        names: Vec<String>,
        items: Vec<Expr>,
    },
    Cast {
        ty: String,
        operand: Box<Expr>,
    },
    /// `a..b` in a `for` loop.
    Range {
        from: Box<Expr>,
        to: Box<Expr>,
    },
    /// `{ stmts; value }` used as a value (also what a macro call expands to): the statements run in a
    /// scope of their own, then `value`, the block's value; a block without one has no value.
    Block {
        block: Block,
        value: Option<Box<Expr>>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
    Deref,
    AddrOf,
    PreInc,
    PreDec,
    PostInc,
    PostDec,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Mod => "%",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Shl => "<<",
            Shr => ">>",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            And => "&&",
            Or => "||",
        }
    }
}

impl Stmt {
    /// The expressions the statement holds directly (not those of its nested blocks).
    pub fn exprs(&self) -> Vec<&Expr> {
        match &self.kind {
            StmtKind::Expr(e)
            | StmtKind::If { cond: e, .. }
            | StmtKind::Unroll { count: e, .. }
            | StmtKind::While { cond: e, .. }
            | StmtKind::For { iterable: e, .. }
            | StmtKind::Return(Some(e)) => vec![e],
            StmtKind::Assign { target, value, .. } => vec![value, target],
            StmtKind::Let { value, .. } => value.iter().collect(),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) | StmtKind::Block(_) => vec![],
        }
    }
}

/// `import "path";` as written.
#[derive(Debug)]
pub struct Import {
    pub path: String,
    /// The path, quotes included.
    pub span: Span,
}
