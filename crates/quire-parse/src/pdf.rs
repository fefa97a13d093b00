//! PDF, read with `pdf_oxide` (chosen by measurement: see `docs/parsing.md`). One page per PDF
//! page, numbered from 1 in the PDF's page order. Sections come from the outline (bookmarks): a
//! bookmark's title starts its section on the page it points to, at the line where the title
//! appears (or at the top of the page when it cannot be found there).
//!
//! Encrypted files are opened by `lopdf` with the empty user password (many "protected" PDFs
//! only restrict printing or copying) and handed on decrypted; `pdf_oxide`'s own decryption
//! left some of those locked and reported others as empty, which would have turned them into
//! "scanned" documents. Files that need a real password fail as encrypted; files without a
//! text layer fail as scanned instead of becoming empty documents.

use std::borrow::Cow;

use pdf_oxide::PdfDocument;
use pdf_oxide::object::{Object, ObjectRef};
use pdf_oxide::outline::{Destination, OutlineItem};

use crate::blocks::BlockBuilder;
use crate::ocr::{MIN_PICTURE_SIDE, Ocr, visible_chars};
use crate::{Extracted, ParseError, ParseLimits};

mod bilevel;

const WHAT: &str = "PDF document";

/// Below this many visible characters per page on average, a file whose nearly empty pages
/// carry images is taken as scanned: page numbers, a running header or a stamp are all an
/// image-only scan usually carries as text.
const MIN_CHARS_PER_PAGE: usize = 16;

/// Extracts the text of a PDF page by page. With `ocr`, pages without a text layer that carry
/// images are read by OCR instead (their page numbers kept; pages with text keep their text).
pub(crate) fn parse(
    bytes: &[u8],
    limits: &ParseLimits,
    ocr: Option<&Ocr>,
) -> Result<Extracted, ParseError> {
    if is_truncated(bytes) {
        return Err(malformed(
            "the file is truncated (it does not end with the %%EOF marker)",
        ));
    }
    if nesting_depth(bytes) > MAX_NESTING {
        return Err(malformed(&format!(
            "arrays and dictionaries are nested more than {MAX_NESTING} deep"
        )));
    }
    let bytes = unlock(bytes)?;
    match isolated(|| read(bytes.to_vec(), limits, ocr)) {
        // A page whose content stream was lost with its header reads as empty: say why.
        Some(Err(ParseError::Empty)) => {
            return Err(damaged_header(&bytes).map_or(ParseError::Empty, |d| malformed(&d)));
        }
        Some(read) => return read,
        None => {}
    }
    // pdf_oxide panicked on damage it did not anticipate (found by `quire bench fuzz`: a
    // flipped bit in an object header made it slice a string inside a character). lopdf
    // reads the file on its own terms and writes it out again with clean headers, which
    // pdf_oxide then reads; when neither can, the reason names the damage.
    let damage = damaged_header(&bytes).unwrap_or_else(|| {
        "its structure could not be read (the PDF reader stopped on damage it could not \
         work around)"
            .to_owned()
    });
    match repaired(&bytes).and_then(|clean| isolated(|| read(clean, limits, ocr))) {
        Some(Ok(doc)) => Ok(doc),
        // The repaired copy's own reasons (no text, a scan, a limit) hold for the file.
        Some(Err(
            e @ (ParseError::Scanned | ParseError::LimitExceeded(_) | ParseError::Ocr(_)),
        )) => Err(e),
        _ => Err(malformed(&damage)),
    }
}

/// Runs `f`, turning a panic inside a PDF library into `None`. The panic hook still writes
/// the panic to the server log (stderr); the document gets a reason of its own.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Stack of the thread that reads a PDF with pdf_oxide, which reads nested objects
/// recursively (see [`MAX_NESTING`]): more than a main thread's usual 8 MiB.
const READER_STACK: usize = 16 << 20;

/// Runs `f` (which reads with pdf_oxide) on a thread of its own, turning a panic into `None`.
/// pdf_oxide keeps the objects it is resolving in thread-local state that a panic leaves
/// behind, so after one caught panic every later file read on that thread lost its pages ("it
/// has no pages"); a thread per file ends with its state. Pages read there are reported to
/// this thread's progress observer.
fn isolated<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    let (pages, reported) = std::sync::mpsc::channel();
    let work = std::sync::Mutex::new(Some(f));
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("pdf-reader".into())
            .stack_size(READER_STACK)
            .spawn_scoped(scope, || {
                let f = work.lock().ok()?.take()?;
                let observer = move |done, total| {
                    // A closed channel only loses a progress report.
                    let _ = pages.send((done, total));
                };
                Some(crate::progress::observe(observer, f))
            });
        match reader {
            Ok(reader) => {
                // Ends when the reader's observer is dropped: the read is over.
                for (done, total) in reported {
                    crate::progress::page_done(done, total);
                }
                reader.join().ok().flatten()
            }
            // No thread to be had (a process limit): read here.
            Err(_) => {
                drop(reported);
                let f = work.lock().ok()?.take()?;
                guarded(f)
            }
        }
    })
}

