//! Templates: parsing against the table shared with the controller's plan validation
//! (tests/wire/template_cases.json), and rendering: values, filters, built-ins, the refusals
//! of values their place cannot carry, and the request's bound.

use std::path::Path;

use loadfleet_engine::rng::Rng;
use loadfleet_engine::row::Row;
use loadfleet_engine::template::{
    Builtin, Context, DataColumns, Filter, Names, ParseErrorKind, Piece, Place, RenderError, Source, Template,
    MAX_REQUEST_BYTES,
};
use loadfleet_engine::vars::Vars;
use serde_json::{json, Value};

fn table() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/wire/template_cases.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the case table is JSON")
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().expect("a list").iter().map(|s| s.as_str().expect("a string").to_string()).collect()
}

/// A piece as the table writes it.
fn piece_json(template: &Template, piece: &Piece, variables: &[String], data: &[DataColumns<'_>]) -> Value {
    let Piece::Value { source, filter } = piece else {
        let Piece::Literal(range) = piece else { unreachable!() };
        return json!({"literal": String::from_utf8_lossy(template.literal(range.clone()))});
    };
    let mut value = match *source {
        Source::Var(slot) => json!({"var": variables[slot]}),
        Source::Column { data: d, column } => json!({"data": data[d].name, "column": data[d].columns[column]}),
        Source::Builtin(Builtin::Random { low, high }) => json!({"builtin": "random", "low": low, "high": high}),
        Source::Builtin(builtin) => {
            json!({"builtin": format!("{builtin:?}").to_lowercase().replace("nowms", "now_ms")})
        }
    };
    match filter {
        Filter::None => {}
        Filter::Url => value["filter"] = json!("url"),
        Filter::Json => value["filter"] = json!("json"),
    }
    value
}

fn error_json(kind: &ParseErrorKind, offset: usize) -> Value {
    let mut value = json!({"kind": kind.name(), "offset": offset});
    match kind {
        ParseErrorKind::UnknownVariable(name)
        | ParseErrorKind::UnknownData(name)
        | ParseErrorKind::UnknownColumn(name)
        | ParseErrorKind::UnknownFilter(name)
        | ParseErrorKind::BadRandom(name) => value["name"] = json!(name),
        ParseErrorKind::Unterminated | ParseErrorKind::Empty | ParseErrorKind::TooLong(_) => {}
    }
    value
}

#[test]
fn every_case_of_the_shared_table_parses_as_it_says() {
    let table = table();
    let variables = strings(&table["names"]["variables"]);
    let columns: Vec<(String, Vec<String>)> = table["names"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["name"].as_str().unwrap().to_string(), strings(&d["columns"])))
        .collect();
    let data: Vec<DataColumns<'_>> = columns.iter().map(|(n, c)| DataColumns { name: n, columns: c }).collect();
    let names = Names { variables: &variables, data: &data };
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for case in cases {
        let text = case["template"].as_str().unwrap();
        let got = match Template::parse(text.as_bytes(), &names, Place::Body) {
            Ok(t) => {
                json!({"pieces": t.pieces().iter().map(|p| piece_json(&t, p, &variables, &data)).collect::<Vec<_>>()})
            }
            Err(e) => json!({"error": error_json(&e.kind, e.offset)}),
        };
        let expected = if case.get("error").is_some() {
            json!({"error": case["error"]})
        } else {
            json!({"pieces": case["pieces"]})
        };
        assert_eq!(got, expected, "template {text:?}");
    }
}

struct Fixture {
    variables: Vec<String>,
    columns: Vec<String>,
    vars: Vars,
    rng: Rng,
}

impl Fixture {
    fn new() -> Fixture {
        let variables: Vec<String> = ["csrf", "sid", "user"].iter().map(|s| s.to_string()).collect();
        let mut vars = Vars::new(variables.len()).unwrap();
        vars.set(0, b"a b&c").unwrap();
        vars.set(1, b"s1").unwrap();
        vars.set(2, b"not the built-in").unwrap();
        let columns = vec!["username".to_string(), "password".to_string()];
        Fixture { variables, columns, vars, rng: Rng::new(42) }
    }

