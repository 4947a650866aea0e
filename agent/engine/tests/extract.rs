//! Extractors, kind by kind: what each takes from a response, and its "not found".

use loadfleet_engine::extract::{Extractor, Missing};
use loadfleet_engine::response::{HeaderLine, Response};

const HTML: &[u8] = br#"<html><form method="post">
<INPUT type="hidden" value="t&amp;k&quot;1&#39;" name="csrf">
<input name='user' value='alice'/>
<input name=plain value=bare>
<input name="empty">
<inputx name="csrf2" value="no">
<input type="text"
       name="multi"
       value="line &lt;b&gt; &x; &#x27;">
<span data-cart-items="3"></span><span data-cart-items="7"></span>
</form></html>"#;

fn headers() -> Vec<HeaderLine<'static>> {
    vec![
        HeaderLine { name: b"Content-Type", value: b"text/html" },
        HeaderLine { name: b"Set-Cookie", value: b"lang=en; Path=/" },
        HeaderLine { name: b"set-cookie", value: b" PHPSESSID = s1 ; HttpOnly" },
        HeaderLine { name: b"Set-Cookie", value: b"PHPSESSID=s2; Path=/" },
        HeaderLine { name: b"X-Twice", value: b"first" },
        HeaderLine { name: b"x-twice", value: b"second" },
    ]
}

