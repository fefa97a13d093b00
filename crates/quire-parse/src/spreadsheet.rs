//! XLSX, ODS and legacy XLS workbooks (read with calamine): one page and one section per sheet, named after
//! the sheet, with rows rendered under their header names.

use std::io::Cursor;

use calamine::{Cell, Data, DataRef, Ods, Range, Reader, Xls, Xlsx, XlsxError};

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
    // calamine panics on some damage (an overflowing multiplication in its XLSX reader, found
    // by `quire bench fuzz`): that is damage too, not an internal error.
    let read = || read_workbook(bytes, format, limits);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(malformed(
            format.describe(),
            "its structure could not be read (the spreadsheet reader stopped on damage it \
             could not work around)",
        ))
    })
}

fn read_workbook(
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
            check_biff(&stream, what, limits)?;
            read::<Xls<_>>(bytes, what, limits)
        }
        _ => {
            let what = "XLSX workbook";
            check_zip(bytes, what, limits)?;
            check_shared_strings(bytes, what, limits)?;
            let mut workbook = Xlsx::new(Cursor::new(bytes)).map_err(|e| reader_error(what, e))?;
            let names = workbook.sheet_names().to_vec();
            read_sheets(&names, limits, |name| {
                xlsx_sheet(&mut workbook, name, what, limits)
            })
        }
    }
}

/// Checks the records of an XLS workbook stream that calamine trusts: a sheet's start
/// (`BoundSheet8`) must lie inside the stream, a sheet's declared size (`Dimensions`, which
/// calamine reserves memory for) must be ordered and within Excel's 65,536 × 256 grid, and the
/// cells of a sheet must span a grid that fits the memory budget (calamine builds the whole
/// grid: one damaged cell record at column 65,535 of row 65,535 asked for 137 GB, found by
/// `quire bench fuzz`).
fn check_biff(stream: &[u8], what: &str, limits: &ParseLimits) -> Result<(), ParseError> {
    let damaged = |detail: &str| malformed(what, detail);
    let mut at = 0usize;
    // Substreams open (a sheet's BOF opens one, its EOF closes it) and the current sheet's cells.
    let (mut depth, mut cells) = (0_usize, Extent::default());
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
                if let (Some(r0), Some(r1), Some(c0), Some(c1)) =
                    (first_row, last_row, first_col, last_col)
                {
                    // The dimensions' last row and column are one past the end.
                    let mut declared = Extent::default();
                    declared.add(r0, u32::from(c0));
                    declared.add(r1.max(r0 + 1) - 1, u32::from(c1.max(c0 + 1)) - 1);
                    declared.check("a sheet declares", what, limits)?;
                }
            }
            0x0809 => {
                depth += 1;
                if depth <= 2 {
                    cells = Extent::default();
                }
            }
            0x000A => depth = depth.saturating_sub(1),
            // The cell records calamine reads: number, label, rich string, Boolean or error,
            // RK, shared-string label, formula (row and column first), and MulRK (a row of RK
            // cells, its last column at the end).
            0x0203 | 0x0204 | 0x00D6 | 0x0205 | 0x027E | 0x00FD | 0x0006 | 0x00BD => {
                let (Some(row), Some(col)) = (u16_at(data, 0), u16_at(data, 2)) else {
                    return Err(damaged("a cell record is too short"));
                };
                cells.add(u32::from(row), u32::from(col));
                if kind == 0x00BD {
                    let last = data.len().checked_sub(2).and_then(|end| u16_at(data, end));
                    match last {
                        Some(last) if last >= col => cells.add(u32::from(row), u32::from(last)),
                        _ => return Err(damaged("a row of cells ends before it starts")),
                    }
                }
                cells.check("a sheet's cells span", what, limits)?;
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
    let mut workbook = W::new(Cursor::new(bytes)).map_err(|e| reader_error(what, e))?;
    let names = workbook.sheet_names().to_vec();
    read_sheets(&names, limits, |name| {
        workbook
            .worksheet_range(name)
            .map_err(|e| reader_error(what, e))
    })
}

/// A calamine error as the reason a workbook could not be read.
fn reader_error(what: &str, e: impl std::fmt::Display) -> ParseError {
    let detail = e.to_string();
    if detail.to_ascii_lowercase().contains("password") || detail.contains("ncrypt") {
        ParseError::Encrypted(what.into())
    } else {
        malformed(what, &detail)
    }
}

