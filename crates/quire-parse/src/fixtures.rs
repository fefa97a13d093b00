//! Files built by tests (enabled by the `fixtures` feature): small valid PDFs with text, an
//! outline and, when asked, encryption; legacy Office compound files; and scans: pages of
//! known text rendered to images (a compiled-in bitmap font, so no font file is needed), as
//! PNG, multi-page TIFF, and PDFs whose pages are those images, and DOCX and PPTX files whose
//! pictures are such images (`office`), so tests never need sample files on disk.

use std::io::{Cursor, Write};

mod office;

pub use office::{DocxPart, Media, PptxSlide, docx, pptx};

/// Builds small, valid PDFs for tests: one page per entry, each line of text drawn in
/// Helvetica, with an optional outline entry per page.
pub fn pdf(pages: &[(&str, Option<&str>)]) -> Vec<u8> {
    let n = pages.len();
    // 1: catalog, 2: page tree, 3: font, then a page and its content per page, then the outline.
    let page_ids: Vec<usize> = (0..n).map(|i| 4 + 2 * i).collect();
    let outline_root = 4 + 2 * n;
    let marks: Vec<(usize, &str)> = pages
        .iter()
        .enumerate()
        .filter_map(|(i, (_, title))| title.map(|t| (i, t)))
        .collect();
    let outline = if marks.is_empty() {
        String::new()
    } else {
        format!(" /Outlines {outline_root} 0 R")
    };
    let mut objects = vec![format!("<< /Type /Catalog /Pages 2 0 R{outline} >>")];
    let kids: Vec<String> = page_ids.iter().map(|id| format!("{id} 0 R")).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
    for (i, (text, _)) in pages.iter().enumerate() {
        let mut stream = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
        for line in text.lines() {
            let escaped = line.replace('(', "\\(").replace(')', "\\)");
            stream.push_str(&format!("({escaped}) Tj T*\n"));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            page_ids[i] + 1
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    if !marks.is_empty() {
        let (first, last) = (outline_root + 1, outline_root + marks.len());
        objects.push(format!(
            "<< /Type /Outlines /First {first} 0 R /Last {last} 0 R /Count {} >>",
            marks.len()
        ));
        for (k, (page, title)) in marks.iter().enumerate() {
            let id = outline_root + 1 + k;
            let prev = if k > 0 {
                format!(" /Prev {} 0 R", id - 1)
            } else {
                String::new()
            };
            let next = if k + 1 < marks.len() {
                format!(" /Next {} 0 R", id + 1)
            } else {
                String::new()
            };
            objects.push(format!(
                "<< /Title ({title}) /Parent {outline_root} 0 R /Dest [{} 0 R /Fit]{prev}{next} >>",
                page_ids[*page]
            ));
        }
    }
    assemble(&objects)
}

/// A one-page PDF whose text runs are drawn where and in the order given (`(x, y, text)` in
/// points from the bottom left), as a page whose content stream lists a table column by
/// column draws them.
pub fn positioned_pdf(runs: &[(f32, f32, &str)]) -> Vec<u8> {
    let mut stream = String::new();
    for (x, y, text) in runs {
        let escaped = text.replace('(', "\\(").replace(')', "\\)");
        stream.push_str(&format!("BT /F1 10 Tf {x} {y} Td ({escaped}) Tj ET\n"));
    }
    let objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [4 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
         /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>"
            .to_owned(),
        format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ),
    ];
    assemble(&objects)
}

/// Encrypts a PDF built by [`pdf`] with RC4-128 and the given user password (the owner
/// password is always `owner`).
pub fn encrypted_pdf(pdf: &[u8], user_password: &str) -> Vec<u8> {
    use lopdf::{EncryptionState, EncryptionVersion, Permissions};
    let mut doc = lopdf::Document::load_mem(pdf).unwrap();
    let state = EncryptionState::try_from(EncryptionVersion::V2 {
        document: &doc,
        owner_password: "owner",
        user_password,
        key_length: 128,
        permissions: Permissions::all(),
    })
    .unwrap();
    doc.encrypt(&state).unwrap();
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A PDF built by [`pdf`] whose document information dictionary gives `title` (written as
/// UTF-16 with a byte-order mark, as most producers write non-ASCII titles).
pub fn titled_pdf(pdf: &[u8], title: &str) -> Vec<u8> {
    use lopdf::{Dictionary, Object, StringFormat};
    let mut doc = lopdf::Document::load_mem(pdf).unwrap();
    let mut encoded = vec![0xFE, 0xFF];
    encoded.extend(title.encode_utf16().flat_map(u16::to_be_bytes));
    let mut info = Dictionary::new();
    info.set("Title", Object::String(encoded, StringFormat::Hexadecimal));
    let id = doc.add_object(info);
    doc.trailer.set("Info", Object::Reference(id));
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A PDF of `pages` pages that are each one image (a small grey square) and no text, as a
/// scanner without OCR produces.
pub fn image_only_pdf(pages: usize) -> Vec<u8> {
    // 1: catalog, 2: page tree, 3: the image, then a page and its content per page.
    let page_ids: Vec<usize> = (0..pages).map(|i| 4 + 2 * i).collect();
    let kids: Vec<String> = page_ids.iter().map(|id| format!("{id} 0 R")).collect();
    let pixels = "80".repeat(16);
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        ),
        format!(
            "<< /Type /XObject /Subtype /Image /Width 4 /Height 4 /ColorSpace /DeviceGray \
             /BitsPerComponent 8 /Filter /ASCIIHexDecode /Length {} >>\nstream\n{pixels}>\nendstream",
            pixels.len() + 1
        ),
    ];
    let draw = "q 400 0 0 600 100 100 cm /Im1 Do Q";
    for id in &page_ids {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /XObject << /Im1 3 0 R >> >> /Contents {} 0 R >>",
            id + 1
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{draw}\nendstream",
            draw.len()
        ));
    }
    assemble(&objects)
}

