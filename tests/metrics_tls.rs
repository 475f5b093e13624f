//! `--metrics-web-config`: the metrics endpoint closed to strangers. A real Prometheus scrapes it over TLS with a
//! client certificate and basic auth; curl and raw sockets are refused as they should be, and counted by reason;
//! a handshake that never finishes does not hold up other scrapes; and promtool (`check web-config`, the
//! Prometheus project's own reader of the format) and steadytrace agree on a set of good and bad files.

mod common;

use common::prometheus::{free_port, installed, Prometheus};
use common::{can_trace, skip, stderr, stdout, tracer, wait_for_stderr_line, workload, Reaped};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "alice";
const PASSWORD: &str = "s3cret";

/// A certificate authority, a server certificate for `localhost` and 127.0.0.1, a client certificate it signed,
/// and a stranger's self-signed one, as PEM files in a directory removed when dropped.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(test: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("steadytrace-tls-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the certificates");
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "steadytrace test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();

        let leaf = |names: &[&str],
                    usage: ExtendedKeyUsagePurpose,
                    issuer: Option<&CertifiedIssuer<'_, KeyPair>>| {
            let mut params =
                CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
            params.distinguished_name.push(DnType::CommonName, names[0]);
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().unwrap();
            let cert = match issuer {
                Some(issuer) => params.signed_by(&key, issuer).unwrap(),
                None => params.self_signed(&key).unwrap(),
            };
            (cert.pem(), key.serialize_pem())
        };
        let files = [
            ("server", leaf(&["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth, Some(&ca))),
            ("client", leaf(&["scraper"], ExtendedKeyUsagePurpose::ClientAuth, Some(&ca))),
            ("stranger", leaf(&["stranger"], ExtendedKeyUsagePurpose::ClientAuth, None)),
        ];
        for (name, (cert, key)) in files {
            std::fs::write(dir.join(format!("{name}.crt")), cert).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), key).unwrap();
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Writes `text` as the web configuration `name` beside the certificates (which it names relatively).
    fn web_config(&self, name: &str, text: &str) -> String {
        std::fs::write(self.dir.join(name), text).unwrap();
        self.path(name)
    }

    /// TLS with verified client certificates, and basic auth for [`USER`].
    fn closed_config(&self) -> String {
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        self.web_config(
            "web.yml",
            &format!(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\nbasic_auth_users:\n  {USER}: '{hash}'\n"
            ),
        )
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The tracer serving `script`'s maps on 127.0.0.1:`port` as `web_config` says, once it has attached.
fn closed_tracer(port: u16, web_config: &str, extra: &[&str], script: &str) -> Reaped {
    let address = format!("127.0.0.1:{port}");
    let mut args = vec!["--metrics", &address, "--metrics-web-config", web_config];
    args.extend_from_slice(extra);
    args.extend(["-e", script]);
    let mut tracer =
        Reaped::spawn(tracer(&args).stdout(Stdio::null()).stderr(Stdio::piped())).expect("start the tracer");
    drop(wait_for_stderr_line(&mut tracer, "Attached"));
    tracer
}

#[test]
fn a_real_prometheus_scrapes_over_tls_with_basic_auth_and_is_refused_without_them() {
    let test = "a_real_prometheus_scrapes_over_tls_with_basic_auth_and_is_refused_without_them";
    if !can_trace(test) || !installed(test) {
        return;
    }
    const CALLS: u32 = 1234;
    let pki = Pki::new("prometheus");
    let port = free_port();
    let command = format!("sh -c '{} getppid {CALLS} 1; sleep 40'", workload().display());
    let script = r#"tracepoint:syscalls:sys_enter_getppid /comm == "workload"/ { @calls = count(); }"#;
    let _tracer = closed_tracer(port, &pki.closed_config(), &["-c", &command], script);
    let job = |name: &str, certificate: bool, password: &str| {
        let client = if certificate {
            format!(", cert_file: '{}', key_file: '{}'", pki.path("client.crt"), pki.path("client.key"))
        } else {
            String::new()
        };
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config: {{ ca_file: '{}', server_name: localhost{client} }}\n    basic_auth: {{ username: {USER}, password: '{password}' }}\n    static_configs: [ {{ targets: ['127.0.0.1:{port}'] }} ]\n",
            pki.path("ca.crt")
        )
    };
    let prometheus = Prometheus::start_jobs(&format!(
        "{}{}{}",
        job("closed", true, PASSWORD),
        job("wrong_password", true, "guess"),
        job("no_client_certificate", false, PASSWORD)
    ));
    let wanted = f64::from(CALLS);
    let queries = [
        r#"steadytrace_map_calls_total{job="closed"}"#,
        r#"up{job="closed"}"#,
        r#"up{job="wrong_password"}"#,
        r#"up{job="no_client_certificate"}"#,
        // The refusals of the other two jobs, as the closed job's scrapes read them (they go on growing).
        r#"clamp_max(steadytrace_metrics_requests_refused_total{job="closed",reason="unauthorized"}, 1)"#,
        r#"clamp_max(steadytrace_metrics_requests_refused_total{job="closed",reason="tls_handshake"}, 1)"#,
        r#"clamp_max(steadytrace_metrics_scrapes_total{job="closed"}, 1)"#,
    ];
    let last =
        prometheus.wait_for(&queries, &[wanted, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0], Duration::from_secs(30));
    assert_eq!(
        last,
        [Some(wanted), Some(1.0), Some(0.0), Some(0.0), Some(1.0), Some(1.0), Some(1.0)],
        "as Prometheus read them: {}",
        queries.join(", ")
    );
}

/// curl against the endpoint: its exit code, the answer's status code (0 when there was none) and its head
/// and body.
fn curl(port: u16, pki: &Pki, args: &[&str]) -> (i32, u32, String) {
    let resolve = format!("localhost:{port}:127.0.0.1");
    let output: Output = Command::new("curl")
        .args([
            "-s",
            "-i",
            "-m",
            "2",
            "--resolve",
            &resolve,
            "--cacert",
            &pki.path("ca.crt"),
            "-w",
            "\n%{http_code}",
        ])
        .args(args)
        .output()
        .expect("run curl");
    let text = stdout(&output);
    let (answer, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (output.status.code().unwrap_or(-1), code.trim().parse().unwrap_or(0), answer.to_string())
}

#[test]
fn plain_http_strangers_wrong_passwords_and_stalled_handshakes_are_refused_and_counted() {
    let test = "plain_http_strangers_wrong_passwords_and_stalled_handshakes_are_refused_and_counted";
    if !can_trace(test) {
        return;
    }
    if Command::new("curl").arg("--version").output().is_err() {
        skip(test, "curl is not installed");
        return;
    }
    let pki = Pki::new("refusals");
    let port = free_port();
    let _tracer = closed_tracer(port, &pki.closed_config(), &[], "BEGIN { @started = count(); }");
    let url = format!("https://localhost:{port}/metrics");
    let (cert, key) = (pki.path("client.crt"), pki.path("client.key"));
    let credentials = format!("{USER}:{PASSWORD}");
    let scrape = || curl(port, &pki, &["--cert", &cert, "--key", &key, "-u", &credentials, &url]);

    let (exit, code, answer) = scrape();
    assert_eq!((exit, code), (0, 200), "a scrape with the client certificate and the password:\n{answer}");
    assert!(answer.contains("\nsteadytrace_map_started_total 1\n"), "{answer}");
    assert!(answer.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "the configured header:\n{answer}");

    let plain = curl(port, &pki, &[&format!("http://127.0.0.1:{port}/metrics")]);
    assert_eq!(plain.1, 400, "plain HTTP to the TLS port: {plain:?}");
    assert!(plain.2.ends_with("Client sent an HTTP request to an HTTPS server.\n"), "{plain:?}");

    let wrong = format!("{USER}:guess");
    let (_, code, answer) = curl(port, &pki, &["--cert", &cert, "--key", &key, "-u", &wrong, &url]);
    assert_eq!(code, 401, "a wrong password:\n{answer}");
    assert!(answer.contains("\r\nWWW-Authenticate: Basic\r\n"), "{answer}");
    let (_, code, _) = curl(port, &pki, &["--cert", &cert, "--key", &key, &url]);
    assert_eq!(code, 401, "no password");

    let (stranger_cert, stranger_key) = (pki.path("stranger.crt"), pki.path("stranger.key"));
    let stranger =
        curl(port, &pki, &["--cert", &stranger_cert, "--key", &stranger_key, "-u", &credentials, &url]);
    assert!(stranger.0 != 0 && stranger.1 == 0, "a certificate no trusted authority signed: {stranger:?}");
    let anonymous = curl(port, &pki, &["-u", &credentials, &url]);
    assert!(anonymous.0 != 0 && anonymous.1 == 0, "no client certificate: {anonymous:?}");

    // Clients that connect and never finish the handshake: half of them send nothing, half the start of a TLS
    // record and no more.
    const STALLED: usize = 10;
    let stalled: Vec<TcpStream> = (0..STALLED)
        .map(|i| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            if i % 2 == 1 {
                stream.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
            }
            stream
        })
        .collect();
    let started = Instant::now();
    let (exit, code, _) = scrape();
    assert_eq!((exit, code), (0, 200), "a scrape beside {STALLED} stalled handshakes (curl -m 2)");
    assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());

    // The stalled clients lose their slots at the endpoint's 5 s limit, and are counted.
    std::thread::sleep(Duration::from_secs(6));
    let (_, _, answer) = scrape();
    let count = |series: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {series}:\n{answer}"))
    };
    let refused =
        |reason: &str| count(&format!("steadytrace_metrics_requests_refused_total{{reason=\"{reason}\"}}"));
    assert_eq!(
        [
            refused("plain_http"),
            refused("unauthorized"),
            refused("tls_handshake"),
            refused("timeout"),
            count("steadytrace_metrics_scrapes_total")
        ],
        [1, 2, 2, STALLED as u64, 3],
        "(plain_http, unauthorized, tls_handshake, timeout, scrapes served) as the endpoint counted them"
    );
    for mut stream in stalled {
        let mut byte = [0u8; 1];
        stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let closed = matches!(std::io::Read::read(&mut stream, &mut byte), Ok(0) | Err(_));
        assert!(closed, "a stalled connection is closed by the endpoint");
    }
}

