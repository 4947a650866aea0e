//! Checks: each condition's pass and failure with its description, conditions in order,
//! templated body conditions, and the descriptions' bound.

use loadfleet_engine::checks::{Check, Condition, HeaderTest, JsonTest, Outcome, StatusSet, MAX_DESCRIPTION_BYTES};
use loadfleet_engine::response::{HeaderLine, Response};
use loadfleet_engine::rng::Rng;
use loadfleet_engine::row::Row;
use loadfleet_engine::template::{Context, DataColumns, Names};
use loadfleet_engine::vars::Vars;

const HEADERS: [HeaderLine<'static>; 2] = [
    HeaderLine { name: b"Location", value: b"/login.php" },
    HeaderLine { name: b"Content-Type", value: b"text/html; charset=utf-8" },
];

fn no_names() -> Names<'static> {
    Names { variables: &[], data: &[] }
}

/// The outcome of a check of `conditions` on a response (status, body, latency in µs), for
/// a user whose row's username is alice.
fn outcome(conditions: Vec<Condition>, status: u16, body: &str, latency_us: u64) -> Outcome {
    let check = Check::new("the check", conditions).unwrap();
    let response = Response::new(status, &HEADERS, body.as_bytes(), latency_us);
    evaluate(&check, &response)
}

fn evaluate(check: &Check, response: &Response<'_>) -> Outcome {
    let (vars, mut rng, ends) = (Vars::new(0).unwrap(), Rng::new(1), [5u32]);
    let mut ctx = Context {
        vars: &vars,
        row: Some(Row::new(0, b"alice", &ends)),
        user: 0,
        agent: 0,
        iteration: 0,
        now_ms: 0,
        rng: &mut rng,
    };
    check.evaluate(response, &mut ctx, &mut Vec::new())
}

fn fail(text: &str) -> Outcome {
    Outcome::Fail(text.to_string())
}

#[test]
fn status_sets_take_codes_classes_and_ranges() {
    let set = StatusSet::parse(&["200", "3xx", "401-403"]).unwrap();
    let passing: Vec<u16> = (100..=599).filter(|&c| set.contains(c)).collect();
    assert_eq!(passing.len(), 1 + 100 + 3);
    assert!(set.contains(302) && set.contains(402) && !set.contains(404) && !set.contains(201));
    assert!(!set.contains(0) && !set.contains(700) && !set.contains(u16::MAX));
    assert_eq!(outcome(vec![Condition::status(&["200"]).unwrap()], 200, "", 0), Outcome::Pass);
    assert_eq!(outcome(vec![Condition::status(&["200"]).unwrap()], 403, "", 0), fail("status 403 not in [200]"));
    assert_eq!(
        outcome(vec![Condition::status(&["2xx", "304"]).unwrap()], 404, "", 0),
        fail("status 404 not in [2xx, 304]")
    );
}

#[test]
fn bad_status_items_are_named() {
    assert_eq!(
        StatusSet::parse(&["200", "700"]).unwrap_err(),
        "status[1] '700': a code in 100..=599, a class like '2xx' or a range like '200-299'"
    );
    for bad in ["6xx", "0xx", "299-200", "abc", "", "99", "2x", "200-", "20x0"] {
        assert!(StatusSet::parse(&[bad]).is_err(), "{bad:?}");
    }
    assert!(StatusSet::parse(&[]).is_err());
    assert!(StatusSet::parse(&["100-599"]).unwrap().contains(599));
}

#[test]
fn body_contains_and_lacks_take_the_rendered_template() {
    let columns = vec!["username".to_string()];
    let data = [DataColumns { name: "accounts", columns: &columns }];
    let names = Names { variables: &[], data: &data };
    let welcome = || Condition::body_contains("Welcome, ${accounts.username}", &names).unwrap();
    assert_eq!(outcome(vec![welcome()], 200, "<h1>Welcome, alice</h1>", 0), Outcome::Pass);
    assert_eq!(outcome(vec![welcome()], 200, "<h1>Welcome, bob</h1>", 0), fail("body lacks 'Welcome, alice'"));
    let lacks = Condition::body_lacks("error", &names).unwrap();
    assert_eq!(outcome(vec![lacks], 200, "an error page", 0), fail("body contains 'error'"));
    assert_eq!(outcome(vec![Condition::body_lacks("error", &names).unwrap()], 200, "fine", 0), Outcome::Pass);
    let refused = Condition::body_contains("${nope}", &names).unwrap_err();
    assert!(refused.starts_with("body_contains: unknown variable 'nope'"), "{refused}");
}

