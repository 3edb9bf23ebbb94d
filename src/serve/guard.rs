//! The safety rules of `deeptree serve`, as small pure functions: which Host a request may name (DNS rebinding),
//! which Origin a request that changes the store may come from (cross-site requests), the per-run token every such
//! request carries, and which addresses the server may bind to.

use std::net::IpAddr;

/// Where the server listens and what it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub bind: IpAddr,
    pub port: u16,
    /// `--allow-remote`: a bind address other than loopback, and its Host, are accepted.
    pub allow_remote: bool,
    /// The per-run token of the requests that change the store.
    pub token: String,
}

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "x-deeptree-token";

impl Guard {
    /// Is `host` (the request's Host header) one this server answers to? `127.0.0.1`, `localhost` and `[::1]` with
    /// the server's port; with `--allow-remote` also the bind address with the port, and any name when bound to
    /// every address (`0.0.0.0`, `::`), where the server cannot know the names it is reached by.
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        let Some(host) = host else { return false };
        let host = host.to_ascii_lowercase();
        let Some((name, port)) = host.rsplit_once(':') else { return false };
        if port != self.port.to_string() {
            return false;
        }
        if matches!(name, "127.0.0.1" | "localhost" | "[::1]") {
            return true;
        }
        // The address it is bound to, as a URL names it: another loopback address (127.0.0.2), or with
        // `--allow-remote` any.
        if (self.bind.is_loopback() || self.allow_remote) && name == url_host(self.bind) {
            return true;
        }
        self.allow_remote && self.bind.is_unspecified() && !name.is_empty()
    }

    /// May a request that changes the store come from `origin` (its Origin header), sent to `host` (its Host header,
    /// already allowed)? Only from the page's own origin, `http://` and the Host; a request with no Origin is not
    /// from a browser's cross-site form or script (browsers send Origin with every POST), and the token still
    /// guards it. `Sec-Fetch-Site: cross-site` is refused too.
    pub fn origin_allowed(&self, origin: Option<&str>, host: &str, fetch_site: Option<&str>) -> bool {
        if fetch_site.is_some_and(|site| site.eq_ignore_ascii_case("cross-site")) {
            return false;
        }
        match origin {
            None => true,
            Some(origin) => origin.eq_ignore_ascii_case(&format!("http://{host}")),
        }
    }

    /// Does `sent` (the token header of a request) match this run's token? Compared in constant time.
    pub fn token_ok(&self, sent: Option<&str>) -> bool {
        let Some(sent) = sent else { return false };
        let (a, b) = (sent.as_bytes(), self.token.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// How a URL names `addr`: an IPv6 address in brackets.
pub fn url_host(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// May the server bind to `addr`? Loopback always; any other address only with `--allow-remote`, and then with a
/// warning to print: the token and the tree travel in clear.
pub fn check_bind(addr: IpAddr, allow_remote: bool) -> Result<Option<String>, String> {
    if addr.is_loopback() {
        return Ok(None);
    }
    if !allow_remote {
        return Err(format!(
            "refusing to serve on {addr}, which is not a loopback address: other machines could reach the tree and \
             steer it; give --allow-remote to do so anyway"
        ));
    }
    Ok(Some(format!(
        "warning: serving on {addr}: plain HTTP, so the token (which lets a page change the store) and the tree \
         travel in clear; use it only on a network you trust"
    )))
}

/// A new token: 16 random bytes from the system (`/dev/urandom`), in hex.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(bind: &str, allow_remote: bool) -> Guard {
        Guard { bind: bind.parse().unwrap(), port: 8123, allow_remote, token: "00ff".repeat(8) }
    }

    #[test]
    fn only_loopback_names_with_the_port_are_hosts() {
        let g = guard("127.0.0.1", false);
        for host in ["127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123", "[::1]:8123"] {
            assert!(g.host_allowed(Some(host)), "{host}");
        }
        for host in [
            None,
            Some("127.0.0.1"),
            Some("localhost"),
            Some("127.0.0.1:8124"),
            Some("evil.example:8123"),
            Some("localhost.evil.example:8123"),
            Some("192.168.1.2:8123"),
            Some(""),
        ] {
            assert!(!g.host_allowed(host), "{host:?}");
        }
    }

    #[test]
    fn another_loopback_bind_answers_to_its_own_address_too() {
        let g = guard("127.0.0.2", false);
        assert!(g.host_allowed(Some("127.0.0.2:8123")));
        assert!(g.host_allowed(Some("localhost:8123")));
        assert!(!g.host_allowed(Some("127.0.0.3:8123")));
        assert_eq!(url_host("::1".parse().unwrap()), "[::1]");
    }

    #[test]
    fn a_remote_bind_adds_its_own_address() {
        let g = guard("192.168.1.2", true);
        assert!(g.host_allowed(Some("192.168.1.2:8123")));
        assert!(g.host_allowed(Some("localhost:8123")));
        assert!(!g.host_allowed(Some("evil.example:8123")));
        let any = guard("0.0.0.0", true);
        assert!(any.host_allowed(Some("box.lan:8123")));
        assert!(!any.host_allowed(Some("box.lan:80")));
        assert!(guard("::", true).host_allowed(Some("[fe80::1]:8123")));
    }

    #[test]
    fn only_the_pages_own_origin_may_change_the_store() {
        let g = guard("127.0.0.1", false);
        assert!(g.origin_allowed(None, "127.0.0.1:8123", None));
        assert!(g.origin_allowed(Some("http://127.0.0.1:8123"), "127.0.0.1:8123", Some("same-origin")));
        assert!(g.origin_allowed(Some("http://localhost:8123"), "localhost:8123", None));
        assert!(!g.origin_allowed(Some("http://localhost:8123"), "127.0.0.1:8123", None));
        assert!(!g.origin_allowed(Some("http://evil.example"), "127.0.0.1:8123", None));
        assert!(!g.origin_allowed(Some("null"), "127.0.0.1:8123", None));
        assert!(!g.origin_allowed(Some("https://127.0.0.1:8123"), "127.0.0.1:8123", None));
        assert!(!g.origin_allowed(None, "127.0.0.1:8123", Some("cross-site")));
    }

    #[test]
    fn the_token_must_match_exactly() {
        let g = guard("127.0.0.1", false);
        assert!(g.token_ok(Some(&"00ff".repeat(8))));
        assert!(!g.token_ok(None));
        assert!(!g.token_ok(Some("")));
        assert!(!g.token_ok(Some(&"00ff".repeat(7))));
        assert!(!g.token_ok(Some(&format!("{}00fe", "00ff".repeat(7)))));
    }

    #[test]
    fn binding_beyond_loopback_needs_the_flag_and_warns() {
        assert_eq!(check_bind("127.0.0.1".parse().unwrap(), false), Ok(None));
        assert_eq!(check_bind("::1".parse().unwrap(), false), Ok(None));
        assert!(check_bind("0.0.0.0".parse().unwrap(), false).unwrap_err().contains("--allow-remote"));
        assert!(check_bind("192.168.1.2".parse().unwrap(), true).unwrap().unwrap().contains("in clear"));
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
