//! A job's journeys (issue 30): per request, what `Job::from_spec` compiled once from its
//! RequestSpec — the templates of its path, header values and body, its extractions and
//! checks — and, per job, what every user's state is made of (variables, the cookie jar's
//! caps, the body capture's cap, the first user's index). Names are resolved to slots and
//! check counters here, so nothing is looked up by name per request.
//!
//! Which requests take the journey path: a job with no template (`${` in a path, header
//! value or body), no extraction and no check has no journeys, and every request of it keeps
//! the static path (its prerendered bytes, the remembered head, the discarded body). In a
//! job with journeys, a request takes the journey path when it has any of those, or when
//! users have a cookie jar (its Cookie header changes per user); the others stay static.

use url::Url;

use crate::checks::{Check, Condition, HeaderTest, JsonTest};
use crate::extract::Extractor;
use crate::feed::Feed;
use crate::jar::{JarLimits, DEFAULT_MAX_BYTES, DEFAULT_MAX_COOKIES};
use crate::redirect::{Origins, MAX_REDIRECTS_LIMIT};
use crate::template::{Names, Piece, Place, Template};
use crate::vars::Vars;
use crate::wire::pb;

/// A response body kept for extractions and checks when the job says 0 (JobSpec.max_body_bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;
/// The most a job may ask to keep of a body: each capture buffer in use holds at most this.
pub const MAX_BODY_BYTES_LIMIT: usize = 16 * 1024 * 1024;
/// Checks, and extractions, of one request (stats.proto: at most 16 + 16 counted per row).
pub const MAX_CHECKS: usize = 16;
pub const MAX_EXTRACTS: usize = 16;

/// What a user does after a failed check or an extraction that found nothing; the stronger
/// wins when several apply (Stop over Restart over Continue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OnFail {
    Continue,
    Restart,
    Stop,
}

impl OnFail {
    fn from_proto(value: i32) -> Result<OnFail, String> {
        match pb::OnFail::try_from(value) {
            Ok(pb::OnFail::Unspecified | pb::OnFail::Continue) => Ok(OnFail::Continue),
            Ok(pb::OnFail::Restart) => Ok(OnFail::Restart),
            Ok(pb::OnFail::Stop) => Ok(OnFail::Stop),
            Err(_) => Err(format!("{value} is not an OnFail")),
        }
    }
}

/// One extraction of a request: the value goes to variable slot `var`.
#[derive(Debug)]
pub struct Extraction {
    pub var: usize,
    pub extractor: Extractor,
    pub on_missing: OnFail,
    /// Stored when nothing is found.
    pub default_value: Vec<u8>,
    /// Its counter among the checks of the request's name (`Journeys::check_names`).
    pub counter: usize,
}

#[derive(Debug)]
pub struct JourneyCheck {
    pub check: Check,
    pub on_fail: OnFail,
    pub counter: usize,
}

/// One request of a job, as the journey path sends and judges it.
#[derive(Debug)]
pub struct Journey {
    pub method: String,
    pub path: Template,
    /// Name and value; the plan's Content-Length is left out (the body's length is counted).
    pub headers: Vec<(String, Template)>,
    pub body: Template,
    /// POST and PUT say their length even when the body is empty.
    pub always_length: bool,
    pub head: bool,
    pub extractions: Vec<Extraction>,
    pub checks: Vec<JourneyCheck>,
    /// No check of the request names statuses: 200-399 is the implicit status check.
    pub implicit_status: bool,
    /// An extraction or a check reads the body: it is captured (up to `max_body_bytes`).
    pub needs_body: bool,
    /// Redirects followed (redirect.rs), at most MAX_REDIRECTS_LIMIT; 0: none.
    pub max_redirects: u32,
}

#[derive(Debug)]
pub struct Journeys {
    /// Per request of the job: Some for a request on the journey path.
    pub requests: Vec<Option<Journey>>,
    /// The job's variables (slots of every user's Vars).
    pub variables: usize,
    /// None: cookies off (no jar, Set-Cookie ignored, no Cookie header).
    pub jar: Option<JarLimits>,
    pub max_body_bytes: usize,
    /// ${user} of local user i is first_user + i.
    pub first_user: u64,
    /// ${agent}: the agent's index in the run (JobSpec.agent_index).
    pub agent: u32,
    /// Where a redirect's hop may go: the targets' origins.
    pub origins: Origins,
    /// Per request name (Job::names): its checks', then its extractions' names, in the plan's
    /// order (several requests of one name share the counters of equal names).
    pub check_names: Vec<Vec<String>>,
    /// Per target: the Host header.
    pub hosts: Vec<String>,
    /// Per (request, target), at `url_key`: the URL cookies are stored for and matched
    /// against — the target and the path's fixed start (up to its first value or `?`).
    pub urls: Vec<Url>,
    targets: usize,
    /// The job's data file (feed.rs): each user's row comes from it.
    pub feed: Option<Feed>,
}