    fn template(&self, text: &str, place: Place) -> Template {
        let data = [DataColumns { name: "accounts", columns: &self.columns }];
        Template::parse(text.as_bytes(), &Names { variables: &self.variables, data: &data }, place).unwrap()
    }

    fn render(&mut self, text: &str, place: Place, out: &mut Vec<u8>) -> Result<(), RenderError> {
        let template = self.template(text, place);
        let ends = [5u32, 15];
        let mut ctx = Context {
            vars: &self.vars,
            row: Some(Row::new(0, b"alice\"secret\"\r\n", &ends)),
            user: 1_000_007,
            agent: 3,
            iteration: 12,
            now_ms: 1_764_000_000_123,
            rng: &mut self.rng,
        };
        template.render_into(out, &mut ctx)
    }

    fn rendered(&mut self, text: &str, place: Place) -> Result<String, RenderError> {
        let mut out = b"GET ".to_vec();
        self.render(text, place, &mut out)?;
        Ok(String::from_utf8(out[4..].to_vec()).unwrap())
    }
}

#[test]
fn values_columns_and_filters_are_filled_in() {
    let mut f = Fixture::new();
    assert_eq!(f.rendered("/a?c=${csrf:url}&s=${sid}", Place::Path).unwrap(), "/a?c=a%20b%26c&s=s1");
    assert_eq!(f.rendered("user=${accounts.username}", Place::Body).unwrap(), "user=alice");
    assert_eq!(f.rendered(r#"{"p": "${accounts.password:json}"}"#, Place::Body).unwrap(), r#"{"p": "\"secret\"\r\n"}"#);
    assert_eq!(f.rendered("price $$${sid} $${sid}", Place::Body).unwrap(), "price $s1 ${sid}");
}

#[test]
fn built_ins_are_the_context_s_and_win_over_a_variable_of_their_name() {
    let mut f = Fixture::new();
    assert_eq!(
        f.rendered("${user}/${agent}/${iteration}/${now_ms}", Place::Path).unwrap(),
        "1000007/3/12/1764000000123"
    );
    let uuid = f.rendered("${uuid}", Place::Header).unwrap();
    assert_eq!((uuid.len(), &uuid[14..15]), (36, "4"), "{uuid}");
    assert_ne!(uuid, f.rendered("${uuid}", Place::Header).unwrap(), "a new UUID each rendering");
}

#[test]
fn random_stays_within_its_bounds_and_reaches_both() {
    let mut f = Fixture::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..400 {
        seen.insert(f.rendered("${random(3,7)}", Place::Path).unwrap().parse::<u64>().unwrap());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [3, 4, 5, 6, 7]);
    assert_eq!(f.rendered("${random(9,9)}", Place::Path).unwrap(), "9");
    let whole: u64 = f.rendered("${random(0,18446744073709551615)}", Place::Path).unwrap().parse().unwrap();
    assert!(whole > 0);
}

#[test]
fn a_header_value_with_cr_or_lf_is_refused_and_the_buffer_left_as_it_was() {
    let mut f = Fixture::new();
    f.vars.set(1, b"x\r\nX-Injected: 1").unwrap();
    let mut out = b"GET / HTTP/1.1\r\n".to_vec();
    let refused = f.render("X-Sid: ${sid}", Place::Header, &mut out).unwrap_err();
    assert_eq!(refused, RenderError::Unsafe { place: Place::Header, byte: b'\r', piece: 1 });
    assert!(refused.to_string().contains("0x0d, which a header cannot carry"), "{refused}");
    assert_eq!(out, b"GET / HTTP/1.1\r\n");
    assert_eq!(f.rendered("X-Sid: ${sid:url}", Place::Header).unwrap(), "X-Sid: x%0D%0AX-Injected%3A%201");
    assert!(f.rendered("${accounts.password}", Place::Header).is_err(), "a cell is checked like a variable");
    assert_eq!(f.rendered("${sid}", Place::Body).unwrap(), "x\r\nX-Injected: 1", "a body carries anything");
}

#[test]
fn a_path_value_with_a_blank_or_control_byte_is_refused() {
    let mut f = Fixture::new();
    let refused = f.rendered("/a/${csrf}", Place::Path).unwrap_err();
    assert_eq!(refused, RenderError::Unsafe { place: Place::Path, byte: b' ', piece: 1 });
    for bad in [&b"\t"[..], b"\x7f", b"\x00", b"a\nb"] {
        f.vars.set(1, bad).unwrap();
        assert!(f.rendered("/${sid}", Place::Path).is_err(), "{bad:?}");
    }
    f.vars.set(1, "é/%?&".as_bytes()).unwrap();
    assert_eq!(f.rendered("/${sid}", Place::Path).unwrap(), "/é/%?&", "bytes above 0x7f and delimiters pass");
}

#[test]
fn a_rendering_past_64_kib_is_refused() {
    let mut f = Fixture::new();
    let mut out = vec![b'x'; MAX_REQUEST_BYTES - 6];
    f.render("${sid}", Place::Body, &mut out).unwrap();
    assert_eq!(out.len(), MAX_REQUEST_BYTES - 4, "up to the bound is fine");
    let refused = f.render("${csrf:url}", Place::Body, &mut out).unwrap_err();
    assert_eq!(refused, RenderError::TooLong { bytes: MAX_REQUEST_BYTES - 4 + 9 });
    assert_eq!(out.len(), MAX_REQUEST_BYTES - 4);
    let refused = f.render("ab${sid}abc", Place::Body, &mut out).unwrap_err();
    assert!(matches!(refused, RenderError::TooLong { .. }), "{refused:?}");
    assert_eq!(out.len(), MAX_REQUEST_BYTES - 4, "the part that fitted is taken back too");
    assert!(refused.to_string().contains("over the 65536 a request may have"), "{refused}");
}

#[test]
fn a_template_text_past_64_kib_is_refused() {
    let names = Names { variables: &[], data: &[] };
    let text = vec![b'a'; MAX_REQUEST_BYTES + 1];
    let refused = Template::parse(&text, &names, Place::Body).unwrap_err();
    assert_eq!((refused.kind, refused.offset), (ParseErrorKind::TooLong(65537), MAX_REQUEST_BYTES));
    assert!(Template::parse(&text[1..], &names, Place::Body).unwrap().is_static());
}

#[test]
fn a_column_of_a_data_set_the_user_has_no_row_of_is_refused() {
    let variables: Vec<String> = vec![];
    let (a, b) = (vec!["x".to_string()], vec!["y".to_string()]);
    let data = [DataColumns { name: "a", columns: &a }, DataColumns { name: "b", columns: &b }];
    let template = Template::parse(b"${b.y}", &Names { variables: &variables, data: &data }, Place::Body).unwrap();
    let (vars, mut rng) = (Vars::new(0).unwrap(), Rng::new(1));
    let ends = [1u32];
    for row in [None, Some(Row::new(0, b"1", &ends))] {
        let mut ctx = Context { vars: &vars, row, user: 0, agent: 0, iteration: 0, now_ms: 0, rng: &mut rng };
        let refused = template.render_into(&mut Vec::new(), &mut ctx).unwrap_err();
        assert_eq!(refused, RenderError::NoRow { data: 1 });
    }
}

#[test]
fn parse_errors_name_the_problem_and_the_fix() {
    let variables = vec!["csrf".to_string()];
    let names = Names { variables: &variables, data: &[] };
    let message = |text: &str| Template::parse(text.as_bytes(), &names, Place::Body).unwrap_err().to_string();
    assert_eq!(message("a ${csrf"), "`${` at byte 2 is never closed by `}` (a literal `${` is written `$${`)");
    assert_eq!(message("${total}"), "unknown variable 'total' at byte 0 (a literal `${` is written `$${`)");
    assert_eq!(message("${csrf:b64}"), "unknown filter ':b64' at byte 0 (filters: url, json)");
    assert!(message("${random(2,1)}").contains("random takes two whole numbers low <= high"));
}