/// A web configuration, what promtool says of it, and what steadytrace says: `Ok(())` or the line its error
/// names.
struct Case {
    name: &'static str,
    text: String,
    promtool_accepts: bool,
    steadytrace: Result<(), usize>,
}

fn cases() -> Vec<Case> {
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let case = |name, text: &str, promtool_accepts, steadytrace| Case {
        name,
        text: text.to_string(),
        promtool_accepts,
        steadytrace,
    };
    vec![
        // Accepted by both.
        case("empty", "", true, Ok(())),
        case("tls", tls, true, Ok(())),
        case("verified clients", &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"), true, Ok(())),
        case("any client certificate", &format!("{tls}  client_auth_type: RequireAnyClientCert\n"), true, Ok(())),
        case("users without tls", &format!("basic_auth_users:\n  {USER}: {hash}\n"), true, Ok(())),
        case("headers", "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n", true, Ok(())),
        case("suites, curves, versions", &format!("{tls}  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n  curve_preferences: [X25519, CurveP256]\n  min_version: TLS13\n  prefer_server_cipher_suites: false\n"), true, Ok(())),
        case("versions alone ask for no tls", "tls_server_config:\n  min_version: TLS13\n", true, Ok(())),
        // Refused by both, at the line named.
        case("unknown section", "tls_config:\n  cert_file: server.crt\n", false, Err(1)),
        case("unknown field", "tls_server_config:\n  cert_file: server.crt\n  keyfile: server.key\n", false, Err(3)),
        case("no key_file", "tls_server_config:\n  cert_file: server.crt\n", false, Err(1)),
        case("no such certificate", "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: server.key\n", false, Err(2)),
        case("another certificate's key", "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n", false, Err(3)),
        case("not a bcrypt hash", &format!("basic_auth_users:\n  {USER}: {PASSWORD}\n"), false, Err(2)),
        case("a user twice", &format!("basic_auth_users:\n  {USER}: {hash}\n  {USER}: {hash}\n"), false, Err(3)),
        case("a header not allowed", "http_server_config:\n  headers:\n    Server: steadytrace\n", false, Err(3)),
        case("a header value not allowed", "http_server_config:\n  headers:\n    X-Frame-Options: allow\n", false, Err(3)),
        case("unknown client_auth_type", &format!("{tls}  client_auth_type: Sometimes\n"), false, Err(4)),
        case("client_ca_file without client auth", &format!("{tls}  client_ca_file: ca.crt\n"), false, Err(4)),
        case("no such client_ca_file", &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nowhere.crt\n"), false, Err(5)),
        case("unknown cipher suite", &format!("{tls}  cipher_suites: [TLS_FANCY]\n"), false, Err(4)),
        case("unknown curve", &format!("{tls}  curve_preferences: [CurveP999]\n"), false, Err(4)),
        case("unknown version", &format!("{tls}  min_version: TLS14\n"), false, Err(4)),
        case("not yaml", "tls_server_config: [\n", false, Err(2)),
        // Accepted by promtool, refused by steadytrace, saying why (docs/METRICS.md lists them).
        case("TLS 1.0", &format!("{tls}  min_version: TLS10\n"), true, Err(4)),
        case("a CBC suite", &format!("{tls}  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n"), true, Err(4)),
        case("P-521", &format!("{tls}  curve_preferences: [CurveP521]\n"), true, Err(4)),
        case("verified clients without a CA", &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"), true, Err(4)),
    ]
}

#[test]
fn promtool_and_steadytrace_agree_on_good_and_bad_web_configs() {
    let test = "promtool_and_steadytrace_agree_on_good_and_bad_web_configs";
    if !can_trace(test) {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        skip(test, "promtool is not installed (apt-get install prometheus; scripts/setup does)");
        return;
    }
    let pki = Pki::new("promtool");
    let mut wrong = vec![];
    for (i, case) in cases().iter().enumerate() {
        let path = pki.web_config(&format!("case{i}.yml"), &case.text);
        let promtool =
            Command::new("promtool").args(["check", "web-config", &path]).output().expect("run promtool");
        let ours =
            tracer(&["--metrics", "127.0.0.1:0", "--metrics-web-config", &path, "-e", "BEGIN { exit(); }"])
                .output()
                .expect("run the tracer");
        let said = stderr(&ours);
        let verdict = match ours.status.code() {
            Some(0) => Ok(()),
            _ => Err(said
                .strip_prefix(&format!("{path}:"))
                .and_then(|rest| rest.split(':').next()?.parse::<usize>().ok())
                .unwrap_or(0)),
        };
        if promtool.status.success() != case.promtool_accepts || verdict != case.steadytrace {
            wrong.push(format!(
                "{}: promtool {} (wanted {}), steadytrace {verdict:?} (wanted {:?})\n  promtool: {}\n  steadytrace: {}",
                case.name,
                promtool.status.success(),
                case.promtool_accepts,
                case.steadytrace,
                (stdout(&promtool) + &stderr(&promtool)).trim(),
                said.trim()
            ));
        }
        if verdict.is_err() {
            assert!(
                said.contains("ERROR: ") && said.contains("\n"),
                "{}: the error shows the line:\n{said}",
                case.name
            );
            assert!(!said.contains("panicked"), "{said}");
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
