//! The web configuration's fields read from its YAML tree as the Prometheus exporter-toolkit reads them (Go's
//! yaml.v2 in strict mode): an unknown or repeated field, or a value of the wrong shape, is an error at its place;
//! a null value leaves the field's default; a scalar is taken as text where text is wanted.

use super::yaml::{Node, Offset, Value};

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed<T> {
    pub value: T,
    pub at: Offset,
}

/// An error at a place in the file, with what to do instead when there is something to say.
#[derive(Debug, PartialEq)]
pub struct Problem {
    pub message: String,
    pub at: Offset,
    pub help: Option<String>,
}

impl Problem {
    pub fn new(at: Offset, message: impl Into<String>) -> Problem {
        Problem { message: message.into(), at, help: None }
    }
    pub fn with_help(mut self, help: impl Into<String>) -> Problem {
        self.help = Some(help.into());
        self
    }
}

/// Every field of the file; strings left empty where the file leaves them out (the exporter-toolkit's defaults).
#[derive(Debug, Default, PartialEq)]
pub struct Fields {
    pub tls: TlsFields,
    pub http2: Option<Placed<bool>>,
    pub headers: Vec<NamedString>,
    pub users: Vec<NamedString>,
}

/// A name and its string value (a header and its value, a user and their hash).
pub type NamedString = (Placed<String>, Placed<String>);

#[derive(Debug, Default, PartialEq)]
pub struct TlsFields {
    /// Where `tls_server_config` is, when it is there.
    pub at: Option<Offset>,
    pub cert_file: Option<Placed<String>>,
    pub key_file: Option<Placed<String>>,
    pub client_auth_type: Option<Placed<String>>,
    pub client_ca_file: Option<Placed<String>>,
    pub cipher_suites: Vec<Placed<String>>,
    pub curve_preferences: Vec<Placed<String>>,
    pub min_version: Option<Placed<String>>,
    pub max_version: Option<Placed<String>>,
    pub prefer_server_cipher_suites: Option<Placed<bool>>,
}

const TOP: &[&str] = &["tls_server_config", "http_server_config", "basic_auth_users"];
const TLS: &[&str] = &[
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "cipher_suites",
    "curve_preferences",
    "min_version",
    "max_version",
    "prefer_server_cipher_suites",
];
const HTTP: &[&str] = &["http2", "headers"];

/// The fields of the document (`None`: an empty file, which asks for nothing).
pub fn fields(document: Option<&Node>) -> Result<Fields, Problem> {
    let mut fields = Fields::default();
    let Some(document) = document.filter(|d| !d.is_null()) else { return Ok(fields) };
    for (key, key_at, value) in strict_mapping(document, "the web configuration", TOP)? {
        match key.as_str() {
            "tls_server_config" => fields.tls = tls_fields(value, key_at)?,
            "http_server_config" => {
                for (key, _, value) in strict_mapping(value, "http_server_config", HTTP)? {
                    match key.as_str() {
                        "http2" => fields.http2 = boolean(value)?,
                        _ => fields.headers = string_map(value, "headers")?,
                    }
                }
            }
            _ => fields.users = string_map(value, "basic_auth_users")?,
        }
    }
    Ok(fields)
}

/// `tls_server_config`'s fields; `at` is where its name is.
fn tls_fields(node: &Node, at: Offset) -> Result<TlsFields, Problem> {
    let mut tls = TlsFields { at: Some(at), ..TlsFields::default() };
    for (key, _, value) in strict_mapping(node, "tls_server_config", TLS)? {
        match key.as_str() {
            "cert_file" => tls.cert_file = string(value)?,
            "key_file" => tls.key_file = string(value)?,
            "client_auth_type" => tls.client_auth_type = string(value)?,
            "client_ca_file" => tls.client_ca_file = string(value)?,
            "cipher_suites" => tls.cipher_suites = strings(value, "cipher_suites")?,
            "curve_preferences" => tls.curve_preferences = strings(value, "curve_preferences")?,
            "min_version" => tls.min_version = string(value)?,
            "max_version" => tls.max_version = string(value)?,
            _ => tls.prefer_server_cipher_suites = boolean(value)?,
        }
    }
    Ok(tls)
}

/// The pairs of a mapping whose keys must be among `known`, each once, with where each key is; a null node is
/// an empty mapping, and a null value is left out (it leaves the field's default).
fn strict_mapping<'a>(
    node: &'a Node,
    what: &str,
    known: &[&str],
) -> Result<Vec<(String, Offset, &'a Node)>, Problem> {
    let mut seen: Vec<String> = vec![];
    let mut out = vec![];
    for (key, value) in mapping(node, what)? {
        let name = key_text(key)?;
        if !known.contains(&name.as_str()) {
            let mut problem = Problem::new(key.at, format!("{what} has no field `{name}`"));
            problem = match crate::lang::suggest::closest(&name, known.iter().copied()) {
                Some(close) => problem.with_help(format!("did you mean `{close}`?")),
                None => problem.with_help(format!("its fields are {}", known.join(", "))),
            };
            return Err(problem);
        }
        if seen.contains(&name) {
            return Err(Problem::new(key.at, format!("`{name}` is set twice in {what}"))
                .with_help("keep one of the two"));
        }
        seen.push(name.clone());
        if !value.is_null() {
            out.push((name, key.at, value));
        }
    }
    Ok(out)
}