/// Numbers `objects` from 1 and writes them with a cross-reference table and a trailer.
fn assemble(objects: &[String]) -> Vec<u8> {
    let bytes: Vec<Vec<u8>> = objects.iter().map(|o| o.clone().into_bytes()).collect();
    assemble_bytes(&bytes)
}

/// [`assemble`] for objects that hold binary streams.
fn assemble_bytes(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n", i + 1).into_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).into_bytes());
    for offset in offsets {
        pdf.extend(format!("{offset:010} 00000 n \n").into_bytes());
    }
    pdf.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /ID [<0123456789abcdef0123456789abcdef> \
             <0123456789abcdef0123456789abcdef>] >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .into_bytes(),
    );
    pdf
}

/// Resolution of the page images [`text_page_image`] draws: a US letter page at 200 dpi.
pub const SCAN_DPI: u32 = 200;
const SCAN_WIDTH: u32 = 1700;
const SCAN_HEIGHT: u32 = 2200;
/// Each pixel of the 10 × 20 bitmap font becomes a square this big: glyphs 20 × 40 pixels,
/// about 11 pt type at [`SCAN_DPI`].
const GLYPH_SCALE: u32 = 2;
const MARGIN: u32 = 100;

/// A white letter page with `text` in black, as a 200 dpi scan of a printed page looks:
/// each line of `text` a line on the page, long lines wrapped at words.
pub fn text_page_image(text: &str) -> image::GrayImage {
    use embedded_graphics::mono_font::MonoTextStyle;
    use embedded_graphics::mono_font::ascii::FONT_10X20;
    use embedded_graphics::pixelcolor::BinaryColor;
    use embedded_graphics::prelude::*;
    use embedded_graphics::text::{Baseline, Text};

    /// Draws font pixels as GLYPH_SCALE-sized squares into a greyscale image.
    struct Page(image::GrayImage);
    impl OriginDimensions for Page {
        fn size(&self) -> Size {
            Size::new(self.0.width() / GLYPH_SCALE, self.0.height() / GLYPH_SCALE)
        }
    }
    impl DrawTarget for Page {
        type Color = BinaryColor;
        type Error = std::convert::Infallible;
        fn draw_iter<I: IntoIterator<Item = Pixel<BinaryColor>>>(
            &mut self,
            pixels: I,
        ) -> Result<(), Self::Error> {
            for Pixel(at, color) in pixels {
                let (Ok(x), Ok(y)) = (u32::try_from(at.x), u32::try_from(at.y)) else {
                    continue;
                };
                let value = if color.is_on() { 0 } else { 255 };
                for dy in 0..GLYPH_SCALE {
                    for dx in 0..GLYPH_SCALE {
                        let (px, py) = (x * GLYPH_SCALE + dx, y * GLYPH_SCALE + dy);
                        if px < self.0.width() && py < self.0.height() {
                            self.0.put_pixel(px, py, image::Luma([value]));
                        }
                    }
                }
            }
            Ok(())
        }
    }

    let mut page = Page(image::GrayImage::from_pixel(
        SCAN_WIDTH,
        SCAN_HEIGHT,
        image::Luma([255]),
    ));
    let style = MonoTextStyle::new(&FONT_10X20, BinaryColor::On);
    let columns = ((SCAN_WIDTH - 2 * MARGIN) / (10 * GLYPH_SCALE)) as usize;
    let line_height = 26; // font pixels: 20 for the glyphs, 6 between lines
    let mut y = MARGIN / GLYPH_SCALE;
    for line in text.lines().flat_map(|l| wrap(l, columns)) {
        let at = Point::new((MARGIN / GLYPH_SCALE) as i32, y as i32);
        let _ = Text::with_baseline(&line, at, style, Baseline::Top).draw(&mut page);
        y += line_height;
    }
    page.0
}

