//! The cookie jar: RFC 6265's rules as a user's requests meet them, the caps and their
//! counts, and the cached `Cookie:` value recomputed only when the jar changed or a cookie
//! expired.

use loadfleet_engine::jar::{
    Jar, JarLimits, Refusal, Stored, DEFAULT_MAX_BYTES, DEFAULT_MAX_COOKIES, MAX_COOKIE_BYTES,
};
use url::Url;

/// 2026-01-01T00:00:00Z: a fixed "now" (dates in Expires below are after it).
const NOW_MS: u64 = 1_767_225_600_000;

fn url(text: &str) -> Url {
    Url::parse(text).unwrap()
}

/// Every URL the tests ask for: a URL's key is its index here, as the job gives each
/// (target, path) its own key.
const URLS: [&str; 14] = [
    "http://app.test/",
    "http://app.test/account",
    "https://app.test/",
    "http://www.app.test/",
    "http://other.test/",
    "http://x.app.test/",
    "http://notapp.test/",
    "http://app.test/account/cart",
    "http://app.test/accounts",
    "http://app.test/shop/cart.php",
    "http://127.0.0.70:18801/account.php",
    "http://127.0.0.71:18801/account.php",
    "http://app.test/login",
    "https://app.test/account",
];

/// The Cookie: value for `at`, under its key.
fn header(jar: &mut Jar, at: &str, now_ms: u64) -> String {
    let key = URLS.iter().position(|k| *k == at).unwrap_or_else(|| panic!("{at} is not in URLS"));
    String::from_utf8(jar.header_for(key, &url(at), now_ms).to_vec()).unwrap()
}

fn jar() -> Jar {
    Jar::new(JarLimits::default(), URLS.len())
}

#[test]
fn a_host_only_cookie_goes_back_to_its_host_only() {
    let mut jar = jar();
    assert_eq!(jar.store(b"sid=abc; Path=/; HttpOnly", &url("http://app.test/login"), NOW_MS), Stored::Added);
    assert_eq!(header(&mut jar, "http://app.test/account", NOW_MS), "sid=abc", "HttpOnly is still sent over HTTP");
    assert_eq!(header(&mut jar, "http://www.app.test/", NOW_MS), "");
    assert_eq!(header(&mut jar, "http://other.test/", NOW_MS), "");
}

#[test]
fn a_domain_cookie_goes_to_the_domain_and_its_subdomains() {
    let mut jar = jar();
    assert_eq!(jar.store(b"d=1; Domain=app.test", &url("http://www.app.test/"), NOW_MS), Stored::Added);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "d=1");
    assert_eq!(header(&mut jar, "http://www.app.test/", NOW_MS), "d=1");
    assert_eq!(header(&mut jar, "http://x.app.test/", NOW_MS), "d=1");
    assert_eq!(header(&mut jar, "http://notapp.test/", NOW_MS), "");
}

#[test]
fn a_cookie_for_another_domain_is_refused_and_counted() {
    let mut jar = jar();
    let refused = jar.store(b"e=1; Domain=evil.test", &url("http://app.test/"), NOW_MS);
    assert_eq!(refused, Stored::Refused(Refusal::OtherDomain));
    let sub = jar.store(b"e=1; Domain=www.app.test", &url("http://app.test/"), NOW_MS);
    assert_eq!(sub, Stored::Refused(Refusal::OtherDomain), "a subdomain of the host is another domain");
    assert_eq!(jar.take_counts().refused, 2);
    assert!(jar.is_empty());
}

#[test]
fn ip_hosts_of_the_lab_work_like_names() {
    let mut jar = jar();
    let at = url("http://127.0.0.70:18801/login.php");
    assert_eq!(jar.store(b"PHPSESSID=s1; path=/", &at, NOW_MS), Stored::Added);
    assert_eq!(header(&mut jar, "http://127.0.0.70:18801/account.php", NOW_MS), "PHPSESSID=s1");
    assert_eq!(header(&mut jar, "http://127.0.0.71:18801/account.php", NOW_MS), "");
}

