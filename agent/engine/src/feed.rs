//! A job's data file (JobSpec.feed): the rows this engine holds and which row a user takes
//! next. A user takes a row when its session starts, and a new one after a restart (Gatling's
//! `feed` at a scenario's start); templates read its cells as `${name.column}` (row.rs).
//!
//! - unique: the engine holds only its slice of the file (the controller and the agent split
//!   the rows exactly, as budgets) and hands each row out once, in order; when they are all
//!   taken, the plan's `on_exhausted` says what a user does (stop, the engine stops its load,
//!   or the slice is taken again from its start). A lost share's rows may be handed to it
//!   while it runs (`append`, EngineCommand.feed_append): it takes them after its own. The
//!   rows first taken since the last report are ranges of the file's indices, one per block
//!   they fall in (`take_unreported`), which the ledger is built from.
//! - circular: every row, in order from the engine's first user's index, over and over.
//! - random: every row, a row at random per take.
//!
//! Bounds: the rows are the job's and those handed to it, each row of the file to one engine
//! at most (a plan's data file is at most 1 MiB, checked by the controller); they live in one
//! buffer with 4 bytes per cell of ends, plus one entry per block; a feed keeps four counters
//! whatever the length of the run.

use std::cell::{Cell, Ref, RefCell};

use crate::rng::Rng;
use crate::row::Row;
use crate::template::DataColumns;
use crate::wire::pb;

/// The most cells a row may have (the controller's bound on a file's columns).
pub const MAX_COLUMNS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Unique,
    Circular,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    StopUser,
    StopRun,
    Wrap,
}

/// What a take gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Row(u32),
    /// A unique feed's rows are all taken and the plan does not wrap.
    Exhausted,
}

/// The rows an engine holds, in the order it takes them: every cell of every row one after
/// another; `ends` holds where each cell ends in the row's own text (row.rs), `rows[i]`
/// where row i's text and ends start.
#[derive(Debug, Default)]
pub struct Rows {
    columns: usize,
    text: Vec<u8>,
    ends: Vec<u32>,
    rows: Vec<(usize, usize)>,
    /// Each block of the file's rows held, in take order (the job's slice, then each block
    /// handed on): the file's index of its first row, and its first row here.
    blocks: Vec<(u64, usize)>,
}

impl Rows {
    /// Row `index` (of this engine's rows) as templates read it: data set 0, the job's one feed.
    pub fn row(&self, index: u32) -> Row<'_> {
        let (text_start, ends_start) = self.rows[index as usize];
        let ends = &self.ends[ends_start..ends_start + self.columns];
        Row::new(0, &self.text[text_start..], ends)
    }

    fn push_block(&mut self, first_row: u64, rows: &[pb::FeedRow]) -> Result<(), String> {
        if let Some((i, row)) = rows.iter().enumerate().find(|(_, row)| row.cells.len() != self.columns) {
            return Err(format!("feed.rows[{i}]: {} cells for {} columns", row.cells.len(), self.columns));
        }
        if rows.is_empty() {
            return Ok(()); // an engine's empty slice: no block (its first row may start another's)
        }
        self.blocks.push((first_row, self.rows.len()));
        for row in rows {
            let (text_start, ends_start) = (self.text.len(), self.ends.len());
            for cell in &row.cells {
                self.text.extend_from_slice(cell.as_bytes());
                self.ends.push((self.text.len() - text_start) as u32);
            }
            self.rows.push((text_start, ends_start));
        }
        Ok(())
    }

    /// The rows [from, to) of this engine as ranges of the file's indices, one per block.
    fn file_ranges(&self, from: usize, to: usize) -> Vec<(u64, u64)> {
        let mut ranges = Vec::new();
        for (i, &(first_row, start)) in self.blocks.iter().enumerate() {
            let end = self.blocks.get(i + 1).map_or(self.rows.len(), |b| b.1);
            let (a, b) = (from.max(start), to.min(end));
            if a < b {
                ranges.push((first_row + (a - start) as u64, first_row + (b - start) as u64));
            }
        }
        ranges
    }
}

