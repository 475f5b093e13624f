//! Config variables, as current bpftrace has them: set in the script's `config = { key = value; ... }` block
//! or by the environment variable `BPFTRACE_KEY`, which wins. A key may be written `max_strlen`, `MAX_STRLEN`
//! or `BPFTRACE_MAX_STRLEN`. Every key bpftrace documents is accepted; the ones steadytrace has an equivalent
//! for are applied, and a setting steadytrace cannot honour is named in a warning.

use crate::lang::ast::{ConfigSetting, ConfigValue};
use crate::lang::Diagnostic;
use crate::probes::MissingProbes;

/// What the config variables decide in steadytrace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Whether the maps are printed when the trace ends.
    pub print_maps_on_exit: bool,
    /// What an attach point that does not exist does, when the script or the environment says.
    pub missing_probes: Option<MissingProbes>,
    /// The most bytes of a file `cat()` prints (bpftrace's default 10240).
    pub max_cat_bytes: u64,
    /// `perf_rb_pages`: the ring buffer's size in pages; by default it is fitted to the script.
    pub ring_pages: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config { print_maps_on_exit: true, missing_probes: None, max_cat_bytes: 10240, ring_pages: None }
    }
}

/// How steadytrace treats one key.
enum Handling {
    /// Read into the [`Config`].
    Apply(fn(&mut Config, &str) -> Result<(), String>),
    /// Accepted without a warning when the value is one of these (what steadytrace does anyway), else
    /// accepted with a warning giving the reason.
    Fixed(&'static [&'static str], &'static str),
    /// Accepted, with a warning giving the reason it changes nothing.
    NoEffect(&'static str),
    /// Accepted without effect when one of these; any other value is an error.
    OneOf(&'static [&'static str]),
    /// A key current bpftrace no longer has a use for: accepted with its warning, whatever the value.
    Deprecated,
}

/// Every key of current bpftrace's config (docs/language.md, "Config Variables").
const KEYS: &[(&str, Handling)] = &[
    ("print_maps_on_exit", Handling::Apply(|c, v| boolean(v).map(|on| c.print_maps_on_exit = on))),
    ("missing_probes", Handling::Apply(|c, v| missing_probes(v).map(|m| c.missing_probes = Some(m)))),
    ("max_strlen", Handling::Fixed(&["64"], "strings are 64 bytes long, as in bpftrace 0.17")),
    (
        "stack_mode",
        Handling::Fixed(
            &["bpftrace"],
            "stacks print in bpftrace's mode unless `kstack(perf)` or `ustack(raw)` asks otherwise",
        ),
    ),
    // Programs are loaded with the license "GPL"; another GPL-compatible one changes nothing.
    (
        "license",
        Handling::OneOf(&[
            "Dual MIT/GPL",
            "Dual BSD/GPL",
            "Dual MPL/GPL",
            "GPL and additional rights",
            "GPL v2",
            "GPL",
        ]),
    ),
    ("cpp_demangle", Handling::Fixed(&["true", "1"], "C++ names in user stacks are always demangled")),
    ("use_blazesym", Handling::Fixed(&["true", "1"], "user stacks are always symbolized with blazesym")),
    ("show_debug_info", Handling::Fixed(&["false", "0"], "stacks never show file and line")),
    (
        "lazy_symbolication",
        Handling::Fixed(&["true", "1"], "user symbols are always looked up when first printed"),
    ),
    ("max_map_keys", Handling::Fixed(&["4096"], "every map holds up to 4096 keys")),
    ("on_stack_limit", Handling::NoEffect("steadytrace lays out the BPF stack itself")),
    ("cache_user_symbols", Handling::NoEffect("blazesym caches user symbols per process")),
    ("log_size", Handling::NoEffect("the verifier's log grows as needed")),
    ("max_bpf_progs", Handling::NoEffect("there is no limit on programs")),
    ("max_probes", Handling::NoEffect("there is no limit on probes")),
    (
        "max_cat_bytes",
        Handling::Apply(|c, v| {
            v.parse().map(|n| c.max_cat_bytes = n).map_err(|_| "must be a number of bytes".to_string())
        }),
    ),
    // bpftrace's pages of each CPU's perf buffer; here the pages of the one ring buffer, rounded up to a power
    // of two.
    (
        "perf_rb_pages",
        Handling::Apply(|c, v| match v.parse::<u64>() {
            Ok(pages) if pages > 0 => {
                c.ring_pages = Some(pages);
                Ok(())
            }
            _ => Err("must be a number of pages".to_string()),
        }),
    ),
    ("str_trunc_trailer", Handling::NoEffect("truncated strings get no trailer, as in bpftrace 0.17")),
    ("unstable_import_statement", Handling::NoEffect("`import` is always available, without a warning")),
    ("unstable_tseries", Handling::NoEffect("`tseries()` is always available, without a warning")),
    ("unstable_typeinfo", Handling::NoEffect("`typeinfo()` is always available, without a warning")),
    (
        "unstable_dw_ustack",
        Handling::Fixed(&["enable", "warn"], "`dw_ustack` is always available, without a warning"),
    ),
    ("symbol_source", Handling::Deprecated),
    ("max_type_res_iterations", Handling::Deprecated),
    ("unstable_addr", Handling::Deprecated),
    ("unstable_import", Handling::Deprecated),
    ("unstable_macro", Handling::Deprecated),
    ("unstable_map_decl", Handling::Deprecated),
];