#[test]
fn body_regex() {
    let regex = || Condition::body_regex(r#"data-cart-items="\d+""#).unwrap();
    assert_eq!(outcome(vec![regex()], 200, r#"<span data-cart-items="3">"#, 0), Outcome::Pass);
    assert_eq!(outcome(vec![regex()], 200, "<span>", 0), fail(r#"body does not match 'data-cart-items="\d+"'"#));
    assert!(Condition::body_regex("(?!x)").unwrap_err().starts_with("body_regex: "));
}

#[test]
fn header_conditions() {
    let header = |name: &str, test| outcome(vec![Condition::header(name, test).unwrap()], 302, "", 0);
    assert_eq!(header("location", HeaderTest::Equals(b"/login.php".to_vec())), Outcome::Pass);
    assert_eq!(
        header("Location", HeaderTest::Equals(b"/account.php".to_vec())),
        fail("header Location is '/login.php', not '/account.php'")
    );
    assert_eq!(header("Content-Type", HeaderTest::Contains(b"text/html".to_vec())), Outcome::Pass);
    assert_eq!(
        header("Content-Type", HeaderTest::Contains(b"json".to_vec())),
        fail("header Content-Type is 'text/html; charset=utf-8', lacks 'json'")
    );
    assert_eq!(header("Location", HeaderTest::regex("^/login").unwrap()), Outcome::Pass);
    assert_eq!(
        header("Location", HeaderTest::regex("^/account").unwrap()),
        fail("header Location is '/login.php', does not match '^/account'")
    );
    assert_eq!(header("X-Error", HeaderTest::Absent), Outcome::Pass);
    assert_eq!(header("Location", HeaderTest::Absent), fail("header Location present: '/login.php'"));
    assert_eq!(header("X-Error", HeaderTest::Contains(b"x".to_vec())), fail("header X-Error absent"));
    assert!(Condition::header("Bad Name", HeaderTest::Absent).unwrap_err().starts_with("header.name \"Bad Name\""));
}

#[test]
fn json_path_conditions() {
    let body = r#"{"status": "fail", "count": 3, "none": null, "items": []}"#;
    let json = |path: &str, test, body: &str| outcome(vec![Condition::json_path(path, test).unwrap()], 200, body, 0);
    assert_eq!(json("$.count", JsonTest::Equals(b"3".to_vec()), body), Outcome::Pass);
    assert_eq!(json("$.status", JsonTest::Equals(b"ok".to_vec()), body), fail("json $.status is 'fail', not 'ok'"));
    assert_eq!(json("$.none", JsonTest::Equals(b"x".to_vec()), body), fail("json $.none is null, not 'x'"));
    assert_eq!(json("$.none", JsonTest::Exists, body), Outcome::Pass, "null exists");
    assert_eq!(json("$.items[0]", JsonTest::Exists, body), fail("json $.items[0]: no value"));
    assert_eq!(json("$.status", JsonTest::Exists, "<html>"), fail("json $.status: body is not JSON"));
    assert!(Condition::json_path("status", JsonTest::Exists).unwrap_err().starts_with("json_path.path \"status\": "));
}

#[test]
fn latency_below() {
    let below = || Condition::latency_below_ms(200).unwrap();
    assert_eq!(outcome(vec![below()], 200, "", 199_999), Outcome::Pass);
    assert_eq!(outcome(vec![below()], 200, "", 200_000), fail("latency 200.0 ms not below 200 ms"));
    assert_eq!(outcome(vec![below()], 200, "", 312_449), fail("latency 312.4 ms not below 200 ms"));
    assert!(Condition::latency_below_ms(0).is_err());
}

#[test]
fn the_first_failing_condition_is_the_one_described() {
    let conditions = || {
        vec![
            Condition::status(&["302"]).unwrap(),
            Condition::header("Location", HeaderTest::Equals(b"/account.php".to_vec())).unwrap(),
            Condition::latency_below_ms(1).unwrap(),
        ]
    };
    assert_eq!(outcome(conditions(), 200, "", 5000), fail("status 200 not in [302]"));
    assert_eq!(outcome(conditions(), 302, "", 5000), fail("header Location is '/login.php', not '/account.php'"));
}

#[test]
fn descriptions_are_bounded_and_say_when_the_body_was_cut() {
    let long = "x".repeat(300);
    let names = no_names();
    let failed = outcome(vec![Condition::body_contains(&long, &names).unwrap()], 200, "", 0);
    let Outcome::Fail(text) = failed else { panic!("passed") };
    assert!(text.len() <= MAX_DESCRIPTION_BYTES, "{} bytes", text.len());
    assert!(text.starts_with("body lacks 'xxx") && text.contains("…"), "{text}");
    let check = Check::new("c", vec![Condition::body_contains("Welcome", &names).unwrap()]).unwrap();
    let mut response = Response::new(200, &[], b"<html><head>", 0);
    response.body_truncated = true;
    assert_eq!(evaluate(&check, &response), fail("body lacks 'Welcome' (only the body's first 12 bytes were kept)"));
}

#[test]
fn checks_need_a_name_and_a_condition_and_say_if_they_read_the_body() {
    assert!(Check::new("", vec![Condition::latency_below_ms(1).unwrap()]).is_err());
    assert!(Check::new(&"n".repeat(65), vec![Condition::latency_below_ms(1).unwrap()]).is_err());
    assert_eq!(Check::new("empty", vec![]).unwrap_err(), "check 'empty': no condition");
    let head_only = Check::new("a", vec![Condition::status(&["200"]).unwrap()]).unwrap();
    assert_eq!((head_only.name(), head_only.needs_body()), ("a", false));
    let body = Check::new("b", vec![Condition::body_regex("x").unwrap()]).unwrap();
    assert!(body.needs_body());
}