/// A sheet of an XLSX workbook, its cells read one at a time so that their extent is checked
/// before calamine builds the grid they span (a damaged cell reference far down the sheet
/// asked for gigabytes, found by `quire bench fuzz`).
fn xlsx_sheet(
    workbook: &mut Xlsx<Cursor<&[u8]>>,
    name: &str,
    what: &str,
    limits: &ParseLimits,
) -> Result<Range<Data>, ParseError> {
    let mut reader = match workbook.worksheet_cells_reader(name) {
        Ok(reader) => reader,
        // A chart sheet or a dialog sheet: no cells.
        Err(XlsxError::NotAWorksheet(_)) => return Ok(Range::default()),
        Err(e) => return Err(reader_error(what, e)),
    };
    let (mut cells, mut extent) = (Vec::new(), Extent::default());
    while let Some(cell) = reader.next_cell().map_err(|e| reader_error(what, e))? {
        if matches!(cell.get_value(), DataRef::Empty) {
            continue;
        }
        let (row, col) = cell.get_position();
        extent.add(row, col);
        extent.check(&format!("the sheet {name:?} spans"), what, limits)?;
        cells.push(Cell::new((row, col), Data::from(cell.get_value().clone())));
    }
    Ok(Range::from_sparse(cells))
}

/// The rows and columns a sheet's cells span: calamine holds a sheet as the whole grid from
/// its first cell to its last, each cell the size of a [`Data`].
#[derive(Default)]
struct Extent {
    /// First and last row and column, when there is a cell.
    bounds: Option<((u32, u32), (u32, u32))>,
}

impl Extent {
    fn add(&mut self, row: u32, col: u32) {
        self.bounds = Some(match self.bounds {
            None => ((row, col), (row, col)),
            Some(((r0, c0), (r1, c1))) => ((r0.min(row), c0.min(col)), (r1.max(row), c1.max(col))),
        });
    }

    /// Fails when the grid would not fit the memory budget ([`ParseLimits::max_unpacked_bytes`]),
    /// which only a damaged file asks for: `subject` says whose extent it is.
    fn check(&self, subject: &str, what: &str, limits: &ParseLimits) -> Result<(), ParseError> {
        let Some(((r0, c0), (r1, c1))) = self.bounds else {
            return Ok(());
        };
        let (rows, cols) = (u64::from(r1 - r0) + 1, u64::from(c1 - c0) + 1);
        let bytes = rows * cols * std::mem::size_of::<Data>() as u64;
        if bytes <= limits.max_unpacked_bytes {
            return Ok(());
        }
        Err(malformed(
            what,
            &format!(
                "{subject} {rows} rows × {cols} columns (to row {}, column {}), a grid of {} MB, \
                 more than the {} MB a document may unpack",
                r1 + 1,
                c1 + 1,
                bytes / 1_000_000,
                limits.max_unpacked_bytes / 1_000_000
            ),
        ))
    }
}

/// Checks the shared string table's declared count, which calamine reserves memory for before
/// it reads a string: each string takes at least `<si/>` (5 bytes) of the part, so a count
/// larger than that allows is damage (a damaged count asked for gigabytes).
fn check_shared_strings(
    bytes: &[u8],
    what: &'static str,
    limits: &ParseLimits,
) -> Result<(), ParseError> {
    let mut archive = Archive::open(bytes, what, limits)?;
    let Some(part) = archive.read("xl/sharedStrings.xml")? else {
        return Ok(());
    };
    let head = &part[..part.len().min(4096)];
    let key = b"uniqueCount=";
    let Some(at) = head.windows(key.len()).position(|w| w == key) else {
        return Ok(());
    };
    let digits: String = head[at + key.len()..]
        .iter()
        .skip(1)
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| char::from(b))
        .collect();
    // calamine ignores a count it cannot read as a number.
    let Ok(count) = digits.parse::<u64>() else {
        return Ok(());
    };
    if count.saturating_mul(5) > part.len() as u64 {
        return Err(malformed(
            what,
            &format!(
                "its shared string table declares {count} strings in {} bytes",
                part.len()
            ),
        ));
    }
    Ok(())
}

