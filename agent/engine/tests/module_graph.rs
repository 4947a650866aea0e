//! The engine's modules depend on each other in one direction only: the graph of `crate::`
//! references between the files of src/ (a `use crate::x…`, or a path `crate::x::…` in code,
//! tests included) has no cycle. What two modules would otherwise take from each other lives
//! in a leaf module of its own (shared.rs, failure.rs, histogram.rs). `make lint` runs this
//! test (`cargo test --release --test module_graph`); it reads the sources, not the compiled
//! crate.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::Path;

/// Module → the modules it refers to → where it first does ("src/x.rs:12").
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn the_module_graph_of_src_has_no_cycle() {
    let graph = read_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.contains_key("run") && graph["run"].contains_key("shared"), "src/ read: {graph:?}");
    let cycles = cycles(&graph);
    assert!(
        cycles.is_empty(),
        "module cycles in src/ (move what both sides use into a leaf module):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn references_are_found_in_code_only() {
    let text = "use crate::a::B;\nuse crate::{c::{self, D}, e};\n// crate::comment\n/* crate::block /* nested */ */\n\
                let s = \"crate::string \\\" crate::escaped\"; let r = r#\"crate::raw\"#;\n\
                let q = '\"'; fn f<'a>(x: &'a str) { crate::f::g(); $crate::macro_root; my_crate::h; }\n";
    let found: Vec<(String, usize)> = references(text);
    let names: Vec<&str> = found.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["a", "c", "e", "f"]);
    assert_eq!(found[3].1, 6, "the line of crate::f");
}

#[test]
fn a_cycle_is_named_with_where_each_step_is() {
    let mut graph = Graph::new();
    let mut edge = |from: &str, to: &str, at: &str| {
        graph.entry(from.into()).or_default().insert(to.into(), at.into());
    };
    edge("run", "open", "src/run.rs:3");
    edge("open", "shared", "src/open.rs:4");
    edge("shared", "run", "src/shared.rs:5");
    edge("open", "rng", "src/open.rs:6");
    edge("leaf", "rng", "src/leaf.rs:1");
    let found = cycles(&graph);
    assert_eq!(
        found,
        ["among open, run, shared: open -> shared (src/open.rs:4) -> run (src/shared.rs:5) -> open (src/run.rs:3)"],
        "one cycle, and nothing of the acyclic rest"
    );
    graph.get_mut("shared").unwrap().clear();
    assert!(cycles(&graph).is_empty());
}

/// Every `.rs` file under `src`, as a node named by its top-level module (src/x.rs and
/// src/x/… are `x`), with its references to other modules.
fn read_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut files: Vec<_> = rust_files(src);
    files.sort();
    for path in files {
        let relative = path.strip_prefix(src).expect("under src");
        let first = relative.components().next().expect("a file").as_os_str().to_string_lossy().into_owned();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let edges = graph.entry(module.clone()).or_default();
        for (target, line) in references(&text) {
            if target != module {
                edges.entry(target).or_insert_with(|| format!("src/{}:{line}", relative.display()));
            }
        }
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The modules `text` names after `crate::` (each name of a `crate::{…}` group), with the
/// line of each, in order; comments, strings and character literals are skipped.
fn references(text: &str) -> Vec<(String, usize)> {
    let code = code_only(text);
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::").map(|i| from + i) {
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        for name in path_heads(&code[from..]) {
            found.push((name, line));
        }
    }
    found
}

/// The first name of the path at the start of `rest`, or of each path of a `{…}` group.
fn path_heads(rest: &str) -> Vec<String> {
    let ident = |s: &str| s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)].into_iter().filter(|n| !n.is_empty()).collect();
    };
    let (mut heads, mut depth, mut item_start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            ',' | '}' if depth == 0 => {
                heads.push(ident(&group[item_start..i]));
                item_start = i + 1;
                if c == '}' {
                    break;
                }
            }
            _ => {}
        }
    }
    heads.retain(|n| !n.is_empty() && n != "self");
    heads
}