/// Old names bpftrace still takes for its keys.
const RENAMED: &[(&str, &str)] = &[
    ("strlen", "max_strlen"),
    ("no_cpp_demangle", "cpp_demangle"),
    ("cat_bytes_max", "max_cat_bytes"),
    ("map_keys_max", "max_map_keys"),
];

/// Names bpftrace reads from the environment only.
const ENV_ONLY: &[&str] = &["btf", "kernel_build", "kernel_source", "vmlinux"];

/// The key's name in lower case without `bpftrace_`, after renames.
fn normalize(key: &str) -> String {
    let lower = key.to_ascii_lowercase();
    let bare = lower.strip_prefix("bpftrace_").unwrap_or(&lower);
    RENAMED.iter().find(|(old, _)| *old == bare).map_or(bare, |(_, new)| new).to_string()
}

fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err("takes true or false (or 1 or 0)".into()),
    }
}

fn missing_probes(value: &str) -> Result<MissingProbes, String> {
    match value {
        "ignore" => Ok(MissingProbes::Ignore),
        "warn" => Ok(MissingProbes::Warn),
        "error" => Ok(MissingProbes::Error),
        _ => Err("takes ignore, warn or error".into()),
    }
}

/// Sets `key` (normalized) to `value`: `Ok(Some(warning))` when steadytrace cannot do what it asks.
fn set(config: &mut Config, key: &str, value: &str) -> Result<Option<String>, String> {
    let Some((_, handling)) = KEYS.iter().find(|(name, _)| *name == key) else {
        return Err(if ENV_ONLY.contains(&key) {
            format!("`{key}` can only be set in the environment, as BPFTRACE_{}", key.to_ascii_uppercase())
        } else {
            format!("`{key}` is not a known config variable")
        });
    };
    Ok(match handling {
        Handling::Apply(apply) => {
            apply(config, value).map_err(|why| format!("`{key}` {why}, not `{value}`"))?;
            None
        }
        Handling::Fixed(same, _) if same.contains(&value) => None,
        Handling::OneOf(valid) if valid.contains(&value) => None,
        // bpftrace's words.
        Handling::OneOf(valid) => {
            return Err(format!(
                "Invalid value for {key}. Found: {value}. Valid values: {}",
                valid.join(", ")
            ))
        }
        Handling::Fixed(_, why) | Handling::NoEffect(why) => {
            Some(format!("config `{key} = {value}` has no effect in steadytrace: {why}"))
        }
        // bpftrace's words.
        Handling::Deprecated => Some(format!("{key} is deprecated and has no effect")),
    })
}

/// The value a script reads as `config.KEY` for a key whose value steadytrace fixes (`max_strlen`: `64`).
pub fn fixed_value(key: &str) -> Option<&'static str> {
    KEYS.iter().find_map(|(name, handling)| match handling {
        Handling::Fixed(values, _) if *name == key => values.first().copied(),
        _ => None,
    })
}

/// The keys [`fixed_value`] gives a value for.
pub fn fixed_keys() -> Vec<&'static str> {
    KEYS.iter()
        .filter(|(_, handling)| matches!(handling, Handling::Fixed(..)))
        .map(|(name, _)| *name)
        .collect()
}