fn take(extractor: &Extractor, response: &Response<'_>) -> Result<String, Missing> {
    let mut out = Vec::new();
    extractor.extract(response, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

fn html(extractor: Extractor) -> Result<String, Missing> {
    let headers = headers();
    take(&extractor, &Response::new(302, &headers, HTML, 1000))
}

fn json(extractor: Extractor, body: &str) -> Result<String, Missing> {
    take(&extractor, &Response::new(200, &[], body.as_bytes(), 1000))
}

#[test]
fn status_header_and_cookie() {
    assert_eq!(html(Extractor::status()), Ok("302".into()));
    assert_eq!(html(Extractor::header("content-type").unwrap()), Ok("text/html".into()));
    assert_eq!(html(Extractor::header("X-TWICE").unwrap()), Ok("first".into()), "the first of two");
    assert_eq!(html(Extractor::header("Location").unwrap()), Err(Missing::NotFound));
    assert_eq!(html(Extractor::cookie("PHPSESSID").unwrap()), Ok("s2".into()), "the last of that name");
    assert_eq!(html(Extractor::cookie("lang").unwrap()), Ok("en".into()));
    assert_eq!(html(Extractor::cookie("Path").unwrap()), Err(Missing::NotFound), "attributes are not cookies");
    assert_eq!(html(Extractor::cookie("phpsessid").unwrap()), Err(Missing::NotFound), "cookie names keep case");
}

#[test]
fn regex_takes_group_1_at_its_occurrence() {
    let regex = |pattern: &str, n: usize| html(Extractor::regex(pattern, n).unwrap());
    assert_eq!(regex(r#"data-cart-items="(\d+)""#, 0), Ok("3".into()));
    assert_eq!(regex(r#"data-cart-items="(\d+)""#, 1), Ok("7".into()));
    assert_eq!(regex(r#"data-cart-items="(\d+)""#, 2), Err(Missing::NotFound));
    assert_eq!(regex(r"cart-items", 0), Ok("cart-items".into()), "no group: the whole match");
    assert_eq!(regex(r"(nothing)|(data)", 0), Err(Missing::NotFound), "group 1 did not take part");
    assert_eq!(regex(r"x*", 3), Ok("".into()), "empty matches move on");
    assert_eq!(regex(r"^<html>", 1), Err(Missing::NotFound), "anchors keep their meaning past the first match");
}

#[test]
fn form_fields_in_any_attribute_order_and_quoting() {
    let field = |name: &str| html(Extractor::form_field(name).unwrap());
    assert_eq!(field("csrf"), Ok("t&k\"1'".into()), "value before name, entities decoded");
    assert_eq!(field("user"), Ok("alice".into()), "single quotes, self-closing");
    assert_eq!(field("plain"), Ok("bare".into()), "no quotes");
    assert_eq!(field("empty"), Ok("".into()), "no value attribute: empty");
    assert_eq!(field("multi"), Ok("line <b> &x; '".into()), "over lines; an unknown entity stays");
    assert_eq!(field("csrf2"), Err(Missing::NotFound), "<inputx> is not an input");
    assert_eq!(field("absent"), Err(Missing::NotFound));
}

#[test]
fn form_field_scans_survive_broken_html() {
    for body in [&b"<input name=\"csrf\" value=\"unclosed"[..], b"<input", b"<input name", b"<input =x name=csrf"] {
        let response = Response::new(200, &[], body, 0);
        let _ = take(&Extractor::form_field("csrf").unwrap(), &response);
    }
    let response = Response::new(200, &[], b"<input name=csrf value='v", 0);
    assert_eq!(take(&Extractor::form_field("csrf").unwrap(), &response), Ok("v".into()));
}

#[test]
fn json_pointer_and_json_path() {
    let body =
        r#"{"token": "abc", "n": 12, "ok": true, "none": null, "items": [{"id": 5}, {"id": 6}], "o": {"k": [1]}}"#;
    assert_eq!(json(Extractor::json_pointer("/token").unwrap(), body), Ok("abc".into()));
    assert_eq!(json(Extractor::json_pointer("/items/1/id").unwrap(), body), Ok("6".into()));
    assert_eq!(json(Extractor::json_pointer("/o").unwrap(), body), Ok(r#"{"k":[1]}"#.into()));
    assert_eq!(json(Extractor::json_pointer("/none").unwrap(), body), Err(Missing::NotFound), "null is no value");
    assert_eq!(json(Extractor::json_pointer("/missing").unwrap(), body), Err(Missing::NotFound));
    assert_eq!(json(Extractor::json_path("$.items[*].id", 0).unwrap(), body), Ok("5".into()));
    assert_eq!(json(Extractor::json_path("$.items[*].id", 1).unwrap(), body), Ok("6".into()));
    assert_eq!(json(Extractor::json_path("$.items[*].id", 2).unwrap(), body), Err(Missing::NotFound));
    assert_eq!(json(Extractor::json_path("$..ok", 0).unwrap(), body), Ok("true".into()));
    assert_eq!(json(Extractor::json_path("$.items[?@.id > 5].id", 0).unwrap(), body), Ok("6".into()));
    assert_eq!(json(Extractor::json_path("$.n", 0).unwrap(), "<html>"), Err(Missing::NotJson));
    assert_eq!(json(Extractor::json_pointer("/n").unwrap(), "{\"n\": 1"), Err(Missing::NotJson));
}

#[test]
fn bad_extractors_are_refused_with_a_reason() {
    assert!(Extractor::regex("(?<=a)b", 0).unwrap_err().contains("look-around"));
    assert!(Extractor::json_pointer("token").unwrap_err().contains("must start with '/'"));
    assert!(Extractor::json_path("$.[", 0).unwrap_err().starts_with("JSONPath \"$.[\": "));
    let refused = Extractor::json_path("$[?match(@.a, 'x.*')]", 0).unwrap_err();
    assert!(
        refused.contains("function name 'match' is not defined"),
        "match() is left out (a regex compiled per node): {refused}"
    );
    assert!(Extractor::json_path("$[?length(@.a) > 1]", 0).is_ok(), "length() is kept");
    assert!(Extractor::header("").is_err());
    assert!(Extractor::header("X Bad").is_err());
    assert!(Extractor::cookie(&"c".repeat(257)).is_err());
    assert!(Extractor::form_field("csrf\n").is_err());
}

#[test]
fn only_body_kinds_need_the_body() {
    assert!(!Extractor::status().needs_body());
    assert!(!Extractor::cookie("a").unwrap().needs_body());
    assert!(Extractor::regex("a", 0).unwrap().needs_body());
    assert!(Extractor::form_field("a").unwrap().needs_body());
    assert!(Extractor::json_path("$.a", 0).unwrap().needs_body());
}
