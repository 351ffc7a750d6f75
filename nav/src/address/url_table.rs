//! `add_repository`'s address filter over a table of URLs, each
//! allowed or refused with its reason. Host names get their addresses from
//! the table, so no lookup leaves the machine.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::add_repository::{check_resolved, git_guard, parse_url};
use super::{ipv4_host, refusal};

const PRIVATE: &str = "Private or loopback addresses are not allowed";

#[derive(Debug, Clone)]
enum Want {
    /// Allowed, and why.
    Allowed(&'static str),
    /// Refused for an address in this range (carried in this IPv6 form, if any).
    Refused(&'static str, Option<&'static str>),
    /// Refused by the URL checks with this message.
    Invalid(&'static str),
}
use Want::{Allowed, Invalid, Refused};

#[derive(Debug, Clone)]
struct Row {
    url: String,
    allow_loopback: bool,
    resolves: Vec<IpAddr>,
    want: Want,
}

fn row(url: impl Into<String>, want: Want) -> Row {
    Row { url: url.into(), allow_loopback: false, resolves: Vec::new(), want }
}

fn named(url: impl Into<String>, resolves: &[&str], want: Want) -> Row {
    Row { resolves: resolves.iter().map(|a| a.parse().unwrap()).collect(), ..row(url, want) }
}

/// IPv4 addresses and the range each is refused for (`None`: public).
const V4: &[(&str, Option<&str>)] = &[
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("140.82.112.3", None),
    ("151.101.1.1", None),
    ("11.0.0.0", None),
    ("126.255.255.255", None),
    ("128.0.0.0", None),
    ("100.63.255.255", None),
    ("100.128.0.0", None),
    ("169.253.255.255", None),
    ("169.255.0.0", None),
    ("172.15.255.255", None),
    ("172.32.0.0", None),
    ("192.0.1.1", None),
    ("192.167.255.255", None),
    ("192.169.0.0", None),
    ("198.17.255.255", None),
    ("198.20.0.0", None),
    ("198.51.99.255", None),
    ("203.0.112.255", None),
    ("203.0.114.0", None),
    ("223.255.255.255", None),
    ("0.0.0.0", Some("this network 0.0.0.0/8")),
    ("0.1.2.3", Some("this network 0.0.0.0/8")),
    ("10.0.0.1", Some("private 10.0.0.0/8")),
    ("10.255.255.255", Some("private 10.0.0.0/8")),
    ("100.64.0.0", Some("shared address space 100.64.0.0/10")),
    ("100.127.255.255", Some("shared address space 100.64.0.0/10")),
    ("127.0.0.1", Some("loopback 127.0.0.0/8")),
    ("127.255.255.254", Some("loopback 127.0.0.0/8")),
    ("169.254.0.1", Some("link-local 169.254.0.0/16")),
    ("169.254.169.254", Some("link-local 169.254.0.0/16")),
    ("172.16.0.0", Some("private 172.16.0.0/12")),
    ("172.31.255.255", Some("private 172.16.0.0/12")),
    ("192.0.0.1", Some("IETF protocol assignments 192.0.0.0/24")),
    ("192.0.0.170", Some("IETF protocol assignments 192.0.0.0/24")),
    ("192.0.2.1", Some("documentation 192.0.2.0/24")),
    ("192.31.196.1", Some("AS112-v4 192.31.196.0/24")),
    ("192.52.193.1", Some("AMT 192.52.193.0/24")),
    ("192.88.99.1", Some("6to4 relay anycast 192.88.99.0/24")),
    ("192.168.0.1", Some("private 192.168.0.0/16")),
    ("192.168.255.255", Some("private 192.168.0.0/16")),
    ("192.175.48.1", Some("AS112 direct delegation 192.175.48.0/24")),
    ("198.18.0.1", Some("benchmarking 198.18.0.0/15")),
    ("198.19.255.255", Some("benchmarking 198.18.0.0/15")),
    ("198.51.100.1", Some("documentation 198.51.100.0/24")),
    ("203.0.113.1", Some("documentation 203.0.113.0/24")),
    ("224.0.0.1", Some("multicast 224.0.0.0/4")),
    ("239.255.255.250", Some("multicast 224.0.0.0/4")),
    ("240.0.0.1", Some("reserved 240.0.0.0/4")),
    ("255.255.255.254", Some("reserved 240.0.0.0/4")),
    ("255.255.255.255", Some("limited broadcast 255.255.255.255/32")),
];

/// Every IPv4 address of [`V4`] as a literal, as a host name resolving to
/// it, and carried in each IPv6 form that delivers to it.
fn v4_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, &(text, range)) in V4.iter().enumerate() {
        let v4: Ipv4Addr = text.parse().unwrap();
        let [a, b, c, d] = v4.octets();
        let (hi, lo) = (u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
        let want = |carrier: Option<&'static str>| match range {
            None => Allowed("a public IPv4 address"),
            Some(range) => Refused(range, carrier),
        };
        rows.push(row(format!("https://{text}/octo/demo"), want(None)));
        rows.push(named(format!("https://host{i}.example.com/octo/demo"), &[text], want(None)));
        rows.push(row(format!("https://[::ffff:{text}]/octo/demo"), want(Some("IPv4-mapped ::ffff:0:0/96"))));
        rows.push(row(format!("https://[64:ff9b::{hi:x}:{lo:x}]/octo/demo"), want(Some("NAT64 64:ff9b::/96"))));
        rows.push(row(format!("https://[2002:{hi:x}:{lo:x}::1]/octo/demo"), want(Some("6to4 2002::/16"))));
        let teredo = Ipv6Addr::new(0x2001, 0, 0x4136, 0xe378, 0x8000, 0x63bf, !hi, !lo);
        rows.push(row(format!("https://[{teredo}]/octo/demo"), want(Some("Teredo 2001::/32"))));
        if a != 0 {
            // `::` and `::1` are the unspecified and loopback addresses, not IPv4-compatible.
            rows.push(row(format!("https://[::{text}]/octo/demo"), want(Some("IPv4-compatible ::/96"))));
            rows.push(row(
                format!("https://[::ffff:0:{text}]/octo/demo"),
                want(Some("IPv4-translated ::ffff:0:0:0/96")),
            ));
        }
    }
    rows
}

