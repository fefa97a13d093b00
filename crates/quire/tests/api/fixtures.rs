//! Office files built by the tests themselves: minimal but valid DOCX, PPTX and XLSX packages,
//! and hostile ones (a zip bomb, a truncated file).

use std::io::{Cursor, Write};

use zip::ZipWriter;
use zip::write::SimpleFileOptions;

/// A ZIP package with the given `(path, content)` entries.
pub fn package(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (path, content) in entries {
        zip.start_file(*path, options).unwrap();
        zip.write_all(content).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

/// A paragraph of a DOCX body: its style id (if any) and text.
pub enum Para<'a> {
    Styled(&'a str, &'a str),
    Text(&'a str),
    PageBreak,
    Table(&'a [&'a [&'a str]]),
}

/// A DOCX whose styles map `Heading1`/`Heading2` to heading levels.
pub fn docx(body: &[Para<'_>]) -> Vec<u8> {
    let mut xml = format!("<?xml version=\"1.0\"?><w:document {W}><w:body>");
    for para in body {
        match para {
            Para::Styled(style, text) => xml.push_str(&format!(
                "<w:p><w:pPr><w:pStyle w:val=\"{style}\"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"
            )),
            Para::Text(text) => xml.push_str(&format!("<w:p><w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")),
            Para::PageBreak => xml.push_str("<w:p><w:r><w:br w:type=\"page\"/></w:r></w:p>"),
            Para::Table(rows) => {
                xml.push_str("<w:tbl>");
                for row in *rows {
                    xml.push_str("<w:tr>");
                    for cell in *row {
                        xml.push_str(&format!("<w:tc><w:p><w:r><w:t>{cell}</w:t></w:r></w:p></w:tc>"));
                    }
                    xml.push_str("</w:tr>");
                }
                xml.push_str("</w:tbl>");
            }
        }
    }
    xml.push_str("</w:body></w:document>");
    let styles = format!(
        "<?xml version=\"1.0\"?><w:styles {W}>\
         <w:style w:type=\"paragraph\" w:styleId=\"Heading1\"><w:name w:val=\"heading 1\"/></w:style>\
         <w:style w:type=\"paragraph\" w:styleId=\"Heading2\"><w:name w:val=\"heading 2\"/></w:style>\
         </w:styles>"
    );
    package(&[
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("word/document.xml", xml.as_bytes()),
        ("word/styles.xml", styles.as_bytes()),
    ])
}

const CONTENT_TYPES: &str = r#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>"#;

/// A PPTX with one slide per `(title, body lines)`.
pub fn pptx(slides: &[(&str, &[&str])]) -> Vec<u8> {
    let p = r#"xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let mut ids = String::new();
    let mut rels = String::from(
        r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#,
    );
    let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (title, lines)) in slides.iter().enumerate() {
        let n = i + 1;
        ids.push_str(&format!(r#"<p:sldId id="{}" r:id="rId{n}"/>"#, 255 + n));
        rels.push_str(&format!(
            r#"<Relationship Id="rId{n}" Type="slide" Target="slides/slide{n}.xml"/>"#
        ));
        let body: String = lines
            .iter()
            .map(|l| format!("<a:p><a:r><a:t>{l}</a:t></a:r></a:p>"))
            .collect();
        let slide = format!(
            "<?xml version=\"1.0\"?><p:sld {p}><p:cSld><p:spTree>\
             <p:sp><p:nvSpPr><p:nvPr><p:ph type=\"title\"/></p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>{title}</a:t></a:r></a:p></p:txBody></p:sp>\
             <p:sp><p:nvSpPr><p:nvPr><p:ph idx=\"1\"/></p:nvPr></p:nvSpPr><p:txBody>{body}</p:txBody></p:sp>\
             </p:spTree></p:cSld></p:sld>"
        );
        parts.push((format!("ppt/slides/slide{n}.xml"), slide.into_bytes()));
    }
    rels.push_str("</Relationships>");
    let presentation = format!(
        "<?xml version=\"1.0\"?><p:presentation {p}><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>"
    );
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("ppt/presentation.xml", presentation.as_bytes()),
        ("ppt/_rels/presentation.xml.rels", rels.as_bytes()),
    ];
    for (path, xml) in &parts {
        entries.push((path.as_str(), xml.as_slice()));
    }
    package(&entries)
}

/// An XLSX with one sheet per `(name, rows)`, cells as inline strings.
pub fn xlsx(sheets: &[(&str, &[&[&str]])]) -> Vec<u8> {
    let ns = r#"xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let mut list = String::new();
    let mut rels = String::from(
        r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">"#,
    );
    let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (name, rows)) in sheets.iter().enumerate() {
        let n = i + 1;
        list.push_str(&format!(
            r#"<sheet name="{name}" sheetId="{n}" r:id="rId{n}"/>"#
        ));
        rels.push_str(&format!(
            r#"<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet{n}.xml"/>"#
        ));
        let mut data = String::new();
        for (r, row) in rows.iter().enumerate() {
            data.push_str(&format!("<row r=\"{}\">", r + 1));
            for (c, value) in row.iter().enumerate() {
                let col = (b'A' + c as u8) as char;
                data.push_str(&format!(
                    r#"<c r="{col}{}" t="inlineStr"><is><t>{value}</t></is></c>"#,
                    r + 1
                ));
            }
            data.push_str("</row>");
        }
        let sheet = format!(
            "<?xml version=\"1.0\"?><worksheet {ns}><sheetData>{data}</sheetData></worksheet>"
        );
        parts.push((format!("xl/worksheets/sheet{n}.xml"), sheet.into_bytes()));
    }
    rels.push_str("</Relationships>");
    let workbook =
        format!("<?xml version=\"1.0\"?><workbook {ns}><sheets>{list}</sheets></workbook>");
    let types = r#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>"#;
    let root_rels = r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#;
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("[Content_Types].xml", types.as_bytes()),
        ("_rels/.rels", root_rels.as_bytes()),
        ("xl/workbook.xml", workbook.as_bytes()),
        ("xl/_rels/workbook.xml.rels", rels.as_bytes()),
    ];
    for (path, xml) in &parts {
        entries.push((path.as_str(), xml.as_slice()));
    }
    package(&entries)
}

/// A DOCX whose body unpacks to `unpacked` bytes of spaces (it compresses ~1000:1).
pub fn docx_bomb(unpacked: usize) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(unpacked > u32::MAX as usize);
    zip.start_file("word/document.xml", options).unwrap();
    let chunk = vec![b' '; 1 << 20];
    let mut left = unpacked;
    while left > 0 {
        let n = left.min(chunk.len());
        zip.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    zip.finish().unwrap().into_inner()
}
