//! Extractors and checks on a response allocate nothing per call but the value's buffer
//! (regexes read with reused capture locations, headers and form fields by byte scans);
//! the JSON kinds are left out: their body is parsed once into a Value, by design.
//! Counted by tests/counting_alloc's global allocator (this thread's calls).

mod counting_alloc;

use counting_alloc::allocations;
use loadfleet_engine::checks::{Check, Condition, HeaderTest, Outcome};
use loadfleet_engine::extract::Extractor;
use loadfleet_engine::response::{HeaderLine, Response};
use loadfleet_engine::rng::Rng;
use loadfleet_engine::template::{Context, Names};
use loadfleet_engine::vars::Vars;

const BODY: &[u8] = br#"<form><input type="hidden" name="csrf" value="a&amp;b"></form>
<span data-cart-items="3"></span><span data-cart-items="7"></span>"#;

const HEADERS: [HeaderLine<'static>; 2] = [
    HeaderLine { name: b"Location", value: b"/account.php" },
    HeaderLine { name: b"Set-Cookie", value: b"PHPSESSID=s1; Path=/" },
];

#[test]
fn extractions_allocate_nothing_per_call() {
    let extractors = [
        Extractor::status(),
        Extractor::header("location").unwrap(),
        Extractor::cookie("PHPSESSID").unwrap(),
        Extractor::regex(r#"data-cart-items="(\d+)""#, 1).unwrap(),
        Extractor::form_field("csrf").unwrap(),
    ];
    let mut out = Vec::with_capacity(256);
    let response = Response::new(200, &HEADERS, BODY, 1500);
    // The regex's lazy DFA fills its cache on its first searches: warm it, as a run's first
    // requests do.
    for extractor in &extractors {
        extractor.extract(&response, &mut out).unwrap();
    }
    let before = allocations();
    for _ in 0..100 {
        for extractor in &extractors {
            out.clear();
            extractor.extract(&response, &mut out).unwrap();
        }
    }
    assert_eq!(allocations() - before, 0, "allocations in 500 extractions");
    assert_eq!(out, b"a&b");
    std::hint::black_box(vec![0u8; 3]);
    assert!(allocations() > before, "the counter counts");
}

#[test]
fn a_passing_check_allocates_nothing() {
    let variables = vec!["items".to_string()];
    let names = Names { variables: &variables, data: &[] };
    let conditions = vec![
        Condition::status(&["2xx"]).unwrap(),
        Condition::header("Location", HeaderTest::Contains(b"account".to_vec())).unwrap(),
        Condition::header("X-Error", HeaderTest::Absent).unwrap(),
        Condition::body_contains("data-cart-items=\"${items}\"", &names).unwrap(),
        Condition::body_lacks("error", &names).unwrap(),
        Condition::body_regex(r#"name="csrf""#).unwrap(),
        Condition::latency_below_ms(200).unwrap(),
    ];
    let check = Check::new("account page", conditions).unwrap();
    let mut vars = Vars::new(1).unwrap();
    vars.set(0, b"7").unwrap();
    let (mut rng, mut scratch) = (Rng::new(1), Vec::with_capacity(256));
    let response = Response::new(200, &HEADERS, BODY, 1500);
    let mut ctx = Context { vars: &vars, row: None, user: 0, agent: 0, iteration: 0, now_ms: 0, rng: &mut rng };
    assert_eq!(check.evaluate(&response, &mut ctx, &mut scratch), Outcome::Pass, "warm-up");
    let before = allocations();
    for _ in 0..100 {
        assert_eq!(check.evaluate(&response, &mut ctx, &mut scratch), Outcome::Pass);
    }
    assert_eq!(allocations() - before, 0, "allocations in 100 passing checks");
}