/// `line` cut at spaces into pieces of at most `columns` characters (an empty line stays).
fn wrap(line: &str, columns: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for word in line.split_whitespace() {
        let current = out.last_mut().expect("never empty");
        if !current.is_empty() && current.len() + 1 + word.len() > columns {
            out.push(word.to_owned());
        } else {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
    }
    out
}

/// A PNG of [`text_page_image`].
pub fn png(text: &str) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    text_page_image(text)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A multi-page greyscale TIFF, one [`text_page_image`] per entry.
pub fn tiff(pages: &[&str]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut encoder = tiff::encoder::TiffEncoder::new(&mut out).unwrap();
    for text in pages {
        let page = text_page_image(text);
        encoder
            .write_image::<tiff::encoder::colortype::Gray8>(page.width(), page.height(), &page)
            .unwrap();
    }
    out.into_inner()
}

/// A PNG that claims `width` × `height` pixels but holds almost nothing: a decompression bomb
/// as far as a decoder that trusts the header is concerned.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFF_u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend(crc32(&body).to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = width.to_be_bytes().to_vec();
    header.extend(height.to_be_bytes());
    header.extend([8, 0, 0, 0, 0]); // 8-bit greyscale, deflate, no interlace
    chunk(&mut png, b"IHDR", &header);
    // A zlib stream of a few zero bytes: nowhere near the rows the header promises.
    chunk(
        &mut png,
        b"IDAT",
        &[0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01],
    );
    chunk(&mut png, b"IEND", &[]);
    png
}

