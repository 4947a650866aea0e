//! A user's variables: one value per slot (slot i is the job's variables[i]), filled by
//! extractions and read by templates. Slots, not names: the job resolves every name to its
//! slot once, so nothing looks a name up per request.
//!
//! Bounded per user (Hyperfoil's rule: fixed caps, overflow refused, never grown): a value is
//! at most MAX_VALUE_BYTES, all values together at most MAX_VARS_BYTES, and at most MAX_SLOTS
//! slots. The values live in one buffer whose capacity never passes MAX_VARS_BYTES, so a user
//! holds at most 4 KiB + 8 bytes per slot whatever the values were. A value over a cap is
//! refused whole, never truncated: a cut token would only fail later, further from its cause.

use std::fmt;

/// Bytes of one value (a session id, a CSRF token: tens of bytes; 1 KiB leaves room).
pub const MAX_VALUE_BYTES: usize = 1024;
/// Bytes of all of a user's values together.
pub const MAX_VARS_BYTES: usize = 4 * 1024;
/// Variables of a job (the plan declares them; 64 is far past any journey's few).
pub const MAX_SLOTS: usize = 64;

/// Why a value was not stored; the caller turns it into a failed extraction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VarsError {
    TooManySlots { slots: usize },
    ValueTooLong { slot: usize, bytes: usize },
    TotalTooLarge { slot: usize, bytes: usize, others: usize },
}

impl fmt::Display for VarsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VarsError::TooManySlots { slots } => write!(f, "{slots} variables, over the {MAX_SLOTS} a job may have"),
            VarsError::ValueTooLong { bytes, .. } => {
                write!(f, "value of {bytes} bytes over {} KiB", MAX_VALUE_BYTES / 1024)
            }
            VarsError::TotalTooLarge { bytes, others, .. } => write!(
                f,
                "value of {bytes} bytes with the user's other values' {others} over {} KiB in all",
                MAX_VARS_BYTES / 1024
            ),
        }
    }
}

impl std::error::Error for VarsError {}