fn mapping<'a>(node: &'a Node, what: &str) -> Result<&'a [(Node, Node)], Problem> {
    match &node.value {
        Value::Mapping(pairs) => Ok(pairs),
        _ if node.is_null() => Ok(&[]),
        other => Err(Problem::new(
            node.at,
            format!("{what} is a mapping of names to values, not {}", shape(other)),
        )),
    }
}

fn key_text(key: &Node) -> Result<String, Problem> {
    match &key.value {
        Value::Scalar { text, .. } => Ok(text.clone()),
        other => Err(Problem::new(key.at, format!("a key is a name, not {}", shape(other)))),
    }
}

/// A scalar as text; a null leaves the default.
fn string(node: &Node) -> Result<Option<Placed<String>>, Problem> {
    if node.is_null() {
        return Ok(None);
    }
    match &node.value {
        Value::Scalar { text, .. } => Ok(Some(Placed { value: text.clone(), at: node.at })),
        other => Err(Problem::new(node.at, format!("expected a string here, not {}", shape(other)))),
    }
}

/// A sequence of strings (a null item is the empty string, as in Go).
fn strings(node: &Node, what: &str) -> Result<Vec<Placed<String>>, Problem> {
    match &node.value {
        Value::Sequence(items) => items
            .iter()
            .map(|item| Ok(string(item)?.unwrap_or(Placed { value: String::new(), at: item.at })))
            .collect(),
        other => Err(Problem::new(node.at, format!("{what} is a list, not {}", shape(other)))
            .with_help(format!("write it as `{what}: [A, B]` or one `- A` per line"))),
    }
}

/// A mapping of strings to strings, each key once (a null value is the empty string).
fn string_map(node: &Node, what: &str) -> Result<Vec<NamedString>, Problem> {
    let mut out: Vec<NamedString> = vec![];
    for (key, value) in mapping(node, what)? {
        let name = Placed { value: key_text(key)?, at: key.at };
        if out.iter().any(|(k, _)| k.value == name.value) {
            return Err(Problem::new(key.at, format!("`{}` is set twice in {what}", name.value)));
        }
        let value = string(value)?.unwrap_or(Placed { value: String::new(), at: value.at });
        out.push((name, value));
    }
    Ok(out)
}

/// A YAML 1.1 boolean, as Go's yaml.v2 reads one: only an unquoted scalar can be one.
fn boolean(node: &Node) -> Result<Option<Placed<bool>>, Problem> {
    if node.is_null() {
        return Ok(None);
    }
    let value = match &node.value {
        Value::Scalar { text, plain: true } => match text.as_str() {
            "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
            "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
                Some(false)
            }
            _ => None,
        },
        _ => None,
    };
    match value {
        Some(value) => Ok(Some(Placed { value, at: node.at })),
        None => Err(Problem::new(node.at, "expected true or false here")
            .with_help("write `true` or `false`, unquoted")),
    }
}

fn shape(value: &Value) -> &'static str {
    match value {
        Value::Scalar { .. } => "a single value",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::super::yaml;
    use super::*;

    fn read(text: &str) -> Result<Fields, Problem> {
        fields(yaml::parse(text).unwrap().as_ref())
    }

    #[test]
    fn every_field_is_read_with_its_place() {
        let text = "tls_server_config:\n  cert_file: a.crt\n  key_file: \"a.key\"\n  cipher_suites: [X, Y]\n  prefer_server_cipher_suites: no\nhttp_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\nbasic_auth_users:\n  alice: $2y$10$abc\n  bob:\n";
        let f = read(text).unwrap();
        assert_eq!(f.tls.cert_file, Some(Placed { value: "a.crt".into(), at: 32 }));
        assert_eq!(f.tls.key_file.unwrap().value, "a.key");
        assert_eq!(f.tls.cipher_suites.iter().map(|c| c.value.as_str()).collect::<Vec<_>>(), ["X", "Y"]);
        assert!(!f.tls.prefer_server_cipher_suites.unwrap().value);
        assert!(!f.http2.unwrap().value);
        assert_eq!(f.headers[0].0.value, "X-Frame-Options");
        assert_eq!(f.users.len(), 2);
        assert_eq!(f.users[1].1.value, "");
        assert_eq!(read("").unwrap(), Fields::default());
        assert_eq!(read("tls_server_config:\n").unwrap().tls.at, None);
    }

    #[test]
    fn strict_as_the_exporter_toolkit() {
        let unknown = read("tls_server_config:\n  cert_fil: a\n").unwrap_err();
        assert_eq!((unknown.at, unknown.help.as_deref()), (21, Some("did you mean `cert_file`?")));
        assert!(read("basic_auth_users:\n  a: x\n  a: y\n").unwrap_err().message.contains("twice"));
        assert!(read("tls_server_config:\n  cert_file: a\n  cert_file: b\n")
            .unwrap_err()
            .message
            .contains("twice"));
        assert!(read("junk").is_err());
        assert!(read("- a\n").is_err());
        assert!(read("tls_server_config:\n  cert_file: [a]\n").is_err());
        assert!(read("tls_server_config:\n  cipher_suites: X\n").is_err());
        assert!(read("http_server_config:\n  http2: 'true'\n").is_err());
        assert!(read("http_server_config:\n  http2: maybe\n").is_err());
        assert!(read("tls_server_config:\n  cert_file: 123\n").is_ok());
    }
}
