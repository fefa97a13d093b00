//! Sitemaps (sitemaps.org): the pages of a `<urlset>` with their `<lastmod>`, or the
//! sitemaps of a `<sitemapindex>`.

use quick_xml::Reader;
use quick_xml::events::Event;

/// What one sitemap file lists.
#[derive(Debug, Default, PartialEq)]
pub struct Sitemap {
    /// Pages (`<url><loc>`), with their `<lastmod>` as written.
    pub pages: Vec<(String, Option<String>)>,
    /// Further sitemaps (`<sitemap><loc>` of an index).
    pub sitemaps: Vec<String>,
}

/// Largest sitemap read, uncompressed (the sitemaps.org protocol's own limit).
pub const MAX_SITEMAP_BYTES: u64 = 50 * 1024 * 1024;

/// A sitemap's text from the bytes served: gzip-compressed (`.xml.gz`, told by its magic
/// bytes, whatever the URL or content type say) or plain.
pub fn text_of(body: &[u8]) -> Result<String, String> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        return Ok(String::from_utf8_lossy(body).into_owned());
    }
    use std::io::Read as _;
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(MAX_SITEMAP_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("a damaged gzip sitemap: {e}"))?;
    if text.len() as u64 > MAX_SITEMAP_BYTES {
        return Err(format!(
            "larger than {} MiB uncompressed",
            MAX_SITEMAP_BYTES / 1024 / 1024
        ));
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Reads a sitemap or sitemap index; the error says what is wrong with the XML.
pub fn read(xml: &str) -> Result<Sitemap, String> {
    let mut reader = Reader::from_str(xml);
    let mut sitemap = Sitemap::default();
    // The entry being read: whether it is a page, its loc and lastmod.
    let mut entry: Option<(bool, String, String)> = None;
    // The field of the entry whose text is being read ("loc" or "lastmod").
    let mut field: Option<String> = None;
    let mut seen_root = false;
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("invalid sitemap XML: {e}"))?
        {
            Event::Start(e) => {
                let name = e.local_name().into_inner().to_owned();
                match name.as_str() {
                    "urlset" | "sitemapindex" => seen_root = true,
                    "url" => entry = Some((true, String::new(), String::new())),
                    "sitemap" => entry = Some((false, String::new(), String::new())),
                    "loc" | "lastmod" if entry.is_some() => field = Some(name),
                    _ => {}
                }
            }
            Event::End(e) => match e.local_name().into_inner() {
                "url" | "sitemap" => {
                    if let Some((page, loc, lastmod)) = entry.take() {
                        let loc = loc.trim().to_owned();
                        let lastmod = Some(lastmod.trim().to_owned()).filter(|l| !l.is_empty());
                        if loc.is_empty() {
                        } else if page {
                            sitemap.pages.push((loc, lastmod));
                        } else {
                            sitemap.sitemaps.push(loc);
                        }
                    }
                }
                "loc" | "lastmod" => field = None,
                _ => {}
            },
            Event::Text(t) => push(&mut entry, field.as_deref(), &t.xml10_content()),
            Event::CData(t) => push(&mut entry, field.as_deref(), &t.xml10_content()),
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => match r.xml10_content().as_ref() {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        _ => String::new(),
                    },
                };
                push(&mut entry, field.as_deref(), &text);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_root {
        return Err("not a sitemap: no <urlset> or <sitemapindex>".into());
    }
    Ok(sitemap)
}

fn push(entry: &mut Option<(bool, String, String)>, field: Option<&str>, text: &str) {
    if let Some((_, loc, lastmod)) = entry {
        match field {
            Some("loc") => loc.push_str(text),
            Some("lastmod") => lastmod.push_str(text),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzip_sitemap_is_read_like_a_plain_one_and_a_damaged_one_is_refused() {
        use std::io::Write as _;
        let xml = r#"<urlset><url><loc>https://a.example/x</loc></url></urlset>"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(xml.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(text_of(&gz).unwrap(), xml);
        assert_eq!(text_of(xml.as_bytes()).unwrap(), xml);
        let cut = &gz[..gz.len() / 2];
        assert!(text_of(cut).unwrap_err().contains("damaged gzip"));
    }

    #[test]
    fn a_urlset_lists_pages_with_lastmod() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
            <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
              <url><loc> https://x.example/a?p=1&amp;q=2 </loc><lastmod>2024-05-01</lastmod></url>
              <url><loc>https://x.example/b</loc><changefreq>daily</changefreq></url>
              <url><lastmod>2024-05-01</lastmod></url>
            </urlset>"#;
        assert_eq!(
            read(xml).unwrap(),
            Sitemap {
                pages: vec![
                    (
                        "https://x.example/a?p=1&q=2".into(),
                        Some("2024-05-01".into())
                    ),
                    ("https://x.example/b".into(), None),
                ],
                sitemaps: vec![],
            }
        );
    }

    #[test]
    fn an_index_lists_sitemaps() {
        let xml = r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
              <sitemap><loc>https://x.example/one.xml</loc><lastmod>2024-01-01</lastmod></sitemap>
              <sitemap><loc><![CDATA[https://x.example/two.xml]]></loc></sitemap>
            </sitemapindex>"#;
        let sitemap = read(xml).unwrap();
        assert!(sitemap.pages.is_empty());
        assert_eq!(
            sitemap.sitemaps,
            ["https://x.example/one.xml", "https://x.example/two.xml"]
        );
    }

    #[test]
    fn other_documents_are_refused() {
        assert!(read("<html><body>hi</body></html>").is_err());
        assert!(read("<urlset><url><loc>x</url>").is_err());
    }
}
