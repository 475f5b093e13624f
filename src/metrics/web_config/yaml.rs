//! The web configuration file as a tree of YAML nodes, each with the place it starts at, so that an error
//! names the line of the offending value. yaml-rust2's event parser reads the text; its own document type
//! drops the places.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A place in the text: the byte offset of where a node starts.
pub type Offset = usize;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A scalar's text; `plain` when it was written without quotes (only a plain scalar can be null or a bool).
    Scalar {
        text: String,
        plain: bool,
    },
    Sequence(Vec<Node>),
    Mapping(Vec<(Node, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub at: Offset,
}

impl Node {
    /// Null as YAML 1.1 (the Go parser's) spells it: empty, `~` or `null` in its three cases, unquoted.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }
}

/// A YAML syntax error: the message and where.
#[derive(Debug, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    pub at: Offset,
}

/// The document in `text` (`None` for an empty file), or the first syntax error.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder { text, stack: vec![], anchors: HashMap::new(), document: None, error: None };
    let mut parser = Parser::new_from_str(text);
    parser
        .load(&mut builder, false)
        .map_err(|e| SyntaxError { message: e.info().to_string(), at: byte_offset(text, e.marker()) })?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder.document)
}

/// The byte offset of a marker, which counts characters.
fn byte_offset(text: &str, marker: &Marker) -> Offset {
    text.char_indices().nth(marker.index()).map_or(text.len(), |(i, _)| i)
}

/// Collections being read, innermost last, with the anchor each was given.
enum Open {
    Sequence(Node, usize),
    Mapping(Node, usize, Option<Node>),
}

struct Builder<'a> {
    text: &'a str,
    stack: Vec<Open>,
    anchors: HashMap<usize, Node>,
    document: Option<Node>,
    error: Option<SyntaxError>,
}

impl Builder<'_> {
    /// Places a finished node in the collection it belongs to (or as the document).
    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.document = Some(node),
            Some(Open::Sequence(Node { value: Value::Sequence(items), .. }, _)) => items.push(node),
            Some(Open::Mapping(Node { value: Value::Mapping(pairs), .. }, _, key)) => match key.take() {
                None => *key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
            Some(_) => unreachable!("open collections hold their own kind"),
        }
    }
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, event: Event, marker: Marker) {
        let at = byte_offset(self.text, &marker);
        match event {
            Event::Scalar(text, style, anchor, _) => {
                let plain = style == TScalarStyle::Plain;
                self.finish(Node { value: Value::Scalar { text, plain }, at }, anchor);
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Open::Sequence(Node { value: Value::Sequence(vec![]), at }, anchor))
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Open::Mapping(Node { value: Value::Mapping(vec![]), at }, anchor, None))
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Open::Sequence(node, anchor) | Open::Mapping(node, anchor, _)) => {
                    self.finish(node, anchor)
                }
                None => {}
            },
            Event::Alias(anchor) => match self.anchors.get(&anchor).cloned() {
                Some(node) => self.finish(Node { at, ..node }, 0),
                None if self.error.is_none() => {
                    self.error = Some(SyntaxError { message: "an alias of an unknown anchor".into(), at })
                }
                None => {}
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str, at: Offset) -> Node {
        Node { value: Value::Scalar { text: text.into(), plain: true }, at }
    }

    #[test]
    fn nodes_keep_where_they_start() {
        let text = "a:\n  b: x\nc: [1, 2]\n";
        let Some(Node { value: Value::Mapping(pairs), .. }) = parse(text).unwrap() else { panic!() };
        assert_eq!(pairs[0].0, scalar("a", 0));
        let Value::Mapping(inner) = &pairs[0].1.value else { panic!() };
        assert_eq!(inner[0], (scalar("b", 5), scalar("x", 8)));
        let Value::Sequence(items) = &pairs[1].1.value else { panic!() };
        assert_eq!(items, &[scalar("1", 14), scalar("2", 17)]);
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# only a comment\n").unwrap(), None);
    }

    #[test]
    fn aliases_quotes_and_nulls() {
        let text = "a: &x 'q'\nb: *x\nc: ~\nd:\n";
        let Some(Node { value: Value::Mapping(pairs), .. }) = parse(text).unwrap() else { panic!() };
        assert_eq!(pairs[1].1.value, Value::Scalar { text: "q".into(), plain: false });
        assert!(pairs[2].1.is_null() && pairs[3].1.is_null() && !pairs[0].1.is_null());
    }

    #[test]
    fn syntax_errors_say_where() {
        let error = parse("a: b\n  c: [\n").unwrap_err();
        assert!(error.at >= 5, "{error:?}");
        let error = parse("a: *nowhere\n").unwrap_err();
        assert!(!error.message.is_empty());
    }
}