#[derive(Debug)]
pub struct Feed {
    pub name: String,
    pub columns: Vec<String>,
    mode: Mode,
    exhausted: Exhausted,
    /// Appended to only between a user's take and its reads (the engine's one thread).
    held: RefCell<Rows>,
    /// Takes so far (unique and circular: the next row is this modulo the rows).
    next: Cell<u64>,
    /// Unique: rows held reported as taken.
    reported: Cell<u64>,
    /// Unique with stop_run: the rows ran out, the engine's load ends.
    halted: Cell<bool>,
}

impl Feed {
    /// The feed of `spec` for an engine whose first user is `first_user`; or why not.
    pub fn from_spec(spec: &pb::FeedSpec, first_user: u64) -> Result<Feed, String> {
        let columns = spec.columns.len();
        if columns == 0 || columns > MAX_COLUMNS {
            return Err(format!("feed.columns: {columns} columns, not 1 to {MAX_COLUMNS}"));
        }
        let mode = match pb::FeedMode::try_from(spec.mode) {
            Ok(pb::FeedMode::Unspecified | pb::FeedMode::Unique) => Mode::Unique,
            Ok(pb::FeedMode::Circular) => Mode::Circular,
            Ok(pb::FeedMode::Random) => Mode::Random,
            Err(_) => return Err(format!("feed.mode: {} is not a FeedMode", spec.mode)),
        };
        let exhausted = match pb::FeedExhausted::try_from(spec.on_exhausted) {
            Ok(pb::FeedExhausted::Unspecified | pb::FeedExhausted::StopUser) => Exhausted::StopUser,
            Ok(pb::FeedExhausted::StopRun) => Exhausted::StopRun,
            Ok(pb::FeedExhausted::Wrap) => Exhausted::Wrap,
            Err(_) => return Err(format!("feed.on_exhausted: {} is not a FeedExhausted", spec.on_exhausted)),
        };
        let mut held = Rows { columns, ..Rows::default() };
        held.push_block(spec.first_row, &spec.rows)?;
        let feed = Feed {
            name: spec.name.clone(),
            columns: spec.columns.clone(),
            mode,
            exhausted,
            held: RefCell::new(held),
            next: Cell::new(0),
            reported: Cell::new(0),
            halted: Cell::new(false),
        };
        let rows = feed.rows() as u64;
        if mode == Mode::Circular && rows > 0 {
            // Engines start at different rows, so a fleet's users spread over the file.
            feed.next.set(first_user % rows);
        }
        Ok(feed)
    }

    /// Rows of the file handed to this engine (a lost share's, EngineCommand.feed_append), taken
    /// after those it holds; false when it holds a block starting at that row already (the
    /// agent sends each once, but a repeat changes nothing). Only a unique feed takes rows.
    pub fn append(&self, block: &pb::FeedBlock) -> Result<bool, String> {
        if self.mode != Mode::Unique {
            return Err(format!("feed {}: only a unique feed is handed rows", self.name));
        }
        let mut held = self.held.borrow_mut();
        if held.blocks.iter().any(|&(first_row, _)| first_row == block.first_row) {
            return Ok(false);
        }
        held.push_block(block.first_row, &block.rows)?;
        Ok(true)
    }

