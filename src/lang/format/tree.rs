//! The script as `--fmt` needs it: every item, statement and expression as written (numbers, strings and
//! C definitions in their own spelling), with the comments and blank lines around them. Nothing is expanded,
//! substituted or checked; [`super::format`] parses the script with the real parser first.

use super::super::diag::Diagnostic;
use super::super::lexer::{Lexer, Tok, Token};
use super::super::span::Span;

/// A comment or blank line before an item or statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trivia {
    Blank,
    /// `// text`, as printed (a `/* */` comment becomes one line per line).
    Comment(String),
}

#[derive(Debug)]
pub struct Item {
    pub before: Vec<Trivia>,
    pub kind: ItemKind,
}

#[derive(Debug)]
pub enum ItemKind {
    /// Printed as written: preprocessor lines, C definitions, `import`, the `#!` line.
    Raw(String),
    Config(Vec<(String, String)>),
    /// `let @m = hash(N);`
    MapDecl(String, Expr),
    Macro {
        name: String,
        params: Vec<String>,
        body: Block,
    },
    Probe {
        points: Vec<String>,
        predicate: Option<Expr>,
        body: Block,
    },
}

#[derive(Debug, Default)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    /// Comments after the last statement.
    pub after: Vec<Trivia>,
}

#[derive(Debug)]
pub struct Stmt {
    pub before: Vec<Trivia>,
    pub kind: StmtKind,
    /// Whether a `;` followed it.
    pub semi: bool,
    /// A comment on the same line, after it.
    pub trailing: Option<String>,
}

