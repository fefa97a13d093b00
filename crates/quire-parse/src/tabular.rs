//! Tables whose rows must be understandable alone: each row becomes one block that repeats the
//! column names (`Team: Boston; Season: 1970; Wins: 57`), so a passage cut from the middle of a
//! long sheet still says what its numbers are.

use crate::Extracted;
use crate::blocks::BlockBuilder;

/// Renders rows under their header names into `out`. The first row with any content is the
/// header; empty header cells become `column N`; empty values are left out.
pub(crate) fn push_rows(out: &mut BlockBuilder, rows: impl IntoIterator<Item = Vec<String>>) {
    let mut header: Option<Vec<String>> = None;
    let mut emitted = 0usize;
    for row in rows {
        let row: Vec<String> = row
            .iter()
            .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        if row.iter().all(String::is_empty) {
            continue;
        }
        let Some(names) = &header else {
            header = Some(
                row.iter()
                    .enumerate()
                    .map(|(i, name)| {
                        if name.is_empty() {
                            format!("column {}", i + 1)
                        } else {
                            name.clone()
                        }
                    })
                    .collect(),
            );
            continue;
        };
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(_, value)| !value.is_empty())
            .map(|(i, value)| match names.get(i) {
                Some(name) => format!("{name}: {value}"),
                None => format!("column {}: {value}", i + 1),
            })
            .collect();
        out.push_block(&line.join("; "));
        emitted += 1;
    }
    // A table that is only a header is still text worth keeping.
    if let (Some(names), 0) = (&header, emitted) {
        out.push_block(&names.join("; "));
    }
}

/// CSV or TSV text: the delimiter is `delimiter`, or guessed among `,` `;` `\t` `|`.
pub(crate) fn delimited(text: &str, delimiter: Option<u8>) -> Extracted {
    let delimiter = delimiter.unwrap_or_else(|| guess_delimiter(text));
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let rows = reader
        .records()
        .filter_map(Result::ok)
        .map(|record| record.iter().map(str::to_owned).collect::<Vec<_>>());
    let mut out = BlockBuilder::new();
    push_rows(&mut out, rows);
    out.into()
}

/// The candidate delimiter that splits the first lines most consistently.
fn guess_delimiter(text: &str) -> u8 {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(20)
        .collect();
    let mut best = (b',', 0usize);
    for candidate in [b',', b';', b'\t', b'|'] {
        let counts: Vec<usize> = lines
            .iter()
            .map(|line| line.bytes().filter(|&b| b == candidate).count())
            .collect();
        let min = counts.iter().copied().min().unwrap_or(0);
        // Fields that are consistently present on every line beat a delimiter that only
        // appears inside some values.
        if min > best.1 {
            best = (candidate, min);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(e: &Extracted) -> Vec<&str> {
        e.blocks.iter().map(|b| b.text.as_str()).collect()
    }

    #[test]
    fn rows_repeat_their_column_names() {
        let csv = "Team,Season,Wins\nBoston,1970,57\nDetroit,,44\n";
        assert_eq!(
            texts(&delimited(csv, None)),
            vec![
                "Team: Boston; Season: 1970; Wins: 57",
                "Team: Detroit; Wins: 44"
            ]
        );
    }

    #[test]
    fn delimiters_are_guessed() {
        assert_eq!(guess_delimiter("a;b;c\n1;2,5;3\n"), b';');
        assert_eq!(guess_delimiter("a|b\n1|2\n"), b'|');
        assert_eq!(guess_delimiter("a\tb\n1\t2\n"), b'\t');
        assert_eq!(guess_delimiter("a,b\n\"x;y\",2\n"), b',');
    }

    #[test]
    fn quoted_fields_and_ragged_rows() {
        let csv = "name,notes\n\"Smith, J\",\"said \"\"hi\"\"\"\nextra,1,2\n";
        assert_eq!(
            texts(&delimited(csv, None)),
            vec![
                "name: Smith, J; notes: said \"hi\"",
                "name: extra; notes: 1; column 3: 2"
            ]
        );
    }

    #[test]
    fn a_lone_header_is_kept() {
        assert_eq!(
            texts(&delimited("only,a,header\n", None)),
            vec!["only; a; header"]
        );
    }
}
