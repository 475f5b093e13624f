//! `--metrics-web-config FILE`: TLS, client certificates, basic authentication and extra response headers for the
//! metrics endpoint, from the web configuration file every Prometheus exporter reads (the exporter-toolkit's
//! format: `tls_server_config`, `http_server_config`, `basic_auth_users`). The file is read once, at start; a
//! problem in it stops steadytrace there, naming the line, rather than serving something other than what it asks.

mod basic_auth;
mod decode;
mod tls;
mod yaml;

pub use basic_auth::Users;
use decode::{Fields, Placed, Problem};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// What the endpoint does beyond plain HTTP.
pub struct WebConfig {
    /// TLS, when `tls_server_config` asks for it.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: Users,
    /// `http_server_config.headers`: sent with every answer.
    pub headers: Vec<(String, String)>,
}

impl WebConfig {
    /// Plain HTTP, no authentication: what the endpoint is without `--metrics-web-config`.
    pub fn open() -> WebConfig {
        WebConfig { tls: None, users: Users::new(HashMap::new()), headers: vec![] }
    }

    /// Reads `path`; an error is rendered for the terminal, with the file's line and the offending text
    /// underlined.
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("steadytrace: --metrics-web-config: cannot read {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        from_text(&text, dir).map_err(|problem| render(path, &text, &problem))
    }

    /// Whether the endpoint speaks plain HTTP with passwords on it (said at start: they cross the network in
    /// the clear).
    pub fn passwords_in_clear(&self) -> bool {
        self.tls.is_none() && !self.users.is_empty()
    }
}

fn from_text(text: &str, dir: &Path) -> Result<WebConfig, Problem> {
    let document =
        yaml::parse(text).map_err(|e| Problem::new(e.at, format!("this is not YAML: {}", e.message)))?;
    let Fields { tls, http2: _, headers, users } = decode::fields(document.as_ref())?;
    let headers = headers.into_iter().map(checked_header).collect::<Result<_, _>>()?;
    let mut hashes = HashMap::new();
    for (user, hash) in users {
        if let Some(why) = basic_auth::check_hash(&hash.value) {
            return Err(Problem::new(
                hash.at,
                format!("the password of `{}` is not a bcrypt hash: {why}", user.value),
            )
            .with_help("make one with `htpasswd -nbBC 10 \"\" PASSWORD | tr -d ':\\n'`"));
        }
        hashes.insert(user.value, hash.value);
    }
    Ok(WebConfig { tls: tls::server_config(&tls, dir)?, users: Users::new(hashes), headers })
}

/// The headers the exporter-toolkit lets a file add, with the values it allows (any, where none are listed).
const HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

fn checked_header((name, value): (Placed<String>, Placed<String>)) -> Result<(String, String), Problem> {
    let Some((_, allowed)) = HEADERS.iter().find(|(n, _)| *n == name.value) else {
        return Err(Problem::new(name.at, format!("the header `{}` cannot be set here", name.value))
            .with_help(format!(
                "these can: {}",
                HEADERS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )));
    };
    if !allowed.is_empty() && !allowed.contains(&value.value.as_str()) {
        return Err(Problem::new(value.at, format!("{} cannot be `{}`", name.value, value.value))
            .with_help(format!("one of {}", allowed.join(", "))));
    }
    if value.value.contains(['\r', '\n']) {
        return Err(Problem::new(value.at, format!("the value of {} holds a line break", name.value)));
    }
    Ok((name.value, value.value))
}

/// `FILE:LINE:COL: ERROR: message`, the line with the offending text underlined, and help.
fn render(path: &Path, text: &str, problem: &Problem) -> String {
    use crate::lang::diag::{Diagnostic, Source};
    use crate::lang::span::Span;
    let name = path.display().to_string();
    let source = Source { name: &name, text };
    let end = token_end(text, problem.at);
    let mut diagnostic = Diagnostic::error(Span::new(problem.at, end), problem.message.clone());
    if let Some(help) = &problem.help {
        diagnostic = diagnostic.with_help(help.clone());
    }
    source.render(&diagnostic).trim_end().to_string()
}

