//! The built-in values of templates (template.rs): `${user}`, `${agent}`, `${iteration}`,
//! `${uuid}`, `${now_ms}` and `${random(low,high)}`, their names parsed once per job and
//! their text written per request into a small array (no allocation).

use std::io::Write as _;

use crate::rng::Rng;

/// The longest text of a built-in (a UUID is 36 characters, a u64 at most 20 digits).
pub const MAX_BUILTIN_BYTES: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// The user's fleet-wide index.
    User,
    /// The agent's index.
    Agent,
    /// The user's round of its session's steps, from 0.
    Iteration,
    /// A random version 4 UUID.
    Uuid,
    /// Milliseconds since the Unix epoch.
    NowMs,
    Random {
        low: u64,
        high: u64,
    },
}

/// A `random(...)` whose bounds are not two whole numbers low <= high.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRandom;

/// What a built-in's text is made of, besides the random numbers.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinValues {
    pub user: u64,
    pub agent: u32,
    pub iteration: u64,
    pub now_ms: u64,
}

impl Builtin {
    /// The built-in `reference` names: None when it names none.
    pub fn parse(reference: &str) -> Option<Result<Builtin, BadRandom>> {
        let builtin = match reference {
            "user" => Builtin::User,
            "agent" => Builtin::Agent,
            "iteration" => Builtin::Iteration,
            "uuid" => Builtin::Uuid,
            "now_ms" => Builtin::NowMs,
            _ if reference == "random" || reference.starts_with("random(") => return Some(random(reference)),
            _ => return None,
        };
        Some(Ok(builtin))
    }

    /// Writes the built-in's text into `text`; returns its length.
    pub fn write(self, values: &BuiltinValues, rng: &mut Rng, text: &mut [u8; MAX_BUILTIN_BYTES]) -> usize {
        let mut cursor = &mut text[..];
        let _ = match self {
            Builtin::User => write!(cursor, "{}", values.user),
            Builtin::Agent => write!(cursor, "{}", values.agent),
            Builtin::Iteration => write!(cursor, "{}", values.iteration),
            Builtin::NowMs => write!(cursor, "{}", values.now_ms),
            Builtin::Random { low, high } => {
                let span = high - low;
                let draw = if span == u64::MAX { rng.next_u64() } else { low + rng.below(span + 1) };
                write!(cursor, "{draw}")
            }
            Builtin::Uuid => return uuid_v4(rng, text),
        };
        MAX_BUILTIN_BYTES - cursor.len()
    }
}

fn random(reference: &str) -> Result<Builtin, BadRandom> {
    let inside = reference.strip_prefix("random(").and_then(|r| r.strip_suffix(')')).ok_or(BadRandom)?;
    let (low, high) = inside.split_once(',').ok_or(BadRandom)?;
    let number = |s: &str| s.trim_matches([' ', '\t']).parse::<u64>().map_err(|_| BadRandom);
    let (low, high) = (number(low)?, number(high)?);
    if low > high {
        return Err(BadRandom);
    }
    Ok(Builtin::Random { low, high })
}

/// A random version 4 UUID (RFC 9562 §5.4) in its 36-character text form.
fn uuid_v4(rng: &mut Rng, text: &mut [u8; MAX_BUILTIN_BYTES]) -> usize {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
    bytes[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut length = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text[length] = b'-';
            length += 1;
        }
        text[length] = HEX[usize::from(byte >> 4)];
        text[length + 1] = HEX[usize::from(byte & 0x0f)];
        length += 2;
    }
    length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_version_4_in_its_text_form() {
        let mut text = [0u8; MAX_BUILTIN_BYTES];
        let length = uuid_v4(&mut Rng::new(1), &mut text);
        let uuid = std::str::from_utf8(&text[..length]).unwrap();
        assert_eq!(uuid.len(), 36);
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(groups[2].starts_with('4'), "{uuid}");
        assert!(matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'), "{uuid}");
        assert!(uuid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn the_longest_texts_fit() {
        let values = BuiltinValues { user: u64::MAX, agent: u32::MAX, iteration: u64::MAX, now_ms: u64::MAX };
        let mut text = [0u8; MAX_BUILTIN_BYTES];
        assert_eq!(Builtin::User.write(&values, &mut Rng::new(1), &mut text), 20);
        assert_eq!(&text[..20], b"18446744073709551615");
        let whole = Builtin::Random { low: 0, high: u64::MAX };
        assert!(whole.write(&values, &mut Rng::new(1), &mut text) <= 20);
    }

    #[test]
    fn names_parse_to_builtins() {
        assert_eq!(Builtin::parse("now_ms"), Some(Ok(Builtin::NowMs)));
        assert_eq!(Builtin::parse("random( 1 ,\t9)"), Some(Ok(Builtin::Random { low: 1, high: 9 })));
        assert_eq!(Builtin::parse("random(9,1)"), Some(Err(BadRandom)));
        assert_eq!(Builtin::parse("random"), Some(Err(BadRandom)));
        assert_eq!(Builtin::parse("csrf"), None);
    }
}
