//! Templates of a journey's requests: `${name}` in a path, a header value or a body, parsed
//! once when the job is built into pieces (literal bytes, a variable's slot, a data column, a
//! built-in) and rendered per request by copying bytes into the user's request buffer. No
//! name is looked up and nothing is allocated per request but the buffer's own growth.
//!
//! Grammar (the controller's plan validation mirrors it; tests/wire/template_cases.json is
//! the table both sides test against):
//!
//! ```text
//! template  := ( "$$" before "{" | "${" reference [ ":" filter ] "}" | any other byte )*
//! reference := "user" | "agent" | "iteration" | "uuid" | "now_ms" | "random(" low "," high ")"
//!            | data "." column | variable
//! filter    := "url" | "json"
//! ```
//! In a run of `$`s just before a `{`, each `$$` is a literal `$` and an odd one left over
//! opens a `${`: `$${` is a literal `${`, `$$${x}` is `$` and x's value (Make's rule, kept to
//! runs before `{`, so a `$` or `$$` anywhere else is itself). A `${` ends at the first `}`. Built-in
//! names win over a variable of the same name (validation refuses such variables). `:url`
//! percent-encodes all but RFC 3986's unreserved bytes; `:json` escapes for the inside of a
//! JSON string (no quotes added). `random(low,high)` is uniform over low..=high (whole
//! numbers 0..2^64, blanks around them allowed).
//!
//! Bounds: a template's text is at most MAX_REQUEST_BYTES; a rendering never makes the
//! buffer (one request) longer than MAX_REQUEST_BYTES: it is refused instead, and the
//! buffer is left as it was. A value that would break its place is refused too: CR, LF or
//! NUL in a header value (a header of the attacker's choosing), blanks or control bytes in a
//! path. Literal bytes are the plan's own and were validated with it.

use std::fmt;
use std::ops::Range;

pub use crate::builtins::Builtin;
use crate::builtins::{BuiltinValues, MAX_BUILTIN_BYTES};
pub use crate::encode::Filter;
use crate::rng::Rng;
use crate::row::Row;
use crate::vars::Vars;

/// A rendered request (and so a template's text) is at most this long.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Where a template's rendering goes, which decides what a value may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The request target (path and query): no blank or control byte.
    Path,
    /// A header's value: no CR, LF or NUL.
    Header,
    /// The body: any byte.
    Body,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A variable's slot in the job's `variables`.
    Var(usize),
    /// A cell of the user's row: data set `data`'s column `column`, both indices in the job.
    Column {
        data: usize,
        column: usize,
    },
    Builtin(Builtin),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes of `Template::literal`.
    Literal(Range<usize>),
    Value {
        source: Source,
        filter: Filter,
    },
}

/// A data set's name and columns, as the job declares them.
#[derive(Debug, Clone, Copy)]
pub struct DataColumns<'a> {
    pub name: &'a str,
    pub columns: &'a [String],
}

/// What a template may name: the job's variables (slot i is `variables[i]`) and data sets.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    pub variables: &'a [String],
    pub data: &'a [DataColumns<'a>],
}

/// Why a template's text was refused; `offset` is the byte where its `${` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    Unterminated,
    Empty,
    UnknownVariable(String),
    UnknownData(String),
    /// `data.column`.
    UnknownColumn(String),
    UnknownFilter(String),
    /// The text between `${` and `}`.
    BadRandom(String),
    /// The template's length in bytes (offset: MAX_REQUEST_BYTES).
    TooLong(usize),
}