/// One user's values. Unset slots read as empty.
#[derive(Debug, Clone)]
pub struct Vars {
    /// Every value, one after another; `ends[i]` is where slot i's value ends, and it starts
    /// where slot i-1's ends.
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Vars {
    /// `slots` empty values (at most MAX_SLOTS). Nothing is allocated for values until one is set.
    pub fn new(slots: usize) -> Result<Vars, VarsError> {
        if slots > MAX_SLOTS {
            return Err(VarsError::TooManySlots { slots });
        }
        Ok(Vars { bytes: Vec::new(), ends: vec![0; slots] })
    }

    pub fn slots(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of all values together.
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The buffer's capacity: never above MAX_VARS_BYTES.
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Slot `slot`'s value. Panics on a slot the job does not have (slots are resolved when
    /// the job is built, so that is a bug, not input).
    pub fn get(&self, slot: usize) -> &[u8] {
        &self.bytes[self.start(slot)..self.ends[slot] as usize]
    }

    fn start(&self, slot: usize) -> usize {
        if slot == 0 {
            0
        } else {
            self.ends[slot - 1] as usize
        }
    }

    /// Sets slot `slot` to `value`, or refuses it (over MAX_VALUE_BYTES, or the total over
    /// MAX_VARS_BYTES) and leaves every value as it was.
    pub fn set(&mut self, slot: usize, value: &[u8]) -> Result<(), VarsError> {
        let (start, end) = (self.start(slot), self.ends[slot] as usize);
        if value.len() > MAX_VALUE_BYTES {
            return Err(VarsError::ValueTooLong { slot, bytes: value.len() });
        }
        let others = self.bytes.len() - (end - start);
        if others + value.len() > MAX_VARS_BYTES {
            return Err(VarsError::TotalTooLarge { slot, bytes: value.len(), others });
        }
        let new_len = others + value.len();
        if new_len > self.bytes.capacity() {
            // Doubling, but never past the cap: the cap is the most a user ever holds.
            let target = new_len.max(2 * self.bytes.capacity()).min(MAX_VARS_BYTES);
            self.bytes.reserve_exact(target - self.bytes.len());
        }
        // At most 4 KiB move: cheaper than any per-slot allocation.
        self.bytes.splice(start..end, value.iter().copied());
        let grown = value.len() as i64 - (end - start) as i64;
        for later in &mut self.ends[slot..] {
            *later = (i64::from(*later) + grown) as u32;
        }
        Ok(())
    }

    /// Every slot empty again (a session restart), the buffer's capacity kept for the next session.
    pub fn reset(&mut self) {
        self.bytes.clear();
        self.ends.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_per_slot_and_replaced() {
        let mut vars = Vars::new(3).unwrap();
        assert_eq!(vars.get(1), b"");
        vars.set(1, b"token").unwrap();
        vars.set(0, b"a").unwrap();
        vars.set(2, b"zz").unwrap();
        assert_eq!((vars.get(0), vars.get(1), vars.get(2)), (&b"a"[..], &b"token"[..], &b"zz"[..]));
        vars.set(1, b"longer token").unwrap();
        vars.set(0, b"").unwrap();
        assert_eq!((vars.get(0), vars.get(1), vars.get(2)), (&b""[..], &b"longer token"[..], &b"zz"[..]));
        assert_eq!(vars.total_bytes(), 14);
    }

    #[test]
    fn a_value_over_1_kib_is_refused_whole_and_nothing_changes() {
        let mut vars = Vars::new(2).unwrap();
        vars.set(0, b"kept").unwrap();
        vars.set(0, &[b'x'; MAX_VALUE_BYTES]).unwrap();
        vars.set(0, b"kept").unwrap();
        let long = vec![b'x'; MAX_VALUE_BYTES + 1];
        let refused = vars.set(0, &long).unwrap_err();
        assert_eq!(refused, VarsError::ValueTooLong { slot: 0, bytes: 1025 });
        assert_eq!(refused.to_string(), "value of 1025 bytes over 1 KiB");
        assert_eq!(vars.get(0), b"kept");
        let refused = vars.set(1, &[b'x'; 1331]).unwrap_err();
        assert_eq!(refused.to_string(), "value of 1331 bytes over 1 KiB");
    }

    #[test]
    fn the_total_is_bounded_at_4_kib_and_the_buffer_never_grows_past_it() {
        let mut vars = Vars::new(5).unwrap();
        for slot in 0..4 {
            vars.set(slot, &[b'a' + slot as u8; MAX_VALUE_BYTES]).unwrap();
        }
        assert_eq!(vars.total_bytes(), MAX_VARS_BYTES);
        let refused = vars.set(4, b"x").unwrap_err();
        assert_eq!(refused, VarsError::TotalTooLarge { slot: 4, bytes: 1, others: 4096 });
        assert!(refused.to_string().contains("other values' 4096 over 4 KiB in all"), "{refused}");
        // Replacing a value counts the new value instead of the old, not beside it.
        vars.set(3, b"short").unwrap();
        vars.set(4, b"now fits").unwrap();
        assert_eq!(vars.get(2), &[b'c'; MAX_VALUE_BYTES][..]);
        assert_eq!(vars.get(4), b"now fits");
        assert!(vars.capacity_bytes() <= MAX_VARS_BYTES, "capacity {}", vars.capacity_bytes());
    }

    #[test]
    fn reset_empties_every_slot_and_keeps_the_capacity() {
        let mut vars = Vars::new(2).unwrap();
        vars.set(0, &[b'x'; 900]).unwrap();
        vars.set(1, b"y").unwrap();
        let capacity = vars.capacity_bytes();
        vars.reset();
        assert_eq!((vars.get(0), vars.get(1), vars.total_bytes()), (&b""[..], &b""[..], 0));
        assert_eq!(vars.capacity_bytes(), capacity);
        assert!(capacity >= 901);
    }

    #[test]
    fn at_most_64_slots() {
        assert_eq!(Vars::new(MAX_SLOTS).unwrap().slots(), 64);
        let refused = Vars::new(MAX_SLOTS + 1).unwrap_err();
        assert_eq!(refused.to_string(), "65 variables, over the 64 a job may have");
    }
}
