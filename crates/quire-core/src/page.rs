//! Pages of long lists: how many items a page holds ([`PageSize`]) and where the next page
//! starts ([`DocumentCursor`], opaque to clients), both parsed from query parameters.

use chrono::{DateTime, TimeZone, Utc};

use crate::InputError;

/// Items one page holds: 1 to [`PageSize::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize(u32);

impl PageSize {
    /// The largest page a client may ask for.
    pub const MAX: u32 = 1_000;

    /// Parses the `limit` query parameter.
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        match raw.trim().parse::<u32>() {
            Ok(n) if (1..=Self::MAX).contains(&n) => Ok(Self(n)),
            _ => Err(InputError(format!(
                "`limit` must be a whole number from 1 to {} (got {raw:?})",
                Self::MAX
            ))),
        }
    }

    /// The number of items.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// Where a page of a source's documents (newest first) goes on: after the document created at
/// `created_at` that was stored as number `seq` (insertion order breaks ties of time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentCursor {
    /// Creation time of the last document of the previous page.
    pub created_at: DateTime<Utc>,
    /// Its insertion number in the store.
    pub seq: i64,
}

/// Cursors start with this tag, so a cursor of another list is refused, not misread.
const DOCUMENT_CURSOR_TAG: &str = "d1.";

impl DocumentCursor {
    /// The opaque form clients send back.
    pub fn encode(&self) -> String {
        format!(
            "{DOCUMENT_CURSOR_TAG}{}.{}",
            self.created_at.timestamp_micros(),
            self.seq
        )
    }

    /// Parses the `cursor` query parameter (a value [`DocumentCursor::encode`] made).
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let invalid = || {
            InputError(format!(
                "`cursor` {raw:?} is not a cursor this server gave out; use the `Link` header's \
                 next URL"
            ))
        };
        let rest = raw.strip_prefix(DOCUMENT_CURSOR_TAG).ok_or_else(invalid)?;
        let (micros, seq) = rest.split_once('.').ok_or_else(invalid)?;
        let micros: i64 = micros.parse().map_err(|_| invalid())?;
        let seq: i64 = seq.parse().map_err(|_| invalid())?;
        let created_at = Utc.timestamp_micros(micros).single().ok_or_else(invalid)?;
        Ok(Self { created_at, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(PageSize::parse("1").unwrap().get(), 1);
        assert_eq!(PageSize::parse("1000").unwrap().get(), 1000);
        for bad in ["0", "1001", "-1", "ten", "", "2.5"] {
            assert!(PageSize::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let cursor = DocumentCursor {
            created_at: Utc.timestamp_micros(1_800_000_000_123_456).unwrap(),
            seq: 42,
        };
        assert_eq!(DocumentCursor::parse(&cursor.encode()).unwrap(), cursor);
        for bad in [
            "",
            "d1.",
            "d1.5",
            "d1.x.1",
            "x1.5.1",
            "d1.5.1.2",
            "d1.99999999999999999999.1",
        ] {
            assert!(DocumentCursor::parse(bad).is_err(), "{bad}");
        }
    }
}
