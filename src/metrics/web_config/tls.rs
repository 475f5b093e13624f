//! `tls_server_config` made into a rustls server configuration, with the exporter-toolkit's meaning of each
//! field. rustls offers less than Go's TLS, so some values promtool accepts are refused here, each saying why:
//! TLS 1.0 and 1.1, CBC and RSA-key-exchange cipher suites, and the P-521 curve.

use super::decode::{Placed, Problem, TlsFields};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `client_auth_type` asks of clients, as Go's `tls.ClientAuthType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// Asked for, not needed, not verified.
    Request,
    /// Needed, not verified.
    RequireAny,
    /// Verified against `client_ca_file` when given.
    VerifyIfGiven,
    RequireAndVerify,
}

impl ClientAuth {
    fn parse(name: &str) -> Option<ClientAuth> {
        Some(match name {
            "" | "NoClientCert" => ClientAuth::None,
            "RequestClientCert" => ClientAuth::Request,
            // RequireClientCert is kept by the exporter-toolkit for old files.
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAny,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
            _ => return None,
        })
    }
}

const CLIENT_AUTH_TYPES: &str =
    "NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert";

/// The server configuration `fields` ask for, with relative file names taken from `dir` (the web configuration
/// file's directory); `None` when they ask for no TLS (no certificate, key or client authentication).
pub fn server_config(fields: &TlsFields, dir: &Path) -> Result<Option<Arc<ServerConfig>>, Problem> {
    let given = |field: &Option<Placed<String>>| field.as_ref().filter(|f| !f.value.is_empty()).cloned();
    let (cert, key) = (given(&fields.cert_file), given(&fields.key_file));
    let (auth, ca) = (given(&fields.client_auth_type), given(&fields.client_ca_file));
    if cert.is_none() && key.is_none() && auth.is_none() && ca.is_none() {
        return Ok(None);
    }
    let at = fields.at.unwrap_or_default();
    let cert = cert.ok_or_else(|| {
        Problem::new(at, "tls_server_config has no cert_file").with_help("add `cert_file: server.crt` (PEM)")
    })?;
    let key = key.ok_or_else(|| {
        Problem::new(at, "tls_server_config has no key_file").with_help("add `key_file: server.key` (PEM)")
    })?;
    let chain = certificates(&cert, dir)?;
    let private_key = PrivateKeyDer::from_pem_file(file(&key, dir))
        .map_err(|e| Problem::new(key.at, format!("cannot read a private key from {}: {e}", key.value)))?;

    let client_auth = match &auth {
        None => ClientAuth::None,
        Some(name) => ClientAuth::parse(&name.value).ok_or_else(|| {
            Problem::new(name.at, format!("unknown client_auth_type `{}`", name.value))
                .with_help(format!("one of {CLIENT_AUTH_TYPES}"))
        })?,
    };
    if let Some(ca) = &ca {
        if client_auth == ClientAuth::None {
            return Err(Problem::new(
                ca.at,
                "client_ca_file is given, but client_auth_type asks for no client certificate",
            )
            .with_help("add `client_auth_type: RequireAndVerifyClientCert`"));
        }
    }
    let provider = Arc::new(provider(fields)?);
    let verifier =
        client_verifier(client_auth, ca.as_ref(), dir, &provider, auth.as_ref().map_or(at, |a| a.at))?;
    let versions = versions(fields)?;
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| Problem::new(at, format!("these TLS settings cannot work together: {e}")))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private_key)
        .map_err(|e| {
            Problem::new(key.at, format!("{} and {} do not make a key pair: {e}", cert.value, key.value))
                .with_help("key_file must hold the private key of cert_file's first certificate")
        })?;
    // Go's prefer_server_cipher_suites defaults to true.
    config.ignore_client_order = fields.prefer_server_cipher_suites.as_ref().is_none_or(|p| p.value);
    Ok(Some(Arc::new(config)))
}

/// `name` as a path: absolute, or relative to the web configuration file's directory.
fn file(name: &Placed<String>, dir: &Path) -> PathBuf {
    dir.join(&name.value)
}

fn certificates(cert: &Placed<String>, dir: &Path) -> Result<Vec<CertificateDer<'static>>, Problem> {
    let path = file(cert, dir);
    let unreadable = |e: &dyn std::fmt::Display| {
        Problem::new(cert.at, format!("cannot read certificates from {}: {e}", path.display()))
    };
    let chain = CertificateDer::pem_file_iter(&path)
        .map_err(|e| unreadable(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e))?;
    if chain.is_empty() {
        return Err(unreadable(&"it holds no PEM `CERTIFICATE` block"));
    }
    Ok(chain)
}

