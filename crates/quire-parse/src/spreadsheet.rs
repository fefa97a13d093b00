//! XLSX and ODS workbooks (read with calamine): one page and one section per sheet, named after
//! the sheet, with rows rendered under their header names.

use std::io::Cursor;

use calamine::{Data, Ods, Reader, Xlsx};

use crate::archive::Archive;
use crate::blocks::BlockBuilder;
use crate::tabular::push_rows;
use crate::{Extracted, Format, ParseError, ParseLimits};

pub(crate) fn parse(
    bytes: &[u8],
    format: &Format,
    limits: &ParseLimits,
) -> Result<Extracted, ParseError> {
    if *format == Format::Ods {
        read::<Ods<_>>(bytes, "ODS spreadsheet", limits)
    } else {
        read::<Xlsx<_>>(bytes, "XLSX workbook", limits)
    }
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
    // calamine unpacks parts whole; check the container against the limits first.
    Archive::open(bytes, what, limits)?;
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