impl ParseErrorKind {
    /// The kind's name in tests/wire/template_cases.json.
    pub fn name(&self) -> &'static str {
        match self {
            ParseErrorKind::Unterminated => "unterminated",
            ParseErrorKind::Empty => "empty",
            ParseErrorKind::UnknownVariable(_) => "unknown_variable",
            ParseErrorKind::UnknownData(_) => "unknown_data",
            ParseErrorKind::UnknownColumn(_) => "unknown_column",
            ParseErrorKind::UnknownFilter(_) => "unknown_filter",
            ParseErrorKind::BadRandom(_) => "bad_random",
            ParseErrorKind::TooLong(_) => "too_long",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        let literal = "(a literal `${` is written `$${`)";
        match &self.kind {
            ParseErrorKind::Unterminated => write!(f, "`${{` at byte {at} is never closed by `}}` {literal}"),
            ParseErrorKind::Empty => write!(f, "empty `${{}}` at byte {at}"),
            ParseErrorKind::UnknownVariable(name) => write!(f, "unknown variable '{name}' at byte {at} {literal}"),
            ParseErrorKind::UnknownData(name) => write!(f, "unknown data set '{name}' at byte {at}"),
            ParseErrorKind::UnknownColumn(name) => write!(f, "unknown data column '{name}' at byte {at}"),
            ParseErrorKind::UnknownFilter(name) => {
                write!(f, "unknown filter ':{name}' at byte {at} (filters: url, json)")
            }
            ParseErrorKind::BadRandom(text) => {
                write!(f, "'{text}' at byte {at}: random takes two whole numbers low <= high, as random(1,100)")
            }
            ParseErrorKind::TooLong(bytes) => {
                write!(f, "template of {bytes} bytes, over the {MAX_REQUEST_BYTES} a request may have")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// What a rendering reads besides the template: the user's state and the moment.
pub struct Context<'a> {
    pub vars: &'a Vars,
    /// The user's row, if it has one.
    pub row: Option<Row<'a>>,
    pub user: u64,
    pub agent: u32,
    pub iteration: u64,
    pub now_ms: u64,
    pub rng: &'a mut Rng,
}

/// Why a rendering was refused (the request is not sent: ERROR_KIND_TEMPLATE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// Piece `piece`'s value holds `byte`, which `place` cannot carry.
    Unsafe { place: Place, byte: u8, piece: usize },
    /// The request would be `bytes` long, over MAX_REQUEST_BYTES.
    TooLong { bytes: usize },
    /// The template reads data set `data`, of which the user has no row (or not that cell).
    NoRow { data: usize },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Unsafe { place, byte, piece } => {
                let place = match place {
                    Place::Path => "the path",
                    Place::Header => "a header",
                    Place::Body => "the body",
                };
                write!(f, "a value (piece {piece}) with byte 0x{byte:02x}, which {place} cannot carry")
            }
            RenderError::TooLong { bytes } => {
                write!(f, "request of {bytes} bytes, over the {MAX_REQUEST_BYTES} a request may have")
            }
            RenderError::NoRow { data } => write!(f, "the user has no row of data set {data}"),
        }
    }
}