/// Where the value starting at `at` ends on its line: before a `: ` that follows a key, a ` #` comment, or a
/// flow sequence's `,`/`]`.
fn token_end(text: &str, at: usize) -> usize {
    let rest = text.get(at..).unwrap_or_default();
    let line = rest.split('\n').next().unwrap_or_default();
    let quoted = line.starts_with(['"', '\'']);
    let mut end = line.len();
    if !quoted {
        for stop in [": ", " #", ",", "]"] {
            if let Some(i) = line.find(stop) {
                end = end.min(i);
            }
        }
        if line.ends_with(':') && end == line.len() {
            end -= 1;
        }
    }
    at + line[..end].trim_end().len().max(1).min(line.len().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        match from_text(text, Path::new("/nonexistent")) {
            Ok(_) => panic!("accepted: {text}"),
            Err(problem) => render(Path::new("web.yml"), text, &problem),
        }
    }

    #[test]
    fn errors_name_the_line_and_underline_the_text() {
        assert_eq!(
            error("tls_server_config:\n  cert_fil: a.crt # old\n"),
            "web.yml:2:3: ERROR: tls_server_config has no field `cert_fil`\n  cert_fil: a.crt # old\n  ^^^^^^^^\nhelp: did you mean `cert_file`?"
        );
        let missing = error("tls_server_config:\n  cert_file: missing.crt\n  key_file: k\n");
        assert!(
            missing
                .starts_with("web.yml:2:14: ERROR: cannot read certificates from /nonexistent/missing.crt"),
            "{missing}"
        );
        assert!(missing.ends_with("\n             ^^^^^^^^^^^"), "{missing}");
        let hash = error("basic_auth_users:\n  alice: plain\n");
        assert!(
            hash.starts_with("web.yml:2:10: ERROR: the password of `alice` is not a bcrypt hash"),
            "{hash}"
        );
        let header = error("http_server_config:\n  headers:\n    X-Frame-Options: allow\n");
        assert!(header.contains("web.yml:3:22: ERROR: X-Frame-Options cannot be `allow`"), "{header}");
        assert!(error("http_server_config:\n  headers:\n    Server: x\n").contains("cannot be set here"));
        assert!(error("a: [\n").contains("this is not YAML"));
        assert!(error("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n")
            .contains("no cert_file"));
    }

    #[test]
    fn what_asks_for_nothing_is_plain_http() {
        for text in [
            "",
            "tls_server_config:\n",
            "tls_server_config:\n  min_version: TLS13\n",
            "http_server_config:\n  http2: false\n",
        ] {
            let config = from_text(text, Path::new("/")).unwrap_or_else(|p| panic!("{text}: {p:?}"));
            assert!(config.tls.is_none() && config.users.is_empty() && !config.passwords_in_clear());
        }
        let hash = bcrypt::hash("x", 4).unwrap();
        let users = from_text(&format!("basic_auth_users:\n  a: {hash}\n"), Path::new("/")).unwrap();
        assert!(users.passwords_in_clear());
    }

    /// Random text, and random edits of a good file: reading never panics.
    #[test]
    fn random_files_never_panic() {
        let good = "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\nhttp_server_config:\n  headers: {X-Frame-Options: deny}\nbasic_auth_users:\n  u: '$2y$10$x'\n";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let pieces = [
            ":",
            " ",
            "\n",
            "- ",
            "[",
            "]",
            "{",
            "}",
            "'",
            "\"",
            "&a ",
            "*a",
            "#",
            "\t",
            "é",
            "tls_server_config",
            "cert_file",
        ];
        for _ in 0..20_000 {
            let mut text: Vec<char> = good.chars().collect();
            for _ in 0..next() % 6 {
                let at = (next() % (text.len() as u64 + 1)) as usize;
                match next() % 3 {
                    0 if at < text.len() => {
                        text.remove(at);
                    }
                    _ => {
                        let piece = pieces[(next() % pieces.len() as u64) as usize];
                        for (i, c) in piece.chars().enumerate() {
                            text.insert(at + i, c);
                        }
                    }
                }
            }
            let text: String = text.into_iter().collect();
            if let Err(problem) = from_text(&text, Path::new("/nonexistent")) {
                let _ = render(Path::new("f"), &text, &problem);
            }
        }
    }
}
