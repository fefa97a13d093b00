//! XLSX, ODS and legacy XLS workbooks (read with calamine): one page and one section per sheet, named after
//! the sheet, with rows rendered under their header names.

use std::io::Cursor;

use calamine::{Data, Ods, Reader, Xls, Xlsx};

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::ole::{Ole, malformed, u16_at, u32_at};
use crate::tabular::push_rows;
use crate::xml::{XmlEvent, for_each_event};
use crate::{Extracted, Format, ParseError, ParseLimits};

pub(crate) fn parse(
    bytes: &[u8],
    format: &Format,
    limits: &ParseLimits,
) -> Result<Extracted, ParseError> {
    match format {
        Format::Ods => {
            check_ods_content(bytes, limits)?;
            read::<Ods<_>>(bytes, "ODS spreadsheet", limits)
        }
        Format::Xls => {
            // calamine reads the workbook stream whole; check the compound file against the
            // limits first (a stream longer than the file or the budget fails here).
            let what = "Excel 97-2003 workbook (.xls)";
            let mut ole = Ole::open(bytes, what, limits)?;
            let stream = match ole.read("/Workbook")? {
                Some(stream) => stream,
                None => ole.require("/Book")?,
            };
            check_biff(&stream, what)?;
            read::<Xls<_>>(bytes, what, limits)
        }
        _ => {
            check_zip(bytes, "XLSX workbook", limits)?;
            read::<Xlsx<_>>(bytes, "XLSX workbook", limits)
        }
    }
}

/// Checks the records of an XLS workbook stream that calamine trusts: a sheet's start
/// (`BoundSheet8`) must lie inside the stream, and a sheet's declared size (`Dimensions`, which
/// calamine reserves memory for) must be ordered and within Excel's 65,536 × 256 grid.
fn check_biff(stream: &[u8], what: &str) -> Result<(), ParseError> {
    let damaged = |detail: &str| malformed(what, detail);
    let mut at = 0usize;
    while let (Some(kind), Some(len)) = (u16_at(stream, at), u16_at(stream, at + 2)) {
        let data = stream
            .get(at + 4..at + 4 + usize::from(len))
            .ok_or_else(|| damaged("a record runs past the end of the workbook stream"))?;
        match kind {
            0x0085 if u32_at(data, 0).is_none_or(|pos| pos as usize >= stream.len()) => {
                return Err(damaged("a sheet starts outside the workbook stream"));
            }
            0x0200 => {
                let (first_row, last_row, first_col, last_col) = match data.len() {
                    10 => (
                        u16_at(data, 0).map(u32::from),
                        u16_at(data, 2).map(u32::from),
                        u16_at(data, 4),
                        u16_at(data, 6),
                    ),
                    _ => (
                        u32_at(data, 0),
                        u32_at(data, 4),
                        u16_at(data, 8),
                        u16_at(data, 10),
                    ),
                };
                let ok = matches!(
                    (first_row, last_row, first_col, last_col),
                    (Some(r0), Some(r1), Some(c0), Some(c1))
                        if r0 <= r1 && r1 <= 65_536 && c0 <= c1 && c1 <= 256
                );
                if !ok {
                    return Err(damaged("a sheet declares impossible dimensions"));
                }
            }
            _ => {}
        }
        at += 4 + usize::from(len);
    }
    Ok(())
}

/// calamine unpacks parts whole; check the container against the limits first.
fn check_zip(bytes: &[u8], what: &'static str, limits: &ParseLimits) -> Result<(), ParseError> {
    Archive::open(bytes, what, limits).map(drop)
}

/// Checks the container against the limits, and that `content.xml` is well-formed: calamine's
/// ODS reader waits for a table's closing tag and takes the end of the file for just another
/// event, so a part that ends inside a table kept it looping until the time budget (found by
/// `quire bench fuzz`).
fn check_ods_content(bytes: &[u8], limits: &ParseLimits) -> Result<(), ParseError> {
    const WHAT: &str = "ODS spreadsheet";
    let mut archive = Archive::open(bytes, WHAT, limits)?;
    let content = archive.require_text("content.xml")?;
    let mut open = 0_usize;
    // The reader checks that each closing tag names the element it closes.
    for_each_event(&content, |event| match event {
        XmlEvent::Start { .. } => open += 1,
        XmlEvent::End { .. } => open = open.saturating_sub(1),
        XmlEvent::Text(_) => {}
    })
    .map_err(|detail| malformed(WHAT, &format!("content.xml: {detail}")))?;
    if open > 0 {
        return Err(malformed(
            WHAT,
            "content.xml ends before its elements are closed",
        ));
    }
    Ok(())
}