fn v6_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for v6 in [
        "2606:4700::1111",
        "2a00:1450:4001:82a::200e",
        "2001:4860:4860::8888",
        "2620:0:2d0:200::7",
        "2001:200::1",
        "2400:cb00:2048:1::c629:d7a2",
        "2c0f:fb50:4003::1",
        "3fff:1000::1",
        "2620:4f:8001::1",
    ] {
        rows.push(row(format!("https://[{v6}]/octo/demo"), Allowed("a global unicast IPv6 address")));
    }
    for (v6, range) in [
        ("::1", "loopback ::1/128"),
        ("::", "unspecified ::/128"),
        ("0:0:0:0:0:0:0:1", "loopback ::1/128"),
        ("fe80::1", "link-local fe80::/10"),
        ("febf:ffff::1", "link-local fe80::/10"),
        ("fc00::1", "unique-local fc00::/7"),
        ("fd12:3456:789a::1", "unique-local fc00::/7"),
        ("fec0::1", "site-local fec0::/10"),
        ("feff::1", "site-local fec0::/10"),
        ("ff02::1", "multicast ff00::/8"),
        ("ff0e::101", "multicast ff00::/8"),
        ("100::1", "discard-only 100::/64"),
        ("100::ffff:ffff:ffff:ffff", "discard-only 100::/64"),
        ("100:0:0:1::1", "dummy prefix 100:0:0:1::/64"),
        ("2001:db8::1", "documentation 2001:db8::/32"),
        ("2001:db8:ffff::1", "documentation 2001:db8::/32"),
        ("3fff::1", "documentation 3fff::/20"),
        ("3fff:fff::1", "documentation 3fff::/20"),
        ("5f00::1", "segment routing SIDs 5f00::/16"),
        ("2001:1::1", "IETF protocol assignments 2001::/23"),
        ("2001:2::1", "IETF protocol assignments 2001::/23"),
        ("2001:3::1", "IETF protocol assignments 2001::/23"),
        ("2001:4:112::1", "IETF protocol assignments 2001::/23"),
        ("2001:10::1", "IETF protocol assignments 2001::/23"),
        ("2001:20::1", "IETF protocol assignments 2001::/23"),
        ("2001:1ff::1", "IETF protocol assignments 2001::/23"),
        ("2620:4f:8000::1", "AS112 direct delegation 2620:4f:8000::/48"),
        ("64:ff9b:1::1", "local-use IPv4/IPv6 translation 64:ff9b:1::/48"),
        ("64:ff9b:1:ffff::808:808", "local-use IPv4/IPv6 translation 64:ff9b:1::/48"),
        ("4000::1", "not global unicast (outside 2000::/3)"),
        ("1::1", "not global unicast (outside 2000::/3)"),
        ("8000::1", "not global unicast (outside 2000::/3)"),
        ("e000::1", "not global unicast (outside 2000::/3)"),
        ("64:ff9a::1", "not global unicast (outside 2000::/3)"),
    ] {
        rows.push(row(format!("https://[{v6}]/octo/demo"), Refused(range, None)));
    }
    // The cases the hostile probe found (git was started for each).
    for (v6, range, carrier) in [
        ("64:ff9b::a9fe:a9fe", "link-local 169.254.0.0/16", "NAT64 64:ff9b::/96"),
        ("::127.0.0.1", "loopback 127.0.0.0/8", "IPv4-compatible ::/96"),
        ("2002:a9fe:a9fe::", "link-local 169.254.0.0/16", "6to4 2002::/16"),
        ("::ffff:0:a9fe:a9fe", "link-local 169.254.0.0/16", "IPv4-translated ::ffff:0:0:0/96"),
        ("::2", "this network 0.0.0.0/8", "IPv4-compatible ::/96"),
        ("::ffff:0:0", "this network 0.0.0.0/8", "IPv4-mapped ::ffff:0:0/96"),
        ("2001:0:7f00:1::", "loopback 127.0.0.0/8", "Teredo 2001::/32"),
        ("2001:0:4136:e378::", "limited broadcast 255.255.255.255/32", "Teredo 2001::/32"),
    ] {
        rows.push(row(format!("https://[{v6}]/octo/demo"), Refused(range, Some(carrier))));
    }
    rows
}

