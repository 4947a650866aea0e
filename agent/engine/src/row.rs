//! One row of a plan's data set (a CSV of accounts, say) as the engine keeps rows: the cells
//! one after another in one buffer and where each ends, so 100,000 rows of 32 cells cost
//! their bytes and 4 bytes a cell, not an allocation a cell. Templates read a user's row
//! through this view (`${accounts.username}`); the feed (which row a user has) keeps the
//! buffers.

/// A borrowed row: cell i is `text[ends[i-1]..ends[i]]` (the first starts at 0).
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    data: usize,
    text: &'a [u8],
    ends: &'a [u32],
}

impl<'a> Row<'a> {
    /// A row of data set `data` (its index in the job). `ends` must not decrease and the last
    /// must be at most `text.len()`: a cell that does not is read as missing.
    pub fn new(data: usize, text: &'a [u8], ends: &'a [u32]) -> Row<'a> {
        Row { data, text, ends }
    }

    pub fn data(&self) -> usize {
        self.data
    }

    pub fn cells(&self) -> usize {
        self.ends.len()
    }

    /// Cell `column`, or None when the row has no such cell.
    pub fn cell(&self, column: usize) -> Option<&'a [u8]> {
        let end = *self.ends.get(column)? as usize;
        let start = if column == 0 { 0 } else { self.ends[column - 1] as usize };
        self.text.get(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_read_from_one_buffer() {
        let row = Row::new(1, b"alicesecret", &[5, 5, 11]);
        assert_eq!((row.data(), row.cells()), (1, 3));
        assert_eq!(row.cell(0), Some(&b"alice"[..]));
        assert_eq!(row.cell(1), Some(&b""[..]));
        assert_eq!(row.cell(2), Some(&b"secret"[..]));
        assert_eq!(row.cell(3), None);
    }

    #[test]
    fn ends_past_the_text_or_decreasing_read_as_missing() {
        let row = Row::new(0, b"abc", &[2, 9, 1]);
        assert_eq!(row.cell(0), Some(&b"ab"[..]));
        assert_eq!(row.cell(1), None);
        assert_eq!(row.cell(2), None);
    }
}
