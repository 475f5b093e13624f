//! C type definitions at the top of a script (`struct Foo { int a; char b[10]; };`, `union`, `enum`,
//! `typedef`), which bpftrace hands to clang. steadytrace reads them itself and lays structs out with
//! the x86-64 System V rules: each member at its alignment (1 in a `packed` struct), bitfields packed
//! into units of their declared type, the struct's size rounded up to its alignment.

use super::diag::Diagnostic;
use super::lexer::{Lexer, Tok, Token};
use super::span::Span;
use super::surroundings::RecordSizes;

/// Every type a script defines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CTypes {
    pub records: Vec<RecordDef>,
    pub enums: Vec<std::sync::Arc<EnumDef>>,
    typedefs: Vec<(String, CType)>,
}

/// A struct or union, laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordDef {
    /// Empty for an unnamed one (`struct { int a; } x;`).
    pub name: String,
    pub union: bool,
    pub size: u32,
    pub align: u32,
    pub fields: Vec<FieldDef>,
    /// Declared (`struct Foo;`) but not (yet) defined.
    pub incomplete: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDef {
    /// `None` for an unnamed struct or union whose members belong to the enclosing one, and for an
    /// unnamed bitfield (padding).
    pub name: Option<String>,
    /// Bytes from the start of the record.
    pub offset: u32,
    pub ty: CType,
    /// A bitfield: its first bit after `offset`, and its width.
    pub bits: Option<(u32, u32)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumDef {
    pub name: String,
    pub variants: Vec<(String, i64)>,
}

impl EnumDef {
    /// The name of the first variant with `value`.
    pub fn variant(&self, value: i64) -> Option<&str> {
        self.variants.iter().find(|(_, v)| *v == value).map(|(n, _)| n.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CType {
    Void,
    Int {
        size: u32,
        signed: bool,
    },
    /// Plain `char`: one byte, signed as the architecture has it. A type apart from `signed char` and
    /// `unsigned char` because only its arrays are strings (bpftrace prints the others' as integers).
    Char {
        signed: bool,
    },
    Pointer(Box<CType>),
    Array(Box<CType>, u32),
    /// A record of the script (an index into [`CTypes::records`]).
    Record(usize),
    /// A struct or union only named, not defined in the script (the kernel's, through BTF): usable
    /// behind a pointer.
    Named {
        union: bool,
        name: String,
    },
    /// An enum of the script (an index into [`CTypes::enums`]) stored in `size` bytes.
    Enum {
        index: usize,
        size: u32,
    },
}

impl CTypes {
    pub fn record(&self, union: bool, name: &str) -> Option<usize> {
        self.records.iter().rposition(|r| r.union == union && r.name == name && !r.incomplete)
    }

    pub fn enum_named(&self, name: &str) -> Option<&std::sync::Arc<EnumDef>> {
        self.enums.iter().find(|e| e.name == name)
    }

    /// The enum that defines constant `name`, and its value.
    pub fn enum_constant(&self, name: &str) -> Option<(&std::sync::Arc<EnumDef>, i64)> {
        self.enums.iter().find_map(|e| e.variants.iter().find(|(n, _)| n == name).map(|&(_, v)| (e, v)))
    }

    /// `(size, alignment)` of a type held by value; `None` when it has none (void, an undefined struct).
    /// `named` sizes the structs the script only names (the kernel's, held by value:
    /// `struct foo { struct load_weight w; }`).
    pub fn size_align(&self, ty: &CType, named: RecordSizes<'_>) -> Option<(u32, u32)> {
        match ty {
            CType::Void => None,
            CType::Named { union, name } => named(*union, name),
            CType::Int { size, .. } | CType::Enum { size, .. } => Some((*size, *size)),
            CType::Char { .. } => Some((1, 1)),
            CType::Pointer(_) => Some((8, 8)),
            CType::Array(element, len) => self
                .size_align(element, named)
                .and_then(|(size, align)| Some((size.checked_mul(*len)?, align))),
            CType::Record(index) => {
                let record = &self.records[*index];
                (!record.incomplete).then_some((record.size, record.align))
            }
        }
    }

    /// A C spelling of `ty`, for messages.
    pub fn describe(&self, ty: &CType) -> String {
        match ty {
            CType::Void => "void".into(),
            CType::Int { size, signed } => format!("{}int{}", if *signed { "" } else { "u" }, size * 8),
            CType::Char { signed } => self.describe(&CType::Int { size: 1, signed: *signed }),
            CType::Pointer(to) => format!("{} *", self.describe(to)),
            CType::Array(..) => {
                // `a[2][3]` is an array of 2 arrays of 3: the lengths read outermost first.
                let (mut element, mut lengths) = (ty, String::new());
                while let CType::Array(inner, len) = element {
                    lengths.push_str(&format!("[{len}]"));
                    element = inner;
                }
                format!("{}{lengths}", self.describe(element))
            }
            CType::Record(index) => {
                let record = &self.records[*index];
                format!("{} {}", if record.union { "union" } else { "struct" }, record.name)
            }
            CType::Named { union, name } => format!("{} {name}", if *union { "union" } else { "struct" }),
            CType::Enum { index, .. } => format!("enum {}", self.enums[*index].name),
        }
    }
}

/// Whether the script's next top-level item is a C definition: it starts with one of these words.
pub fn starts_definition(word: &str) -> bool {
    matches!(word, "struct" | "union" | "enum" | "typedef")
}

/// Reads one definition (`struct ... };`, `enum ... };`, `typedef ...;`) at the lexer's position into
/// `types`; `named` sizes the structs it only names.
pub fn definition(
    lexer: &mut Lexer<'_>,
    types: &mut CTypes,
    named: RecordSizes<'_>,
) -> Result<(), Diagnostic> {
    let mut reader = Reader { lexer, types, named };
    reader.top_level()
}

/// The C integer types, by their words in canonical order.
fn builtin_int(words: &[&str]) -> Option<CType> {
    let unsigned = words.contains(&"unsigned");
    let rest: Vec<&str> = words.iter().copied().filter(|w| *w != "unsigned" && *w != "signed").collect();
    let size = match rest.as_slice() {
        // Plain `char` is signed or not as the architecture's C compilers have it (unsigned on arm64).
        ["char"] if words.len() == 1 => return Some(CType::Char { signed: bpf::arch::HOST.char_signed }),
        ["char"] => 1,
        ["short"] | ["short", "int"] => 2,
        [] | ["int"] => 4,
        ["long"] | ["long", "int"] | ["long", "long"] | ["long", "long", "int"] => 8,
        ["_Bool"] | ["bool"] if !unsigned && words.len() == 1 => {
            return Some(CType::Int { size: 1, signed: false })
        }
        _ => return None,
    };
    Some(CType::Int { size, signed: !unsigned })
}

/// The kernel's and stdint's fixed-width names (`u32`, `__s64`, `uint8_t`, `size_t`).
fn fixed_width(name: &str) -> Option<(u32, bool)> {
    let name = name.trim_start_matches("__");
    let (signed, digits) = if let Some(d) = name.strip_prefix("uint").or_else(|| name.strip_prefix('u')) {
        (false, d)
    } else if let Some(d) = name.strip_prefix("int").or_else(|| name.strip_prefix('s')) {
        (true, d)
    } else {
        return match name {
            "size_t" | "uintptr_t" => Some((8, false)),
            "ssize_t" | "intptr_t" | "ptrdiff_t" | "loff_t" => Some((8, true)),
            "pid_t" => Some((4, true)),
            "uid_t" | "gid_t" => Some((4, false)),
            _ => None,
        };
    };
    let digits = digits.strip_suffix("_t").unwrap_or(digits);
    match digits {
        "8" => Some((1, signed)),
        "16" => Some((2, signed)),
        "32" => Some((4, signed)),
        "64" => Some((8, signed)),
        _ => None,
    }
}

/// What `__attribute__((...))` lists say.
#[derive(Default)]
struct Attributes {
    packed: bool,
    aligned: Option<u32>,
}

/// A member's declarator: `*name[2][3] : bits`.
struct Declarator {
    name: Option<(String, Span)>,
    ty: CType,
    bits: Option<(u32, Span)>,
}

struct Reader<'l, 'a, 't> {
    lexer: &'l mut Lexer<'a>,
    types: &'t mut CTypes,
    named: RecordSizes<'t>,
}

impl Reader<'_, '_, '_> {
    fn peek(&mut self) -> Result<Token, Diagnostic> {
        self.lexer.clone().next_token()
    }

    fn next(&mut self) -> Result<Token, Diagnostic> {
        self.lexer.next_token()
    }

    fn eat(&mut self, punct: &str) -> Result<Option<Span>, Diagnostic> {
        let token = self.peek()?;
        if matches!(token.tok, Tok::Punct(p) if p == punct) {
            self.next()?;
            return Ok(Some(token.span));
        }
        Ok(None)
    }

    fn expect(&mut self, punct: &str, context: &str) -> Result<Span, Diagnostic> {
        match self.eat(punct)? {
            Some(span) => Ok(span),
            None => {
                let found = self.peek()?;
                Err(Diagnostic::error(
                    found.span,
                    format!("expected `{punct}` {context}, found {}", found.tok.describe()),
                ))
            }
        }
    }

    fn peek_word(&mut self) -> Result<Option<String>, Diagnostic> {
        Ok(match self.peek()?.tok {
            Tok::Ident(word) => Some(word),
            _ => None,
        })
    }

    fn top_level(&mut self) -> Result<(), Diagnostic> {
        let first = self.next()?;
        let Tok::Ident(keyword) = first.tok else {
            return Err(Diagnostic::error(first.span, "internal error: no C definition here"));
        };
        if keyword == "typedef" {
            let base = self.type_specifier()?;
            loop {
                let declarator = self.declarator(base.clone())?;
                let Some((name, _)) = declarator.name else {
                    return Err(Diagnostic::error(first.span, "this `typedef` names no type"));
                };
                self.types.typedefs.push((name, declarator.ty));
                if self.eat(",")?.is_none() {
                    break;
                }
            }
            self.attributes()?;
            self.expect(";", "after the `typedef`")?;
            return Ok(());
        }
        let named = self.peek_word()?.is_some_and(|w| !is_attribute(&w));
        let ty = self.tagged(&keyword, first.span)?;
        if !named && matches!(ty, CType::Record(_)) {
            return Err(Diagnostic::error(first.span, format!("this `{keyword}` has no name"))
                .with_help(format!("name it: `{keyword} NAME {{ ... }};`")));
        }
        // `struct Foo { ... } foo;` would declare a variable, which a script has no use for (a word
        // after the brace without `;` is the first probe's: `struct Foo { ... } begin { ... }`).
        let mut ahead = self.lexer.clone();
        if let (Ok(Token { tok: Tok::Ident(_), span }), Ok(Token { tok: Tok::Punct(";"), .. })) =
            (ahead.next_token(), ahead.next_token())
        {
            return Err(Diagnostic::error(span, "variables cannot be declared here")
                .with_help("only type definitions go before the probes"));
        }
        // The `;` after the closing brace is optional, as bpftrace reads definitions.
        self.eat(";")?;
        Ok(())
    }

    /// `__attribute__((packed, aligned(N)))`, any number of them.
    fn attributes(&mut self) -> Result<Attributes, Diagnostic> {
        let mut found = Attributes::default();
        while self.peek_word()?.is_some_and(|w| is_attribute(&w)) {
            self.next()?;
            self.expect("(", "after `__attribute__`")?;
            self.expect("(", "after `__attribute__(`")?;
            loop {
                let token = self.next()?;
                let Tok::Ident(name) = token.tok else {
                    return Err(Diagnostic::error(token.span, "expected an attribute's name"));
                };
                match name.trim_matches('_') {
                    "packed" => found.packed = true,
                    "aligned" => {
                        let value = if self.eat("(")?.is_some() {
                            let n = self.constant()?;
                            self.expect(")", "after the alignment")?;
                            n
                        } else {
                            16
                        };
                        if value <= 0 || (value as u64).count_ones() != 1 {
                            return Err(Diagnostic::error(token.span, "an alignment is a power of two"));
                        }
                        found.aligned = Some(found.aligned.unwrap_or(1).max(value as u32));
                    }
                    _ => {
                        return Err(Diagnostic::error(
                            token.span,
                            format!("the attribute `{name}` is not supported"),
                        )
                        .with_help("steadytrace lays out types with `packed` and `aligned(N)` only"))
                    }
                }
                if self.eat(",")?.is_none() {
                    break;
                }
            }
            self.expect(")", "to close the attribute list")?;
            self.expect(")", "to close `__attribute__`")?;
        }
        Ok(found)
    }

    /// An integer constant: `N`, `-N`, or an enum constant defined before.
    fn constant(&mut self) -> Result<i64, Diagnostic> {
        let negative = self.eat("-")?.is_some();
        let token = self.next()?;
        let value = match token.tok {
            Tok::Int(n) => i64::try_from(n).unwrap_or(n as i64),
            Tok::Ident(name) => match self.types.enum_constant(&name) {
                Some((_, value)) => value,
                None => {
                    return Err(Diagnostic::error(
                        token.span,
                        format!("`{name}` is no constant defined before"),
                    ))
                }
            },
            other => {
                return Err(Diagnostic::error(
                    token.span,
                    format!("expected a number, found {}", other.describe()),
                ))
            }
        };
        Ok(if negative { value.wrapping_neg() } else { value })
    }

    /// The type words before a declarator: `unsigned long`, `const struct Foo`, `struct { ... }`, a typedef.
    fn type_specifier(&mut self) -> Result<CType, Diagnostic> {
        let mut words: Vec<String> = vec![];
        let mut span: Option<Span> = None;
        loop {
            let token = self.peek()?;
            let Tok::Ident(word) = token.tok else { break };
            match word.as_str() {
                "const" | "volatile" | "restrict" | "__restrict" | "register" | "static" | "extern" => {
                    self.next()?;
                }
                "struct" | "union" | "enum" if words.is_empty() => {
                    self.next()?;
                    return self.tagged(&word, token.span);
                }
                "unsigned" | "signed" | "char" | "short" | "int" | "long" | "_Bool" | "bool" | "float"
                | "double" | "void" => {
                    self.next()?;
                    span = Some(span.map_or(token.span, |s| s.to(token.span)));
                    words.push(word);
                }
                _ if words.is_empty() => {
                    self.next()?;
                    if let Some((size, signed)) = fixed_width(&word) {
                        return Ok(CType::Int { size, signed });
                    }
                    if let Some((_, ty)) = self.types.typedefs.iter().rev().find(|(n, _)| *n == word) {
                        return Ok(ty.clone());
                    }
                    return Err(Diagnostic::error(token.span, format!("unknown type `{word}`")).with_help(
                        "C types known here are the integer types, struct/union/enum, and the script's typedefs",
                    ));
                }
                _ => break,
            }
        }
        let Some(span) = span else {
            let found = self.peek()?;
            return Err(Diagnostic::error(
                found.span,
                format!("expected a type, found {}", found.tok.describe()),
            ));
        };
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        if words == ["void"] {
            return Ok(CType::Void);
        }
        if words.iter().any(|w| *w == "float" || *w == "double") {
            return Err(Diagnostic::error(span, "floating-point members are not supported"));
        }
        builtin_int(&words)
            .ok_or_else(|| Diagnostic::error(span, format!("`{}` is not a C type", words.join(" "))))
    }

    /// After `struct`, `union` or `enum`: a name, a body, or both.
    fn tagged(&mut self, keyword: &str, keyword_span: Span) -> Result<CType, Diagnostic> {
        let name = match self.peek()?.tok {
            Tok::Ident(name) if !is_attribute(&name) => {
                self.next()?;
                Some(name)
            }
            _ => None,
        };
        let has_body = self.eat("{")?.is_some();
        if keyword == "enum" {
            return self.enum_body(name, has_body, keyword_span);
        }
        let union = keyword == "union";
        let Some(name) = name.clone().filter(|_| !has_body) else {
            return self.record_body(union, name.unwrap_or_default(), has_body, keyword_span);
        };
        Ok(match self.types.record(union, &name) {
            Some(index) => CType::Record(index),
            None => CType::Named { union, name },
        })
    }

    fn enum_body(&mut self, name: Option<String>, has_body: bool, span: Span) -> Result<CType, Diagnostic> {
        if !has_body {
            let name = name.ok_or_else(|| Diagnostic::error(span, "expected a name or `{` after `enum`"))?;
            let index = self
                .types
                .enums
                .iter()
                .position(|e| e.name == name)
                .ok_or_else(|| Diagnostic::error(span, format!("`enum {name}` is not defined before")))?;
            return Ok(CType::Enum { index, size: enum_size(&self.types.enums[index]) });
        }
        let mut variants: Vec<(String, i64)> = vec![];
        let mut next = 0i64;
        while self.eat("}")?.is_none() {
            let token = self.next()?;
            let Tok::Ident(variant) = token.tok else {
                return Err(Diagnostic::error(
                    token.span,
                    format!("expected an enum constant's name, found {}", token.tok.describe()),
                ));
            };
            if self.eat("=")?.is_some() {
                next = match self.peek()?.tok {
                    Tok::Ident(other) if variants.iter().any(|(n, _)| *n == other) => {
                        self.next()?;
                        variants.iter().find(|(n, _)| *n == other).map(|&(_, v)| v).unwrap_or(0)
                    }
                    _ => self.constant()?,
                };
            }
            variants.push((variant, next));
            next = next.wrapping_add(1);
            if self.eat(",")?.is_none() {
                self.expect("}", "to close the enum")?;
                break;
            }
        }
        self.attributes()?;
        let def = EnumDef { name: name.unwrap_or_default(), variants };
        let size = enum_size(&def);
        self.types.enums.push(std::sync::Arc::new(def));
        Ok(CType::Enum { index: self.types.enums.len() - 1, size })
    }

    fn record_body(
        &mut self,
        union: bool,
        name: String,
        has_body: bool,
        span: Span,
    ) -> Result<CType, Diagnostic> {
        if !has_body {
            if name.is_empty() {
                let keyword = if union { "union" } else { "struct" };
                return Err(Diagnostic::error(span, format!("expected a name or `{{` after `{keyword}`")));
            }
            // `struct Foo;`
            self.types.records.push(RecordDef {
                name,
                union,
                size: 0,
                align: 1,
                fields: vec![],
                incomplete: true,
            });
            return Ok(CType::Record(self.types.records.len() - 1));
        }
        let mut members: Vec<(Declarator, Attributes)> = vec![];
        while self.eat("}")?.is_none() {
            let base = self.type_specifier()?;
            // `struct { ... };` inside a struct: its members are the enclosing struct's.
            if matches!(self.peek()?.tok, Tok::Punct(";")) {
                self.next()?;
                members.push((Declarator { name: None, ty: base, bits: None }, Attributes::default()));
                continue;
            }
            loop {
                let declarator = self.declarator(base.clone())?;
                let attributes = self.attributes()?;
                members.push((declarator, attributes));
                if self.eat(",")?.is_none() {
                    break;
                }
            }
            // The last member's `;` may be left out, as clang allows (with a warning).
            if matches!(self.peek()?.tok, Tok::Punct("}")) {
                continue;
            }
            self.expect(";", "after the member")?;
        }
        let attributes = self.attributes()?;
        let record = self.lay_out(union, name, members, attributes)?;
        // A definition completes an earlier declaration.
        self.types.records.push(record);
        Ok(CType::Record(self.types.records.len() - 1))
    }

    /// `*name[N]` (`: bits`): the declared name and its type built on `base`.
    fn declarator(&mut self, base: CType) -> Result<Declarator, Diagnostic> {
        let mut ty = base;
        while self.eat("*")?.is_some() {
            ty = CType::Pointer(Box::new(ty));
            while self.peek_word()?.is_some_and(|w| matches!(w.as_str(), "const" | "volatile" | "restrict")) {
                self.next()?;
            }
        }
        let name = match self.peek()?.tok {
            Tok::Ident(name) if !is_attribute(&name) => Some((name, self.next()?.span)),
            _ => None,
        };
        let mut lengths = vec![];
        while self.eat("[")?.is_some() {
            let at = self.peek()?.span;
            let len = self.constant()?;
            if len < 0 || len > u32::MAX as i64 / 2 {
                return Err(Diagnostic::error(at, "an array's length must be 0 or more"));
            }
            lengths.push(len as u32);
            self.expect("]", "after the array's length")?;
        }
        for len in lengths.into_iter().rev() {
            ty = CType::Array(Box::new(ty), len);
        }
        let bits = if self.eat(":")?.is_some() {
            let at = self.peek()?.span;
            let bits = self.constant()?;
            Some((
                u32::try_from(bits).map_err(|_| Diagnostic::error(at, "a bitfield's width is 0 or more"))?,
                at,
            ))
        } else {
            None
        };
        if name.is_none() && bits.is_none() {
            let found = self.peek()?;
            return Err(Diagnostic::error(
                found.span,
                format!("expected a member's name, found {}", found.tok.describe()),
            ));
        }
        Ok(Declarator { name, ty, bits })
    }

    /// Places the members: C's rules for x86-64.
    fn lay_out(
        &mut self,
        union: bool,
        name: String,
        members: Vec<(Declarator, Attributes)>,
        attributes: Attributes,
    ) -> Result<RecordDef, Diagnostic> {
        let mut fields = vec![];
        let mut bit = 0u64; // the next free bit, from the record's start
        let mut size = 0u64;
        let mut align = 1u32;
        for (declarator, member_attributes) in members {
            let described = self.types.describe(&declarator.ty);
            let span = declarator.name.as_ref().map(|(_, s)| *s).or(declarator.bits.map(|(_, s)| s));
            let (member_size, natural) =
                self.types.size_align(&declarator.ty, self.named).ok_or_else(|| {
                    let span = span.unwrap_or_default();
                    match declarator.ty {
                        CType::Array(..) => Diagnostic::error(span, format!("`{described}` is too big")),
                        _ => Diagnostic::error(span, format!("a member of type `{described}` has no size"))
                            .with_help(
                                "define the type before this struct, or point to it (`struct NAME *`)",
                            ),
                    }
                })?;
            let packed = attributes.packed || member_attributes.packed;
            let member_align = match member_attributes.aligned {
                Some(wanted) => wanted.max(if packed { 1 } else { natural }),
                None if packed => 1,
                None => natural,
            };
            if union {
                bit = 0;
            }
            let name = declarator.name.map(|(n, _)| n);
            match declarator.bits {
                Some((width, at)) => {
                    if !matches!(declarator.ty, CType::Int { .. } | CType::Char { .. } | CType::Enum { .. }) {
                        return Err(Diagnostic::error(at, format!("a bitfield of `{described}`")));
                    }
                    if width > member_size * 8 {
                        return Err(Diagnostic::error(
                            at,
                            format!("a bitfield of {width} bits is wider than its type `{described}`"),
                        ));
                    }
                    let unit = u64::from(member_size) * 8;
                    if width == 0 {
                        bit = bit.next_multiple_of(u64::from(natural) * 8);
                    } else {
                        // A bitfield that would straddle its type's unit starts the next one.
                        if !packed && bit % unit + u64::from(width) > unit {
                            bit = bit.next_multiple_of(u64::from(member_align) * 8);
                        }
                        let offset = (bit / 8) as u32;
                        fields.push(FieldDef {
                            name: name.clone(),
                            offset,
                            ty: declarator.ty,
                            bits: Some(((bit % 8) as u32, width)),
                        });
                        bit += u64::from(width);
                    }
                    // Unnamed bitfields do not align the record.
                    if name.is_some() {
                        align = align.max(member_align);
                    }
                }
                None => {
                    bit = bit.next_multiple_of(u64::from(member_align) * 8);
                    fields.push(FieldDef { name, offset: (bit / 8) as u32, ty: declarator.ty, bits: None });
                    bit += u64::from(member_size) * 8;
                    align = align.max(member_align);
                }
            }
            size = size.max(bit.div_ceil(8));
        }
        if attributes.packed {
            align = 1;
        }
        if let Some(wanted) = attributes.aligned {
            align = align.max(wanted);
        }
        let size = size.next_multiple_of(u64::from(align));
        let size =
            u32::try_from(size).map_err(|_| Diagnostic::error(Span::default(), "this struct is too big"))?;
        Ok(RecordDef { name, union, size, align, fields, incomplete: false })
    }
}

fn is_attribute(word: &str) -> bool {
    word == "__attribute__" || word == "__attribute"
}

/// Bytes of an enum: an `int` unless a value needs more.
fn enum_size(def: &EnumDef) -> u32 {
    let fits = def.variants.iter().all(|&(_, v)| i32::try_from(v).is_ok() || u32::try_from(v).is_ok());
    if fits {
        4
    } else {
        8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> CTypes {
        let mut lexer = Lexer::new(text);
        let mut types = CTypes::default();
        loop {
            lexer.skip_trivia().unwrap();
            if lexer.pos() == text.len() {
                return types;
            }
            definition(&mut lexer, &mut types, &|_, _| None).unwrap();
        }
    }

    fn error(text: &str) -> String {
        let mut types = CTypes::default();
        definition(&mut Lexer::new(text), &mut types, &|_, _| None).unwrap_err().message
    }

    fn offsets(record: &RecordDef) -> Vec<(String, u32)> {
        record.fields.iter().map(|f| (f.name.clone().unwrap_or_default(), f.offset)).collect()
    }

    #[test]
    fn plain_char_is_signed_as_the_architecture_has_it() {
        assert_eq!(builtin_int(&["char"]), Some(CType::Char { signed: bpf::arch::HOST.char_signed }));
        assert_eq!(builtin_int(&["signed", "char"]), Some(CType::Int { size: 1, signed: true }));
        assert_eq!(builtin_int(&["unsigned", "char"]), Some(CType::Int { size: 1, signed: false }));
    }

    #[test]
    fn members_sit_at_their_alignment_and_the_size_rounds_up() {
        let types = read("struct Foo { int a; char b[10]; struct Bar *p; unsigned int x:3; short s; };");
        let foo = &types.records[0];
        assert_eq!(
            offsets(foo),
            [("a".into(), 0), ("b".into(), 4), ("p".into(), 16), ("x".into(), 24), ("s".into(), 26)]
        );
        assert_eq!((foo.size, foo.align), (32, 8));
        assert_eq!(
            foo.fields[2].ty,
            CType::Pointer(Box::new(CType::Named { union: false, name: "Bar".into() }))
        );
    }

    #[test]
    fn packed_and_aligned_attributes_change_the_layout() {
        let types = read(
            "struct foo { int x; char y; int z; }\nstruct bar { int x; char y; int z; } __attribute__((packed))\n\
             struct bar2 { int x; char y; int z; } __attribute__((packed)) __attribute__((aligned(1)))\n\
             struct big { char c; } __attribute__((aligned(16)));\nstruct m { char c; int i __attribute__((aligned(8))); };",
        );
        let sizes: Vec<u32> = types.records.iter().map(|r| r.size).collect();
        assert_eq!(sizes, [12, 9, 9, 16, 16]);
        assert_eq!(types.records[4].fields[1].offset, 8);
    }

    #[test]
    fn bitfields_share_units_and_start_a_new_one_when_full() {
        let types = read(
            "struct f { unsigned long long x_0:1; unsigned long long x_1:1; unsigned long long x_2:2; };\n\
             struct g { char a; int b:30; int c:4; char d; };\nstruct h { char a:4; int :0; char b; };",
        );
        let f = &types.records[0];
        assert_eq!(f.size, 8);
        assert_eq!(
            f.fields.iter().map(|f| f.bits).collect::<Vec<_>>(),
            [Some((0, 1)), Some((1, 1)), Some((2, 2))]
        );
        let g = &types.records[1];
        // b (30 bits) does not fit after `a` in its 32-bit unit: bits 32..62; c starts the next unit.
        assert_eq!(g.fields[1].offset * 8 + g.fields[1].bits.unwrap().0, 32);
        assert_eq!(g.fields[2].offset * 8 + g.fields[2].bits.unwrap().0, 64);
        assert_eq!((g.fields[3].offset, g.size), (9, 12));
        let h = &types.records[2];
        assert_eq!((h.fields[1].offset, h.size), (4, 5));
    }

    #[test]
    fn unions_nested_and_unnamed_records() {
        let types = read(
            "union U { char c; long l; int a[3]; };\nstruct Foo { int x; struct Bar { int x; } bar; struct { char y; long z; }; };",
        );
        assert_eq!((types.records[0].size, types.records[0].union), (16, true));
        let foo = types.record(false, "Foo").unwrap();
        let bar = types.record(false, "Bar").unwrap();
        assert_eq!(types.records[foo].fields[1].ty, CType::Record(bar));
        assert_eq!(types.records[foo].fields[1].offset, 4);
        assert_eq!(types.records[foo].fields[2].name, None);
        assert_eq!((types.records[foo].fields[2].offset, types.records[foo].size), (8, 24));
    }

    #[test]
    fn enums_count_on_from_the_last_value() {
        let types = read("enum Foo { ONE = 1, TWO, NEG = -3, NEXT, ALIAS = ONE, };\nenum { A, B }");
        assert_eq!(
            types.enums[0].variants,
            [
                ("ONE".into(), 1),
                ("TWO".into(), 2),
                ("NEG".into(), -3),
                ("NEXT".into(), -2),
                ("ALIAS".into(), 1)
            ]
        );
        assert_eq!(types.enum_constant("B").map(|(_, v)| v), Some(1));
        assert_eq!(types.enums[0].variant(1), Some("ONE"));
    }

    #[test]
    fn typedefs_name_types() {
        let types = read("typedef unsigned int u32_t;\ntypedef struct P { u32_t a; u64 b; } P_t;\nstruct Q { P_t p; u32_t c; };");
        let q = types.record(false, "Q").unwrap();
        assert_eq!(types.records[q].size, 24);
        assert_eq!(types.records[q].fields[1].ty, CType::Int { size: 4, signed: false });
    }

    #[test]
    fn a_missing_last_semicolon_and_comments_are_accepted() {
        let types =
            read("struct x {unsigned long x}; struct y { int a; } /**/ __attribute__ /**/ ((packed)) /**/");
        assert_eq!(types.records[0].size, 8);
        assert_eq!(types.records[1].size, 4);
    }

    #[test]
    fn bad_definitions_are_errors() {
        assert_eq!(error("struct A { float f; };"), "floating-point members are not supported");
        assert_eq!(error("struct A { foo_t f; };"), "unknown type `foo_t`");
        assert_eq!(error("struct A { struct B b; };"), "a member of type `struct B` has no size");
        assert_eq!(error("struct A { long a[100000000][100]; };"), "`int64[100000000][100]` is too big");
        assert_eq!(error("struct A { char c:9; };"), "a bitfield of 9 bits is wider than its type `int8`");
        assert_eq!(
            error("struct A { int a; } __attribute__((weird));"),
            "the attribute `weird` is not supported"
        );
        assert_eq!(error("struct A { int a; } a;"), "variables cannot be declared here");
        assert!(error("struct A { int a; ").starts_with("expected a type"));
    }
}