/// A page of a PDF built by [`scanned_pdf`].
#[derive(Debug, Clone, Copy)]
pub enum PdfPage<'a> {
    /// A page with this text in its text layer.
    Text(&'a str),
    /// A page that is only a scan (a JPEG of [`text_page_image`]) of this text.
    Scan(&'a str),
    /// A page whose only image claims to be a JPEG but holds bytes no decoder reads.
    BrokenScan,
}

/// A PDF of text pages and scanned pages, as a scanner without OCR (or a mixed document)
/// produces; every page is US letter, the scans drawn over the whole page.
pub fn scanned_pdf(pages: &[PdfPage<'_>]) -> Vec<u8> {
    let n = pages.len();
    // 1: catalog, 2: page tree, 3: font, then a page, its content and its image per page.
    let page_ids: Vec<usize> = (0..n).map(|i| 4 + 3 * i).collect();
    let kids: Vec<String> = page_ids.iter().map(|id| format!("{id} 0 R")).collect();
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")).into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    for (i, page) in pages.iter().enumerate() {
        let id = page_ids[i];
        let (content, image) = match page {
            PdfPage::Text(text) => {
                let mut stream = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
                for line in text.lines() {
                    let escaped = line.replace('(', "\\(").replace(')', "\\)");
                    stream.push_str(&format!("({escaped}) Tj T*\n"));
                }
                stream.push_str("ET");
                // An unused placeholder keeps the object numbering regular.
                (stream, b"null".to_vec())
            }
            PdfPage::Scan(_) | PdfPage::BrokenScan => {
                let (width, height, jpeg) = match page {
                    PdfPage::Scan(text) => {
                        let page = text_page_image(text);
                        let mut jpeg = Vec::new();
                        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
                            .encode_image(&page)
                            .unwrap();
                        (page.width(), page.height(), jpeg)
                    }
                    _ => (850, 1100, b"not a JPEG at all".repeat(8)),
                };
                let mut object = format!(
                    "<< /Type /XObject /Subtype /Image /Width {width} /Height {height} \
                     /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode \
                     /Length {} >>\nstream\n",
                    jpeg.len()
                )
                .into_bytes();
                object.extend_from_slice(&jpeg);
                object.extend_from_slice(b"\nendstream");
                ("q 612 0 0 792 0 0 cm /Im1 Do Q".to_owned(), object)
            }
        };
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R >> /XObject << /Im1 {} 0 R >> >> \
                 /Contents {} 0 R >>",
                id + 2,
                id + 1
            )
            .into_bytes(),
        );
        objects.push(
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            )
            .into_bytes(),
        );
        objects.push(image);
    }
    assemble_bytes(&objects)
}

/// An OLE compound file with the given `(path, bytes)` streams (storages on the way are
/// created), written with `cfb`.
pub fn compound(streams: &[(&str, &[u8])]) -> Vec<u8> {
    let mut file = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
    for (path, bytes) in streams {
        if let Some((parent, _)) = path.rsplit_once('/')
            && !parent.is_empty()
        {
            file.create_storage_all(parent).unwrap();
        }
        file.create_stream(path).unwrap().write_all(bytes).unwrap();
    }
    file.flush().unwrap();
    file.into_inner().into_inner()
}

/// A minimal Word 97 `.doc`: a File Information Block, `text` as one piece after it (8-bit
/// when `compressed`, else UTF-16, so `\r` ends paragraphs and `\x0c` breaks pages), and a
/// `1Table` stream with the piece table. `flags` are added to the FIB's flags (0x0100 marks
/// the file encrypted).
pub fn doc(text: &str, compressed: bool, flags: u16) -> Vec<u8> {
    let (csw, cslw, pairs) = (14usize, 22usize, 93usize);
    let fib_len = 32 + 2 + csw * 2 + 2 + cslw * 4 + 2 + pairs * 8;
    let mut word = vec![0u8; fib_len];
    word[0..2].copy_from_slice(&0xA5ECu16.to_le_bytes());
    word[2..4].copy_from_slice(&0x00C1u16.to_le_bytes());
    word[0x0A..0x0C].copy_from_slice(&(flags | 0x0200).to_le_bytes());
    word[32..34].copy_from_slice(&(csw as u16).to_le_bytes());
    let rg_lw = 34 + csw * 2 + 2;
    word[rg_lw - 2..rg_lw].copy_from_slice(&(cslw as u16).to_le_bytes());
    let chars = text.chars().count() as u32;
    word[rg_lw + 12..rg_lw + 16].copy_from_slice(&chars.to_le_bytes());
    let rg_fc_lcb = rg_lw + cslw * 4 + 2;
    word[rg_fc_lcb - 2..rg_fc_lcb].copy_from_slice(&(pairs as u16).to_le_bytes());
    let text_at = word.len() as u32;
    let fc = if compressed {
        word.extend(text.chars().map(|c| c as u8));
        (text_at * 2) | 0x4000_0000
    } else {
        word.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        text_at
    };
    let mut plc = Vec::new();
    plc.extend(0u32.to_le_bytes());
    plc.extend(chars.to_le_bytes());
    plc.extend([0u8; 2]);
    plc.extend(fc.to_le_bytes());
    plc.extend([0u8; 2]);
    let mut table = vec![0u8; 16];
    let fc_clx = table.len() as u32;
    table.push(2);
    table.extend((plc.len() as u32).to_le_bytes());
    table.extend(&plc);
    let lcb_clx = table.len() as u32 - fc_clx;
    let at = rg_fc_lcb + 33 * 8;
    word[at..at + 4].copy_from_slice(&fc_clx.to_le_bytes());
    word[at + 4..at + 8].copy_from_slice(&lcb_clx.to_le_bytes());
    compound(&[("/WordDocument", &word), ("/1Table", &table)])
}