#[test]
fn a_path_cookie_goes_to_its_path_and_below_longer_paths_first() {
    let mut jar = jar();
    jar.store(b"root=r; Path=/", &url("http://app.test/"), NOW_MS);
    jar.store(b"acc=a; Path=/account", &url("http://app.test/"), NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/account", NOW_MS), "acc=a; root=r", "longer path first");
    assert_eq!(header(&mut jar, "http://app.test/account/cart", NOW_MS), "acc=a; root=r");
    assert_eq!(header(&mut jar, "http://app.test/accounts", NOW_MS), "root=r", "a prefix is not a path-match");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "root=r");
    // Without Path, the default path is the request path's directory (RFC 6265 §5.1.4).
    jar.store(b"dir=d", &url("http://app.test/shop/item.php"), NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/shop/cart.php", NOW_MS), "dir=d; root=r");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "root=r");
}

#[test]
fn a_secure_cookie_is_not_sent_over_http() {
    let mut jar = jar();
    jar.store(b"s=1; Secure", &url("https://app.test/"), NOW_MS);
    jar.store(b"plain=2", &url("https://app.test/"), NOW_MS);
    assert_eq!(header(&mut jar, "https://app.test/", NOW_MS), "s=1; plain=2");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "plain=2");
}

#[test]
fn max_age_expires_the_cookie_and_the_cached_value_follows() {
    let mut jar = jar();
    jar.store(b"m=1; Max-Age=60", &url("http://app.test/"), NOW_MS);
    jar.store(b"keep=2", &url("http://app.test/"), NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS + 59_999), "m=1; keep=2");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS + 60_000), "keep=2", "gone at its expiry, no store between");
    let counts = jar.take_counts();
    assert_eq!((counts.expired, counts.recomputed), (1, 2));
    assert_eq!(jar.len(), 1);
}

#[test]
fn expires_is_a_date_and_max_age_wins_over_it() {
    let mut jar = jar();
    jar.store(b"x=1; Expires=Wed, 01 Jan 2031 00:00:00 GMT", &url("http://app.test/"), NOW_MS);
    jar.store(b"y=2; Max-Age=10; Expires=Wed, 01 Jan 2031 00:00:00 GMT", &url("http://app.test/"), NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "x=1; y=2");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS + 10_000), "x=1");
    let in_2031 = 1_924_992_000_000;
    assert_eq!(header(&mut jar, "http://app.test/", in_2031), "");
}

#[test]
fn max_age_0_or_a_past_expires_deletes_the_namesake_only() {
    let mut jar = jar();
    let at = url("http://app.test/");
    jar.store(b"sid=1", &at, NOW_MS);
    jar.store(b"lang=en", &at, NOW_MS);
    assert_eq!(jar.store(b"sid=; Max-Age=0", &at, NOW_MS), Stored::Deleted);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "lang=en");
    assert_eq!(jar.store(b"lang=; Expires=Thu, 01 Jan 1970 00:00:01 GMT", &at, NOW_MS), Stored::Deleted);
    assert_eq!(jar.store(b"never=; Max-Age=0", &at, NOW_MS), Stored::AlreadyExpired);
    assert_eq!(jar.store(b"lang=; Max-Age=0; Path=/other", &at, NOW_MS), Stored::AlreadyExpired, "another path");
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "");
    assert_eq!(jar.take_counts().deleted, 2);
}

#[test]
fn a_namesake_replaces_the_value_and_keeps_its_age() {
    let mut jar = jar();
    let at = url("http://app.test/");
    jar.store(b"a=1", &at, NOW_MS);
    jar.store(b"b=2", &at, NOW_MS);
    assert_eq!(jar.store(b"a=11", &at, NOW_MS), Stored::Replaced);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "a=11; b=2");
    assert_eq!((jar.len(), jar.bytes()), (2, 7));
}

#[test]
fn the_17th_cookie_evicts_the_oldest_and_is_counted() {
    let mut jar = jar();
    let at = url("http://app.test/");
    for i in 0..=DEFAULT_MAX_COOKIES {
        assert_eq!(jar.store(format!("c{i}=v").as_bytes(), &at, NOW_MS), Stored::Added);
    }
    assert_eq!(jar.len(), 16);
    let sent = header(&mut jar, "http://app.test/", NOW_MS);
    assert!(sent.starts_with("c1=v; ") && sent.ends_with("; c16=v"), "{sent}");
    assert_eq!(jar.take_counts().evicted, 1);
}