/// The file as lopdf reads it and writes it again (every object header rewritten, the
/// cross-reference table rebuilt), or `None` when lopdf cannot read it either.
fn repaired(bytes: &[u8]) -> Option<Vec<u8>> {
    guarded(|| {
        let mut doc = lopdf::Document::load_mem(bytes).ok()?;
        let mut out = Vec::with_capacity(bytes.len());
        doc.save_to(&mut out).ok()?;
        Some(out)
    })
    .flatten()
}

/// Longest run of bytes before `obj` read as an object header (`12 0 obj`, with room for
/// odd spacing).
const MAX_HEADER: usize = 32;

/// Where an object header is damaged: the first `obj` keyword whose line holds only digits,
/// spaces and bytes that are not ASCII (a flipped bit) before it, named by its object number
/// when that survived, else by its position.
fn damaged_header(bytes: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(found) = find(&bytes[from..], b"obj") {
        let at = from + found;
        from = at + 3;
        if bytes[..at].ends_with(b"end") {
            continue;
        }
        let start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n' || b == b'\r')
            .map_or(0, |p| p + 1);
        let header = &bytes[start..at];
        // Digits and spaces, with bytes that are not ASCII among them; anything else is text.
        let header_like = header
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_whitespace() || !b.is_ascii());
        if header.len() > MAX_HEADER
            || !header_like
            || !header.iter().any(u8::is_ascii_digit)
            || header.is_ascii()
        {
            continue;
        }
        let digits = header.iter().take_while(|b| b.is_ascii_digit()).count();
        let number = std::str::from_utf8(&header[..digits]).ok();
        let whole = digits > 0 && header.get(digits).is_some_and(u8::is_ascii_whitespace);
        return Some(match number {
            Some(number) if whole => format!("the header of object {number} is unreadable"),
            _ => format!("the header of the object at byte {start} is unreadable"),
        });
    }
    None
}

/// Reads the (decrypted) file with pdf_oxide.
fn read(bytes: Vec<u8>, limits: &ParseLimits, ocr: Option<&Ocr>) -> Result<Extracted, ParseError> {
    let doc = PdfDocument::from_bytes(bytes).map_err(|e| open_error(&e))?;
    if doc.is_encrypted() && !doc.is_authenticated() {
        return Err(ParseError::Encrypted(WHAT.into()));
    }
    let pages = doc.page_count().map_err(|e| open_error(&e))?;
    if pages == 0 {
        return Err(malformed("it has no pages"));
    }
    limits.check_pages("the PDF document", pages, "pages")?;

    // First the text layer of every page (cheap), so the pages that need OCR are known, and
    // counted against ocr.max_pages, before the first one is read.
    let texts: Vec<Option<String>> = (0..pages)
        .map(|i| {
            let text = doc.extract_text(i).ok()?;
            Some(match columns_apart(&text) {
                true => rows_of(&doc, i).unwrap_or(text),
                false => text,
            })
        })
        .collect();
    let unreadable = texts.iter().filter(|t| t.is_none()).count();
    if unreadable == pages {
        return Err(malformed("no page could be read"));
    }
    let visible: usize = texts.iter().flatten().map(|t| visible_chars(t)).sum();
    let has_images = |page: usize| {
        doc.page_image_handles(page)
            .is_ok_and(|images| !images.is_empty())
    };
    let sparse_pages: Vec<usize> = (0..pages)
        .filter(|&i| {
            texts[i]
                .as_deref()
                .is_some_and(|t| visible_chars(t) < MIN_CHARS_PER_PAGE)
        })
        .collect();
    let scanned: Vec<usize> = sparse_pages
        .iter()
        .copied()
        .filter(|&i| has_images(i))
        .collect();
    let to_ocr = match ocr {
        Some(ocr) => {
            ocr.check_pages("the PDF document", scanned.len())?;
            scanned
        }
        None => {
            if visible < MIN_CHARS_PER_PAGE * (pages - unreadable) && !scanned.is_empty() {
                // Little text, and nearly empty pages that carry images: a scan.
                return Err(ParseError::Scanned);
            }
            Vec::new()
        }
    };
    let bookmarks = bookmarks(&doc);
    // Without an outline, each page's own heading is its section.
    let titles = if bookmarks.is_empty() {
        let pages: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
        crate::page_titles::page_titles(&pages)
    } else {
        Vec::new()
    };

    let mut out = BlockBuilder::new();
    // The title the file names itself by, when it says something, heads every section path
    // (level 0: bookmarks start at 1, page titles are 1).
    if let Some(title) = info_title(&doc).and_then(|t| crate::page_titles::metadata_title(&t)) {
        out.label(0, &title);
    }
    let mut read = visible;
    // A page image that cannot be decoded is skipped, so it costs the document that page, not
    // its other pages (a 400-page report lost all of them to one image); the first such reason
    // becomes the document's when nothing at all could be read.
    let mut undecodable = None;
    for (index, text) in texts.iter().enumerate() {
        out.force_page(index as u32 + 1);
        if let Some(title) = titles.get(index) {
            out.label(1, title);
        }
        let marks: Vec<&Bookmark> = bookmarks.iter().filter(|b| b.page == index).collect();
        if let (Some(ocr), true) = (ocr, to_ocr.contains(&index)) {
            let recognized = ocr_page(&doc, index, ocr, &mut undecodable)?;
            read += visible_chars(&recognized);
            for mark in &marks {
                out.heading(mark.level, &mark.title);
            }
            crate::raster::push_text(&mut out, &recognized);
        } else if let Some(text) = text {
            push_page(&mut out, text, &marks);
        }
        crate::progress::page_done(index as u32 + 1, pages as u32);
    }
    if read == 0 {
        return Err(undecodable.unwrap_or(ParseError::Empty));
    }
    let (blocks, _) = out.finish();
    Ok(Extracted {
        blocks,
        page_count: pages as u32,
    })
}