impl Journeys {
    /// The key of (request, target) in `urls` and in every user's jar.
    pub fn url_key(&self, request: usize, target: usize) -> usize {
        request * self.targets + target
    }

    pub fn journey(&self, request: usize) -> Option<&Journey> {
        self.requests[request].as_ref()
    }

    /// The journeys of `spec`, whose request i has name `names[name_of[i]]`; None when the
    /// job has none; or every problem, each starting with its field's path.
    pub fn build(spec: &pb::JobSpec, name_of: &[usize], names: usize) -> Result<Option<Journeys>, Vec<String>> {
        if !spec.requests.iter().any(is_journey) {
            return Ok(None);
        }
        let mut problems = Vec::new();
        if let Err(e) = Vars::new(spec.variables.len()) {
            problems.push(format!("variables: {e}"));
        }
        let jar = jar_limits(spec.cookies.as_ref()).map_err(|e| problems.push(e)).ok().flatten();
        let max_body_bytes = max_body_bytes(spec.max_body_bytes).map_err(|e| problems.push(e)).unwrap_or(0);
        let feed = spec.feed.as_ref().map(|f| Feed::from_spec(f, spec.first_user));
        let feed = feed.transpose().map_err(|e| problems.push(e)).ok().flatten();
        let columns: Vec<_> = feed.iter().map(Feed::data_columns).collect();
        let names_of = Names { variables: &spec.variables, data: &columns };
        let mut check_names = vec![Vec::new(); names];
        let mut requests = Vec::new();
        for (i, r) in spec.requests.iter().enumerate() {
            let journeyed = jar.is_some() || is_journey(r);
            let built = journeyed.then(|| build_request(spec, &names_of, r, &mut check_names[name_of[i]]));
            match built {
                Some(Ok(journey)) => requests.push(Some(journey)),
                Some(Err(errors)) => problems.extend(errors.into_iter().map(|e| format!("requests[{i}].{e}"))),
                None => requests.push(None),
            }
        }
        let urls = urls(spec, &names_of).map_err(|e| problems.push(e)).unwrap_or_default();
        let origins = Origins::new(spec.targets.iter().map(|t| t.url.as_str())).map_err(|e| problems.push(e));
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Some(Journeys {
            requests,
            variables: spec.variables.len(),
            jar,
            max_body_bytes,
            first_user: spec.first_user,
            agent: spec.agent_index,
            origins: origins.unwrap_or_default(),
            check_names,
            hosts: spec.targets.iter().map(|t| host_header(&t.url).to_string()).collect(),
            urls,
            targets: spec.targets.len(),
            feed,
        }))
    }
}

/// Whether a request needs the journey path whatever the cookies: a template, an extraction,
/// a check or redirects to follow.
fn is_journey(r: &pb::RequestSpec) -> bool {
    let templated = |text: &[u8]| text.windows(2).any(|w| w == b"${");
    !r.extracts.is_empty()
        || !r.checks.is_empty()
        || r.max_redirects > 0
        || templated(r.path.as_bytes())
        || r.headers.iter().any(|h| templated(h.value.as_bytes()))
        || templated(&r.body)
}

fn jar_limits(cookies: Option<&pb::Cookies>) -> Result<Option<JarLimits>, String> {
    let Some(cookies) = cookies else { return Ok(Some(JarLimits::default())) };
    if cookies.off {
        return Ok(None);
    }
    let or = |value: u32, default: usize| if value == 0 { default } else { value as usize };
    JarLimits::new(or(cookies.max_cookies, DEFAULT_MAX_COOKIES), or(cookies.max_bytes, DEFAULT_MAX_BYTES)).map(Some)
}

fn max_body_bytes(value: u32) -> Result<usize, String> {
    match value as usize {
        0 => Ok(DEFAULT_MAX_BODY_BYTES),
        n if n > MAX_BODY_BYTES_LIMIT => {
            Err(format!("max_body_bytes: {n} is over the {MAX_BODY_BYTES_LIMIT} a response may keep"))
        }
        n => Ok(n),
    }
}