fn shape_rows() -> Vec<Row> {
    let invalid = "Invalid repository URL (only https is supported): ";
    let mut rows: Vec<Row> = [
        ("ftp://github.com/octo/demo", Invalid("")),
        ("git://8.8.8.8/octo/demo", Invalid("")),
        ("file:///etc/passwd", Invalid("")),
        ("https://[::1/octo/demo", Invalid("")),
        ("https://[fe80::1%25eth0]/octo/demo", Invalid("")),
        ("https://[1.2.3.4]/octo/demo", Invalid("")),
        ("https://[::1]x/octo/demo", Invalid("")),
        ("https://[github.com]/octo/demo", Invalid("")),
        ("https://exa_mple.com/octo/demo", Invalid("")),
        ("https://%31%32%37.0.0.1/octo/demo", Invalid("")),
        ("https://256.1.1.1/octo/demo", Invalid("")),
        ("https://1.2.3.4.5/octo/demo", Invalid("")),
        ("https://08.8.8.8/octo/demo", Invalid("")),
        ("https://0x1g/octo/demo", Invalid("")),
        ("https://bücher.example/octo/demo", Invalid("")),
        ("https://-bad.example/octo/demo", Invalid("")),
        ("https://a..b/octo/demo", Invalid("")),
    ]
    .into_iter()
    .map(|(url, _)| row(url, Invalid(invalid)))
    .collect();
    for (url, message) in [
        ("https://user:pw@github.com/octo/demo", "Repository URLs must not include credentials"),
        ("https://user@[::1]/octo/demo", "Repository URLs must not include credentials"),
        ("https://github.com:8443/octo/demo", "Repository URLs must not include a port"),
        ("https://[2606:4700::1111]:443/octo/demo", "Repository URLs must not include a port"),
        ("https://127.0.0.1:80/octo/demo", "Repository URLs must not include a port"),
        ("https://github.com/octo/demo?x=1", "Repository URLs must not include a query or fragment"),
        ("https://github.com/octo/demo#x", "Repository URLs must not include a query or fragment"),
        ("https://localhost/octo/demo", "localhost URLs are not allowed"),
        ("https://LOCALHOST./octo/demo", "localhost URLs are not allowed"),
        ("https://repo.localhost/octo/demo", "localhost URLs are not allowed"),
    ] {
        rows.push(row(url, Invalid(message)));
    }
    // Host names the resolver would read as addresses are those addresses.
    for (url, range) in [
        ("https://127.1/octo/demo", "loopback 127.0.0.0/8"),
        ("https://0x7f000001/octo/demo", "loopback 127.0.0.0/8"),
        ("https://2130706433/octo/demo", "loopback 127.0.0.0/8"),
        ("https://0177.0.0.1/octo/demo", "loopback 127.0.0.0/8"),
        ("https://127.0.0.1./octo/demo", "loopback 127.0.0.0/8"),
        ("https://169.254.43518/octo/demo", "link-local 169.254.0.0/16"),
        ("https://0xa9fea9fe/octo/demo", "link-local 169.254.0.0/16"),
        ("https://0xa9.0xfe.0xa9.0xfe/octo/demo", "link-local 169.254.0.0/16"),
        ("https://0/octo/demo", "this network 0.0.0.0/8"),
        ("https://10.1/octo/demo", "private 10.0.0.0/8"),
    ] {
        rows.push(row(url, Refused(range, None)));
    }
    for url in ["https://0x08080808/octo/demo", "https://134744072/octo/demo", "https://8.8.2056/octo/demo"] {
        rows.push(row(url, Allowed("a public IPv4 address in inet_aton form, given to git as 8.8.8.8")));
    }
    rows
}

