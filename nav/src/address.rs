//! Which addresses `add_repository` lets git connect to.
//!
//! The decision is on the address the connection ends at. An IPv6 address
//! that carries an IPv4 address (IPv4-mapped and -translated, the deprecated
//! IPv4-compatible form, NAT64's well-known prefix, 6to4, Teredo) is judged
//! by the IPv4 address it carries, since that is where a dual-stack socket,
//! a translator or a relay delivers the packets. Every other address is
//! refused when it falls in a range of the IANA IPv4 or IPv6 Special-Purpose
//! Address Registry (RFC 6890 and its updates), in multicast, or, for IPv6,
//! outside global unicast `2000::/3`. The registries also list a few
//! anycast services as globally reachable (AS112, AMT, PCP and TURN anycast);
//! no repository is served from those, so they are refused as well.
//!
//! Host names that spell an IPv4 address the way `inet_aton` reads it
//! (`127.1`, `0x7f000001`, `2130706433`, `0177.0.0.1`) are addresses too:
//! [`ipv4_host`] reads them as the resolver would.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused: the range it is in and, for an IPv4 address
/// carried in IPv6, the form that carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub range: &'static str,
    pub carrier: Option<&'static str>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.carrier {
            Some(carrier) => write!(f, "{} (carried in {carrier})", self.range),
            None => f.write_str(self.range),
        }
    }
}

/// IPv4 ranges refused, first match wins: the special-purpose registry,
/// multicast and the reserved block.
const IPV4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "this network 0.0.0.0/8"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private 10.0.0.0/8"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "shared address space 100.64.0.0/10"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback 127.0.0.0/8"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local 169.254.0.0/16"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private 172.16.0.0/12"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "IETF protocol assignments 192.0.0.0/24"),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation 192.0.2.0/24"),
    (Ipv4Addr::new(192, 31, 196, 0), 24, "AS112-v4 192.31.196.0/24"),
    (Ipv4Addr::new(192, 52, 193, 0), 24, "AMT 192.52.193.0/24"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "6to4 relay anycast 192.88.99.0/24"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private 192.168.0.0/16"),
    (Ipv4Addr::new(192, 175, 48, 0), 24, "AS112 direct delegation 192.175.48.0/24"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking 198.18.0.0/15"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation 198.51.100.0/24"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation 203.0.113.0/24"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast 224.0.0.0/4"),
    (Ipv4Addr::new(255, 255, 255, 255), 32, "limited broadcast 255.255.255.255/32"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved 240.0.0.0/4"),
];

/// IPv6 ranges refused, first match wins (after the IPv4-carrying forms).
const IPV6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "unspecified ::/128"),
    (Ipv6Addr::LOCALHOST, 128, "loopback ::1/128"),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, "local-use IPv4/IPv6 translation 64:ff9b:1::/48"),
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64, "discard-only 100::/64"),
    (Ipv6Addr::new(0x100, 0, 0, 1, 0, 0, 0, 0), 64, "dummy prefix 100:0:0:1::/64"),
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, "IETF protocol assignments 2001::/23"),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "documentation 2001:db8::/32"),
    (Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0), 48, "AS112 direct delegation 2620:4f:8000::/48"),
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "documentation 3fff::/20"),
    (Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, "segment routing SIDs 5f00::/16"),
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "unique-local fc00::/7"),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local fe80::/10"),
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "site-local fec0::/10"),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast ff00::/8"),
];

/// Outside every range above and outside global unicast: reserved by the IETF.
const NOT_GLOBAL_UNICAST: &str = "not global unicast (outside 2000::/3)";

fn in_v4(ip: Ipv4Addr, base: Ipv4Addr, prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(base) & mask
}

fn in_v6(ip: Ipv6Addr, base: Ipv6Addr, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(base) & mask
}

fn v4_refusal(ip: Ipv4Addr) -> Option<&'static str> {
    IPV4.iter().find(|(base, prefix, _)| in_v4(ip, *base, *prefix)).map(|(_, _, range)| *range)
}

fn v4_at(bits: u128, shift: u32) -> Ipv4Addr {
    Ipv4Addr::from((bits >> shift) as u32)
}

/// The IPv4 addresses an IPv6 address delivers to, with the form's name.
fn carried_v4(ip: Ipv6Addr) -> Option<(&'static str, Vec<Ipv4Addr>)> {
    let bits = u128::from(ip);
    let prefix96 = bits >> 32;
    if prefix96 == 0xffff {
        return Some(("IPv4-mapped ::ffff:0:0/96", vec![v4_at(bits, 0)]));
    }
    if prefix96 == 0xffff_0000 {
        return Some(("IPv4-translated ::ffff:0:0:0/96", vec![v4_at(bits, 0)]));
    }
    // `::` and `::1` are themselves (unspecified, loopback), not IPv4-compatible 0.0.0.0/0.0.0.1.
    if prefix96 == 0 && bits > 1 {
        return Some(("IPv4-compatible ::/96", vec![v4_at(bits, 0)]));
    }
    if in_v6(ip, Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) {
        return Some(("NAT64 64:ff9b::/96", vec![v4_at(bits, 0)]));
    }
    if in_v6(ip, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        return Some(("6to4 2002::/16", vec![v4_at(bits, 80)]));
    }
    if in_v6(ip, Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32) {
        // Teredo: the server's address, then the client's, stored inverted.
        return Some(("Teredo 2001::/32", vec![v4_at(bits, 64), Ipv4Addr::from(!(bits as u32))]));
    }
    None
}

