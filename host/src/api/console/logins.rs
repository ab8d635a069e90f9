//! The console's sessions, in this process's memory: a random id (the cookie) per login,
//! holding the token it was opened with and its CSRF token. Bounded: at most
//! [`MAX_LOGINS`] at once (past that the one idle longest ends), each ends after
//! [`IDLE`] without a request and [`MAX_AGE`] after it began. Looked up by the id's
//! digest, so the table's hashing never sees the secret itself.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Console sessions at once.
pub const MAX_LOGINS: usize = 256;
/// A console session ends after this long without a request.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A console session ends this long after it began, whatever its use.
pub const MAX_AGE: Duration = Duration::from_secs(12 * 60 * 60);

struct Login {
    token: String,
    csrf: String,
    began: Instant,
    seen: Instant,
}

impl Login {
    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.seen) < IDLE && now.duration_since(self.began) < MAX_AGE
    }
}

/// The console sessions of this process.
#[derive(Default)]
pub struct Logins {
    table: Mutex<HashMap<[u8; 32], Login>>,
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 32 random bytes from the operating system, as hex.
pub fn random_hex() -> Result<String, rand_core::Error> {
    use rand_core::RngCore;
    let mut bytes = [0u8; 32];
    rand_core::OsRng.try_fill_bytes(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub fn same_secret(expected: &str, presented: &str) -> bool {
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

impl Logins {
    /// Starts a console session for `token`; its id (the cookie's value).
    pub fn start(&self, token: String) -> Result<String, rand_core::Error> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let now = Instant::now();
        if let Ok(mut table) = self.table.lock() {
            table.retain(|_, l| l.live(now));
            if table.len() >= MAX_LOGINS
                && let Some(oldest) = table.iter().min_by_key(|(_, l)| l.seen).map(|(k, _)| *k)
            {
                table.remove(&oldest);
            }
            table.insert(
                key(&id),
                Login {
                    token,
                    csrf,
                    began: now,
                    seen: now,
                },
            );
        }
        Ok(id)
    }

    /// The token and CSRF token of the live console session `id`; the request counts as
    /// its use.
    pub fn find(&self, id: &str) -> Option<(String, String)> {
        self.find_at(id, Instant::now())
    }

    fn find_at(&self, id: &str, now: Instant) -> Option<(String, String)> {
        let mut table = self.table.lock().ok()?;
        let k = key(id);
        let login = table.get_mut(&k)?;
        if !login.live(now) {
            table.remove(&k);
            return None;
        }
        login.seen = now;
        Some((login.token.clone(), login.csrf.clone()))
    }

    /// Ends the console session `id` (logout).
    pub fn end(&self, id: &str) {
        if let Ok(mut table) = self.table.lock() {
            table.remove(&key(id));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().map(|t| t.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_random_bounded_and_end() {
        let logins = Logins::default();
        let a = logins.start("t-a".into()).unwrap();
        let b = logins.start("t-b".into()).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        let (token, csrf) = logins.find(&a).unwrap();
        assert_eq!(token, "t-a");
        assert_ne!(
            csrf,
            logins.find(&b).unwrap().1,
            "one CSRF token per session"
        );
        logins.end(&a);
        assert!(logins.find(&a).is_none());
        assert!(logins.find("not-an-id").is_none());
        for i in 0..MAX_LOGINS + 10 {
            logins.start(format!("t-{i}")).unwrap();
        }
        assert_eq!(logins.len(), MAX_LOGINS);
        assert!(logins.find(&b).is_none(), "the one idle longest went first");
    }

    #[test]
    fn idle_and_old_sessions_end() {
        let logins = Logins::default();
        let id = logins.start("t".into()).unwrap();
        let later = Instant::now() + IDLE - Duration::from_secs(5);
        assert!(logins.find_at(&id, later).is_some(), "used in time");
        assert!(
            logins
                .find_at(&id, later + IDLE - Duration::from_secs(5))
                .is_some(),
            "each use counts"
        );
        assert!(logins.find_at(&id, later + IDLE * 3).is_none(), "idle");
        assert_eq!(logins.len(), 0);
        let id = logins.start("t".into()).unwrap();
        let mut at = Instant::now();
        let end = at + MAX_AGE;
        while at < end {
            assert!(logins.find_at(&id, at).is_some());
            at += IDLE / 2;
        }
        assert!(logins.find_at(&id, at).is_none(), "too old");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("", ""));
    }
}