fn name_rows() -> Vec<Row> {
    let mut rows = vec![
        named("https://github.com/octo/demo", &["140.82.112.3"], Allowed("GitHub's public address")),
        named("https://gitlab.com/group/sub/project", &["172.65.251.78"], Allowed("GitLab's public address")),
        named(
            "https://dual.example.com/octo/demo",
            &["8.8.8.8", "2606:4700::1111"],
            Allowed("every address is public"),
        ),
        named("https://mixed.example.com/octo/demo", &["8.8.8.8", "10.0.0.1"], Refused("private 10.0.0.0/8", None)),
        named(
            "https://mapped.example.com/octo/demo",
            &["2606:4700::1111", "::ffff:127.0.0.1"],
            Refused("loopback 127.0.0.0/8", Some("IPv4-mapped ::ffff:0:0/96")),
        ),
        named(
            "https://nat64.example.com/octo/demo",
            &["64:ff9b::a9fe:a9fe"],
            Refused("link-local 169.254.0.0/16", Some("NAT64 64:ff9b::/96")),
        ),
        named(
            "https://metadata.example.com/latest/meta",
            &["169.254.169.254"],
            Refused("link-local 169.254.0.0/16", None),
        ),
        named("https://ula.example.com/octo/demo", &["fd00::1"], Refused("unique-local fc00::/7", None)),
        named("https://v6lo.example.com/octo/demo", &["::1"], Refused("loopback ::1/128", None)),
        named("https://site.example.com/octo/demo", &["fec0::1"], Refused("site-local fec0::/10", None)),
    ];
    // The test setting lets loopback through, and nothing else.
    let test_mode = |url: &str, resolves: &[&str], want| Row { allow_loopback: true, ..named(url, resolves, want) };
    rows.extend([
        test_mode("http://127.0.0.1:9418/demo/x", &[], Allowed("loopback, test setting")),
        test_mode("git://127.0.0.1:9418/demo/x", &[], Allowed("loopback, test setting")),
        test_mode("git://[::1]:9418/demo/x", &[], Allowed("IPv6 loopback, test setting")),
        test_mode("http://[::ffff:127.0.0.1]:8080/demo/x", &[], Allowed("mapped loopback, test setting")),
        test_mode("http://localhost:8080/demo/x", &["127.0.0.1"], Allowed("localhost, test setting")),
        test_mode("https://vm.example.com/demo/x", &["127.0.0.1"], Allowed("a name for loopback, test setting")),
        test_mode("http://10.0.0.1:80/demo/x", &[], Invalid("Repository URLs must not include a port")),
        test_mode("https://169.254.169.254/demo/x", &[], Refused("link-local 169.254.0.0/16", None)),
        test_mode(
            "https://[64:ff9b::a9fe:a9fe]/demo/x",
            &[],
            Refused("link-local 169.254.0.0/16", Some("NAT64 64:ff9b::/96")),
        ),
        test_mode("https://lan.example.com/demo/x", &["192.168.1.1"], Refused("private 192.168.0.0/16", None)),
    ]);
    rows
}