/// One request's journey; its problems start with the field (`path: ...`).
fn build_request(
    spec: &pb::JobSpec,
    names: &Names<'_>,
    r: &pb::RequestSpec,
    counters: &mut Vec<String>,
) -> Result<Journey, Vec<String>> {
    let mut problems = Vec::new();
    let mut template = |field: String, text: &[u8], place: Place| {
        Template::parse(text, names, place).map_err(|e| problems.push(format!("{field}: {e}"))).ok()
    };
    let path = template("path".into(), r.path.as_bytes(), Place::Path);
    let mut headers = Vec::new();
    for (h, header) in r.headers.iter().enumerate() {
        if header.name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let value = template(format!("headers[{h}].value"), header.value.as_bytes(), Place::Header);
        headers.extend(value.map(|v| (header.name.clone(), v)));
    }
    let body = template("body".into(), &r.body, Place::Body);
    let checks = build_checks(r, names, counters, &mut problems);
    let extractions = build_extractions(spec, r, counters, &mut problems);
    if r.max_redirects > MAX_REDIRECTS_LIMIT {
        problems
            .push(format!("max_redirects: {} is over the {MAX_REDIRECTS_LIMIT} a request may follow", r.max_redirects));
    }
    let (Some(path), Some(body), true) = (path, body, problems.is_empty()) else { return Err(problems) };
    let needs_body =
        extractions.iter().any(|e| e.extractor.needs_body()) || checks.iter().any(|c| c.check.needs_body());
    Ok(Journey {
        method: r.method.clone(),
        path,
        headers,
        body,
        always_length: r.method == "POST" || r.method == "PUT",
        head: r.method == "HEAD",
        implicit_status: r.checks.iter().all(|c| c.status.is_empty()),
        needs_body,
        extractions,
        checks,
        max_redirects: r.max_redirects,
    })
}

/// The counter of `name` among a request name's checks: its index, added if new.
fn counter(counters: &mut Vec<String>, name: &str) -> usize {
    counters.iter().position(|n| n == name).unwrap_or_else(|| {
        counters.push(name.to_string());
        counters.len() - 1
    })
}