fn read<'a, W>(
    bytes: &'a [u8],
    what: &'static str,
    limits: &ParseLimits,
) -> Result<Extracted, ParseError>
where
    W: Reader<Cursor<&'a [u8]>>,
    W::Error: std::fmt::Display,
{
    let malformed = |e: W::Error| {
        let detail = e.to_string();
        if detail.to_ascii_lowercase().contains("password") || detail.contains("ncrypt") {
            ParseError::Encrypted(what.into())
        } else {
            ParseError::Malformed {
                format: what.into(),
                detail,
            }
        }
    };
    let mut workbook = W::new(Cursor::new(bytes)).map_err(malformed)?;
    let names = workbook.sheet_names().to_vec();
    limits.check_pages("the workbook", names.len(), "sheets")?;
    let mut out = BlockBuilder::new();
    for (index, name) in names.iter().enumerate() {
        out.force_page(index as u32 + 1);
        out.set_section(name, false);
        let range = workbook.worksheet_range(name).map_err(malformed)?;
        push_rows(
            &mut out,
            range.rows().map(|row| row.iter().map(cell_text).collect()),
        );
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: names.len().max(1) as u32,
    })
}

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::DateTime(d) => d
            .as_datetime()
            .map(|t| {
                let text = t.to_string();
                text.strip_suffix(" 00:00:00")
                    .map(str::to_owned)
                    .unwrap_or(text)
            })
            .unwrap_or_else(|| cell.to_string()),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{compound, xls};
    use crate::test_support::{shape, zip_package};

    #[test]
    fn xls_sheets_become_pages() {
        let file = xls(&[
            ("Teams", &[&["Team", "Wins"], &["Falcons", "12"]]),
            ("Coaches", &[&["Coach"], &["Marlowe"]]),
        ]);
        assert_eq!(crate::detect_format(&file, "book", ""), Format::Xls);
        let parsed = crate::parse(&file, "book.xls", "", &ParseLimits::default()).unwrap();
        assert_eq!(
            shape(&parsed.blocks),
            vec![
                (1, "Teams", "Team: Falcons; Wins: 12"),
                (2, "Coaches", "Coach: Marlowe")
            ]
        );
        assert_eq!(parsed.page_count, 2);
    }

    #[test]
    fn corrupt_workbook_records_fail_with_a_reason() {
        let record = |kind: u16, data: &[u8]| {
            let mut out = kind.to_le_bytes().to_vec();
            out.extend((data.len() as u16).to_le_bytes());
            out.extend(data);
            out
        };
        // A sheet said to start far past the end of the stream.
        let mut sheet = u32::MAX.to_le_bytes().to_vec();
        sheet.extend([0, 0, 1, 0, b'x']);
        let far = record(0x0085, &sheet);
        // A sheet that claims 4 billion rows (calamine would reserve memory for them).
        let mut dims = 0u32.to_le_bytes().to_vec();
        dims.extend(u32::MAX.to_le_bytes());
        dims.extend([0, 0, 1, 0, 0, 0]);
        let huge = record(0x0200, &dims);
        for stream in [far, huge, vec![0x09, 0x08, 0xFF, 0x00]] {
            let file = compound(&[("/Workbook", &stream)]);
            let err = parse(&file, &Format::Xls, &ParseLimits::default()).unwrap_err();
            assert!(matches!(err, ParseError::Malformed { .. }), "{err}");
        }
    }

    /// Found by `quire bench fuzz`: two bytes deleted from a closing tag (`</table:table>` became
    /// `<able:table>`) left calamine looping past the time budget; now the file fails at once.
    #[test]
    fn an_ods_whose_content_ends_inside_a_table_fails_with_a_reason() {
        let content = |table_end: &str| {
            format!(
                "<office:document-content xmlns:office=\"o\" xmlns:table=\"t\" xmlns:text=\"x\">\
                 <office:body><office:spreadsheet><table:table table:name=\"Parts\">\
                 <table:table-row><table:table-cell office:value-type=\"string\"><text:p>seal\
                 </text:p></table:table-cell></table:table-row>{table_end}</office:spreadsheet>\
                 </office:body></office:document-content>"
            )
        };
        let ods = |content: &str| {
            zip_package(&[
                ("mimetype", "application/vnd.oasis.opendocument.spreadsheet"),
                ("content.xml", content),
                (
                    "META-INF/manifest.xml",
                    "<manifest:manifest xmlns:manifest=\"m\"><manifest:file-entry \
                     manifest:full-path=\"/\"/></manifest:manifest>",
                ),
            ])
        };
        let limits = ParseLimits::default();
        let whole = parse(&ods(&content("</table:table>")), &Format::Ods, &limits).unwrap();
        assert_eq!(shape(&whole.blocks), vec![(1, "Parts", "seal")]);
        for broken in [
            content("<able:table>"),
            // Cut off inside the row.
            content("</table:table>")[..300].to_owned(),
        ] {
            let err = parse(&ods(&broken), &Format::Ods, &limits).unwrap_err();
            assert!(matches!(err, ParseError::Malformed { .. }), "{err}");
            assert!(err.to_string().contains("content.xml"), "{err}");
        }
    }
}