/// Why `ip` is refused, or `None` when git may connect to it.
pub fn refusal(ip: IpAddr) -> Option<Refusal> {
    match ip {
        IpAddr::V4(v4) => v4_refusal(v4).map(|range| Refusal { range, carrier: None }),
        IpAddr::V6(v6) => {
            if let Some((carrier, carried)) = carried_v4(v6) {
                return carried.into_iter().find_map(v4_refusal).map(|range| Refusal { range, carrier: Some(carrier) });
            }
            let range =
                IPV6.iter().find(|(base, prefix, _)| in_v6(v6, *base, *prefix)).map(|(_, _, range)| *range).or_else(
                    || (!in_v6(v6, Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3)).then_some(NOT_GLOBAL_UNICAST),
                );
            range.map(|range| Refusal { range, carrier: None })
        }
    }
}

/// Whether git may connect to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    refusal(ip).is_none()
}

/// Whether `ip` is a loopback address, directly or carried in IPv6.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || carried_v4(v6).is_some_and(|(_, carried)| carried.iter().any(Ipv4Addr::is_loopback))
        }
    }
}

/// A number part of an `inet_aton` address: decimal, `0x` hex or `0` octal.
fn aton_part(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() && radix == 16 {
        return Some(0);
    }
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A host name that the resolver reads as an IPv4 address: one to four
/// numbers, the last filling the remaining bytes (`inet_aton`).
/// `Some(Err(()))` when it looks numeric but is not a valid address, which
/// is refused rather than left to a resolver to interpret.
pub fn ipv4_host(host: &str) -> Option<Result<Ipv4Addr, ()>> {
    let last = host.rsplit('.').next().unwrap_or_default();
    let numeric = |s: &str| {
        !s.is_empty() && (s.bytes().all(|b| b.is_ascii_digit()) || s.starts_with("0x") || s.starts_with("0X"))
    };
    if !numeric(last) {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return Some(Err(()));
    }
    let values: Option<Vec<u64>> = parts.iter().map(|p| aton_part(p)).collect();
    let Some(values) = values else { return Some(Err(())) };
    let (last, leading) = values.split_last().ok_or(()).map_or((0, &[][..]), |(l, r)| (*l, r));
    if leading.iter().any(|&v| v > 255) || last >= 1u64 << (8 * (4 - leading.len())) {
        return Some(Err(()));
    }
    let mut address = last as u32;
    for (i, &v) in leading.iter().enumerate() {
        address |= (v as u32) << (24 - 8 * i);
    }
    Some(Ok(Ipv4Addr::from(address)))
}

/// A DNS name git may be given: letters, digits and hyphens in labels of 1
/// to 63 bytes, 253 bytes in all. Anything else (`_`, `%`, non-ASCII) could
/// be read differently by the resolver and curl.
pub fn valid_host_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod url_table;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inet_aton_forms() {
        for (host, ip) in [
            ("127.1", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("169.254.43518", "169.254.169.254"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("8.8.8.8", "8.8.8.8"),
            ("0", "0.0.0.0"),
        ] {
            assert_eq!(ipv4_host(host), Some(Ok(ip.parse().unwrap())), "{host}");
        }
        for host in ["256.0.0.1", "1.2.3.4.5", "08.0.0.1", "1.2.3.256", "4294967296", "0xfg"] {
            assert_eq!(ipv4_host(host), Some(Err(())), "{host}");
        }
        for host in ["github.com", "1.2.3.example", "x1", "a.b"] {
            assert_eq!(ipv4_host(host), None, "{host}");
        }
    }

    #[test]
    fn carried_addresses_decide() {
        let r = |s: &str| refusal(s.parse().unwrap()).map(|r| r.to_string());
        assert_eq!(r("64:ff9b::a9fe:a9fe").unwrap(), "link-local 169.254.0.0/16 (carried in NAT64 64:ff9b::/96)");
        assert_eq!(r("2001:0:4136:e378:8000:63bf:f7f7:f7f7"), None, "Teredo of public server and client");
        assert_eq!(
            r("2001:0:4136:e378:8000:63bf:3fff:fdd2").unwrap(),
            "documentation 192.0.2.0/24 (carried in Teredo 2001::/32)"
        );
        assert_eq!(r("::1").unwrap(), "loopback ::1/128");
        assert_eq!(r("::").unwrap(), "unspecified ::/128");
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(is_loopback("::127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:8.8.8.8".parse().unwrap()));
    }
}
