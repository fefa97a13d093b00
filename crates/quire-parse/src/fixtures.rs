//! Files built by tests (enabled by the `fixtures` feature): small valid PDFs with text, an
//! outline and, when asked, encryption, so tests never need sample files on disk.

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
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n{body}\nendobj\n", i + 1).into_bytes());
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