/// A page needs at least this many lines that hold only figures (amounts, years,
/// percentages), and a quarter of its lines so, to be read again row by row.
const MIN_FIGURE_LINES: usize = 8;

/// True when the text layer lists a table column by column: the row labels first, then runs
/// of lines that hold only figures (a filing's statements often read so). Such a page is read
/// again row by row ([`rows_of`]), so a label stays with its figures.
fn columns_apart(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let figures = lines.iter().filter(|l| figures_only(l)).count();
    figures >= MIN_FIGURE_LINES && figures * 4 >= lines.len()
}

fn figures_only(line: &str) -> bool {
    let line = line.trim();
    line.chars().any(|c| c.is_ascii_digit())
        && line
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_whitespace() || "$€£,.()%-–—".contains(c))
}

/// The page's text a row at a time: its lines as the engine groups them, joined when they
/// stand at the same height (a row label and figures set far to its right are separate
/// lines to the engine), left to right, the rows in the engine's order. `None` when the page
/// cannot be read so.
fn rows_of(doc: &PdfDocument, index: usize) -> Option<String> {
    let lines = doc.extract_text_lines(index).ok()?;
    // Each row: its vertical centre, the height of its shortest line, and its lines.
    let mut rows: Vec<(f32, f32, Vec<&pdf_oxide::layout::TextLine>)> = Vec::new();
    for line in lines.iter().filter(|l| !l.text.trim().is_empty()) {
        let (centre, height) = (line.bbox.y + line.bbox.height / 2.0, line.bbox.height.abs());
        let same = rows
            .iter_mut()
            .find(|(c, h, _)| (c - centre).abs() <= 0.5 * h.min(height));
        match same {
            Some((_, h, members)) => {
                *h = h.min(height);
                members.push(line);
            }
            None => rows.push((centre, height, vec![line])),
        }
    }
    let text = rows
        .into_iter()
        .map(|(_, _, mut members)| {
            members.sort_by(|a, b| a.bbox.x.total_cmp(&b.bbox.x));
            members
                .iter()
                .map(|l| l.text.trim())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    (!text.is_empty()).then_some(text)
}

/// OCRs the images of page `index` (0-based) in paint order: a scanner puts one image on a
/// page, some put the page in strips. Each image's size is checked before it is decoded, and
/// its resolution comes from the size it is drawn at; CCITT fax and JBIG2 images are decoded
/// by [`bilevel`]. An image that cannot be decoded is skipped, its reason kept in
/// `undecodable` (the first one only).
fn ocr_page(
    doc: &PdfDocument,
    index: usize,
    ocr: &Ocr,
    undecodable: &mut Option<ParseError>,
) -> Result<String, ParseError> {
    let page = index as u32 + 1;
    let what = format!("image on page {page} of the PDF document");
    let handles = doc.page_image_handles(index).map_err(|e| {
        malformed(&format!(
            "the images of page {page} could not be read ({e})"
        ))
    })?;
    let mut text = String::new();
    let mut pixels = 0u64;
    for handle in handles
        .iter()
        .filter(|h| h.width >= MIN_PICTURE_SIDE && h.height >= MIN_PICTURE_SIDE)
    {
        crate::raster::check_size(&what, handle.width, handle.height)?;
        pixels += u64::from(handle.width) * u64::from(handle.height);
        if pixels > 2 * crate::raster::MAX_PIXELS {
            return Err(ParseError::LimitExceeded(format!(
                "the images on page {page} of the PDF document hold more than {} megapixels, \
                 over the limit for OCR",
                2 * crate::raster::MAX_PIXELS / 1_000_000
            )));
        }
        let gray = if bilevel::is_bilevel(handle) && !handle.is_inline {
            bilevel::read(doc, index, handle).map_or_else(
                |reason| Ok(Err(reason)),
                |image| bilevel::decode(&image, &what),
            )?
        } else {
            handle
                .decode()
                .and_then(|image| image.to_dynamic_image())
                .map(crate::raster::to_gray)
                .map_err(|e| e.to_string())
        };
        let gray = match gray {
            Ok(gray) => gray,
            Err(reason) => {
                undecodable.get_or_insert_with(|| {
                    ParseError::Ocr(format!(
                        "the {what} could not be decoded for OCR ({reason})"
                    ))
                });
                continue;
            }
        };
        let drawn_inches = handle.bbox.width.abs() / 72.0;
        let dpi = (drawn_inches > 0.1).then(|| gray.width() as f32 / drawn_inches);
        text.push_str(&ocr.recognize(&gray, dpi, page)?);
        text.push('\n');
    }
    Ok(text)
}

/// The bytes to read: the file itself, or a decrypted copy when it is encrypted and opens with
/// the empty password. Only files that declare encryption pay for the second parse.
fn unlock(bytes: &[u8]) -> Result<Cow<'_, [u8]>, ParseError> {
    if find(bytes, b"/Encrypt").is_none() {
        return Ok(Cow::Borrowed(bytes));
    }
    // `load_mem` already applies the empty user password when it opens the file.
    let Some(Ok(mut doc)) = guarded(|| lopdf::Document::load_mem(bytes)) else {
        // lopdf is stricter about damaged files than pdf_oxide; let pdf_oxide try, and its
        // authentication check still stops a locked file.
        return Ok(Cow::Borrowed(bytes));
    };
    if !doc.is_encrypted() && !doc.was_encrypted() {
        return Ok(Cow::Borrowed(bytes));
    }
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(ParseError::Encrypted(WHAT.into()));
    }
    let mut decrypted = Vec::with_capacity(bytes.len());
    doc.save_to(&mut decrypted)
        .map_err(|e| malformed(&format!("it could not be decrypted ({e})")))?;
    Ok(Cow::Owned(decrypted))
}