/// The literal a URL's host spells, as `parse_url` reads it.
fn literal_of(url: &str) -> Option<IpAddr> {
    let authority = url.split_once("://")?.1.split('/').next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host.strip_prefix('[') {
        return v6.split_once(']')?.0.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h).trim_end_matches('.');
    ipv4_host(host)?.ok().map(IpAddr::V4)
}

#[test]
fn url_table() {
    let rows: Vec<Row> = [v4_rows(), v6_rows(), shape_rows(), name_rows()].concat();
    let (mut allowed, mut refused) = (0, 0);
    for Row { url, allow_loopback, resolves, want } in &rows {
        let parsed = parse_url(url, *allow_loopback);
        match (want, &parsed) {
            (Invalid(message), Err(e)) => assert!(e.starts_with(message) && !message.is_empty(), "{url}: {e}"),
            (Refused(range, carrier), Err(e)) => {
                assert_eq!(e, PRIVATE, "{url}");
                let why = refusal(literal_of(url).unwrap()).unwrap();
                assert_eq!((why.range, why.carrier), (*range, *carrier), "{url}");
            }
            (Refused(range, carrier), Ok(u)) => {
                assert!(!resolves.is_empty(), "{url}: a literal was not refused");
                let why = check_resolved(resolves, *allow_loopback).expect_err(url);
                assert_eq!((why.range, why.carrier), (*range, *carrier), "{url}");
                assert!(u.bare_host.parse::<IpAddr>().is_err(), "{url}");
            }
            (Allowed(why), Ok(u)) => {
                assert_eq!(check_resolved(resolves, *allow_loopback), Ok(()), "{url} ({why})");
                let guard = git_guard(u, resolves);
                assert!(guard.windows(2).any(|w| w == ["-c", "http.followRedirects=false"]), "{url}: {guard:?}");
                let literal = literal_of(url);
                if let Some(IpAddr::V6(v6)) = literal {
                    assert!(u.url().contains(&format!("[{v6}]")), "{url}: {}", u.url());
                }
                if let Some(ip) = literal {
                    // git is given the address that was checked, in its canonical spelling.
                    assert_eq!(u.bare_host, ip.to_string(), "{url}");
                }
                if u.scheme == "https" && literal.is_none() && !resolves.is_empty() {
                    let pin = guard.iter().find(|a| a.starts_with("http.curloptResolve=")).expect(url);
                    assert!(pin.starts_with(&format!("http.curloptResolve={}:443:", u.bare_host)), "{pin}");
                }
            }
            (want, got) => panic!("{url}: wanted {want:?}, got {got:?}"),
        }
        if matches!(want, Allowed(_)) { allowed += 1 } else { refused += 1 }
    }
    eprintln!("URL table: {} tried, {refused} refused, {allowed} allowed", rows.len());
    assert!(rows.len() >= 200, "{} rows", rows.len());
}
