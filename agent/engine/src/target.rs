//! A target as the engine connects to it: the plan's URL (its statistics' key), the
//! addresses connections go to in turn, the TLS setup of an https target, and the HTTP
//! version it is loaded with (h2target.rs).

use std::cell::Cell;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::h2target::H2Target;
use crate::http;
use crate::wire::pb;

pub struct Target {
    /// As written in the plan; the key of its statistics.
    pub url: String,
    /// Where connections go, in turn: the addresses the agent gave, or the URL's host
    /// resolved once (its first address).
    addrs: Vec<SocketAddr>,
    next_addr: Cell<usize>,
    /// https targets: the handshake's configuration and server name.
    pub tls: Option<http::Tls>,
    /// HTTP/1.1 or HTTP/2, and the streams per HTTP/2 connection (h2target.rs).
    pub h2: H2Target,
}

impl Target {
    /// The address for the next connection (round robin).
    pub fn next_addr(&self) -> SocketAddr {
        let index = self.next_addr.get();
        self.next_addr.set((index + 1) % self.addrs.len());
        self.addrs[index]
    }
}

/// `http[s]://host:port` (no path) to the addresses to connect to (the agent's, or the
/// host resolved) and, for https, the TLS setup. Errors start with the field at fault.
/// `verify`: the job's tls_verify, for a target with its own TLS options.
pub fn parse_target(
    target: &pb::Target,
    tls_config: &std::sync::Arc<rustls::ClientConfig>,
    verify: bool,
) -> Result<Target, String> {
    let url = &target.url;
    let (rest, default_port, https) = match url.split_once("://") {
        Some(("http", rest)) => (rest, 80, false),
        Some(("https", rest)) => (rest, 443, true),
        _ => return Err(format!("url: '{url}' must start with http:// or https://")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains('/') {
        return Err(format!("url: '{url}' must be scheme://host:port without a path"));
    }
    let with_port = if has_port(authority) { authority.to_string() } else { format!("{authority}:{default_port}") };
    let addrs = if target.addresses.is_empty() {
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("url: cannot resolve '{authority}': {e}"))?
            .next()
            .ok_or_else(|| format!("url: '{authority}' has no address"))?;
        vec![addr]
    } else {
        // Resolved and checked by the agent: the engine must not resolve again (a second
        // answer could point elsewhere than what the allow-list saw).
        let parse = |(j, a): (usize, &String)| {
            a.parse().map_err(|_| format!("addresses[{j}]: '{a}' is not ip:port ([ip]:port for IPv6)"))
        };
        target.addresses.iter().enumerate().map(parse).collect::<Result<Vec<SocketAddr>, String>>()?
    };
    let h2 = H2Target::from_proto(target, https)?;
    let tls = if https {
        let host = with_port[..with_port.rfind(':').expect("has a port")].trim_matches(|c| c == '[' || c == ']');
        let server_name = crate::tls::server_name(target.tls.as_ref(), host)?;
        let config = match &target.tls {
            Some(options) => crate::tls::target_config(verify, options)?,
            None => std::sync::Arc::clone(tls_config),
        };
        Some(http::Tls { config: h2.tls_config(&config), server_name })
    } else if target.tls.is_some() {
        return Err(format!("tls: '{url}' is not https; TLS options need an https:// URL"));
    } else {
        None
    };
    Ok(Target { url: url.to_string(), addrs, next_addr: Cell::new(0), tls, h2 })
}

fn has_port(authority: &str) -> bool {
    match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_and_default_port() {
        let tls = crate::tls::client_config(false);
        let target = |url: &str| pb::Target { url: url.into(), weight: 1, ..Default::default() };
        assert_eq!(parse_target(&target("http://[::1]:81"), &tls, false).unwrap().next_addr().port(), 81);
        assert_eq!(parse_target(&target("http://127.0.0.1"), &tls, false).unwrap().next_addr().port(), 80);
        let https = parse_target(&target("https://127.0.0.1"), &tls, false).unwrap();
        assert_eq!(https.next_addr().port(), 443);
        assert!(https.tls.is_some());
    }

    #[test]
    fn tls_options_need_an_https_url() {
        let tls = crate::tls::client_config(false);
        let target = |url: &str| pb::Target { url: url.into(), weight: 1, ..Default::default() };
        let mut plain = target("http://127.0.0.1:81");
        plain.tls = Some(pb::TargetTls::default());
        assert!(parse_target(&plain, &tls, false).err().unwrap().starts_with("tls: "));
        let mut https = target("https://127.0.0.1:443");
        https.tls = Some(pb::TargetTls { sni: "lab.test".into(), ..Default::default() });
        assert!(parse_target(&https, &tls, false).unwrap().tls.is_some());
    }
}
