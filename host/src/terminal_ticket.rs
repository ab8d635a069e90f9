//! Terminal tickets: what a browser presents to open a session's terminal, since its
//! WebSocket cannot send `Authorization` (Jupyter's and Kubernetes' dashboards do the same).
//! A ticket is minted by a request that may use the session (`POST
//! /v1/sessions/{id}/terminal/tickets`) and names that session, an expiry 30 s ahead and a
//! random nonce, signed (HMAC-SHA256) with the host's preview key. The front door accepts a
//! nonce once (its row in the session's key-value scope). Pure: no store, no clock.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long a ticket works after it is minted.
pub const TICKET_TTL_SECONDS: u64 = 30;
/// The key prefix of a redeemed ticket's row (`terminal-ticket:{expiry}:{nonce}`), in the
/// session's scope of the preview owner: dropped with the session, and once expired by the
/// next redemption.
pub const REDEEMED_PREFIX: &str = "terminal-ticket:";

/// Longest ticket text read: `{20 digits}.{32 hex}.{64 hex}` and a margin.
const MAX_TICKET_BYTES: usize = 160;

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], session: &str, expires_at_s: u64, nonce: &str) -> HmacSha256 {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => HmacSha256::new(&Default::default()),
    };
    // A distinct first line: a preview signature can never be a ticket's, nor one the other.
    mac.update(format!("wharf-terminal\n{session}\n{expires_at_s}\n{nonce}").as_bytes());
    mac
}

/// A ticket for `session` until `expires_at_s`, with `nonce` (hex, from the caller's RNG).
pub fn mint(key: &[u8], session: &str, expires_at_s: u64, nonce: &str) -> String {
    let sig = hex::encode(
        mac(key, session, expires_at_s, nonce)
            .finalize()
            .into_bytes(),
    );
    format!("{expires_at_s}.{nonce}.{sig}")
}

/// A ticket that passed [`verify`]: what the front door records to accept it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemable {
    /// When it expires, Unix seconds.
    pub expires_at_s: u64,
    /// Its nonce (hex).
    pub nonce: String,
}

impl Redeemable {
    /// The key of its redeemed row.
    pub fn row_key(&self) -> String {
        format!("{REDEEMED_PREFIX}{}:{}", self.expires_at_s, self.nonce)
    }
}

/// When a redeemed ticket's row (`key`) may go: its expiry, or `None` for another key.
pub fn row_expiry(key: &str) -> Option<u64> {
    key.strip_prefix(REDEEMED_PREFIX)?
        .split_once(':')?
        .0
        .parse()
        .ok()
}

/// Why a ticket is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketRefusal {
    /// Not `{expiry}.{nonce}.{signature}`.
    #[error("the terminal ticket is malformed")]
    Malformed,
    /// Its time is over.
    #[error("the terminal ticket expired (tickets work for {TICKET_TTL_SECONDS} s)")]
    Expired,
    /// Not signed by this host for this session.
    #[error("the terminal ticket is not this session's")]
    Mismatch,
}

/// Checks `ticket` for `session` at `now_s`, in constant time.
pub fn verify(
    key: &[u8],
    session: &str,
    ticket: &str,
    now_s: u64,
) -> Result<Redeemable, TicketRefusal> {
    if ticket.len() > MAX_TICKET_BYTES {
        return Err(TicketRefusal::Malformed);
    }
    let mut parts = ticket.split('.');
    let (Some(expires), Some(nonce), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TicketRefusal::Malformed);
    };
    let expires_at_s: u64 = expires.parse().map_err(|_| TicketRefusal::Malformed)?;
    let nonce_ok = nonce.len() == 32 && nonce.bytes().all(|b| b.is_ascii_hexdigit());
    if !nonce_ok {
        return Err(TicketRefusal::Malformed);
    }
    let given = hex::decode(sig).map_err(|_| TicketRefusal::Malformed)?;
    mac(key, session, expires_at_s, nonce)
        .verify_slice(&given)
        .map_err(|_| TicketRefusal::Mismatch)?;
    // Past the signature: a forged expiry is a mismatch above, never "expired".
    if expires_at_s <= now_s || expires_at_s > now_s + TICKET_TTL_SECONDS + 5 {
        return Err(TicketRefusal::Expired);
    }
    Ok(Redeemable {
        expires_at_s,
        nonce: nonce.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_ticket_holds_for_its_session_until_it_expires() {
        let key = b"k".repeat(32);
        let ticket = mint(&key, "ses_a", 1030, NONCE);
        let ok = verify(&key, "ses_a", &ticket, 1000).expect("valid");
        assert_eq!(ok.expires_at_s, 1030);
        assert_eq!(row_expiry(&ok.row_key()), Some(1030));
        assert_eq!(
            verify(&key, "ses_b", &ticket, 1000),
            Err(TicketRefusal::Mismatch)
        );
        assert_eq!(
            verify(&b"j".repeat(32), "ses_a", &ticket, 1000),
            Err(TicketRefusal::Mismatch)
        );
        assert_eq!(
            verify(&key, "ses_a", &ticket, 1030),
            Err(TicketRefusal::Expired)
        );
    }

    #[test]
    fn a_tampered_or_hostile_ticket_is_refused() {
        let key = b"k".repeat(32);
        let ticket = mint(&key, "ses_a", 1030, NONCE);
        let longer = ticket.replacen("1030", "9999", 1);
        assert_eq!(
            verify(&key, "ses_a", &longer, 1000),
            Err(TicketRefusal::Mismatch)
        );
        for hostile in [
            "",
            "...",
            "1030.x.y",
            &format!("1030.{NONCE}"),
            &format!("{ticket}.extra"),
            &format!("99999999999999999999999.{NONCE}.00"),
            &"9".repeat(500),
            &format!("1030.{}.00", "g".repeat(32)),
        ] {
            assert_eq!(
                verify(&key, "ses_a", hostile, 1000),
                Err(TicketRefusal::Malformed),
                "{hostile}"
            );
        }
    }

    #[test]
    fn a_ticket_signed_far_into_the_future_is_refused() {
        // Only a holder of the key can sign one; still, a ticket lives 30 s at most.
        let key = b"k".repeat(32);
        let ticket = mint(&key, "ses_a", 5000, NONCE);
        assert_eq!(
            verify(&key, "ses_a", &ticket, 1000),
            Err(TicketRefusal::Expired)
        );
    }

    #[test]
    fn only_redeemed_rows_have_an_expiry() {
        assert_eq!(row_expiry("terminal-ticket:12:abc"), Some(12));
        assert_eq!(row_expiry("preview-epoch"), None);
        assert_eq!(row_expiry("terminal-ticket:x:abc"), None);
    }
}