/// The client certificate verifier `auth` asks for; `at` is where `client_auth_type` is.
fn client_verifier(
    auth: ClientAuth,
    ca: Option<&Placed<String>>,
    dir: &Path,
    provider: &Arc<CryptoProvider>,
    at: usize,
) -> Result<Arc<dyn ClientCertVerifier>, Problem> {
    let verified = match auth {
        ClientAuth::None => return Ok(WebPkiClientVerifier::no_client_auth()),
        ClientAuth::Request | ClientAuth::RequireAny => {
            let algorithms = provider.signature_verification_algorithms;
            return Ok(Arc::new(AnyClientCertificate {
                mandatory: auth == ClientAuth::RequireAny,
                algorithms,
            }));
        }
        ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify => auth,
    };
    let ca = ca.ok_or_else(|| {
        Problem::new(at, "client certificates are to be verified, but there is no client_ca_file").with_help(
            "add `client_ca_file: ca.crt`, the certificate authority that signs the scrapers' certificates",
        )
    })?;
    let mut roots = RootCertStore::empty();
    for certificate in certificates(ca, dir)? {
        roots.add(certificate).map_err(|e| {
            Problem::new(ca.at, format!("{} holds a certificate that cannot be a root: {e}", ca.value))
        })?;
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
    let builder =
        if verified == ClientAuth::VerifyIfGiven { builder.allow_unauthenticated() } else { builder };
    builder.build().map_err(|e| Problem::new(ca.at, format!("cannot verify clients with {}: {e}", ca.value)))
}

/// ring's provider with the cipher suites and curves the fields choose (all of them when they choose none).
fn provider(fields: &TlsFields) -> Result<CryptoProvider, Problem> {
    // rustls 0.23.48 deprecates ring's provider for want of post-quantum key exchange (aws-lc-rs has it). ring
    // is kept: it builds with a C compiler alone, as the static and aarch64 cross builds need, and Go's TLS in
    // Prometheus 2.x offers no post-quantum exchange either.
    #[allow(deprecated)]
    let mut provider = ring::default_provider();
    if !fields.cipher_suites.is_empty() {
        let mut chosen = vec![];
        for name in &fields.cipher_suites {
            match cipher_suite(&name.value)? {
                // As in Go, TLS 1.3's suites are not configurable: naming one changes nothing.
                Suite::Tls13 => {}
                Suite::Tls12(suite) => chosen.push(suite),
                Suite::NotInRustls => {
                    return Err(Problem::new(
                        name.at,
                        format!("steadytrace's TLS (rustls) does not offer {}", name.value),
                    )
                    .with_help(format!(
                        "rustls offers only forward-secret AEAD suites for TLS 1.2: {}",
                        TLS12_SUITES.map(|(n, _)| n).join(", ")
                    )))
                }
                Suite::Unknown => {
                    return Err(Problem::new(name.at, format!("unknown cipher suite `{}`", name.value))
                        .with_help(format!("TLS 1.2's are {}", TLS12_SUITES.map(|(n, _)| n).join(", "))))
                }
            }
        }
        provider
            .cipher_suites
            .retain(|s| s.version() == &rustls::version::TLS13 || chosen.contains(&s.suite()));
    }
    if !fields.curve_preferences.is_empty() {
        let mut groups = vec![];
        for name in &fields.curve_preferences {
            let group = match name.value.as_str() {
                "X25519" => ring::kx_group::X25519,
                "CurveP256" => ring::kx_group::SECP256R1,
                "CurveP384" => ring::kx_group::SECP384R1,
                "CurveP521" => {
                    return Err(Problem::new(
                        name.at,
                        "steadytrace's TLS (rustls with ring) has no CurveP521",
                    )
                    .with_help("use X25519, CurveP256 or CurveP384"))
                }
                other => {
                    return Err(Problem::new(name.at, format!("unknown curve `{other}`"))
                        .with_help("one of X25519, CurveP256, CurveP384"))
                }
            };
            groups.push(group);
        }
        provider.kx_groups = groups;
    }
    Ok(provider)
}

enum Suite {
    Tls12(rustls::CipherSuite),
    Tls13,
    NotInRustls,
    Unknown,
}

const TLS12_SUITES: [(&str, rustls::CipherSuite); 6] = [
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// A cipher suite by the name Go's `tls.CipherSuites()` gives it (the names the exporter-toolkit takes).
fn cipher_suite(name: &str) -> Result<Suite, Problem> {
    if let Some((_, suite)) = TLS12_SUITES.iter().find(|(n, _)| *n == name) {
        return Ok(Suite::Tls12(*suite));
    }
    Ok(match name {
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => Suite::Tls13,
        "TLS_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_RSA_WITH_AES_256_CBC_SHA"
        | "TLS_RSA_WITH_AES_128_GCM_SHA256"
        | "TLS_RSA_WITH_AES_256_GCM_SHA384"
        | "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA" => Suite::NotInRustls,
        _ => Suite::Unknown,
    })
}

/// TLS 1.2 and 1.3 between `min_version` and `max_version` (defaults TLS12 and TLS13, as the exporter-toolkit's).
fn versions(fields: &TlsFields) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, Problem> {
    let version = |field: &Option<Placed<String>>, default: u8| -> Result<(u8, usize), Problem> {
        let Some(name) = field else { return Ok((default, 0)) };
        match name.value.as_str() {
            "TLS12" => Ok((2, name.at)),
            "TLS13" => Ok((3, name.at)),
            "TLS10" | "TLS11" => {
                Err(Problem::new(name.at, format!("steadytrace's TLS (rustls) has no {}", name.value))
                    .with_help("TLS 1.0 and 1.1 are deprecated (RFC 8996); use TLS12 or TLS13"))
            }
            other => Err(Problem::new(name.at, format!("unknown TLS version `{other}`"))
                .with_help("one of TLS12, TLS13")),
        }
    };
    let (min, min_at) = version(&fields.min_version, 2)?;
    let (max, _) = version(&fields.max_version, 3)?;
    if min > max {
        return Err(Problem::new(min_at, "min_version is above max_version: no TLS version is left"));
    }
    Ok([(2, &rustls::version::TLS12), (3, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(v, _)| (min..=max).contains(v))
        .map(|(_, version)| version)
        .collect())
}

/// `RequestClientCert` and `RequireAnyClientCert`: a client's certificate is taken without verifying who issued
/// it (Go's meaning); the handshake still proves the client holds its key.
#[derive(Debug)]
struct AnyClientCertificate {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCertificate {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