#[test]
fn bytes_are_capped_at_8_kib_and_4_kib_a_cookie() {
    let mut jar = jar();
    let at = url("http://app.test/");
    let cookie = |name: &str, bytes: usize| format!("{name}={}", "v".repeat(bytes - name.len() - 1)).into_bytes();
    assert_eq!(
        jar.store(&cookie("big", MAX_COOKIE_BYTES + 1), &at, NOW_MS),
        Stored::Refused(Refusal::TooLong { bytes: 4097 })
    );
    for name in ["a", "b", "c"] {
        jar.store(&cookie(name, 3000), &at, NOW_MS);
    }
    assert_eq!((jar.len(), jar.bytes()), (2, 6000), "a went to keep b and c under {DEFAULT_MAX_BYTES}");
    assert!(header(&mut jar, "http://app.test/", NOW_MS).starts_with("b="));
    assert_eq!(jar.store(&cookie("d", MAX_COOKIE_BYTES), &at, NOW_MS), Stored::Added);
    assert_eq!(jar.bytes(), 7096);
    let counts = jar.take_counts();
    assert_eq!((counts.evicted, counts.refused), (2, 1));
}

#[test]
fn what_is_not_a_cookie_is_refused() {
    let mut jar = jar();
    let at = url("http://app.test/");
    assert_eq!(jar.store(b"no pair here", &at, NOW_MS), Stored::Refused(Refusal::Invalid));
    assert_eq!(jar.store(b"=v", &at, NOW_MS), Stored::Refused(Refusal::Invalid));
    assert_eq!(jar.store(b"a=\xff", &at, NOW_MS), Stored::Refused(Refusal::NotText));
    assert!(jar.is_empty());
}

#[test]
fn the_value_is_recomputed_only_when_the_jar_changed() {
    let mut jar = jar();
    let at = url("http://app.test/");
    jar.store(b"sid=1", &at, NOW_MS);
    let generation = jar.generation();
    for _ in 0..5 {
        assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "sid=1");
        assert_eq!(header(&mut jar, "http://app.test/account", NOW_MS), "sid=1");
    }
    assert_eq!(jar.take_counts().recomputed, 2, "once per URL key");
    assert_eq!(jar.generation(), generation);
    jar.store(b"sid=2", &at, NOW_MS);
    assert_ne!(jar.generation(), generation);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "sid=2");
    assert_eq!(jar.take_counts().recomputed, 1);
    jar.store(b"x=1; Domain=evil.test", &at, NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "sid=2");
    assert_eq!(jar.take_counts().recomputed, 0, "a refused cookie changes nothing");
}

#[test]
fn reset_empties_the_jar_for_a_new_session() {
    let mut jar = jar();
    jar.store(b"sid=1", &url("http://app.test/"), NOW_MS);
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "sid=1");
    jar.reset();
    assert_eq!((jar.len(), jar.bytes()), (0, 0));
    assert_eq!(header(&mut jar, "http://app.test/", NOW_MS), "");
}

#[test]
fn limits_are_checked_and_name_their_field() {
    assert_eq!(JarLimits::new(16, 8192).unwrap(), JarLimits::default());
    assert_eq!(JarLimits::new(0, 8192).unwrap_err(), "cookies.max_cookies 0 is not in 1..=64");
    assert_eq!(JarLimits::new(65, 8192).unwrap_err(), "cookies.max_cookies 65 is not in 1..=64");
    assert_eq!(JarLimits::new(16, 4095).unwrap_err(), "cookies.max_bytes 4095 is not in 4096..=65536");
    assert!(JarLimits::new(64, 65536).is_ok());
    assert!(JarLimits::new(1, 65537).is_err());
}

#[test]
fn with_max_cookies_64_every_cookie_is_selected() {
    let mut jar = Jar::new(JarLimits::new(64, 65536).unwrap(), 1);
    let at = url("http://app.test/");
    for i in 0..70 {
        jar.store(format!("c{i}=v").as_bytes(), &at, NOW_MS);
    }
    let sent = String::from_utf8(jar.header_for(0, &at, NOW_MS).to_vec()).unwrap();
    assert_eq!(sent.split("; ").count(), 64);
    assert!(sent.starts_with("c6=v; ") && sent.ends_with("; c69=v"), "{sent}");
}