/// A BIFF8 (Excel 97–2003) `.xls` with one sheet per `(name, rows)`, every cell a string
/// (`LABEL` records): the least a reader needs (BOF, BoundSheet8 and EOF, then per sheet BOF,
/// the cells and EOF).
pub fn xls(sheets: &[(&str, &[&[&str]])]) -> Vec<u8> {
    fn record(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
        out.extend(kind.to_le_bytes());
        out.extend((data.len() as u16).to_le_bytes());
        out.extend(data);
    }
    fn bof(kind: u16) -> Vec<u8> {
        let mut data = 0x0600u16.to_le_bytes().to_vec();
        data.extend(kind.to_le_bytes());
        data.extend([0u8; 12]);
        data
    }
    // Sheet streams first, to know their lengths; then the globals, whose own length fixes
    // where each sheet starts.
    let bodies: Vec<Vec<u8>> = sheets
        .iter()
        .map(|(_, rows)| {
            let mut body = Vec::new();
            record(&mut body, 0x0809, &bof(0x0010));
            for (r, row) in rows.iter().enumerate() {
                for (c, text) in row.iter().enumerate() {
                    let mut data = Vec::new();
                    data.extend((r as u16).to_le_bytes());
                    data.extend((c as u16).to_le_bytes());
                    data.extend(0u16.to_le_bytes());
                    let units: Vec<u16> = text.encode_utf16().collect();
                    data.extend((units.len() as u16).to_le_bytes());
                    data.push(1);
                    data.extend(units.iter().flat_map(|u| u.to_le_bytes()));
                    record(&mut body, 0x0204, &data);
                }
            }
            record(&mut body, 0x000A, &[]);
            body
        })
        .collect();
    let sheet_record = |name: &str, pos: u32| {
        let units: Vec<u16> = name.encode_utf16().collect();
        let mut data = pos.to_le_bytes().to_vec();
        data.extend([0, 0, units.len() as u8, 1]);
        data.extend(units.iter().flat_map(|u| u.to_le_bytes()));
        data
    };
    let globals_len: usize = 4
        + 16
        + sheets
            .iter()
            .map(|(name, _)| 4 + sheet_record(name, 0).len())
            .sum::<usize>()
        + 4;
    let mut stream = Vec::new();
    record(&mut stream, 0x0809, &bof(0x0005));
    let mut pos = globals_len;
    for ((name, _), body) in sheets.iter().zip(&bodies) {
        record(&mut stream, 0x0085, &sheet_record(name, pos as u32));
        pos += body.len();
    }
    record(&mut stream, 0x000A, &[]);
    for body in &bodies {
        stream.extend(body);
    }
    compound(&[("/Workbook", &stream)])
}