fn build_checks(
    r: &pb::RequestSpec,
    names: &Names<'_>,
    counters: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Vec<JourneyCheck> {
    if r.checks.len() > MAX_CHECKS {
        problems.push(format!("checks: {} checks, over the {MAX_CHECKS} a request may have", r.checks.len()));
        return Vec::new();
    }
    let mut built = Vec::new();
    for (j, c) in r.checks.iter().enumerate() {
        let check = conditions(c, names).and_then(|conditions| Check::new(&c.name, conditions));
        match (check, OnFail::from_proto(c.on_fail)) {
            (Ok(check), Ok(on_fail)) => {
                built.push(JourneyCheck { counter: counter(counters, &c.name), check, on_fail });
            }
            (Err(e), _) => problems.push(format!("checks[{j}]: {e}")),
            (_, Err(e)) => problems.push(format!("checks[{j}].on_fail: {e}")),
        }
    }
    built
}

/// A check's conditions in the order the proto lists them.
fn conditions(c: &pb::Check, names: &Names<'_>) -> Result<Vec<Condition>, String> {
    let mut conditions = Vec::new();
    if !c.status.is_empty() {
        let items: Vec<&str> = c.status.iter().map(String::as_str).collect();
        conditions.push(Condition::status(&items)?);
    }
    if !c.body_contains.is_empty() {
        conditions.push(Condition::body_contains(&c.body_contains, names)?);
    }
    if !c.body_lacks.is_empty() {
        conditions.push(Condition::body_lacks(&c.body_lacks, names)?);
    }
    if !c.body_regex.is_empty() {
        conditions.push(Condition::body_regex(&c.body_regex)?);
    }
    if let Some(header) = &c.header {
        conditions.push(header_condition(header)?);
    }
    if let Some(json) = &c.json_path {
        let test = match &json.test {
            Some(pb::json_condition::Test::Equals(text)) => JsonTest::Equals(text.as_bytes().to_vec()),
            Some(pb::json_condition::Test::Exists(_)) | None => JsonTest::Exists,
        };
        conditions.push(Condition::json_path(&json.path, test)?);
    }
    if c.latency_below_ms > 0 {
        conditions.push(Condition::latency_below_ms(c.latency_below_ms)?);
    }
    Ok(conditions)
}

fn header_condition(header: &pb::HeaderCondition) -> Result<Condition, String> {
    use pb::header_condition::Test;
    let test = match &header.test {
        Some(Test::Equals(text)) => HeaderTest::Equals(text.as_bytes().to_vec()),
        Some(Test::Contains(text)) => HeaderTest::Contains(text.as_bytes().to_vec()),
        Some(Test::Regex(pattern)) => HeaderTest::regex(pattern).map_err(|e| format!("header.regex: {e}"))?,
        Some(Test::Absent(_)) => HeaderTest::Absent,
        None => return Err(format!("header {:?}: no test (equals, contains, regex or absent)", header.name)),
    };
    Condition::header(&header.name, test)
}

fn build_extractions(
    spec: &pb::JobSpec,
    r: &pb::RequestSpec,
    counters: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Vec<Extraction> {
    if r.extracts.len() > MAX_EXTRACTS {
        problems
            .push(format!("extracts: {} extractions, over the {MAX_EXTRACTS} a request may have", r.extracts.len()));
        return Vec::new();
    }
    let mut built = Vec::new();
    for (j, e) in r.extracts.iter().enumerate() {
        let Some(variable) = spec.variables.get(e.var as usize) else {
            problems.push(format!("extracts[{j}].var: {} is not a variable index", e.var));
            continue;
        };
        let extractor = extractor(e).map_err(|m| problems.push(format!("extracts[{j}]: {m}")));
        let on_missing =
            OnFail::from_proto(e.on_missing).map_err(|m| problems.push(format!("extracts[{j}].on_missing: {m}")));
        let (Ok(extractor), Ok(on_missing)) = (extractor, on_missing) else { continue };
        let name = if e.name.is_empty() { format!("extract {variable}") } else { e.name.clone() };
        built.push(Extraction {
            var: e.var as usize,
            extractor,
            on_missing,
            default_value: e.default_value.as_bytes().to_vec(),
            counter: counter(counters, &name),
        });
    }
    built
}

fn extractor(e: &pb::Extract) -> Result<Extractor, String> {
    use pb::extract::Source;
    let occurrence = e.occurrence as usize;
    match &e.source {
        Some(Source::Status(_)) => Ok(Extractor::status()),
        Some(Source::Header(name)) => Extractor::header(name),
        Some(Source::Cookie(name)) => Extractor::cookie(name),
        Some(Source::Regex(pattern)) => Extractor::regex(pattern, occurrence),
        Some(Source::JsonPointer(pointer)) => Extractor::json_pointer(pointer),
        Some(Source::JsonPath(path)) => Extractor::json_path(path, occurrence),
        Some(Source::FormField(field)) => Extractor::form_field(field),
        None => Err("no source (status, header, cookie, regex, json_pointer, json_path or form_field)".into()),
    }
}

/// Per (request, target): the target's URL and the request path's fixed start.
fn urls(spec: &pb::JobSpec, names: &Names<'_>) -> Result<Vec<Url>, String> {
    let mut urls = Vec::new();
    for (i, r) in spec.requests.iter().enumerate() {
        let fixed = match Template::parse(r.path.as_bytes(), names, Place::Path) {
            Ok(path) => fixed_path(&path),
            Err(_) => "/".to_string(), // refused above with its message
        };
        for (t, target) in spec.targets.iter().enumerate() {
            let text = format!("{}{fixed}", target.url.trim_end_matches('/'));
            let url = Url::parse(&text).map_err(|e| format!("requests[{i}].path on targets[{t}]: '{text}': {e}"))?;
            urls.push(url);
        }
    }
    Ok(urls)
}

/// A path template's literal start, up to its first value or query.
fn fixed_path(path: &Template) -> String {
    let mut fixed = String::new();
    for piece in path.pieces() {
        let Piece::Literal(range) = piece else { break };
        fixed.push_str(&String::from_utf8_lossy(path.literal(range.clone())));
    }
    let end = fixed.find('?').unwrap_or(fixed.len());
    fixed.truncate(end);
    if !fixed.starts_with('/') {
        fixed.insert(0, '/');
    }
    fixed
}

/// A target URL's authority: the Host header.
pub fn host_header(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.strip_suffix('/').unwrap_or(rest)
}