/// `text` with comments, string and character literals blanked (newlines kept, so lines
/// still count).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let skip_to = literal_or_comment_end(&chars, i);
        if skip_to == i {
            out.push(chars[i]);
            i += 1;
        } else {
            out.extend(chars[i..skip_to].iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
            i = skip_to;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends (just after it), or `i` if none starts there.
fn literal_or_comment_end(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let in_ident = i > 0 && (at(i - 1).is_alphanumeric() || at(i - 1) == '_');
    match at(i) {
        '/' if at(i + 1) == '/' => (i..chars.len()).find(|&k| chars[k] == '\n').unwrap_or(chars.len()),
        '/' if at(i + 1) == '*' => block_comment_end(chars, i),
        '"' => string_end(chars, i + 1, false, 0),
        // A raw string (r"…", r#"…"#, br"…"): no escapes, closed by " and as many #s.
        'b' if !in_ident && at(i + 1) == 'r' => raw_string_end(chars, i + 1).unwrap_or(i),
        'r' if !in_ident => raw_string_end(chars, i).unwrap_or(i),
        '\'' if at(i + 1) == '\\' => (i + 3..chars.len()).find(|&k| chars[k] == '\'').map_or(chars.len(), |k| k + 1),
        '\'' if at(i + 2) == '\'' => i + 3,
        _ => i,
    }
}

/// The end of the raw string whose `r` is at `r`, if one starts there.
fn raw_string_end(chars: &[char], r: usize) -> Option<usize> {
    let hashes = chars[r + 1..].iter().take_while(|&&c| c == '#').count();
    (chars.get(r + 1 + hashes) == Some(&'"')).then(|| string_end(chars, r + 2 + hashes, true, hashes))
}

fn block_comment_end(chars: &[char], start: usize) -> usize {
    let (mut depth, mut k) = (0, start);
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => (depth, k) = (depth + 1, k + 2),
            ('*', '/') if depth == 1 => return k + 2,
            ('*', '/') => (depth, k) = (depth - 1, k + 2),
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end of a string whose contents start at `k`: a plain one (escapes honoured) or a raw
/// one, closed by `"` and `hashes` #s.
fn string_end(chars: &[char], mut k: usize, raw: bool, hashes: usize) -> usize {
    while k < chars.len() {
        match chars[k] {
            '\\' if !raw => k += 2,
            '"' if chars[k + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes => {
                return k + 1 + hashes
            }
            _ => k += 1,
        }
    }
    chars.len()
}

/// One line per cycle: for each group of modules that reach each other, its members and the
/// shortest way from its first module back to itself, with where each step's reference is.
fn cycles(graph: &Graph) -> Vec<String> {
    let reach: BTreeMap<&str, BTreeSet<&str>> = graph.keys().map(|m| (m.as_str(), reachable(graph, m))).collect();
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for (module, reached) in &reach {
        if seen.contains(module) || !reached.contains(module) {
            continue;
        }
        let group: BTreeSet<&str> =
            reached.iter().copied().filter(|other| reach.get(other).is_some_and(|r| r.contains(module))).collect();
        seen.extend(group.iter().copied());
        let members = group.iter().copied().collect::<Vec<_>>().join(", ");
        found.push(format!("among {members}: {}", describe(graph, &shortest_cycle(graph, module, &group))));
    }
    found
}

/// The modules reachable from `start` in one step or more.
fn reachable<'g>(graph: &'g Graph, start: &str) -> BTreeSet<&'g str> {
    let mut reached = BTreeSet::new();
    let mut queue: VecDeque<&str> = graph.get(start).into_iter().flat_map(|e| e.keys().map(String::as_str)).collect();
    while let Some(next) = queue.pop_front() {
        if reached.insert(next) {
            queue.extend(graph.get(next).into_iter().flat_map(|e| e.keys().map(String::as_str)));
        }
    }
    reached
}

/// The modules of the shortest way from `start` back to it, within `group`, `start` at both ends.
fn shortest_cycle<'g>(graph: &'g Graph, start: &'g str, group: &BTreeSet<&str>) -> Vec<&'g str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for next in graph.get(at).into_iter().flat_map(|e| e.keys().map(String::as_str)) {
            if next == start {
                let mut path = vec![start, at];
                while let Some(&before) = came_from.get(path.last().expect("not empty")) {
                    path.push(before);
                }
                path.reverse();
                return path;
            }
            if group.contains(next) && !came_from.contains_key(next) {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    unreachable!("{start} is in a cycle")
}

fn describe(graph: &Graph, path: &[&str]) -> String {
    let mut line = path[0].to_string();
    for step in path.windows(2) {
        line.push_str(&format!(" -> {} ({})", step[1], graph[step[0]][step[1]]));
    }
    line
}