impl std::error::Error for RenderError {}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    place: Place,
    /// The literal bytes, `$${` already made `${`; Literal pieces are ranges of it.
    literal: Vec<u8>,
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text` for `place`, naming each variable and column by its index in `names`.
    pub fn parse(text: &[u8], names: &Names<'_>, place: Place) -> Result<Template, ParseError> {
        if text.len() > MAX_REQUEST_BYTES {
            return Err(ParseError { kind: ParseErrorKind::TooLong(text.len()), offset: MAX_REQUEST_BYTES });
        }
        let mut template = Template { place, literal: Vec::new(), pieces: Vec::new() };
        let (mut i, mut run_start) = (0, 0);
        while i < text.len() {
            let dollars = text[i..].iter().take_while(|&&b| b == b'$').count();
            if dollars == 0 || text.get(i + dollars) != Some(&b'{') {
                // Plain bytes, and `$`s that do not come before a `{`, are themselves.
                let plain = dollars.max(1);
                template.literal.extend_from_slice(&text[i..i + plain]);
                i += plain;
                continue;
            }
            // Before a `{`, each `$$` is one `$`; an odd `$` left over opens a `${…}`.
            template.literal.extend(std::iter::repeat_n(b'$', dollars / 2));
            let open = i + dollars - 1;
            if dollars % 2 == 0 {
                template.literal.push(b'{');
                i = open + 2;
                continue;
            }
            let close = text[open + 2..].iter().position(|&b| b == b'}');
            let close = close.ok_or(ParseError { kind: ParseErrorKind::Unterminated, offset: open })?;
            let piece = value_piece(&text[open + 2..open + 2 + close], names)
                .map_err(|kind| ParseError { kind, offset: open })?;
            template.end_literal(run_start);
            template.pieces.push(piece);
            run_start = template.literal.len();
            i = open + close + 3;
        }
        template.end_literal(run_start);
        Ok(template)
    }

    fn end_literal(&mut self, run_start: usize) {
        if self.literal.len() > run_start {
            self.pieces.push(Piece::Literal(run_start..self.literal.len()));
        }
    }

    pub fn place(&self) -> Place {
        self.place
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The bytes of a Literal piece's range.
    pub fn literal(&self, range: Range<usize>) -> &[u8] {
        &self.literal[range]
    }

    /// Nothing to fill: the rendering is always the same bytes.
    pub fn is_static(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Literal(_)))
    }

    /// Appends the rendering to `out`, or refuses it and leaves `out` as it was. `out` holds
    /// one request: it never grows past MAX_REQUEST_BYTES.
    pub fn render_into(&self, out: &mut Vec<u8>, ctx: &mut Context<'_>) -> Result<(), RenderError> {
        let start = out.len();
        for (index, piece) in self.pieces.iter().enumerate() {
            let rendered = match piece {
                Piece::Literal(range) => append(out, &self.literal[range.clone()], Filter::None),
                Piece::Value { source, filter } => self.render_value(out, *source, *filter, ctx, index),
            };
            if let Err(refused) = rendered {
                out.truncate(start);
                return Err(refused);
            }
        }
        Ok(())
    }

    fn render_value(
        &self,
        out: &mut Vec<u8>,
        source: Source,
        filter: Filter,
        ctx: &mut Context<'_>,
        piece: usize,
    ) -> Result<(), RenderError> {
        let at = out.len();
        match source {
            Source::Var(slot) => append(out, ctx.vars.get(slot), filter)?,
            Source::Column { data, column } => {
                let cell = ctx.row.filter(|row| row.data() == data).and_then(|row| row.cell(column));
                append(out, cell.ok_or(RenderError::NoRow { data })?, filter)?;
            }
            Source::Builtin(builtin) => {
                // Digits, hex and hyphens: the same under every filter and safe in every place.
                let mut text = [0u8; MAX_BUILTIN_BYTES];
                let values =
                    BuiltinValues { user: ctx.user, agent: ctx.agent, iteration: ctx.iteration, now_ms: ctx.now_ms };
                let length = builtin.write(&values, ctx.rng, &mut text);
                return append(out, &text[..length], Filter::None);
            }
        }
        match out[at..].iter().find(|&&b| !allowed(self.place, b)) {
            Some(&byte) => Err(RenderError::Unsafe { place: self.place, byte, piece }),
            None => Ok(()),
        }
    }
}

/// Whether a value's byte may stand in `place`.
fn allowed(place: Place, byte: u8) -> bool {
    match place {
        Place::Path => byte > b' ' && byte != 0x7f,
        Place::Header => !matches!(byte, b'\r' | b'\n' | 0),
        Place::Body => true,
    }
}

/// The piece for the text between `${` and `}`.
fn value_piece(expression: &[u8], names: &Names<'_>) -> Result<Piece, ParseErrorKind> {
    let text = String::from_utf8_lossy(expression);
    let (reference, filter) = match text.split_once(':') {
        None => (&*text, Filter::None),
        Some((reference, "url")) => (reference, Filter::Url),
        Some((reference, "json")) => (reference, Filter::Json),
        Some((_, other)) => return Err(ParseErrorKind::UnknownFilter(other.to_string())),
    };
    if reference.is_empty() {
        return Err(ParseErrorKind::Empty);
    }
    Ok(Piece::Value { source: source(reference, names)?, filter })
}

fn source(reference: &str, names: &Names<'_>) -> Result<Source, ParseErrorKind> {
    match Builtin::parse(reference) {
        Some(Ok(builtin)) => Ok(Source::Builtin(builtin)),
        Some(Err(_)) => Err(ParseErrorKind::BadRandom(reference.to_string())),
        None => named(reference, names),
    }
}

fn named(reference: &str, names: &Names<'_>) -> Result<Source, ParseErrorKind> {
    let Some((data_name, column_name)) = reference.split_once('.') else {
        let slot = names.variables.iter().position(|v| v == reference);
        return slot.map(Source::Var).ok_or_else(|| ParseErrorKind::UnknownVariable(reference.to_string()));
    };
    let data = names.data.iter().position(|d| d.name == data_name);
    let data = data.ok_or_else(|| ParseErrorKind::UnknownData(data_name.to_string()))?;
    let column = names.data[data].columns.iter().position(|c| c == column_name);
    let column = column.ok_or_else(|| ParseErrorKind::UnknownColumn(reference.to_string()))?;
    Ok(Source::Column { data, column })
}

/// Appends `value` through `filter`, unless that would make `out` (one request) longer than
/// MAX_REQUEST_BYTES.
fn append(out: &mut Vec<u8>, value: &[u8], filter: Filter) -> Result<(), RenderError> {
    crate::encode::append(out, value, filter, MAX_REQUEST_BYTES).map_err(|bytes| RenderError::TooLong { bytes })
}