/// Renders each named sheet, read by `sheet`, as a page and a section.
fn read_sheets(
    names: &[String],
    limits: &ParseLimits,
    mut sheet: impl FnMut(&str) -> Result<Range<Data>, ParseError>,
) -> Result<Extracted, ParseError> {
    limits.check_pages("the workbook", names.len(), "sheets")?;
    let mut out = BlockBuilder::new();
    for (index, name) in names.iter().enumerate() {
        out.force_page(index as u32 + 1);
        out.set_section(name, false);
        let range = sheet(name)?;
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

    /// A minimal XLSX: one sheet `Parts` whose cells are `cells` (`<c>` elements), and a
    /// shared string table declaring `unique` strings of which it holds one, `seal`.
    fn xlsx(cells: &str, unique: u64) -> Vec<u8> {
        let sheet = format!(
            "<worksheet xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\">\
             <sheetData><row r=\"1\">{cells}</row></sheetData></worksheet>"
        );
        let strings = format!(
            "<sst xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" \
             count=\"1\" uniqueCount=\"{unique}\"><si><t>seal</t></si></sst>"
        );
        zip_package(&[
            (
                "[Content_Types].xml",
                "<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
                 <Override PartName=\"/xl/workbook.xml\" ContentType=\"application/\
                 vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/></Types>",
            ),
            (
                "_rels/.rels",
                "<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
                 <Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/\
                 officeDocument/2006/relationships/officeDocument\" Target=\"xl/workbook.xml\"/>\
                 </Relationships>",
            ),
            (
                "xl/workbook.xml",
                "<workbook xmlns=\"http://schemas.openxmlformats.org/spreadsheetml/2006/main\" \
                 xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\">\
                 <sheets><sheet name=\"Parts\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>",
            ),
            (
                "xl/_rels/workbook.xml.rels",
                "<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
                 <Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/\
                 officeDocument/2006/relationships/worksheet\" Target=\"worksheets/sheet1.xml\"/>\
                 <Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/\
                 officeDocument/2006/relationships/sharedStrings\" Target=\"sharedStrings.xml\"/>\
                 </Relationships>",
            ),
            ("xl/worksheets/sheet1.xml", &sheet),
            ("xl/sharedStrings.xml", &strings),
        ])
    }

    /// Found by `quire bench fuzz`: damaged spreadsheets asked calamine for 6–137 GB (it builds
    /// a sheet's whole grid, and reserves room for the declared number of shared strings) and
    /// were stopped by the worker's memory limit; now they fail with a reason naming the damage.
    #[test]
    fn an_xlsx_whose_cells_or_strings_ask_for_gigabytes_fails_with_a_reason() {
        let limits = ParseLimits::default();
        let cells = |far: &str| {
            format!("<c r=\"A1\" t=\"s\"><v>0</v></c><c r=\"{far}\" t=\"n\"><v>4</v></c>")
        };
        let whole = parse(&xlsx(&cells("B1"), 1), &Format::Xlsx, &limits).unwrap();
        assert_eq!(shape(&whole.blocks), vec![(1, "Parts", "seal; 4")]);

        // One cell reference damaged to the last cell of the grid.
        let err = parse(&xlsx(&cells("XFD1048576"), 1), &Format::Xlsx, &limits).unwrap_err();
        assert!(matches!(err, ParseError::Malformed { .. }), "{err}");
        assert!(
            err.to_string().contains(
                "the sheet \"Parts\" spans 1048576 rows × 16384 columns (to row 1048576, \
                 column 16384)"
            ),
            "{err}"
        );

        let err = parse(&xlsx(&cells("B1"), 5_000_000_000), &Format::Xlsx, &limits).unwrap_err();
        assert!(
            err.to_string()
                .contains("its shared string table declares 5000000000 strings in"),
            "{err}"
        );
    }

    #[test]
    fn an_xls_cell_far_outside_the_sheet_fails_with_a_reason() {
        let limits = ParseLimits::default();
        let file = xls(&[("Parts", &[&["Part", "Qty"], &["seal", "ZZ"]])]);
        assert!(parse(&file, &Format::Xls, &limits).is_ok());
        // The cell holding "ZZ" moved to row 65,536, column 65,536 (its row and column bytes
        // damaged): calamine would build a grid of 4 billion cells.
        let text = find(&file, &[b'Z', 0, b'Z', 0]).unwrap();
        let mut damaged = file.clone();
        damaged[text - 9..text - 5].copy_from_slice(&[0xFF; 4]);
        let err = parse(&damaged, &Format::Xls, &limits).unwrap_err();
        assert!(matches!(err, ParseError::Malformed { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("a sheet's cells span 65536 rows × 65536 columns"),
            "{err}"
        );
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }
}