/// The config of a script's config block; the warnings point at the settings steadytrace cannot honour.
pub fn read(settings: &[ConfigSetting]) -> Result<(Config, Vec<Diagnostic>), Diagnostic> {
    let mut config = Config::default();
    let mut warnings = vec![];
    for setting in settings {
        let key = normalize(&setting.key);
        let value = match &setting.value {
            ConfigValue::Int(n) => n.to_string(),
            ConfigValue::Str(s) | ConfigValue::Word(s) => s.clone(),
        };
        let span = setting.key_span.to(setting.value_span);
        match set(&mut config, &key, &value) {
            Ok(Some(warning)) => warnings.push(Diagnostic::warning(span, warning)),
            Ok(None) => {}
            Err(why) => {
                let diag = Diagnostic::error(span, why);
                return Err(match closest_key(&key).filter(|near| *near != key) {
                    Some(near) => diag.with_help(format!("did you mean `{near}`?")),
                    None => diag,
                });
            }
        }
    }
    Ok((config, warnings))
}

/// Applies the environment's `BPFTRACE_KEY` variables over `config` (`env` looks a variable up).
pub fn override_from_env(config: &mut Config, env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    for (key, handling) in KEYS {
        let name = format!("BPFTRACE_{}", key.to_ascii_uppercase());
        if let (Handling::Apply(apply), Some(value)) = (handling, env(&name)) {
            apply(config, &value).map_err(|why| format!("{name} {why}, not `{value}`"))?;
        }
    }
    Ok(())
}

/// A known key that `key` is probably a misspelling of.
fn closest_key(key: &str) -> Option<&'static str> {
    crate::lang::suggest::closest(key, KEYS.iter().map(|(name, _)| *name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::Span;

    fn setting(key: &str, value: ConfigValue) -> ConfigSetting {
        ConfigSetting { key: key.into(), key_span: Span::new(0, 1), value, value_span: Span::new(2, 3) }
    }

    #[test]
    fn keys_in_every_spelling_are_applied_and_the_environment_wins() {
        let settings = [
            setting("BPFTRACE_PRINT_MAPS_ON_EXIT", ConfigValue::Int(0)),
            setting("missing_probes", ConfigValue::Word("ignore".into())),
            setting("cat_bytes_max", ConfigValue::Int(5)),
            setting("perf_rb_pages", ConfigValue::Int(64)),
        ];
        let (mut config, warnings) = read(&settings).unwrap();
        assert_eq!(
            config,
            Config {
                print_maps_on_exit: false,
                missing_probes: Some(MissingProbes::Ignore),
                max_cat_bytes: 5,
                ring_pages: Some(64),
            }
        );
        assert!(warnings.is_empty());
        let env = |name: &str| (name == "BPFTRACE_MISSING_PROBES").then(|| "error".to_string());
        override_from_env(&mut config, &env).unwrap();
        assert_eq!(config.missing_probes, Some(MissingProbes::Error));
        let env = |name: &str| (name == "BPFTRACE_PRINT_MAPS_ON_EXIT").then(|| "maybe".to_string());
        assert_eq!(
            override_from_env(&mut config, &env).unwrap_err(),
            "BPFTRACE_PRINT_MAPS_ON_EXIT takes true or false (or 1 or 0), not `maybe`"
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_and_unhonoured_settings_warnings() {
        let err = read(&[setting("bad_config", ConfigValue::Word("raw".into()))]).unwrap_err();
        assert_eq!(err.message, "`bad_config` is not a known config variable");
        let err = read(&[setting("missing_probes", ConfigValue::Int(3))]).unwrap_err();
        assert_eq!(err.message, "`missing_probes` takes ignore, warn or error, not `3`");
        let (_, warnings) = read(&[setting("stack_mode", ConfigValue::Word("perf".into()))]).unwrap();
        assert!(warnings[0].message.starts_with("config `stack_mode = perf` has no effect in steadytrace"));
        let err = read(&[setting("perf_rb_pages", ConfigValue::Int(0))]).unwrap_err();
        assert_eq!(err.message, "`perf_rb_pages` must be a number of pages, not `0`");
        let (_, warnings) = read(&[setting("STRLEN", ConfigValue::Int(64))]).unwrap();
        assert!(warnings.is_empty());
        let (_, warnings) =
            read(&[setting("unstable_map_decl", ConfigValue::Word("enable".into()))]).unwrap();
        assert_eq!(warnings[0].message, "unstable_map_decl is deprecated and has no effect");
    }
}
