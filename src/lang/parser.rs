//! A recursive-descent parser with precedence climbing for expressions.

use super::ast::Import;
use super::ast::*;
use super::cdecl::CTypes;
use super::diag::Diagnostic;
use super::lexer::{Lexer, Tok, Token};
use super::macros::{MacroDef, Param};
use super::span::Span;
use super::surroundings::{RecordSizes, Surroundings};
use std::collections::HashMap;

/// One file of a script, parsed. [`super::imports`] reads its imports, then expands the macros of every file.
#[derive(Debug)]
pub struct Parsed {
    pub program: Program,
    pub macros: Vec<MacroDef>,
    pub imports: Vec<Import>,
    /// Where its config block starts (`config`).
    pub config: Option<Span>,
}

/// Parses one file whose positions start at `base`, adding its C definitions to `c_types` (those of the
/// files read before it, which it may use), in `around`.
pub fn parse_file(
    text: &str,
    base: usize,
    c_types: CTypes,
    around: &Surroundings<'_>,
) -> Result<Parsed, Diagnostic> {
    let pre = super::preprocess::preprocess(text, around).map_err(|mut d| {
        d.span = Span::new(base + d.span.start, base + d.span.end);
        d
    })?;
    let missing_headers = pre
        .missing_headers
        .iter()
        .map(|(header, span)| (header.clone(), Span::new(base + span.start, base + span.end)));
    let mut parsed = Parser {
        lexer: Lexer::at_base(&pre.text, base),
        peeked: None,
        in_predicate: false,
        depth: 0,
        else_ifs: 0,
        constants: &pre.constants,
        defines: &pre.defines,
        record_sizes: around.record_sizes,
        expanding: vec![],
        open_ended: Default::default(),
        type_params: vec![],
    }
    .program(c_types)?;
    parsed.program.missing_headers.extend(missing_headers);
    parsed.program.built_in_headers.extend(pre.built_in_headers.iter().cloned());
    Ok(parsed)
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Token>,
    /// Inside `/.../` a `/` followed by `{` closes the predicate instead of dividing.
    in_predicate: bool,
    /// Constants of the headers the script includes (`AF_INET`): replaced by their values, as by cpp.
    constants: &'a HashMap<String, i64>,
    /// `#define NAME value`: a name standing as an expression is its value, read as an expression.
    defines: &'a HashMap<String, String>,
    /// Sizes the structs a C definition only names.
    record_sizes: RecordSizes<'a>,
    /// The defined names being read, innermost last: a name defined in terms of itself is an error.
    expanding: Vec<String>,
    /// How deep the syntax tree being read is: every later pass walks it recursively, so a script cannot
    /// nest deeper than [`MAX_DEPTH`].
    depth: usize,
    /// `else if` branches of the chains being read.
    else_ifs: usize,
    /// The blocks (by their start) whose last statement has no `;` after it and can be their value: an
    /// expression, or an `if` with an `else`.
    open_ended: std::collections::HashSet<usize>,
    /// The plain parameters of the macro whose body is being read: each may stand for a type
    /// (`sizeof(t *)`, `(t *)x`, given `typeof(uint8)`).
    type_params: Vec<String>,
}

/// The deepest nesting of expressions and blocks accepted.
const MAX_DEPTH: usize = 100;

/// What `typeof(...)` in `let $x: typeof(...)` takes: an expression, or a type name and its span.
enum Typeof {
    Expr(Expr),
    Type(String, Span),
}

/// The longest `else if` chain accepted (each branch nests the rest of the chain in the tree).
const MAX_ELSE_IFS: usize = 1000;

/// Binary operators by precedence, loosest first.
const LEVELS: &[&[(&str, BinOp)]] = &[
    &[("||", BinOp::Or)],
    &[("&&", BinOp::And)],
    &[("|", BinOp::BitOr)],
    &[("^", BinOp::BitXor)],
    &[("&", BinOp::BitAnd)],
    &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
    &[("<", BinOp::Lt), ("<=", BinOp::Le), (">", BinOp::Gt), (">=", BinOp::Ge)],
    &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
    &[("+", BinOp::Add), ("-", BinOp::Sub)],
    &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
];

const COMPOUND: &[(&str, BinOp)] = &[
    ("+=", BinOp::Add),
    ("-=", BinOp::Sub),
    ("*=", BinOp::Mul),
    ("/=", BinOp::Div),
    ("%=", BinOp::Mod),
    ("&=", BinOp::BitAnd),
    ("|=", BinOp::BitOr),
    ("^=", BinOp::BitXor),
    ("<<=", BinOp::Shl),
    (">>=", BinOp::Shr),
];

/// Gives every expression of `e` the span `span` (the name a `#define`d value was read for).
fn respan(e: &mut Expr, span: Span) {
    e.span = span;
    match &mut e.kind {
        ExprKind::Map { keys: items, .. } | ExprKind::Tuple(items) | ExprKind::NamedTuple { items, .. } => {
            items.iter_mut().for_each(|e| respan(e, span))
        }
        ExprKind::Call { args, name_span, .. } => {
            *name_span = span;
            args.iter_mut().for_each(|e| respan(e, span));
        }
        ExprKind::Unary { operand: e, .. }
        | ExprKind::Cast { operand: e, .. }
        | ExprKind::Field { base: e, .. } => respan(e, span),
        ExprKind::Binary { lhs: a, rhs: b, .. }
        | ExprKind::Index { base: a, index: b }
        | ExprKind::Range { from: a, to: b } => {
            respan(a, span);
            respan(b, span);
        }
        ExprKind::Ternary { cond, then, otherwise } => {
            respan(cond, span);
            respan(then, span);
            respan(otherwise, span);
        }
        _ => {}
    }
}

