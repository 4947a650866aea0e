//! A job's data file (JobSpec.feed): the rows this engine holds and which row a user takes
//! next. A user takes a row when its session starts, and a new one after a restart (Gatling's
//! `feed` at a scenario's start); templates read its cells as `${name.column}` (row.rs).
//!
//! - unique: the engine holds only its slice of the file (the controller and the agent split
//!   the rows exactly, as budgets) and hands each row out once, in order; when they are all
//!   taken, the plan's `on_exhausted` says what a user does (stop, the engine stops its load,
//!   or the slice is taken again from its start). The rows first taken since the last report
//!   are one range of the file's indices (`take_unreported`), which the ledger is built from.
//! - circular: every row, in order from the engine's first user's index, over and over.
//! - random: every row, a row at random per take.
//!
//! Bounds: the rows are the job's (a plan's data file is at most 1 MiB, checked by the
//! controller); they live in one buffer with 4 bytes per cell of ends, and a feed keeps four
//! counters whatever the length of the run.

use std::cell::Cell;

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

#[derive(Debug)]
pub struct Feed {
    pub name: String,
    pub columns: Vec<String>,
    mode: Mode,
    exhausted: Exhausted,
    first_row: u64,
    /// Every cell of every row, one after another; `ends` holds where each cell ends, in
    /// the row's own text (row.rs), `rows[i]` where row i's text and ends start.
    text: Vec<u8>,
    ends: Vec<u32>,
    rows: Vec<(usize, usize)>,
    /// Takes so far (unique and circular: the next row is this modulo the rows).
    next: Cell<u64>,
    /// Unique: rows of the slice reported as taken.
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
        let mut feed = Feed {
            name: spec.name.clone(),
            columns: spec.columns.clone(),
            mode,
            exhausted,
            first_row: spec.first_row,
            text: Vec::new(),
            ends: Vec::new(),
            rows: Vec::with_capacity(spec.rows.len()),
            next: Cell::new(0),
            reported: Cell::new(0),
            halted: Cell::new(false),
        };
        for (i, row) in spec.rows.iter().enumerate() {
            if row.cells.len() != columns {
                return Err(format!("feed.rows[{i}]: {} cells for {columns} columns", row.cells.len()));
            }
            feed.push(&row.cells);
        }
        if mode == Mode::Circular && !feed.rows.is_empty() {
            // Engines start at different rows, so a fleet's users spread over the file.
            feed.next.set(first_user % feed.rows.len() as u64);
        }
        Ok(feed)
    }

    fn push(&mut self, cells: &[String]) {
        let (text_start, ends_start) = (self.text.len(), self.ends.len());
        for cell in cells {
            self.text.extend_from_slice(cell.as_bytes());
            self.ends.push((self.text.len() - text_start) as u32);
        }
        self.rows.push((text_start, ends_start));
    }

    /// The names templates resolve `${name.column}` against.
    pub fn data_columns(&self) -> DataColumns<'_> {
        DataColumns { name: &self.name, columns: &self.columns }
    }

    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Row `index` (of this engine's rows) as templates read it: data set 0, the job's one feed.
    pub fn row(&self, index: u32) -> Row<'_> {
        let (text_start, ends_start) = self.rows[index as usize];
        let ends = &self.ends[ends_start..ends_start + self.columns.len()];
        Row::new(0, &self.text[text_start..], ends)
    }

    /// The row a user starting its session takes.
    pub fn take(&self, rng: &mut Rng) -> Take {
        let rows = self.rows.len() as u64;
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

    /// A unique feed's rows first taken since the last call, as the file's indices
    /// [start, end); None when there are none (or the feed is not unique).
    pub fn take_unreported(&self) -> Option<(u64, u64)> {
        if self.mode != Mode::Unique {
            return None;
        }
        let taken = self.next.get().min(self.rows.len() as u64);
        let reported = self.reported.replace(taken);
        (taken > reported).then(|| (self.first_row + reported, self.first_row + taken))
    }

    /// Puts the rows first taken since the last report on `report`'s first row, or on a row of
    /// no requests (`target`, `request`) when it has none.
    pub fn report_taken(&self, report: &mut pb::IntervalReport, target: &str, request: &str) {
        let Some((start, end)) = self.take_unreported() else { return };
        if report.stats.is_empty() {
            report.stats.push(pb::IntervalStats {
                target: target.to_string(),
                request: request.to_string(),
                ..Default::default()
            });
        }
        report.stats[0].feed_taken.push(pb::FeedRange { start, end });
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
        assert_eq!(feed.row(1).cell(0), Some(&b"u1"[..]));
        assert_eq!(feed.row(2).cell(1), Some(&b"pw2"[..]));
        assert_eq!(feed.take_unreported(), None);
        takes(&feed, 2);
        assert_eq!(feed.take_unreported(), Some((100, 102)));
        assert_eq!(feed.take_unreported(), None);
        takes(&feed, 4); // past the end: the wrap takes no row a second time in the ledger
        let mut report = pb::IntervalReport::default();
        feed.report_taken(&mut report, "http://t", "r");
        assert_eq!(report.stats.len(), 1);
        assert_eq!(report.stats[0].feed_taken, [pb::FeedRange { start: 102, end: 103 }]);
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
