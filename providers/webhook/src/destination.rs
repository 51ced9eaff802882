//! Where a webhook may go: the guard against server-side request forgery.
//!
//! A webhook URL is chosen by whoever enqueues the notification, so without a guard herald
//! would POST wherever it is told: its own admin port, a database on the private network, the
//! cloud metadata service at 169.254.169.254. The guard refuses every address that is not on
//! the public internet (see [`refusal`]) unless the route allows private networks.
//!
//! The check and the connection must use the same addresses, or a name that resolves to a
//! public address for the check and to 127.0.0.1 a moment later (DNS rebinding) walks past it.
//! So the check lives in the HTTP client's resolver ([`GuardedResolver`]): hyper connects to
//! exactly the addresses it returns, and it returns only addresses it has checked. IP literals
//! never reach a resolver, so the adapter checks those itself before the request
//! ([`check_literal`]).

use std::error::Error;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address is not on the public internet, or `None` if it is.
pub(crate) fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        // 0.0.0.0/8 "this network": Linux connects 0.0.0.0 to the local host.
        (0, ..) => "an unspecified address (0.0.0.0/8)",
        (127, ..) => "a loopback address (127.0.0.0/8)",
        (10, ..) | (192, 168, _) => "a private address (RFC 1918)",
        (172, 16..=31, _) => "a private address (RFC 1918)",
        (169, 254, _) => {
            "a link-local address (169.254.0.0/16, where cloud metadata services live)"
        }
        (100, 64..=127, _) => "a carrier-grade NAT address (100.64.0.0/10)",
        (192, 0, 0) => "an IETF protocol assignment (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address (RFC 5737)",
        (198, 18..=19, _) => "a benchmarking address (198.18.0.0/15)",
        (224..=239, ..) => "a multicast address (224.0.0.0/4)",
        (240..=255, ..) => "a reserved address (240.0.0.0/4, and the broadcast address)",
        _ => return None,
    })
}

/// Only global unicast (2000::/3) may pass, less its special ranges; an IPv4 address carried
/// inside an IPv6 one (mapped, compatible, SIIT, NAT64, 6to4, Teredo) reaches the IPv4 host,
/// so it is the IPv4 address that is judged.
fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("an unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("a loopback address (::1)");
    }
    let segments = ip.segments();
    let [.., a, b, c, d] = ip.octets();
    let last = Ipv4Addr::new(a, b, c, d);
    let embedded = match segments {
        // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d (SIIT).
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => {
            Some(last)
        }
        // 64:ff9b::a.b.c.d, the well-known NAT64 prefix.
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(last),
        // 2002:wwxx:yyzz::/48, 6to4: the IPv4 address follows the prefix.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        _ => None,
    };
    if let Some(v4) = embedded {
        return refusal_v4(v4);
    }
    // Teredo (2001:0::/32): the server's IPv4 address in clear, the client's inverted.
    if let [0x2001, 0, hi, lo, ..] = segments {
        let server = Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
        let client = Ipv4Addr::from(!u32::from(last));
        return refusal_v4(server).or_else(|| refusal_v4(client));
    }
    Some(match segments[0] {
        0x0064 if segments[1] == 0xff9b && segments[2] == 1 => {
            "a local-use NAT64 address (64:ff9b:1::/48)"
        }
        0xfc00..=0xfdff => "a unique local address (fc00::/7)",
        0xfe80..=0xfebf => "a link-local address (fe80::/10)",
        // Deprecated, but still routed inside some sites.
        0xfec0..=0xfeff => "a site-local address (fec0::/10)",
        0xff00..=0xffff => "a multicast address (ff00::/8)",
        0x2001 if segments[1] == 0x0db8 => "a documentation address (2001:db8::/32)",
        0x2001 if segments[1] < 0x0200 => "an IETF special-purpose address (2001::/23)",
        0x2000..=0x3fff => return None,
        _ => "not a global unicast address (outside 2000::/3)",
    })
}

/// A refused destination: what it was, what it resolved to, and why that is not allowed.
/// Carries no part of the URL but the host, so it can go into evidence as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) host: String,
    pub(crate) addr: IpAddr,
    pub(crate) reason: &'static str,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host == self.addr.to_string() {
            write!(f, "{} is {}", self.addr, self.reason)
        } else {
            write!(
                f,
                "{} resolves to {}, {}",
                self.host, self.addr, self.reason
            )
        }
    }
}

impl Error for Refused {}

/// Checks a host that is an IP literal (which no resolver sees); names pass, for the resolver.
pub(crate) fn check_literal(host: &url::Host<&str>) -> Result<(), Refused> {
    let addr = match *host {
        url::Host::Ipv4(v4) => IpAddr::V4(v4),
        url::Host::Ipv6(v6) => IpAddr::V6(v6),
        url::Host::Domain(_) => return Ok(()),
    };
    match refusal(addr) {
        Some(reason) => Err(Refused {
            host: addr.to_string(),
            addr,
            reason,
        }),
        None => Ok(()),
    }
}

/// Finds a [`Refused`] anywhere in an error's chain: reqwest wraps the resolver's error in its
/// own connect error, and this is how the adapter tells a refusal from a failed look-up.
pub(crate) fn find_refusal<'e>(err: &'e (dyn Error + 'static)) -> Option<&'e Refused> {
    let mut source = Some(err);
    while let Some(err) = source {
        if let Some(refused) = err.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = err.source();
    }
    None
}

/// The system resolver with the guard in front: a name is refused as a whole if any of its
/// addresses is refused, rather than connecting to the public ones only, because a name that
/// mixes both is either misconfigured or an attack, and which address a retry would reach
/// must not depend on the resolver's order.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's (or the scheme's) port in afterwards.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some((addr, reason)) = addrs
                .iter()
                .find_map(|addr| refusal(addr.ip()).map(|reason| (addr.ip(), reason)))
            {
                return Err(Box::new(Refused { host, addr, reason }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> bool {
        refusal(s.parse().unwrap()).is_some()
    }

    #[test]
    fn internal_addresses_are_refused() {
        for addr in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            // The ranges an outside probe walked through.
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:a9fe:a9fe",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "2001:0:7f00:1::1",
            "64:ff9b:1::a00:1",
            "198.18.0.1",
            "198.19.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "2001:db8::1",
            "100::1",
            "4000::1",
        ] {
            assert!(refused(addr), "{addr} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.0.1",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.1.1",
            "192.169.0.1",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        ] {
            assert!(!refused(addr), "{addr} must pass");
        }
    }
}