#[derive(Debug)]
pub enum StmtKind {
    Expr(Expr),
    Assign(Expr, &'static str, Expr),
    /// `let $x [: TYPE]`, and its value.
    Let(String, Option<String>, Option<Expr>),
    If(Box<IfChain>),
    While(Expr, Block),
    Unroll(Expr, Block),
    For(String, Expr, Block),
    Word(&'static str),
    Return(Option<Expr>),
    Block(Block),
}

#[derive(Debug)]
pub struct IfChain {
    pub cond: Expr,
    pub then: Block,
    pub otherwise: Option<Else>,
}

#[derive(Debug)]
pub enum Else {
    If(Box<IfChain>),
    Block(Block),
}

#[derive(Debug)]
pub enum Expr {
    /// A number, string, variable, builtin or type, as written.
    Atom(String),
    Call(String, Vec<Expr>),
    Map(String, Vec<Expr>),
    Unary(&'static str, Box<Expr>),
    Postfix(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Option<Box<Expr>>, Box<Expr>),
    Field(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Tuple(Vec<Expr>),
    Record(Vec<(String, Expr)>),
    Cast(String, Box<Expr>),
    Block(Block),
    If(Box<IfChain>),
}

/// Binary operators by precedence, loosest first.
const LEVELS: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", "<=", ">", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

const ASSIGN: &[&str] = &["=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="];

const TYPE_WORDS: &[&str] = &[
    "struct", "union", "enum", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "int", "bool", "string", "void", "char", "short", "long", "unsigned", "signed", "inet", "buffer",
];

pub struct Reader<'a> {
    text: &'a str,
    lexer: Lexer<'a>,
    /// Where the last token read ended.
    last_end: usize,
}

type R<T> = Result<T, Diagnostic>;

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Reader<'a> {
        Reader { text, lexer: Lexer::new(text), last_end: 0 }
    }

    fn peek(&self) -> R<Token> {
        self.lexer.clone().next_token()
    }

    fn peek2(&self) -> R<(Token, Token)> {
        let mut l = self.lexer.clone();
        Ok((l.next_token()?, l.next_token()?))
    }

    fn next(&mut self) -> R<Token> {
        let t = self.lexer.next_token()?;
        self.last_end = t.span.end;
        Ok(t)
    }

    fn at(&self, p: &str) -> R<bool> {
        Ok(matches!(self.peek()?.tok, Tok::Punct(q) if q == p))
    }

    fn at_word(&self, w: &str) -> R<bool> {
        Ok(matches!(&self.peek()?.tok, Tok::Ident(n) if n == w))
    }

    fn eat(&mut self, p: &str) -> R<bool> {
        let found = self.at(p)?;
        if found {
            self.next()?;
        }
        Ok(found)
    }

    fn expect(&mut self, p: &str) -> R<()> {
        let t = self.next()?;
        if !matches!(t.tok, Tok::Punct(q) if q == p) {
            return Err(Diagnostic::error(t.span, format!("expected `{p}`, found {}", t.tok.describe())));
        }
        Ok(())
    }

    fn raw(&self, span: Span) -> String {
        self.text[span.start..span.end].to_string()
    }

    /// Moves the lexer to `pos`.
    fn jump(&mut self, pos: usize) {
        self.lexer = relexer(self.text, pos);
        self.last_end = pos;
    }

    /// The comments and blank lines from the last token to the next one; a comment on the same line as
    /// the last token is returned apart (`trailing`) when `trailing_allowed`.
    fn trivia(&self, trailing_allowed: bool) -> (Option<String>, Vec<Trivia>) {
        let next = self.peek().map(|t| t.span.start).unwrap_or(self.text.len());
        let gap = &self.text[self.last_end.min(next)..next];
        trivia_of(gap, trailing_allowed)
    }

    pub fn program(&mut self) -> R<Vec<Item>> {
        let mut items = vec![];
        if self.text.starts_with("#!") {
            let end = self.text.find('\n').unwrap_or(self.text.len());
            items.push(Item { before: vec![], kind: ItemKind::Raw(self.text[..end].to_string()) });
            self.last_end = end;
        }
        loop {
            let (_, before) = self.trivia(false);
            let start = self.next_start();
            if start >= self.text.len() {
                break;
            }
            let rest = &self.text[start..];
            let kind = if rest.starts_with('#') {
                let end = start + rest.find('\n').unwrap_or(rest.len());
                self.jump(end);
                ItemKind::Raw(self.text[start..end].trim_end().to_string())
            } else if ["struct", "union", "enum", "typedef"].iter().any(|w| starts_word(rest, w)) {
                let end = start + c_definition_end(rest);
                self.jump(end);
                ItemKind::Raw(self.text[start..end].to_string())
            } else if starts_word(rest, "import") {
                let end = start + rest.find(';').map_or(rest.len(), |p| p + 1);
                self.jump(end);
                ItemKind::Raw(self.text[start..end].to_string())
            } else if starts_word(rest, "config") && rest[6..].trim_start().starts_with('=') {
                self.config()?
            } else if starts_word(rest, "let") {
                self.next()?;
                let name = self.next()?;
                self.expect("=")?;
                let value = self.expr()?;
                self.eat(";")?;
                ItemKind::MapDecl(self.raw(name.span), value)
            } else if starts_word(rest, "macro") {
                self.macro_def()?
            } else {
                self.probe()?
            };
            items.push(Item { before, kind });
        }
        Ok(items)
    }

    /// Where the next item starts (past comments and white space).
    fn next_start(&self) -> usize {
        let mut l = relexer(self.text, self.last_end);
        let _ = l.skip_trivia();
        l.pos()
    }

    fn config(&mut self) -> R<ItemKind> {
        self.next()?;
        self.expect("=")?;
        self.expect("{")?;
        let mut settings = vec![];
        while !self.eat("}")? {
            let key = self.next()?;
            self.expect("=")?;
            let value = self.next()?;
            settings.push((self.raw(key.span), self.raw(value.span)));
            self.eat(";")?;
        }
        self.eat(";")?;
        Ok(ItemKind::Config(settings))
    }

    fn macro_def(&mut self) -> R<ItemKind> {
        self.next()?;
        let name = self.next()?;
        let mut params = vec![];
        self.expect("(")?;
        while !self.eat(")")? {
            let p = self.next()?;
            params.push(self.raw(p.span));
            self.eat(",")?;
        }
        let body = self.block()?;
        Ok(ItemKind::Macro { name: self.raw(name.span), params, body })
    }

    fn probe(&mut self) -> R<ItemKind> {
        let mut points = vec![];
        loop {
            self.lexer = relexer(self.text, self.last_end);
            match self.lexer.attach_point()? {
                Some((text, span)) => {
                    self.last_end = span.end;
                    points.push(text);
                }
                None => {
                    let t = self.peek()?;
                    return Err(Diagnostic::error(t.span, "expected an attach point"));
                }
            }
            if !self.eat(",")? {
                break;
            }
        }
        let predicate = if self.eat("/")? {
            let e = self.expr_in_predicate()?;
            Some(e)
        } else {
            None
        };
        let body = self.block()?;
        Ok(ItemKind::Probe { points, predicate, body })
    }

    fn expr_in_predicate(&mut self) -> R<Expr> {
        // The predicate ends at a `/` followed by `{`: read the text up to it as its own script.
        let start = self.last_end;
        let rest = &self.text[start..];
        let mut end = None;
        for (i, _) in rest.match_indices('/') {
            if rest[i + 1..].trim_start().starts_with('{') {
                end = Some(start + i);
                break;
            }
        }
        let end =
            end.ok_or_else(|| Diagnostic::error(Span::new(start, start), "the predicate never ends"))?;
        let mut inner =
            Reader { text: &self.text[..end], lexer: relexer(&self.text[..end], start), last_end: start };
        let e = inner.expr()?;
        self.jump(end + 1);
        Ok(e)
    }

    fn block(&mut self) -> R<Block> {
        self.expect("{")?;
        let mut stmts = vec![];
        loop {
            let (_, before) = self.trivia(false);
            if self.eat("}")? {
                return Ok(Block { stmts, after: before });
            }
            let kind = self.stmt()?;
            let semi = self.eat(";")?;
            let (trailing, _) = self.trivia(true);
            if let Some(comment) = &trailing {
                let at = self.text[self.last_end..].find(comment.as_str()).unwrap_or(0);
                self.last_end += at + comment.len();
            }
            stmts.push(Stmt { before, kind, semi, trailing });
        }
    }

    fn stmt(&mut self) -> R<StmtKind> {
        let t = self.peek()?;
        if let Tok::Ident(word) = &t.tok {
            match word.as_str() {
                "if" => {
                    self.next()?;
                    return Ok(StmtKind::If(Box::new(self.if_chain()?)));
                }
                "while" => {
                    self.next()?;
                    let cond = self.expr()?;
                    return Ok(StmtKind::While(cond, self.block()?));
                }
                "unroll" => {
                    self.next()?;
                    let count = self.expr()?;
                    return Ok(StmtKind::Unroll(count, self.block()?));
                }
                "for" => {
                    self.next()?;
                    let paren = self.eat("(")?;
                    let var = self.next()?;
                    self.expect(":")?;
                    let iter = self.range()?;
                    if paren {
                        self.expect(")")?;
                    }
                    return Ok(StmtKind::For(self.raw(var.span), iter, self.block()?));
                }
                "break" | "continue" => {
                    self.next()?;
                    return Ok(StmtKind::Word(if word == "break" { "break" } else { "continue" }));
                }
                "return" => {
                    self.next()?;
                    let value = if self.at(";")? || self.at("}")? { None } else { Some(self.expr()?) };
                    return Ok(StmtKind::Return(value));
                }
                "let" => {
                    self.next()?;
                    let var = self.next()?;
                    let ty = if self.eat(":")? {
                        let from = self.peek()?.span.start;
                        while !self.at("=")? && !self.at(";")? && !self.at("}")? {
                            self.next()?;
                        }
                        Some(type_text(&self.text[from..self.last_end]))
                    } else {
                        None
                    };
                    let value = if self.eat("=")? { Some(self.expr()?) } else { None };
                    return Ok(StmtKind::Let(self.raw(var.span), ty, value));
                }
                _ => {}
            }
        }
        if self.at("{")? {
            return Ok(StmtKind::Block(self.block()?));
        }
        let target = self.expr()?;
        if let Tok::Punct(p) = self.peek()?.tok {
            if let Some(op) = ASSIGN.iter().find(|a| **a == p) {
                self.next()?;
                return Ok(StmtKind::Assign(target, op, self.expr()?));
            }
        }
        Ok(StmtKind::Expr(target))
    }

    fn if_chain(&mut self) -> R<IfChain> {
        let cond = self.expr()?;
        let then = self.block()?;
        let otherwise = if self.at_word("else")? {
            self.next()?;
            if self.at_word("if")? {
                self.next()?;
                Some(Else::If(Box::new(self.if_chain()?)))
            } else {
                Some(Else::Block(self.block()?))
            }
        } else {
            None
        };
        Ok(IfChain { cond, then, otherwise })
    }

    fn range(&mut self) -> R<Expr> {
        let from = self.expr()?;
        if self.eat("..")? {
            let to = self.expr()?;
            return Ok(Expr::Binary("..", Box::new(from), Box::new(to)));
        }
        Ok(from)
    }

    pub fn expr(&mut self) -> R<Expr> {
        let cond = self.binary(0)?;
        if self.eat("?")? {
            if self.eat(":")? {
                let otherwise = self.expr()?;
                return Ok(Expr::Ternary(Box::new(cond), None, Box::new(otherwise)));
            }
            let then = self.expr()?;
            self.expect(":")?;
            let otherwise = self.expr()?;
            return Ok(Expr::Ternary(Box::new(cond), Some(Box::new(then)), Box::new(otherwise)));
        }
        Ok(cond)
    }

    fn binary(&mut self, level: usize) -> R<Expr> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        loop {
            let Tok::Punct(p) = self.peek()?.tok else { return Ok(lhs) };
            let Some(op) = LEVELS[level].iter().find(|o| **o == p) else { return Ok(lhs) };
            self.next()?;
            let rhs = self.binary(level + 1)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
    }

    fn unary(&mut self) -> R<Expr> {
        if let Tok::Punct(p) = self.peek()?.tok {
            if let Some(op) = ["-", "!", "~", "*", "&", "++", "--"].iter().find(|o| **o == p) {
                self.next()?;
                return Ok(Expr::Unary(op, Box::new(self.unary()?)));
            }
        }
        self.postfix()
    }

    fn postfix(&mut self) -> R<Expr> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".")? || self.eat("->")? {
                let t = self.next()?;
                e = Expr::Field(Box::new(e), self.raw(t.span));
            } else if self.eat("[")? {
                let i = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else if self.eat("++")? {
                e = Expr::Postfix("++", Box::new(e));
            } else if self.eat("--")? {
                e = Expr::Postfix("--", Box::new(e));
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self, close: &str) -> R<Vec<Expr>> {
        let mut args = vec![];
        while !self.eat(close)? {
            args.push(self.type_or_expr()?);
            if !self.eat(",")? {
                self.expect(close)?;
                break;
            }
        }
        Ok(args)
    }

    /// A type in an argument (`sizeof(struct foo)`, `offsetof(struct foo, bar)`), or an expression.
    fn type_or_expr(&mut self) -> R<Expr> {
        if let Tok::Ident(w) = &self.peek()?.tok {
            if ["struct", "union", "enum"].contains(&w.as_str()) {
                let from = self.peek()?.span.start;
                self.next()?;
                self.next()?;
                while self.at("*")? {
                    self.next()?;
                }
                return Ok(Expr::Atom(type_text(&self.text[from..self.last_end])));
            }
        }
        self.expr()
    }

    fn primary(&mut self) -> R<Expr> {
        let t = self.peek()?;
        match &t.tok {
            Tok::Int(_) | Tok::Str(_) | Tok::Var(_) => {
                self.next()?;
                Ok(Expr::Atom(self.raw(t.span)))
            }
            Tok::Map(_) => {
                self.next()?;
                let keys = if self.eat("[")? { self.args("]")? } else { vec![] };
                Ok(Expr::Map(self.raw(t.span), keys))
            }
            Tok::Ident(name) if name == "if" => {
                self.next()?;
                Ok(Expr::If(Box::new(self.if_chain()?)))
            }
            Tok::Ident(_) => {
                self.next()?;
                if self.eat("(")? {
                    let args = self.args(")")?;
                    return Ok(Expr::Call(self.raw(t.span), args));
                }
                Ok(Expr::Atom(self.raw(t.span)))
            }
            Tok::Punct("{") => Ok(Expr::Block(self.block()?)),
            Tok::Punct("(") => {
                if let Some(e) = self.cast()? {
                    return Ok(e);
                }
                self.next()?;
                // A record: `(name = value, ...)`.
                if let (Token { tok: Tok::Ident(_), .. }, Token { tok: Tok::Punct("="), .. }) =
                    self.peek2()?
                {
                    let mut fields = vec![];
                    while !self.eat(")")? {
                        let name = self.next()?;
                        self.expect("=")?;
                        fields.push((self.raw(name.span), self.expr()?));
                        self.eat(",")?;
                    }
                    return Ok(Expr::Record(fields));
                }
                let first = self.expr()?;
                if self.eat(")")? {
                    return Ok(first);
                }
                self.expect(",")?;
                let mut items = vec![first];
                items.extend(self.args(")")?);
                Ok(Expr::Tuple(items))
            }
            _ => {
                Err(Diagnostic::error(t.span, format!("expected an expression, found {}", t.tok.describe())))
            }
        }
    }

    /// `(TYPE)operand`, when the parenthesis holds a type.
    fn cast(&mut self) -> R<Option<Expr>> {
        let mut l = self.lexer.clone();
        let open = l.next_token()?;
        let first = l.next_token()?;
        let Tok::Ident(word) = &first.tok else { return Ok(None) };
        let mut end;
        loop {
            let t = l.next_token()?;
            end = t.span.end;
            match t.tok {
                Tok::Punct(")") => break,
                Tok::Ident(_) | Tok::Int(_) | Tok::Punct("*") | Tok::Punct("[") | Tok::Punct("]") => {}
                _ => return Ok(None),
            }
        }
        let inner = &self.text[first.span.start..end - 1];
        if !TYPE_WORDS.contains(&word.as_str()) && !inner.contains('*') {
            return Ok(None);
        }
        let _ = open;
        self.lexer = l;
        self.last_end = end;
        let operand = self.unary()?;
        Ok(Some(Expr::Cast(type_text(inner), Box::new(operand))))
    }
}

/// A lexer over `text` standing at `pos` (its spans count from the start of `text`).
fn relexer(text: &str, pos: usize) -> Lexer<'_> {
    if pos == 0 {
        Lexer::new(text)
    } else {
        Lexer::at_base(&text[pos..], pos)
    }
}