/// A complete PDF ends with `%%EOF` (readers allow some trailing bytes after it). The engine
/// can rebuild a cut file's structure and would then report the lost pages as empty, so the
/// file is refused instead of indexed in part.
fn is_truncated(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
    find(tail, b"%%EOF").is_none()
}

/// Deepest nesting of arrays and dictionaries a file may have. The engine reads nested objects
/// recursively, so arrays nested 15,000 deep overflowed the parse worker's stack (found by
/// `quire bench fuzz`); real files nest a few levels, and PDFium stops at 64.
const MAX_NESTING: usize = 256;

/// The deepest nesting of arrays (`[`) and dictionaries (`<<`) outside strings, comments and
/// stream data, which hold bytes, not objects. Unmatched closers count as nothing.
fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut at) = (0_usize, 0_usize, 0_usize);
    while let Some(&byte) = bytes.get(at) {
        let next = bytes.get(at + 1).copied();
        at += match byte {
            b'%' => skip_while(&bytes[at..], |b| b != b'\n' && b != b'\r'),
            b'(' => literal_string_len(&bytes[at..]),
            b'[' | b'<' if byte == b'[' || next == Some(b'<') => {
                depth += 1;
                deepest = deepest.max(depth);
                if byte == b'[' { 1 } else { 2 }
            }
            b']' | b'>' if byte == b']' || next == Some(b'>') => {
                depth = depth.saturating_sub(1);
                if byte == b']' { 1 } else { 2 }
            }
            b's' if bytes[at..].starts_with(b"stream") && !bytes[..at].ends_with(b"end") => {
                // Stream data runs to its `endstream`.
                find(&bytes[at..], b"endstream").map_or(bytes.len() - at, |end| end + 9)
            }
            _ => 1,
        };
    }
    deepest
}

/// Bytes from the start of `bytes` while `keep` holds.
fn skip_while(bytes: &[u8], keep: impl Fn(u8) -> bool) -> usize {
    bytes.iter().position(|&b| !keep(b)).unwrap_or(bytes.len())
}

