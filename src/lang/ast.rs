//! The syntax tree. Every node carries the span of the text it came from.

use super::span::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub probes: Vec<Probe>,
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
    Return,
    Block(Block),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

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
    Cast {
        ty: String,
        operand: Box<Expr>,
    },
    /// `a..b` in a `for` loop.
    Range {
        from: Box<Expr>,
        to: Box<Expr>,
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