    /// The names templates resolve `${name.column}` against.
    pub fn data_columns(&self) -> DataColumns<'_> {
        DataColumns { name: &self.name, columns: &self.columns }
    }

    pub fn rows(&self) -> usize {
        self.held.borrow().rows.len()
    }

    /// The rows held, for reading a user's row (not across an await: rows may be appended).
    pub fn held(&self) -> Ref<'_, Rows> {
        self.held.borrow()
    }

    /// The row a user starting its session takes.
    pub fn take(&self, rng: &mut Rng) -> Take {
        let rows = self.rows() as u64;
        if rows == 0 || self.halted.get() {
            return self.exhausted();
        }
        match self.mode {
            Mode::Random => Take::Row(rng.below(rows) as u32),
            Mode::Circular => Take::Row((self.advance() % rows) as u32),
            Mode::Unique => {
                let taken = self.next.get();
                if taken >= rows && self.exhausted != Exhausted::Wrap {
                    return self.exhausted();
                }
                Take::Row((self.advance() % rows) as u32)
            }
        }
    }

    fn advance(&self) -> u64 {
        let at = self.next.get();
        self.next.set(at.saturating_add(1));
        at
    }

    fn exhausted(&self) -> Take {
        if self.exhausted == Exhausted::StopRun {
            self.halted.set(true);
        }
        Take::Exhausted
    }

    /// Unique with stop_run, once a user found no row: the engine starts no more requests.
    pub fn halted(&self) -> bool {
        self.halted.get()
    }

    /// A unique feed's rows first taken since the last call, as ranges of the file's indices
    /// [start, end), one per block they fall in; empty when there are none (or the feed is
    /// not unique).
    pub fn take_unreported(&self) -> Vec<(u64, u64)> {
        if self.mode != Mode::Unique {
            return Vec::new();
        }
        let held = self.held.borrow();
        let taken = self.next.get().min(held.rows.len() as u64);
        let reported = self.reported.replace(taken);
        if taken <= reported {
            return Vec::new();
        }
        held.file_ranges(reported as usize, taken as usize)
    }

    /// Puts the rows first taken since the last report on `report`'s first row, or on a row of
    /// no requests (`target`, `request`) when it has none.
    pub fn report_taken(&self, report: &mut pb::IntervalReport, target: &str, request: &str) {
        let taken = self.take_unreported();
        if taken.is_empty() {
            return;
        }
        if report.stats.is_empty() {
            report.stats.push(pb::IntervalStats {
                target: target.to_string(),
                request: request.to_string(),
                ..Default::default()
            });
        }
        report.stats[0].feed_taken.extend(taken.into_iter().map(|(start, end)| pb::FeedRange { start, end }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: pb::FeedMode, exhausted: pb::FeedExhausted, rows: usize) -> pb::FeedSpec {
        pb::FeedSpec {
            name: "accounts".into(),
            columns: vec!["user".into(), "password".into()],
            mode: mode as i32,
            on_exhausted: exhausted as i32,
            first_row: 100,
            rows: (0..rows).map(|i| pb::FeedRow { cells: vec![format!("u{i}"), format!("pw{i}")] }).collect(),
            file_rows: 1000,
        }
    }

    fn takes(feed: &Feed, n: usize) -> Vec<Take> {
        let mut rng = Rng::new(7);
        (0..n).map(|_| feed.take(&mut rng)).collect()
    }

    #[test]
    fn unique_rows_are_taken_once_in_order_then_the_plan_decides() {
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::StopUser, 3), 0).unwrap();
        assert_eq!(takes(&feed, 4), [Take::Row(0), Take::Row(1), Take::Row(2), Take::Exhausted]);
        assert!(!feed.halted(), "stop_user ends only the user");
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::StopRun, 1), 0).unwrap();
        assert_eq!(takes(&feed, 2), [Take::Row(0), Take::Exhausted]);
        assert!(feed.halted());
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::Wrap, 2), 0).unwrap();
        assert_eq!(takes(&feed, 5), [Take::Row(0), Take::Row(1), Take::Row(0), Take::Row(1), Take::Row(0)]);
    }

    #[test]
    fn circular_starts_at_the_first_user_and_random_stays_in_range() {
        let feed = Feed::from_spec(&spec(pb::FeedMode::Circular, pb::FeedExhausted::Unspecified, 3), 4).unwrap();
        assert_eq!(takes(&feed, 4), [Take::Row(1), Take::Row(2), Take::Row(0), Take::Row(1)]);
        let feed = Feed::from_spec(&spec(pb::FeedMode::Random, pb::FeedExhausted::Unspecified, 3), 0).unwrap();
        let rows: Vec<Take> = takes(&feed, 200);
        assert!(rows.iter().all(|t| matches!(t, Take::Row(r) if *r < 3)));
        for row in 0..3 {
            assert!(rows.contains(&Take::Row(row)), "row {row} never drawn in 200");
        }
    }

    #[test]
    fn cells_are_read_by_column_and_taken_rows_reported_once_as_file_indices() {
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::Wrap, 3), 0).unwrap();
        assert_eq!(feed.held().row(1).cell(0), Some(&b"u1"[..]));
        assert_eq!(feed.held().row(2).cell(1), Some(&b"pw2"[..]));
        assert_eq!(feed.take_unreported(), []);
        takes(&feed, 2);
        assert_eq!(feed.take_unreported(), [(100, 102)]);
        assert_eq!(feed.take_unreported(), []);
        takes(&feed, 4); // past the end: the wrap takes no row a second time in the ledger
        let mut report = pb::IntervalReport::default();
        feed.report_taken(&mut report, "http://t", "r");
        assert_eq!(report.stats.len(), 1);
        assert_eq!(report.stats[0].feed_taken, [pb::FeedRange { start: 102, end: 103 }]);
    }

    fn block(first_row: u64, rows: std::ops::Range<usize>) -> pb::FeedBlock {
        let rows = rows.map(|i| pb::FeedRow { cells: vec![format!("u{i}"), format!("pw{i}")] }).collect();
        pb::FeedBlock { first_row, rows }
    }

    #[test]
    fn rows_handed_on_are_taken_after_the_slice_and_reported_per_block() {
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::StopUser, 2), 0).unwrap();
        assert_eq!(takes(&feed, 3), [Take::Row(0), Take::Row(1), Take::Exhausted]);
        assert_eq!(feed.take_unreported(), [(100, 102)]);
        // A lost engine's rows 500..502 and 700, handed on in two blocks; a repeat is ignored.
        assert_eq!(feed.append(&block(500, 500..502)), Ok(true));
        assert_eq!(feed.append(&block(700, 700..701)), Ok(true));
        assert_eq!(feed.append(&block(500, 500..502)), Ok(false));
        assert_eq!(feed.rows(), 5);
        // The take that found none moved nothing on: the next takes are the handed rows.
        assert_eq!(takes(&feed, 4), [Take::Row(2), Take::Row(3), Take::Row(4), Take::Exhausted]);
        assert_eq!(feed.held().row(2).cell(0), Some(&b"u500"[..]));
        assert_eq!(feed.held().row(4).cell(1), Some(&b"pw700"[..]));
        assert_eq!(feed.take_unreported(), [(500, 502), (700, 701)]);
    }

    #[test]
    fn only_a_unique_feed_is_handed_rows_and_a_short_row_is_refused() {
        let feed = Feed::from_spec(&spec(pb::FeedMode::Circular, pb::FeedExhausted::Unspecified, 2), 0).unwrap();
        assert!(feed.append(&block(5, 5..6)).unwrap_err().contains("only a unique feed"));
        let feed = Feed::from_spec(&spec(pb::FeedMode::Unique, pb::FeedExhausted::StopUser, 2), 0).unwrap();
        let mut short = block(5, 5..7);
        short.rows[1].cells.pop();
        assert_eq!(feed.append(&short).unwrap_err(), "feed.rows[1]: 1 cells for 2 columns");
        assert_eq!(feed.rows(), 2, "a refused block adds no row");
    }

    #[test]
    fn a_row_with_missing_cells_or_no_columns_is_refused() {
        let mut bad = spec(pb::FeedMode::Unique, pb::FeedExhausted::StopUser, 2);
        bad.rows[1].cells.pop();
        assert_eq!(Feed::from_spec(&bad, 0).unwrap_err(), "feed.rows[1]: 1 cells for 2 columns");
        bad.columns.clear();
        assert!(Feed::from_spec(&bad, 0).unwrap_err().starts_with("feed.columns: 0 columns"));
    }
}