/// The length of the literal string `(…)` at the start of `bytes`: balanced parentheses, with
/// backslash escapes; to the end when it is not closed.
fn literal_string_len(bytes: &[u8]) -> usize {
    let (mut open, mut at) = (0_usize, 0_usize);
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'\\' => at += 1,
            b'(' => open += 1,
            b')' => {
                open -= 1;
                if open == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// How far from the end `%%EOF` may be (pdf.js and PDFBox look at the last kilobyte).
const TAIL_BYTES: usize = 1024;

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn open_error(error: &pdf_oxide::Error) -> ParseError {
    let detail = error.to_string();
    let lower = detail.to_ascii_lowercase();
    if lower.contains("encrypt") || lower.contains("password") {
        ParseError::Encrypted(WHAT.into())
    } else {
        malformed(&detail)
    }
}

fn malformed(detail: &str) -> ParseError {
    ParseError::Malformed {
        format: WHAT.into(),
        detail: detail.to_owned(),
    }
}

/// The `/Title` of the document information dictionary, decoded (UTF-16 with its byte-order
/// mark, or PDFDocEncoding read as Latin-1, which agrees with it for letters and digits).
fn info_title(doc: &PdfDocument) -> Option<String> {
    let info = doc.trailer().as_dict()?.get("Info")?;
    let info = doc.resolve_object(info).ok()?;
    let title = info.as_dict()?.get("Title")?;
    let title = doc.resolve_object(title).ok()?;
    let bytes = title.as_string()?;
    Some(match bytes {
        [0xFE, 0xFF, rest @ ..] => {
            let units: Vec<u16> = rest
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8_lossy(rest).into_owned(),
        _ => bytes.iter().map(|&b| char::from(b)).collect(),
    })
}

/// A bookmark with its depth (1 = top) and its 0-based page.
struct Bookmark {
    level: usize,
    title: String,
    page: usize,
}

fn bookmarks(doc: &PdfDocument) -> Vec<Bookmark> {
    let mut out = Vec::new();
    if !outline_is_a_tree(doc) {
        return out;
    }
    if let Ok(Some(outline)) = doc.get_outline() {
        flatten(&outline, 1, &mut out);
    }
    out
}

/// Most outline entries read (a long manual's outline has a few thousand).
const MAX_OUTLINE_ITEMS: usize = 100_000;

/// True when the outline's `/First` and `/Next` links reach each entry once (and there are
/// not too many, nor nested too deep). pdf_oxide follows them without remembering where it has been, so one
/// damaged digit in a reference made it loop, growing, until the time budget (a `/Next` back
/// to a sibling) or overflow the stack and abort the worker (a `/First` back to the entry
/// itself); found by flipping bits of a built-in file. Such an outline is left out, and each
/// page's heading becomes its section instead.
fn outline_is_a_tree(doc: &PdfDocument) -> bool {
    let first = |object: &Object| match object.as_dict().and_then(|d| d.get("First")) {
        Some(Object::Reference(first)) => Some(*first),
        _ => None,
    };
    let Ok(catalog) = doc.catalog() else {
        return true;
    };
    let root = match catalog.as_dict().and_then(|d| d.get("Outlines")) {
        Some(Object::Reference(root)) => doc.load_object(*root),
        _ => return true,
    };
    // Entries to visit, with their depth.
    let mut pending: Vec<(ObjectRef, usize)> = root
        .ok()
        .as_ref()
        .and_then(first)
        .map(|entry| (entry, 1))
        .into_iter()
        .collect();
    let mut seen = std::collections::HashSet::new();
    while let Some((entry, depth)) = pending.pop() {
        if !seen.insert(entry) || seen.len() > MAX_OUTLINE_ITEMS || depth > MAX_OUTLINE_DEPTH {
            return false;
        }
        let Ok(item) = doc.load_object(entry) else {
            continue;
        };
        pending.extend(first(&item).map(|child| (child, depth + 1)));
        if let Some(Object::Reference(next)) = item.as_dict().and_then(|d| d.get("Next")) {
            pending.push((*next, depth));
        }
    }
    true
}

/// Deepest outline read: pdf_oxide reads an entry's children recursively, and real outlines
/// nest a few levels.
const MAX_OUTLINE_DEPTH: usize = 64;

fn flatten(items: &[OutlineItem], level: usize, out: &mut Vec<Bookmark>) {
    for item in items {
        if let Some(Destination::PageIndex(page)) = item.dest {
            let title = normalize(&item.title);
            if !title.is_empty() {
                out.push(Bookmark { level, title, page });
            }
        }
        flatten(&item.children, level + 1, out);
    }
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Adds one page's text: paragraphs split at blank lines, sections switched where the page's
/// bookmark titles appear.
fn push_page(out: &mut BlockBuilder, text: &str, marks: &[&Bookmark]) {
    let lines: Vec<(&str, String)> = text.lines().map(|l| (l, normalize(l))).collect();
    let starts_line = |mark: &Bookmark, line: &str| {
        line.len() >= mark.title.len()
            && line.is_char_boundary(mark.title.len())
            && line[..mark.title.len()].eq_ignore_ascii_case(&mark.title)
    };
    // Bookmarks whose title is not on the page start their section at its top.
    let mut pending: Vec<&Bookmark> = Vec::new();
    for mark in marks {
        if lines.iter().any(|(_, l)| starts_line(mark, l)) {
            pending.push(mark);
        } else {
            out.heading(mark.level, &mark.title);
        }
    }
    for (line, normalized) in &lines {
        if let Some(pos) = pending.iter().position(|m| starts_line(m, normalized)) {
            let mark = pending.remove(pos);
            out.heading(mark.level, &mark.title);
            if normalized.len() == mark.title.len() {
                continue;
            }
        }
        if normalized.is_empty() {
            out.end_block();
        } else {
            out.push_line(line.trim());
        }
    }
    out.end_block();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{encrypted_pdf, image_only_pdf, pdf, positioned_pdf, titled_pdf};

    fn parse_none(bytes: &[u8], limits: &ParseLimits) -> Result<Extracted, ParseError> {
        parse(bytes, limits, None)
    }

    fn shape(doc: &Extracted) -> Vec<(u32, &str)> {
        doc.blocks
            .iter()
            .map(|b| (b.page, b.section.as_str()))
            .collect()
    }

    #[test]
    fn pages_and_outline_sections() {
        let bytes = pdf(&[
            (
                "Introduction\nPumps move water through the plant every day of the year.",
                Some("Introduction"),
            ),
            (
                "Maintenance\nReplace the mechanical seal every two years without fail.",
                Some("Maintenance"),
            ),
            ("Notes on the seal kit and where to order it from.", None),
        ]);
        let doc = parse_none(&bytes, &ParseLimits::default()).unwrap();
        assert_eq!(doc.page_count, 3);
        assert_eq!(
            shape(&doc),
            vec![(1, "Introduction"), (2, "Maintenance"), (3, "Maintenance")]
        );
        assert!(doc.blocks[1].text.contains("mechanical seal"), "{doc:?}");
        assert!(!doc.blocks[1].text.starts_with("Maintenance"), "{doc:?}");
    }

    #[test]
    fn without_an_outline_each_page_is_sectioned_by_its_own_heading() {
        let bytes = pdf(&[
            (
                "Consolidated Balance Sheets\nTotal assets were higher than a year before.",
                None,
            ),
            (
                "continued from the page before, where the table ends.",
                None,
            ),
        ]);
        let doc = parse_none(&bytes, &ParseLimits::default()).unwrap();
        assert_eq!(
            shape(&doc),
            vec![(1, "Consolidated Balance Sheets"), (2, "")],
            "{doc:?}"
        );
        // The heading stays in the page's text too: it is what the page prints.
        assert!(
            doc.blocks[0]
                .text
                .starts_with("Consolidated Balance Sheets")
        );
    }

    #[test]
    fn a_metadata_title_that_says_something_heads_every_section() {
        let pages = [
            (
                "Introduction\nPumps move water through the plant.",
                Some("Introduction"),
            ),
            (
                "Maintenance\nReplace the mechanical seal.",
                Some("Maintenance"),
            ),
        ];
        let bytes = titled_pdf(&pdf(&pages), "Pump Station Manual – 2024");
        let doc = parse_none(&bytes, &ParseLimits::default()).unwrap();
        assert_eq!(
            shape(&doc),
            vec![
                (1, "Pump Station Manual – 2024 > Introduction"),
                (2, "Pump Station Manual – 2024 > Maintenance")
            ]
        );
        // A title that only names the file is left out.
        let bytes = titled_pdf(&pdf(&pages), "Microsoft Word - manual_v3.docx");
        let doc = parse_none(&bytes, &ParseLimits::default()).unwrap();
        assert_eq!(shape(&doc), vec![(1, "Introduction"), (2, "Maintenance")]);
    }

    #[test]
    fn a_table_drawn_column_by_column_is_read_row_by_row() {
        let labels = [
            "Net earnings",
            "Share-based plans expense",
            "Depreciation and amortization",
            "Investment impairment charges",
            "Accounts receivable",
            "Unbilled receivables",
            "Inventories",
            "Accounts payable",
            "Accrued liabilities",
            "Other long-term liabilities",
        ];
        let figures = [
            "$10,460", "202", "2,114", "93", "(795)", "(1,826)", "568", "2", "1,117", "87",
        ];
        let row_y = |i: usize| 700.0 - 14.0 * i as f32;
        let mut runs = vec![(72.0, 740.0, "Consolidated Statements of Cash Flows")];
        runs.extend(labels.iter().enumerate().map(|(i, l)| (72.0, row_y(i), *l)));
        runs.extend(
            figures
                .iter()
                .enumerate()
                .map(|(i, f)| (420.0, row_y(i), *f)),
        );
        let doc = parse_none(&positioned_pdf(&runs), &ParseLimits::default()).unwrap();
        let text: Vec<&str> = doc.blocks.iter().flat_map(|b| b.text.lines()).collect();
        assert_eq!(text[0], "Consolidated Statements of Cash Flows", "{text:?}");
        for (label, figure) in labels.iter().zip(figures) {
            let row = format!("{label} {figure}");
            assert!(text.contains(&row.as_str()), "no line {row:?} in {text:?}");
        }
    }

    #[test]
    fn prose_with_a_few_figures_is_left_as_the_text_layer_reads_it() {
        assert!(!columns_apart("Revenue grew.\n2018\nIt grew again.\n2019"));
        let statement: String = (0..10).map(|i| format!("Item {i}\n")).collect::<String>()
            + &(0..10).map(|i| format!("{i},000\n")).collect::<String>();
        assert!(columns_apart(&statement));
    }

    #[test]
    fn empty_user_password_files_open_and_others_fail_as_encrypted() {
        let plain = pdf(&[("The valve must be closed before the pump starts.", None)]);
        let open = encrypted_pdf(&plain, "");
        assert!(find(&open, b"/Encrypt").is_some());
        let doc = parse_none(&open, &ParseLimits::default()).unwrap();
        assert!(
            doc.blocks[0].text.contains("valve must be closed"),
            "{doc:?}"
        );

        let locked = encrypted_pdf(&plain, "secret");
        let err = parse_none(&locked, &ParseLimits::default()).unwrap_err();
        assert_eq!(err, ParseError::Encrypted(WHAT.into()));
    }

    #[test]
    fn image_only_pdfs_are_reported_as_scanned() {
        let err = parse_none(&image_only_pdf(2), &ParseLimits::default()).unwrap_err();
        assert_eq!(err, ParseError::Scanned);
        assert!(
            err.to_string()
                .contains("no extractable text; the file appears to be scanned")
        );
    }

    #[test]
    fn short_text_without_images_is_not_mistaken_for_a_scan() {
        let doc = parse_none(&pdf(&[("Secret!", None)]), &ParseLimits::default()).unwrap();
        assert_eq!(doc.blocks[0].text, "Secret!");
        let blank = parse_none(&pdf(&[("", None), ("", None)]), &ParseLimits::default());
        assert_eq!(blank.unwrap_err(), ParseError::Empty);
    }

    #[test]
    fn truncated_pdfs_fail_with_a_reason() {
        let bytes = pdf(&[("Some text on the only page of this document.", None)]);
        for cut in [40, bytes.len() / 2] {
            let err = parse_none(&bytes[..cut], &ParseLimits::default()).unwrap_err();
            assert!(
                matches!(err, ParseError::Malformed { .. }),
                "{cut}: {err:?}"
            );
        }
    }

    #[test]
    fn page_limit_counts_pdf_pages() {
        let bytes = pdf(&[
            ("One page of text here.", None),
            ("And a second page.", None),
        ]);
        let limits = ParseLimits {
            max_pages: 1,
            ..ParseLimits::default()
        };
        let err = parse_none(&bytes, &limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the PDF document has 2 pages, more than the limit of 1"
        );
    }

    /// Found by `quire bench fuzz`: arrays nested 15,000 deep overflowed the parse worker's
    /// stack; now such a file fails with a reason. Brackets in strings, comments and stream
    /// data are not nesting.
    #[test]
    fn objects_nested_too_deep_fail_with_a_reason() {
        let page = pdf(&[("Prime [[[ the ((pump)) \\( [[[[", None)]);
        assert!(nesting_depth(&page) < 8, "{}", nesting_depth(&page));
        assert!(parse_none(&page, &ParseLimits::default()).is_ok());
        let mut deep = page.clone();
        let at = find(&deep, b"/Type /Catalog").unwrap();
        let nested = format!("/Deep {}{} ", "[".repeat(20_000), "]".repeat(20_000));
        deep.splice(at..at, nested.into_bytes());
        assert_eq!(nesting_depth(&deep), 20_000 + 1);
        let err = parse_none(&deep, &ParseLimits::default()).unwrap_err();
        assert!(
            err.to_string().contains("nested more than 256 deep"),
            "{err}"
        );
        assert_eq!(
            nesting_depth(b"% [[[[\n<< /A (x[) /S 1 >>stream\n[[[[ endstream ]]"),
            1
        );
    }

    /// Found by `quire bench fuzz`: one flipped bit in an object header (`5 0 obj` became
    /// `5 \xB0 obj`) made pdf_oxide slice a string inside a character and panic, and the
    /// document failed as an "internal error". Now lopdf's rewritten copy is read, and what
    /// it cannot bring back is named.
    #[test]
    fn a_damaged_object_header_is_read_around_or_named() {
        let damage = |mut bytes: Vec<u8>, header: &[u8]| {
            let at = find(&bytes, header).unwrap() + 2;
            bytes[at] ^= 0x80;
            bytes
        };
        let two = damage(
            pdf(&[
                ("The pump is primed before it starts.", None),
                ("Close the valve after the pump stops.", None),
            ]),
            b"5 0 obj",
        );
        // The library itself still panics on it (so this test keeps the finding honest).
        let raw = isolated(|| PdfDocument::from_bytes(two.clone()).map(|d| d.extract_text(0)));
        assert!(raw.is_none(), "pdf_oxide no longer panics: {raw:?}");
        // Page 1's content stream is lost with its header; page 2 is read.
        let doc = parse_none(&two, &ParseLimits::default()).unwrap();
        assert_eq!(doc.page_count, 2);
        let text: String = doc.blocks.iter().map(|b| b.text.as_str()).collect();
        assert!(text.contains("Close the valve"), "{doc:?}");

        // A one-page file has nothing left to read: the reason names the object.
        let one = damage(
            pdf(&[("The pump is primed before it starts.", None)]),
            b"5 0 obj",
        );
        let err = parse_none(&one, &ParseLimits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the PDF document is damaged or truncated: the header of object 5 is unreadable"
        );
    }

    #[test]
    fn damaged_headers_are_found_by_number_or_position() {
        assert_eq!(damaged_header(b"1 0 obj\n<< >>\nendobj\n12 0 obj\n"), None);
        assert_eq!(
            damaged_header(b"1 0 obj\n<< >>\nendobj\n12 \xB0 obj\n").as_deref(),
            Some("the header of object 12 is unreadable")
        );
        assert_eq!(
            damaged_header(b"1 0 obj\n<< >>\nendobj\n1\xB2 0 obj\n").as_deref(),
            Some("the header of the object at byte 21 is unreadable")
        );
        // Text that is not a header is not taken for one.
        assert_eq!(
            damaged_header("(caf\u{e9} object) Tj\nendobj".as_bytes()),
            None
        );
    }

    /// pdf_oxide leaves the thread-local state of the objects it was resolving behind when it
    /// panics: before each file was read on a thread of its own, every file read after a
    /// caught panic on that thread lost its pages ("it has no pages").
    #[test]
    fn a_panic_on_one_file_does_not_spoil_the_next() {
        let clean = pdf(&[("Close the valve after the pump stops.", None)]);
        let mut damaged = pdf(&[
            ("The pump is primed before it starts.", None),
            ("Close the valve after the pump stops.", None),
        ]);
        let at = find(&damaged, b"5 0 obj").unwrap() + 2;
        damaged[at] ^= 0x80;
        for _ in 0..2 {
            assert!(parse_none(&damaged, &ParseLimits::default()).is_ok());
            let doc = parse_none(&clean, &ParseLimits::default()).unwrap();
            assert!(doc.blocks[0].text.contains("Close the valve"), "{doc:?}");
        }
    }

    /// Found by flipping bits of a built-in file: pdf_oxide follows an outline's `/First` and
    /// `/Next` links without remembering where it has been, so an entry whose `/First` is
    /// itself overflowed the stack (aborting the worker), and one whose `/Next` is itself
    /// looped, growing, until the time budget. Such an outline is left out now.
    #[test]
    fn an_outline_that_links_back_to_itself_is_left_out() {
        let bytes = pdf(&[
            ("Introduction\nPumps move water.", Some("Introduction")),
            ("Maintenance\nReplace the seal.", Some("Maintenance")),
        ]);
        assert_eq!(
            shape(&parse_none(&bytes, &ParseLimits::default()).unwrap()),
            vec![(1, "Introduction"), (2, "Maintenance")]
        );
        // Same lengths, so the cross-reference table still holds.
        let relink = |from: &[u8], to: &[u8]| {
            let mut damaged = bytes.clone();
            let at = find(&damaged, from).unwrap();
            damaged[at..at + to.len()].copy_from_slice(to);
            damaged
        };
        for damaged in [
            // The first entry's /Next is the first entry.
            relink(b"/Next 10 0 R", b"/Next  9 0 R"),
            // The first entry's first child is the first entry.
            relink(b"/Parent 8 0 R /Dest [4", b"/First 9 0 R  /Dest [4"),
        ] {
            let started = std::time::Instant::now();
            let doc = parse_none(&damaged, &ParseLimits::default()).unwrap();
            assert!(started.elapsed().as_secs() < 5);
            // Each page's own heading is its section instead.
            assert_eq!(shape(&doc), vec![(1, "Introduction"), (2, "Maintenance")]);
        }
    }
}