impl Parser<'_> {
    /// The value of `#define NAME value`, read as an expression standing at `span`.
    fn expand(&mut self, name: &str, value: &str, span: Span) -> Result<Expr, Diagnostic> {
        if self.expanding.iter().any(|n| n == name) {
            return Err(Diagnostic::error(span, format!("`{name}` is defined in terms of itself")));
        }
        let inside = |d: Diagnostic| {
            Diagnostic::error(span, format!("in `{name}`, defined as `{value}`: {}", d.message))
        };
        let mut expanding = self.expanding.clone();
        expanding.push(name.to_string());
        let mut parser = Parser {
            lexer: Lexer::new(value),
            peeked: None,
            in_predicate: false,
            depth: self.depth,
            else_ifs: 0,
            constants: self.constants,
            defines: self.defines,
            record_sizes: self.record_sizes,
            expanding,
            open_ended: Default::default(),
            type_params: vec![],
        };
        let mut e = parser.expr().map_err(inside)?;
        if parser.peek().map_err(inside)?.tok != Tok::Eof {
            return Err(inside(parser.unexpected("the end of the value")));
        }
        respan(&mut e, span);
        Ok(e)
    }

    fn peek(&mut self) -> Result<&Token, Diagnostic> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next_token()?);
        }
        Ok(self.peeked.as_ref().expect("just filled"))
    }

    fn next(&mut self) -> Result<Token, Diagnostic> {
        self.peek()?;
        Ok(self.peeked.take().expect("just filled"))
    }

    fn at(&mut self, punct: &str) -> Result<bool, Diagnostic> {
        Ok(matches!(&self.peek()?.tok, Tok::Punct(p) if *p == punct))
    }

    fn eat(&mut self, punct: &str) -> Result<Option<Span>, Diagnostic> {
        if self.at(punct)? {
            return Ok(Some(self.next()?.span));
        }
        Ok(None)
    }

    fn expect(&mut self, punct: &str, context: &str) -> Result<Span, Diagnostic> {
        match self.eat(punct)? {
            Some(span) => Ok(span),
            None => {
                let found = self.peek()?.clone();
                Err(Diagnostic::error(
                    found.span,
                    format!("expected `{punct}` {context}, found {}", found.tok.describe()),
                ))
            }
        }
    }

    fn unexpected(&mut self, what: &str) -> Diagnostic {
        match self.peek() {
            Ok(found) => {
                let found = found.clone();
                Diagnostic::error(found.span, format!("expected {what}, found {}", found.tok.describe()))
            }
            Err(diag) => diag,
        }
    }

    fn program(mut self, mut c_types: CTypes) -> Result<Parsed, Diagnostic> {
        let mut probes = vec![];
        let mut macros = vec![];
        let mut imports = vec![];
        let mut config = vec![];
        let mut config_start = None;
        let mut map_decls = vec![];
        loop {
            self.lexer.skip_trivia()?;
            if self.lexer.pos() == self.lexer.end() {
                break;
            }
            if let Some(span) = self.config_start()? {
                if !probes.is_empty() {
                    return Err(Diagnostic::error(span, "the config block must come before every probe")
                        .with_help("move `config = { ... }` to the top of the script"));
                }
                if !config.is_empty() {
                    return Err(Diagnostic::error(span, "a second config block")
                        .with_help("put every setting in one `config = { ... }`"));
                }
                config_start = Some(span);
                config = self.config_block()?;
                continue;
            }
            if self.c_definition_next()? {
                if let Some(first) = probes.first() {
                    let at = self.lexer.clone().next_token()?.span;
                    let first: &Probe = first;
                    return Err(Diagnostic::error(at, "C definitions must come before the probes")
                        .with_help(format!("move it above `{}`", first.attach_points[0].text)));
                }
                super::cdecl::definition(&mut self.lexer, &mut c_types, self.record_sizes)?;
                continue;
            }
            if let Some(import) = self.import()? {
                if !(probes.is_empty() && macros.is_empty() && map_decls.is_empty()) {
                    return Err(Diagnostic::error(
                        import.span,
                        "imports must come before every probe, macro and map declaration",
                    )
                    .with_help("move the `import` up, after the C definitions"));
                }
                imports.push(import);
                continue;
            }
            if let Some(def) = self.macro_def()? {
                macros.push(def);
                continue;
            }
            if let Some(decl) = self.map_declaration()? {
                map_decls.push(decl);
                continue;
            }
            probes.push(self.probe()?);
        }
        let program = Program {
            config,
            c_types: std::sync::Arc::new(c_types),
            map_decls,
            probes,
            missing_headers: vec![],
            built_in_headers: vec![],
        };
        Ok(Parsed { program, macros, imports, config: config_start })
    }

    /// `import "path";` at the top level; consumes nothing at anything else.
    fn import(&mut self) -> Result<Option<Import>, Diagnostic> {
        let mut ahead = self.lexer.clone();
        if !matches!(ahead.next_token()?.tok, Tok::Ident(word) if word == "import") {
            return Ok(None);
        }
        self.lexer = ahead;
        let token = self.lexer.next_token()?;
        let Tok::Str(path) = token.tok else {
            return Err(Diagnostic::error(
                token.span,
                format!("expected the path to import, in quotes, found {}", token.tok.describe()),
            )
            .with_help("an import looks like `import \"lib/helpers.bt\";`"));
        };
        self.expect(";", "after the path to import")?;
        Ok(Some(Import { path, span: token.span }))
    }

    /// Whether `name =` (not `==`) comes next: the first item of a record `(a = 1, b = 2)`.
    fn named_item_next(&mut self) -> Result<bool, Diagnostic> {
        let mut ahead = self.lexer.clone();
        Ok(matches!(ahead.next_token()?.tok, Tok::Ident(_))
            && matches!(ahead.next_token()?.tok, Tok::Punct("=")))
    }

    /// `(name = value, ...)` after its `(` at `open`: a record.
    fn named_tuple(&mut self, open: Span) -> Result<Expr, Diagnostic> {
        let saved = self.in_predicate;
        self.in_predicate = false;
        let (mut names, mut items) = (vec![], vec![]);
        let close = loop {
            let token = self.next()?;
            let Tok::Ident(name) = token.tok else {
                return Err(Diagnostic::error(
                    token.span,
                    format!("expected a field's name, found {}", token.tok.describe()),
                )
                .with_help("every field of a record is named: `(a = 1, b = 2)`"));
            };
            if names.contains(&name) {
                return Err(Diagnostic::error(
                    token.span,
                    format!("the record has two fields named `{name}`"),
                ));
            }
            self.expect("=", "after the field's name")?;
            names.push(name);
            items.push(self.expr()?);
            if let Some(close) = self.eat(")")? {
                break close;
            }
            if self.eat(",")?.is_none() {
                return Err(self.unexpected("`,` or `)` in the record"));
            }
        };
        self.in_predicate = saved;
        Ok(Expr { id: ExprId::NONE, span: open.to(close), kind: ExprKind::NamedTuple { names, items } })
    }

    /// Whether a C type definition comes next (`struct Foo { ... };`, `enum`, `union`, `typedef`).
    fn c_definition_next(&mut self) -> Result<bool, Diagnostic> {
        let mut ahead = self.lexer.clone();
        Ok(matches!(ahead.next_token()?.tok, Tok::Ident(word) if super::cdecl::starts_definition(&word)))
    }

    /// `macro NAME(PARAM, ...) { body }` at the top level; consumes nothing at anything else.
    fn macro_def(&mut self) -> Result<Option<MacroDef>, Diagnostic> {
        let saved = self.lexer.clone();
        let (first, second) = (self.lexer.next_token()?, self.lexer.next_token()?);
        let (Tok::Ident(keyword), Tok::Ident(name)) = (&first.tok, &second.tok) else {
            self.lexer = saved;
            return Ok(None);
        };
        if keyword != "macro" {
            self.lexer = saved;
            return Ok(None);
        }
        let name = name.clone();
        self.expect("(", "after the macro's name")?;
        let mut params = vec![];
        if self.eat(")")?.is_none() {
            loop {
                let token = self.next()?;
                let param =
                    match token.tok {
                        Tok::Var(name) => Param::Var(name),
                        Tok::Map(name) => Param::Map(name),
                        Tok::Ident(name) => Param::Expr(name),
                        other => return Err(Diagnostic::error(
                            token.span,
                            format!("expected a parameter, found {}", other.describe()),
                        )
                        .with_help(
                            "a parameter is a `$variable`, an `@map` or a name standing for an expression",
                        )),
                    };
                if params.iter().any(|(p, _)| *p == param) {
                    return Err(Diagnostic::error(token.span, "this parameter is named twice"));
                }
                params.push((param, token.span));
                if self.eat(")")?.is_some() {
                    break;
                }
                self.expect(",", "between the macro's parameters")?;
            }
        }
        if !self.at("{")? {
            return Err(self.unexpected("`{` to start the macro's body"));
        }
        self.type_params = params
            .iter()
            .filter_map(|(p, _)| if let Param::Expr(name) = p { Some(name.clone()) } else { None })
            .collect();
        let body = self.block_expr();
        self.type_params.clear();
        Ok(Some(MacroDef { name, span: first.span.to(second.span), params, body: body? }))
    }

    /// At `config =`: consumes `config` and gives its span; otherwise consumes nothing.
    fn config_start(&mut self) -> Result<Option<Span>, Diagnostic> {
        let saved = self.lexer.clone();
        if let Ok(Token { tok: Tok::Ident(word), span }) = self.lexer.next_token() {
            if word == "config" && self.lexer.peek_text("=")? && !self.lexer.peek_text("==")? {
                return Ok(Some(span));
            }
        }
        self.lexer = saved;
        Ok(None)
    }

    /// `let @name = kind(max_entries)[;]` at the top level; consumes nothing when the text is not one.
    fn map_declaration(&mut self) -> Result<Option<MapDeclaration>, Diagnostic> {
        let saved = self.lexer.clone();
        let (first, second) = (self.lexer.next_token()?, self.lexer.next_token()?);
        let name = match (&first.tok, second.tok) {
            (Tok::Ident(word), Tok::Map(name)) if word == "let" => name,
            _ => {
                self.lexer = saved;
                return Ok(None);
            }
        };
        self.expect("=", "after the declared map's name")?;
        let help = "a map declaration looks like `let @name = hash(1000);`";
        let (kind, kind_span) = match self.next()? {
            Token { tok: Tok::Ident(kind), span } => (kind, span),
            other => {
                return Err(Diagnostic::error(
                    other.span,
                    format!(
                        "expected the map's type (`hash`, `lruhash`, ...), found {}",
                        other.tok.describe()
                    ),
                )
                .with_help(help))
            }
        };
        self.expect("(", "after the map's type")?;
        let (max_entries, max_entries_span) = match self.next()? {
            Token { tok: Tok::Int(n), span } => (n, span),
            other => {
                return Err(Diagnostic::error(
                    other.span,
                    format!("expected the map's number of entries, found {}", other.tok.describe()),
                )
                .with_help(help))
            }
        };
        let close = self.expect(")", "after the map's number of entries")?;
        // The `;` is optional, as in bpftrace. The top level reads the lexer itself: peek nothing else.
        let before = self.lexer.clone();
        let end = match self.eat(";")? {
            Some(end) => end,
            None => {
                self.lexer = before;
                self.peeked = None;
                close
            }
        };
        Ok(Some(MapDeclaration {
            name,
            kind,
            kind_span,
            max_entries,
            max_entries_span,
            span: first.span.to(end),
        }))
    }

    /// `= { key = value; ... }` after `config`: `;` between settings is optional.
    fn config_block(&mut self) -> Result<Vec<ConfigSetting>, Diagnostic> {
        self.expect("=", "after `config`")?;
        self.expect("{", "to start the config block")?;
        let mut settings = vec![];
        while self.eat("}")?.is_none() {
            if self.eat(";")?.is_some() {
                continue;
            }
            let (key, key_span) = match self.next()? {
                Token { tok: Tok::Ident(key), span } => (key, span),
                other => {
                    return Err(Diagnostic::error(
                        other.span,
                        format!(
                            "expected a setting's name in the config block, found {}",
                            other.tok.describe()
                        ),
                    )
                    .with_help("settings look like `max_strlen = 128;`"))
                }
            };
            self.expect("=", "after the setting's name")?;
            let (value, value_span) = match self.next()? {
                Token { tok: Tok::Int(n), span } => (ConfigValue::Int(n), span),
                Token { tok: Tok::Str(s), span } => (ConfigValue::Str(s), span),
                Token { tok: Tok::Ident(word), span } => (ConfigValue::Word(word), span),
                other => {
                    return Err(Diagnostic::error(
                        other.span,
                        format!(
                            "expected a number, a string or a word as `{key}`'s value, found {}",
                            other.tok.describe()
                        ),
                    ))
                }
            };
            settings.push(ConfigSetting { key, key_span, value, value_span });
        }
        Ok(settings)
    }

    fn probe(&mut self) -> Result<Probe, Diagnostic> {
        let mut attach_points = vec![];
        loop {
            match self.lexer.attach_point()? {
                Some((text, span)) => attach_points.push(AttachPointText { text, span }),
                None => return Err(self.unexpected("a probe such as `BEGIN` or `interval:s:1`")),
            }
            if !self.lexer.peek_text(",")? {
                break;
            }
            self.expect(",", "between probes")?;
            // A comma after the last attach point, as bpftrace takes it.
            if self.lexer.peek_text("{")? || self.lexer.peek_text("/")? {
                break;
            }
        }
        let predicate = if self.eat("/")?.is_some() {
            self.in_predicate = true;
            let cond = self.expr();
            self.in_predicate = false;
            let cond = cond?;
            self.expect("/", "to end the predicate")?;
            Some(cond)
        } else {
            None
        };
        if !self.at("{")? {
            return Err(self.unexpected("`{` to start the probe's body"));
        }
        let body = self.block()?;
        Ok(Probe { attach_points, predicate, body })
    }

    /// Enters one more level of nesting at `span`.
    fn descend(&mut self, levels: usize, span: Span) -> Result<(), Diagnostic> {
        self.depth += levels;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::error(span, format!("this is nested more than {MAX_DEPTH} levels deep"))
                .with_help("split it into several statements, with variables for the parts"));
        }
        Ok(())
    }

    fn block(&mut self) -> Result<Block, Diagnostic> {
        let span = self.peek()?.span;
        self.descend(1, span)?;
        let block = self.block_inner();
        self.depth -= 1;
        block
    }

    fn block_inner(&mut self) -> Result<Block, Diagnostic> {
        Ok(self.block_items()?.0)
    }

    /// `{ stmts }`, and whether its last statement is an expression with no `;` after it (a block
    /// expression's value).
    fn block_items(&mut self) -> Result<(Block, bool), Diagnostic> {
        let open = self.expect("{", "to start a block")?;
        let mut stmts = vec![];
        let mut open_ended = false;
        loop {
            if let Some(close) = self.eat("}")? {
                if open_ended {
                    self.open_ended.insert(open.start);
                }
                return Ok((Block { stmts, span: open.to(close) }, open_ended));
            }
            open_ended = false;
            if self.eat(";")?.is_some() {
                continue;
            }
            if self.peek()?.tok == Tok::Eof {
                return Err(self.unexpected("`}` to close the block"));
            }
            let stmt = self.stmt()?;
            let needs_separator = !matches!(
                stmt.kind,
                StmtKind::If { .. }
                    | StmtKind::Unroll { .. }
                    | StmtKind::While { .. }
                    | StmtKind::For { .. }
                    | StmtKind::Block(_)
            );
            open_ended = matches!(stmt.kind, StmtKind::Expr(_) | StmtKind::If { otherwise: Some(_), .. });
            stmts.push(stmt);
            if needs_separator && !self.at("}")? && self.eat(";")?.is_none() {
                return Err(self.unexpected("`;` or `}` after the statement"));
            }
        }
    }

    /// `{ stmts; value }` as an expression: a block of statements only stands for itself, and `{ value }`
    /// is `value`.
    fn block_expr(&mut self) -> Result<Expr, Diagnostic> {
        let span = self.peek()?.span;
        self.descend(1, span)?;
        let items = self.block_items();
        self.depth -= 1;
        let (block, _) = items?;
        Ok(self.valued(block))
    }

    /// A block read as an expression: its last statement, when open-ended, is its value; an `if` with an
    /// `else` there is a choice between the values of its branches.
    fn valued(&self, mut block: Block) -> Expr {
        let chained_if = matches!(
            block.stmts.as_slice(),
            [Stmt { kind: StmtKind::If { otherwise: Some(_), .. }, span }] if *span == block.span
        );
        let open_ended = chained_if || self.open_ended.contains(&block.span.start);
        let value = match (open_ended, block.stmts.pop()) {
            (true, Some(Stmt { kind: StmtKind::Expr(value), .. })) => Some(Box::new(value)),
            (true, Some(Stmt { kind: StmtKind::If { cond, then, otherwise: Some(otherwise) }, span })) => {
                Some(Box::new(Expr {
                    id: ExprId::NONE,
                    span,
                    kind: ExprKind::Ternary {
                        cond: Box::new(cond),
                        then: Box::new(self.valued(then)),
                        otherwise: Box::new(self.valued(otherwise)),
                    },
                }))
            }
            (_, last) => {
                block.stmts.extend(last);
                None
            }
        };
        let span = block.span;
        // `{ value }` is the value, at its own place.
        if let (true, Some(value)) = (block.stmts.is_empty(), &value) {
            return (**value).clone();
        }
        Expr { id: ExprId::NONE, span, kind: ExprKind::Block { block, value } }
    }

    /// `if cond { a } else { b }` as an expression: `cond ? a : b`.
    fn if_expr(&mut self, start: Span) -> Result<Expr, Diagnostic> {
        let cond = self.expr()?;
        if !self.at("{")? {
            return Err(self.unexpected("`{` after the condition of `if`"));
        }
        let then = self.block_expr()?;
        if self.keyword()?.as_deref() != Some("else") {
            return Err(self.unexpected("`else`: an `if` giving a value needs both branches"));
        }
        self.next()?;
        let otherwise = match self.keyword()?.as_deref() {
            Some("if") => {
                let span = self.next()?.span;
                self.descend(1, span)?;
                let nested = self.if_expr(span);
                self.depth -= 1;
                nested?
            }
            _ if self.at("{")? => self.block_expr()?,
            _ => return Err(self.unexpected("`{` or `if` after `else`")),
        };
        Ok(Expr {
            id: ExprId::NONE,
            span: start.to(otherwise.span),
            kind: ExprKind::Ternary {
                cond: Box::new(cond),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            },
        })
    }

    fn keyword(&mut self) -> Result<Option<String>, Diagnostic> {
        Ok(match &self.peek()?.tok {
            Tok::Ident(name) => Some(name.clone()),
            _ => None,
        })
    }

    fn paren_expr(&mut self, context: &str) -> Result<Expr, Diagnostic> {
        self.expect("(", context)?;
        let e = self.expr()?;
        self.expect(")", context)?;
        Ok(e)
    }

    fn stmt(&mut self) -> Result<Stmt, Diagnostic> {
        let start = self.peek()?.span;
        if self.at("{")? {
            let block = self.block()?;
            return Ok(Stmt { span: block.span, kind: StmtKind::Block(block) });
        }
        let kind = match self.keyword()?.as_deref() {
            Some("if") => {
                self.next()?;
                // `if comptime (cond)`: decided when compiling (`lang::comptime`), which finds it as the call
                // `comptime(cond)`.
                let comptime = match self.keyword()?.as_deref() {
                    Some("comptime") => Some(self.next()?.span),
                    _ => None,
                };
                // `if (cond)` as in bpftrace 0.17, or `if cond` as current bpftrace allows; a block
                // expression as the condition goes in parentheses.
                if self.at("{")? {
                    return Err(self.unexpected("an expression"));
                }
                let cond = self.expr()?;
                let cond = match comptime {
                    Some(name_span) => Expr {
                        id: ExprId::NONE,
                        span: name_span.to(cond.span),
                        kind: ExprKind::Call {
                            name: "comptime".into(),
                            name_span,
                            args: vec![cond],
                            expanded_from: vec![],
                        },
                    },
                    None => cond,
                };
                let then = self.block()?;
                let otherwise = if self.keyword()?.as_deref() == Some("else") {
                    self.next()?;
                    if self.keyword()?.as_deref() == Some("if") {
                        // Each `else if` nests the rest of the chain one level deeper in the tree.
                        let span = self.peek()?.span;
                        self.else_ifs += 1;
                        if self.else_ifs > MAX_ELSE_IFS {
                            return Err(Diagnostic::error(
                                span,
                                format!("an `if` has more than {MAX_ELSE_IFS} `else if` branches"),
                            )
                            .with_help(
                                "look the value up in a map, or split the chain into several `if` statements",
                            ));
                        }
                        let nested = self.stmt();
                        self.else_ifs -= 1;
                        let nested = nested?;
                        Some(Block { span: nested.span, stmts: vec![nested] })
                    } else {
                        Some(self.block()?)
                    }
                } else {
                    None
                };
                StmtKind::If { cond, then, otherwise }
            }
            Some("unroll") => {
                self.next()?;
                let count = self.paren_expr("around the count of `unroll`")?;
                StmtKind::Unroll { count, body: self.block()? }
            }
            Some("while") => {
                self.next()?;
                if self.at("{")? {
                    return Err(self.unexpected("an expression"));
                }
                let cond = self.expr()?;
                StmtKind::While { cond, body: self.block()? }
            }
            Some("for") => {
                self.next()?;
                // `for ($x : ...)`, or without the parentheses as current bpftrace allows.
                let parenthesised = self.eat("(")?.is_some();
                let (var, var_span) = match self.next()? {
                    Token { tok: Tok::Var(name), span } => (name, span),
                    other => {
                        return Err(Diagnostic::error(
                            other.span,
                            format!("expected a `$variable` after `for`, found {}", other.tok.describe()),
                        ))
                    }
                };
                self.expect(":", "after the loop variable")?;
                let iterable = self.expr()?;
                let iterable = if self.eat("..")?.is_some() {
                    let to = self.expr()?;
                    Expr {
                        id: ExprId::NONE,
                        span: iterable.span.to(to.span),
                        kind: ExprKind::Range { from: Box::new(iterable), to: Box::new(to) },
                    }
                } else {
                    iterable
                };
                if parenthesised {
                    self.expect(")", "after what `for` iterates over")?;
                }
                StmtKind::For { var, var_span, iterable, body: self.block()? }
            }
            Some("break") => {
                self.next()?;
                StmtKind::Break
            }
            Some("continue") => {
                self.next()?;
                StmtKind::Continue
            }
            Some("return") => {
                self.next()?;
                if self.at(";")? || self.at("}")? {
                    StmtKind::Return(None)
                } else {
                    StmtKind::Return(Some(self.expr()?))
                }
            }
            Some("let") => {
                self.next()?;
                let (name, decl_span) = match self.next()? {
                    Token { tok: Tok::Var(name), span } => (name, start.to(span)),
                    other => {
                        return Err(Diagnostic::error(
                            other.span,
                            format!("expected a `$variable` after `let`, found {}", other.tok.describe()),
                        ))
                    }
                };
                // `let $x: TYPE [= value]`: the value is cast to TYPE (a string type needs no cast), and a
                // typed declaration without a value starts at zero (or the empty string).
                let colon = self.eat(":")?;
                let (mut declared_typeof, mut declared_typeof_name) = (None, None);
                if let Some(colon) = colon {
                    match self.typeof_operand(colon.end)? {
                        Some(Typeof::Expr(operand)) => declared_typeof = Some(operand),
                        Some(Typeof::Type(ty, span)) => declared_typeof_name = Some((ty, span)),
                        None => {}
                    }
                }
                if let Some(operand) = declared_typeof {
                    // `let $x: typeof(e) [= value]`: sema gives `$x` the type of `e` (`e` is not evaluated).
                    let value = if self.eat("=")?.is_some() { Some(self.expr()?) } else { None };
                    let span = operand.span;
                    let args = std::iter::once(operand).chain(value).collect();
                    let kind = ExprKind::Call {
                        name: TYPEOF_LET.to_string(),
                        name_span: span,
                        args,
                        expanded_from: vec![],
                    };
                    let value = Some(Expr { id: ExprId::NONE, kind, span });
                    return Ok(Stmt {
                        kind: StmtKind::Let { name, decl_span, value },
                        span: start.to(self.last_end(start)),
                    });
                }
                let declared = match colon {
                    _ if declared_typeof_name.is_some() => declared_typeof_name,
                    Some(colon) => match self.declared_type(colon.end)? {
                        Some(declared) => Some(declared),
                        None => match self.next()? {
                        Token { tok: Tok::Ident(ty), span } if ty == "string" => {
                            // `string[N]` (current bpftrace's stdlib writes it): strings here are as long as
                            // their values make them, so N is read past.
                            if self.eat("[")?.is_some() {
                                match self.next()? {
                                    Token { tok: Tok::Int(_), .. } => {}
                                    other => return Err(Diagnostic::error(other.span, "a string's length is a number")),
                                }
                                self.expect("]", "after the string's length")?;
                            }
                            Some((ty, span))
                        }
                        Token { tok: Tok::Ident(ty), span } => {
                            return Err(Diagnostic::error(span, format!("unknown type `{ty}`"))
                                .with_help("a variable can be declared `string` or an integer type: int8 ... int64, uint8 ... uint64"))
                        }
                        other => {
                            return Err(Diagnostic::error(
                                other.span,
                                format!("expected a type after `:`, found {}", other.tok.describe()),
                            )
                            .with_help("for example `let $x: uint32 = 5;` or `let $s: string;`"))
                        }
                        },
                    },
                    None => None,
                };
                let value = if self.eat("=")?.is_some() { Some(self.expr()?) } else { None };
                let value = match declared {
                    None => value,
                    Some((ty, _)) if ty == "string" => Some(value.unwrap_or(Expr {
                        id: ExprId::NONE,
                        kind: ExprKind::Str(String::new()),
                        span: start,
                    })),
                    Some((ty, span)) => {
                        let operand =
                            value.unwrap_or(Expr { id: ExprId::NONE, kind: ExprKind::Int(0), span });
                        let span = span.to(operand.span);
                        Some(Expr {
                            id: ExprId::NONE,
                            kind: ExprKind::Cast { ty, operand: Box::new(operand) },
                            span,
                        })
                    }
                };
                StmtKind::Let { name, decl_span, value }
            }
            _ => return self.expr_stmt(start),
        };
        Ok(Stmt { kind, span: start.to(self.last_end(start)) })
    }

    /// `(typeof(e))operand`, a cast to the type of `e`, read as `typeof:let(e, operand)` (a declared variable's
    /// conversion); `None` (nothing consumed but the peek) when the `(` does not open `(typeof(`.
    fn typeof_cast(&mut self, start: Span) -> Result<Option<Expr>, Diagnostic> {
        let after_paren = self.peek()?.span.end;
        let inner = self.lexer.text_from(after_paren).trim_start();
        if !inner.strip_prefix("typeof").is_some_and(|rest| rest.trim_start().starts_with('(')) {
            return Ok(None);
        }
        self.next()?;
        let Some(declared) = self.typeof_operand(after_paren)? else { return Ok(None) };
        self.expect(")", "after the cast's type")?;
        let operand = self.unary()?;
        let span = start.to(operand.span);
        let kind = match declared {
            Typeof::Type(ty, _) => ExprKind::Cast { ty, operand: Box::new(operand) },
            Typeof::Expr(of) => ExprKind::Call {
                name: TYPEOF_LET.to_string(),
                name_span: start,
                args: vec![of, operand],
                expanded_from: vec![],
            },
        };
        Ok(Some(Expr { id: ExprId::NONE, kind, span }))
    }

    /// What `let $x: typeof(...)` takes, consumed, when the declared type starting at the text position `at`
    /// is one.
    fn typeof_operand(&mut self, at: usize) -> Result<Option<Typeof>, Diagnostic> {
        let text = self.lexer.text_from(at);
        let Some(inner) = text.trim_start().strip_prefix("typeof").map(str::trim_start) else {
            return Ok(None);
        };
        if !inner.starts_with('(') {
            return Ok(None);
        }
        self.next()?;
        let paren = self.expect("(", "after `typeof`")?;
        let inner = self.lexer.text_from(paren.end);
        let declared = if super::type_name::read(inner)
            .is_some_and(|(_, len)| inner[len..].trim_start().starts_with(')'))
        {
            match self.declared_type(paren.end)? {
                Some((ty, span)) => Typeof::Type(ty, span),
                None => {
                    return Err(Diagnostic::error(paren, "expected a type or an expression after `typeof(`"))
                }
            }
        } else {
            Typeof::Expr(self.expr()?)
        };
        self.expect(")", "after what `typeof(...)` takes")?;
        Ok(Some(declared))
    }

    /// The type name of `let $x: TYPE` starting at the text position `at`, consumed, with its span.
    fn declared_type(&mut self, at: usize) -> Result<Option<(String, Span)>, Diagnostic> {
        let Some((ty, len)) = super::type_name::read(self.lexer.text_from(at)) else { return Ok(None) };
        let start = self.peek()?.span.start;
        self.skip_to(at + len)?;
        Ok(Some((ty, Span::new(start, at + len))))
    }

    /// The span up to the end of what was consumed so far.
    fn last_end(&self, start: Span) -> Span {
        Span::new(start.start, self.peeked.as_ref().map_or(self.lexer.pos(), |t| t.span.start).max(start.end))
    }

    fn expr_stmt(&mut self, start: Span) -> Result<Stmt, Diagnostic> {
        let target = self.expr()?;
        let assignable = matches!(target.kind, ExprKind::Var(_) | ExprKind::Map { .. });
        let discard = matches!(&target.kind, ExprKind::Ident(name) if name == "_");
        let kind = if discard && self.eat("=")?.is_some() {
            // `_ = value;`: the value is computed for its effects and dropped.
            StmtKind::Expr(self.expr()?)
        } else if self.at("=")? {
            if !assignable {
                return Err(Diagnostic::error(
                    target.span,
                    "only a `$variable` or an `@map` can be assigned to",
                ));
            }
            self.next()?;
            StmtKind::Assign { target, op: None, value: self.expr()? }
        } else if let Some(&(_, op)) = COMPOUND
            .iter()
            .find(|(p, _)| matches!(&self.peeked, Some(Token { tok: Tok::Punct(q), .. }) if q == p))
        {
            if !assignable {
                return Err(Diagnostic::error(
                    target.span,
                    "only a `$variable` or an `@map` can be assigned to",
                ));
            }
            self.next()?;
            StmtKind::Assign { target, op: Some(op), value: self.expr()? }
        } else {
            StmtKind::Expr(target)
        };
        Ok(Stmt { kind, span: start.to(self.last_end(start)) })
    }

    fn expr(&mut self) -> Result<Expr, Diagnostic> {
        let cond = self.binary(0)?;
        let Some(question) = self.eat("?")? else {
            return Ok(cond);
        };
        if self.eat(":")?.is_some() {
            // `a ?: b` (current bpftrace): `a` when it is true, else `b`; read as `a ? a : b`.
            self.descend(1, question)?;
            let otherwise = self.expr();
            self.depth -= 1;
            let otherwise = otherwise?;
            return Ok(Expr {
                id: ExprId::NONE,
                span: cond.span.to(otherwise.span),
                kind: ExprKind::Ternary {
                    cond: Box::new(cond.clone()),
                    then: Box::new(cond),
                    otherwise: Box::new(otherwise),
                },
            });
        }
        // A chain `a ? b : c ? d : e` nests one level deeper at each `?`.
        self.descend(1, question)?;
        let branches = self.ternary_branches();
        self.depth -= 1;
        let (then, otherwise) = branches?;
        Ok(Expr {
            id: ExprId::NONE,
            span: cond.span.to(otherwise.span),
            kind: ExprKind::Ternary {
                cond: Box::new(cond),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            },
        })
    }

    fn ternary_branches(&mut self) -> Result<(Expr, Expr), Diagnostic> {
        let then = self.expr()?;
        self.expect(":", "between the branches of `?:`")?;
        Ok((then, self.expr()?))
    }

    fn binary(&mut self, level: usize) -> Result<Expr, Diagnostic> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        // A chain `a + b + c ...` deepens the tree by one level per operator.
        let mut chain = 0;
        while let Tok::Punct(p) = self.peek()?.tok {
            let Some(&(_, op)) = LEVELS[level].iter().find(|(s, _)| *s == p) else { break };
            if op == BinOp::Div && self.in_predicate && self.closes_predicate()? {
                break;
            }
            let span = self.next()?.span;
            chain += 1;
            self.descend(1, span)?;
            let rhs = self.binary(level + 1)?;
            lhs = Expr {
                id: ExprId::NONE,
                span: lhs.span.to(rhs.span),
                kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) },
            };
        }
        self.depth -= chain;
        Ok(lhs)
    }

    /// Whether the `/` just peeked is followed by `{`, ending a predicate.
    fn closes_predicate(&mut self) -> Result<bool, Diagnostic> {
        self.lexer.peek_text("{")
    }

    fn unary(&mut self) -> Result<Expr, Diagnostic> {
        let span = self.peek()?.span;
        self.descend(1, span)?;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, Diagnostic> {
        let start = self.peek()?.span;
        let op = match self.peek()?.tok {
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("*") => Some(UnOp::Deref),
            Tok::Punct("&") => Some(UnOp::AddrOf),
            Tok::Punct("++") => Some(UnOp::PreInc),
            Tok::Punct("--") => Some(UnOp::PreDec),
            _ => None,
        };
        if let Some(op) = op {
            self.next()?;
            let operand = self.unary()?;
            return Ok(Expr {
                id: ExprId::NONE,
                span: start.to(operand.span),
                kind: ExprKind::Unary { op, operand: Box::new(operand) },
            });
        }
        if self.at("(")? {
            if let Some(cast) = self.typeof_cast(start)? {
                return Ok(cast);
            }
            if let Some(ty) = self.cast_type()? {
                let operand = self.unary()?;
                return Ok(Expr {
                    id: ExprId::NONE,
                    span: start.to(operand.span),
                    kind: ExprKind::Cast { ty, operand: Box::new(operand) },
                });
            }
        }
        self.postfix()
    }

    /// `(type)` in front of an operand, or `(struct NAME *)`; `None` (nothing consumed but the peek)
    /// otherwise.
    fn cast_type(&mut self) -> Result<Option<String>, Diagnostic> {
        let after_paren = self.peek()?.span.end;
        let inner = self.lexer.text_from(after_paren);
        // A macro's parameter is a cast's type only as a pointer's (`(t *)x`): `(t)` is the argument in parentheses.
        let params: &[String] = &self.type_params;
        let Some((ty, len)) = super::type_name::read_with(inner, params)
            .filter(|(_, len)| inner[*len..].trim_start().starts_with(')'))
            .filter(|(ty, _)| {
                ty.ends_with('*') || super::type_name::read(inner).is_some_and(|_| !params.contains(ty))
            })
            // A name only a kernel typedef makes a type (`pid_t`) is a cast only before an operand: `(x_t) + 1`
            // keeps an enum's variant (or anything else so named) in parentheses.
            .filter(|(ty, len)| !super::type_name::is_typedef_cast(ty) || operand_follows(&inner[*len..]))
        else {
            return self.unknown_cast_type(inner.trim_start()).map(|()| None);
        };
        self.next()?;
        self.skip_to(after_paren + len)?;
        self.expect(")", "after the cast's type")?;
        Ok(Some(ty))
    }

    /// `sizeof(TYPE)` or `typeof(TYPE)` for a type name that is no expression (`uint64 *`, `uint8[4]`, a macro's
    /// `t *`): the call with the type's canonical spelling as an identifier, as `struct NAME` is one; `None`
    /// (nothing consumed but the peek) otherwise. `name` is the call's name, before the peeked `(`.
    fn type_argument(&mut self, name: &str, name_span: Span) -> Result<Option<Expr>, Diagnostic> {
        if name != "sizeof" && name != "typeof" {
            return Ok(None);
        }
        let after_paren = self.peek()?.span.end;
        let inner = self.lexer.text_from(after_paren);
        let Some((ty, len)) = super::type_name::read_with(inner, &self.type_params)
            .filter(|(_, len)| inner[*len..].trim_start().starts_with(')'))
        else {
            return Ok(None);
        };
        self.next()?;
        let type_start = self.peek()?.span.start;
        self.skip_to(after_paren + len)?;
        let type_span = Span::new(type_start, after_paren + len);
        let close = self.expect(")", "after the type")?;
        let arg = Expr { id: ExprId::NONE, kind: ExprKind::Ident(ty), span: type_span };
        let kind =
            ExprKind::Call { name: name.to_string(), name_span, args: vec![arg], expanded_from: vec![] };
        Ok(Some(Expr { id: ExprId::NONE, kind, span: name_span.to(close) }))
    }

    /// Consumes the tokens that start before the text position `end` (a type name already read).
    fn skip_to(&mut self, end: usize) -> Result<(), Diagnostic> {
        while self.peek()?.span.start < end {
            self.next()?;
        }
        Ok(())
    }

    /// `(NAME)` directly before an operand (`(uint128)$x`) can only be a cast: an error naming the type,
    /// where the parser would otherwise stumble over the operand. `inner` is the text after the `(`.
    fn unknown_cast_type(&mut self, inner: &str) -> Result<(), Diagnostic> {
        let len = inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(inner.len());
        let name = &inner[..len];
        let after = inner[len..].trim_start().strip_prefix(')').map(str::trim_start);
        let operand_follows = after
            .and_then(|a| a.chars().next())
            .is_some_and(|c| c == '$' || c == '@' || c == '(' || c.is_ascii_digit());
        if len == 0 || !name.starts_with(|c: char| c.is_ascii_alphabetic()) || !operand_follows {
            return Ok(());
        }
        let start = self.lexer.end() - inner.len();
        Err(Diagnostic::error(Span::new(start, start + len), format!("unknown type `{name}`")).with_help(
            "a value can be cast to int8 ... int64, uint8 ... uint64, bool, a script's enum (`enum NAME`), a pointer (`uint8 *`, `struct NAME *`) or an array (`uint8[4]`)",
        ))
    }

    /// Whether the next token is an identifier.
    fn peek_ident(&mut self) -> Result<bool, Diagnostic> {
        Ok(matches!(self.peek()?.tok, Tok::Ident(_)))
    }

    fn postfix(&mut self) -> Result<Expr, Diagnostic> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".")?.is_some() || self.eat("->")?.is_some() {
                let field = self.next()?;
                // `$t.0` is a tuple's first element.
                let name = match field.tok {
                    Tok::Ident(name) => name,
                    Tok::Int(index) => index.to_string(),
                    other => {
                        return Err(Diagnostic::error(
                            field.span,
                            format!("expected a field name, found {}", other.describe()),
                        ))
                    }
                };
                e = Expr {
                    id: ExprId::NONE,
                    span: e.span.to(field.span),
                    kind: ExprKind::Field { base: Box::new(e), field: name },
                };
            } else if self.at("[")? && !matches!(e.kind, ExprKind::Map { .. }) {
                self.next()?;
                let index = self.expr()?;
                let close = self.expect("]", "after the index")?;
                e = Expr {
                    id: ExprId::NONE,
                    span: e.span.to(close),
                    kind: ExprKind::Index { base: Box::new(e), index: Box::new(index) },
                };
            } else if let Some(span) = self.eat("++")? {
                e = Expr {
                    id: ExprId::NONE,
                    span: e.span.to(span),
                    kind: ExprKind::Unary { op: UnOp::PostInc, operand: Box::new(e) },
                };
            } else if let Some(span) = self.eat("--")? {
                e = Expr {
                    id: ExprId::NONE,
                    span: e.span.to(span),
                    kind: ExprKind::Unary { op: UnOp::PostDec, operand: Box::new(e) },
                };
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self, close: &str, context: &str) -> Result<(Vec<Expr>, Span), Diagnostic> {
        let mut args = vec![];
        if let Some(span) = self.eat(close)? {
            return Ok((args, span));
        }
        loop {
            args.push(self.expr()?);
            if let Some(span) = self.eat(close)? {
                return Ok((args, span));
            }
            if self.eat(",")?.is_none() {
                return Err(self.unexpected(&format!("`,` or `{close}` {context}")));
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, Diagnostic> {
        if self.at("{")? {
            return self.block_expr();
        }
        if self.keyword()?.as_deref() == Some("if") {
            let start = self.next()?.span;
            return self.if_expr(start);
        }
        let token = self.next()?;
        let span = token.span;
        let kind = match token.tok {
            Tok::Int(n) => ExprKind::Int(n),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Var(name) => ExprKind::Var(name),
            Tok::Map(name) => {
                if self.at("[")? {
                    self.next()?;
                    let (keys, close) = self.args("]", "in the map's key")?;
                    return Ok(Expr {
                        id: ExprId::NONE,
                        span: span.to(close),
                        kind: ExprKind::Map { name, keys },
                    });
                }
                ExprKind::Map { name, keys: vec![] }
            }
            // `struct NAME` as an argument (`sizeof(struct task_struct)`): one identifier naming the type.
            Tok::Ident(keyword) if (keyword == "struct" || keyword == "union") && self.peek_ident()? => {
                let name = self.next()?;
                let Tok::Ident(type_name) = name.tok else {
                    return Err(Diagnostic::error(name.span, format!("expected a name after `{keyword}`")));
                };
                return Ok(Expr {
                    id: ExprId::NONE,
                    span: span.to(name.span),
                    kind: ExprKind::Ident(format!("{keyword} {type_name}")),
                });
            }
            Tok::Ident(name) => {
                if self.at("(")? {
                    if let Some(call) = self.type_argument(&name, span)? {
                        return Ok(call);
                    }
                    self.next()?;
                    let (args, close) = self.args(")", "in the call's arguments")?;
                    return Ok(Expr {
                        id: ExprId::NONE,
                        span: span.to(close),
                        kind: ExprKind::Call { name, name_span: span, args, expanded_from: vec![] },
                    });
                }
                if let Some(value) = self.defines.get(&name) {
                    return self.expand(&name, value, span);
                }
                match self.constants.get(&name) {
                    Some(&value) if value >= 0 => ExprKind::Int(value as u64),
                    Some(&value) => ExprKind::Unary {
                        op: UnOp::Neg,
                        operand: Box::new(Expr {
                            id: ExprId::NONE,
                            kind: ExprKind::Int(value.unsigned_abs()),
                            span,
                        }),
                    },
                    None => ExprKind::Ident(name),
                }
            }
            Tok::Punct("(") if self.named_item_next()? => return self.named_tuple(span),
            Tok::Punct("(") => {
                let saved = self.in_predicate;
                self.in_predicate = false;
                let result = self.args(")", "in the parenthesised expression");
                self.in_predicate = saved;
                let (mut items, close) = result?;
                return match items.len() {
                    0 => Err(Diagnostic::error(span.to(close), "empty parentheses are not an expression")),
                    1 => {
                        let mut e = items.remove(0);
                        e.span = span.to(close);
                        Ok(e)
                    }
                    _ => Ok(Expr { id: ExprId::NONE, span: span.to(close), kind: ExprKind::Tuple(items) }),
                };
            }
            other => {
                return Err(Diagnostic::error(
                    span,
                    format!("expected an expression, found {}", other.describe()),
                ));
            }
        };
        Ok(Expr { id: ExprId::NONE, kind, span })
    }
}

/// Whether the text after a cast's type (`) ...`) starts an operand: a name, a number, a string, a variable, a
/// map, a parenthesis, or a unary `-`, `!`, `~`.
fn operand_follows(after_type: &str) -> bool {
    let operand = after_type.trim_start().strip_prefix(')').map(str::trim_start).unwrap_or("");
    operand.starts_with(|c: char| c.is_ascii_alphanumeric() || "_($@\"-!~".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::parse;

    fn body(text: &str) -> Vec<StmtKind> {
        parse(text).unwrap().probes[0].body.stmts.iter().map(|s| s.kind.clone()).collect()
    }

    fn int(n: u64, at: usize) -> Expr {
        Expr { id: ExprId::NONE, kind: ExprKind::Int(n), span: Span::new(at, at + 1) }
    }

    #[test]
    fn multiplication_binds_tighter_than_addition() {
        let stmts = body("BEGIN { 1 + 2 * 3 }");
        let StmtKind::Expr(Expr { kind: ExprKind::Binary { op: BinOp::Add, rhs, .. }, .. }) = &stmts[0]
        else {
            panic!("{stmts:?}")
        };
        assert_eq!(
            rhs.kind,
            ExprKind::Binary { op: BinOp::Mul, lhs: Box::new(int(2, 12)), rhs: Box::new(int(3, 16)) }
        );
    }

    #[test]
    fn a_file_reads_its_imports_and_counts_from_its_base() {
        let parsed = parse_file(
            "import \"a.bt\";\nmacro m() { 1 }\n",
            50,
            CTypes::default(),
            &Surroundings::nothing(),
        )
        .unwrap();
        assert_eq!(parsed.imports[0].path, "a.bt");
        assert_eq!(parsed.imports[0].span, Span::new(57, 63));
        assert_eq!(parsed.macros[0].span.start, 65);
        assert!(parsed.program.probes.is_empty());
        let err = parse_file("#bogus\n", 50, CTypes::default(), &Surroundings::nothing()).unwrap_err();
        assert_eq!(err.span, Span::new(50, 56));
        let err = parse_file("BEGIN { }\nimport \"a.bt\";\n", 0, CTypes::default(), &Surroundings::nothing())
            .unwrap_err();
        assert_eq!(err.message, "imports must come before every probe, macro and map declaration");
    }

    #[test]
    fn reads_probe_lists_and_predicates_with_division() {
        let program = parse("BEGIN, interval:s:1 /(10 / 2) == 5/ { exit(); }").unwrap();
        let probe = &program.probes[0];
        assert_eq!(
            probe.attach_points.iter().map(|a| a.text.as_str()).collect::<Vec<_>>(),
            ["BEGIN", "interval:s:1"]
        );
        assert!(matches!(probe.predicate.as_ref().unwrap().kind, ExprKind::Binary { op: BinOp::Eq, .. }));
    }

    #[test]
    fn reads_assignments_and_control_flow() {
        let stmts = body(
            "BEGIN { $x = 1; @m[pid, comm] += 2; if ($x) { $x++ } else if (1) { } for ($i : 0..3) { } }",
        );
        assert!(matches!(stmts[0], StmtKind::Assign { op: None, .. }));
        assert!(matches!(stmts[1], StmtKind::Assign { op: Some(BinOp::Add), .. }));
        assert!(matches!(stmts[2], StmtKind::If { otherwise: Some(_), .. }));
        assert!(matches!(
            stmts[3],
            StmtKind::For { iterable: Expr { kind: ExprKind::Range { .. }, .. }, .. }
        ));
    }

    #[test]
    fn a_missing_separator_points_at_the_next_token() {
        let err = parse("BEGIN { printf(\"a\") printf(\"b\") }").unwrap_err();
        assert_eq!(err.message, "expected `;` or `}` after the statement, found `printf`");
        assert_eq!(err.span, Span::new(20, 26));
    }

    #[test]
    fn casts_and_fields() {
        let stmts = body("BEGIN { (uint8)args.x }");
        assert!(
            matches!(&stmts[0], StmtKind::Expr(Expr { kind: ExprKind::Cast { ty, .. }, .. }) if ty == "uint8")
        );
    }
}