fn starts_word(text: &str, word: &str) -> bool {
    text.starts_with(word) && !text[word.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
}

/// Where a C definition ends: after the `;` that follows its braces.
fn c_definition_end(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    text.len()
}

/// A type as bpftrace prints it: words apart, `*` against the name.
fn type_text(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            if c == '*' || c == '[' || c == ']' {
                while out.ends_with(' ') {
                    out.pop();
                }
            }
            out.push(c);
        }
    }
    out.trim().to_string()
}

fn trivia_of(gap: &str, trailing_allowed: bool) -> (Option<String>, Vec<Trivia>) {
    let mut out = vec![];
    let mut trailing = None;
    let mut rest = gap;
    let mut first = true;
    loop {
        let ws = rest.len() - rest.trim_start().len();
        let newlines = rest[..ws].matches('\n').count();
        out.extend((1..newlines).map(|_| Trivia::Blank));
        rest = &rest[ws..];
        let comment_len = if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            rest.find("*/").map_or(rest.len(), |p| p + 2)
        } else {
            break;
        };
        let comment = &rest[..comment_len];
        if first && newlines == 0 && trailing_allowed && comment.starts_with("//") {
            trailing = Some(comment.trim_end().to_string());
        } else {
            out.extend(comment_lines(comment).into_iter().map(Trivia::Comment));
        }
        first = false;
        rest = &rest[comment_len..];
    }
    (trailing, out)
}

/// A comment as lines of `//` comments.
fn comment_lines(comment: &str) -> Vec<String> {
    if comment.starts_with("//") {
        return vec![comment.trim_end().to_string()];
    }
    let inner = comment.trim_start_matches("/*").trim_end_matches("*/");
    let lines: Vec<&str> = inner.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        let line = line.strip_prefix('*').map_or(line, str::trim);
        if line.is_empty() && (i == 0 || i + 1 == lines.len()) {
            continue;
        }
        out.push(if line.is_empty() { "//".to_string() } else { format!("// {line}") });
    }
    out
}
