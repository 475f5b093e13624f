//! `basic_auth_users`: who may scrape, by user name and bcrypt hash, as the exporter-toolkit checks them.
//! bcrypt costs tens of milliseconds by design, so a verdict is remembered for the (user, password) pair: a
//! scraper that sends the same credentials every 15 s pays bcrypt once.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The users and their hashes, checked at start ([`check_hash`]).
pub struct Users {
    hashes: HashMap<String, String>,
    /// Remembered verdicts, at most [`REMEMBERED`].
    verdicts: Mutex<HashMap<(String, String), bool>>,
    /// One bcrypt at a time: a flood of wrong passwords takes one core, not all.
    bcrypt: Mutex<()>,
    /// A hash of the users' cost for a password nobody has, compared against for an unknown user so that the
    /// answer takes as long as for a known one (no telling users apart by timing).
    decoy: OnceLock<String>,
}

const REMEMBERED: usize = 100;

impl Users {
    pub fn new(hashes: HashMap<String, String>) -> Users {
        Users { hashes, verdicts: Mutex::default(), bcrypt: Mutex::default(), decoy: OnceLock::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Whether an `Authorization` header's value names a user with the right password.
    pub fn admit(&self, authorization: Option<&str>) -> bool {
        let Some((user, password)) = authorization.and_then(basic_credentials) else { return false };
        let key = (user, password);
        if let Some(&verdict) = lock(&self.verdicts).get(&key) {
            return verdict;
        }
        let (user, password) = &key;
        let hash = self.hashes.get(user);
        let compared = {
            let _one_at_a_time = lock(&self.bcrypt);
            let against = hash.map_or_else(|| self.decoy().as_str(), String::as_str);
            bcrypt::verify(password, against).unwrap_or(false)
        };
        let verdict = hash.is_some() && compared;
        let mut verdicts = lock(&self.verdicts);
        if verdicts.len() >= REMEMBERED {
            // Any one goes (a HashMap's order is random), as the exporter-toolkit's cache evicts.
            if let Some(old) = verdicts.keys().next().cloned() {
                verdicts.remove(&old);
            }
        }
        verdicts.insert(key, verdict);
        verdict
    }

    fn decoy(&self) -> &String {
        self.decoy.get_or_init(|| {
            let cost = self.hashes.values().filter_map(|h| cost(h)).max().unwrap_or(bcrypt::DEFAULT_COST);
            // Its salt is random, so no password is known to match it (and a match would not admit anyone).
            bcrypt::hash("", cost).unwrap_or_default()
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The user and password of `Basic BASE64(user:password)`.
fn basic_credentials(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// A bcrypt hash's cost, when the hash is well formed.
fn cost(hash: &str) -> Option<u32> {
    hash.get(4..6)?.parse().ok()
}

/// Why `hash` is not a bcrypt hash the exporter-toolkit would take (`$2a$`, `$2b$` or `$2y$`, a cost from 4 to
/// 31, then 53 characters of bcrypt's base64), or `None` when it is one.
pub fn check_hash(hash: &str) -> Option<String> {
    const ALPHABET: &str = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let parts: Vec<&str> = hash.split('$').collect();
    let [empty, version, cost, rest] = parts.as_slice() else {
        return Some("a bcrypt hash reads `$2y$COST$` and 53 characters".into());
    };
    if !empty.is_empty() || !matches!(*version, "2a" | "2b" | "2y") {
        return Some(format!("`${version}$` is not a bcrypt version (2a, 2b, 2y)"));
    }
    match cost.parse::<u32>() {
        Ok(4..=31) if cost.len() == 2 => {}
        _ => return Some(format!("the cost `{cost}` is not two digits from 04 to 31")),
    }
    if rest.len() != 53 || !rest.chars().all(|c| ALPHABET.contains(c)) {
        return Some(format!("after the cost come 53 characters of bcrypt's base64, not {}", rest.len()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_checked_as_bcrypt_reads_them() {
        let good = bcrypt::hash("secret", 4).unwrap();
        assert_eq!(check_hash(&good), None);
        assert_eq!(check_hash(&good.replacen("$2b$", "$2y$", 1)), None);
        assert!(check_hash("secret").is_some());
        assert!(check_hash(&good.replacen("$04$", "$03$", 1)).is_some());
        assert!(check_hash(&good.replacen("$2b$", "$3a$", 1)).is_some());
        assert!(check_hash(&good[..good.len() - 1]).is_some());
        assert!(check_hash("").is_some());
    }

    #[test]
    fn credentials_are_checked_and_remembered() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let users = Users::new(HashMap::from([("alice".to_string(), hash)]));
        let header = |user: &str, password: &str| {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        };
        assert!(users.admit(Some(&header("alice", "secret"))));
        assert!(users.admit(Some(&header("alice", "secret"))));
        assert!(!users.admit(Some(&header("alice", "wrong"))));
        assert!(!users.admit(Some(&header("bob", "secret"))));
        assert!(!users.admit(Some("Bearer x")));
        assert!(!users.admit(Some("Basic !!!")));
        assert!(!users.admit(None));
        assert_eq!(lock(&users.verdicts).len(), 3);
        for i in 0..150 {
            users.admit(Some(&header("alice", &i.to_string())));
        }
        assert!(lock(&users.verdicts).len() <= REMEMBERED);
    }
}
