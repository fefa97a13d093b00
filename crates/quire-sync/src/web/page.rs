//! What the crawl reads from an HTML page: its links, title and language. The text itself is
//! left to the upload's HTML parser, like any uploaded page.

use quire_netguard::Url;
use scraper::{Html, Selector};

/// Longest title kept, in characters (metadata strings allow more; titles are never longer).
const TITLE_CHARS: usize = 300;
/// Longest language tag kept (BCP 47 tags are short; anything longer is not one).
const LANGUAGE_CHARS: usize = 35;

/// What one page says about itself.
#[derive(Debug, Default, PartialEq)]
pub struct Page {
    /// `<title>`, whitespace collapsed.
    pub title: Option<String>,
    /// `<html lang>`.
    pub language: Option<String>,
    /// Every `<a href>` resolved against the page (or its `<base href>`), without fragments,
    /// http and https only, in document order and without repeats.
    pub links: Vec<Url>,
}

/// Reads `html`, served at `url`.
pub fn read(html: &str, url: &Url) -> Page {
    let document = Html::parse_document(html);
    let select = |css: &str| Selector::parse(css).expect("a valid built-in selector");
    let title = document
        .select(&select("title"))
        .next()
        .map(|t| collapse(&t.text().collect::<String>(), TITLE_CHARS))
        .filter(|t| !t.is_empty());
    let language = document
        .select(&select("html[lang]"))
        .next()
        .and_then(|h| h.value().attr("lang"))
        .map(|l| collapse(l, LANGUAGE_CHARS))
        .filter(|l| !l.is_empty());
    let base = document
        .select(&select("base[href]"))
        .next()
        .and_then(|b| b.value().attr("href"))
        .and_then(|href| url.join(href.trim()).ok())
        .unwrap_or_else(|| url.clone());
    let mut links: Vec<Url> = Vec::new();
    for anchor in document.select(&select("a[href]")) {
        let Some(href) = anchor.value().attr("href") else {
            continue;
        };
        let Ok(mut link) = base.join(href.trim()) else {
            continue;
        };
        if !matches!(link.scheme(), "http" | "https") {
            continue;
        }
        link.set_fragment(None);
        if !links.contains(&link) {
            links.push(link);
        }
    }
    Page {
        title,
        language,
        links,
    }
}

/// `text` with runs of whitespace made one space, trimmed, cut at `max` characters.
fn collapse(text: &str, max: usize) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_title_and_language_are_read() {
        let url = Url::parse("https://docs.example/guide/intro.html").unwrap();
        let page = read(
            r#"<!doctype html><html lang="de-CH"><head><title>
                 Pumps   and valves </title></head>
               <body><a href="pumps.html#priming">a</a> <a href="/other/">b</a>
               <a href="pumps.html">again</a> <a href="mailto:x@y">mail</a>
               <a href="https://elsewhere.example/x">c</a></body></html>"#,
            &url,
        );
        assert_eq!(page.title.as_deref(), Some("Pumps and valves"));
        assert_eq!(page.language.as_deref(), Some("de-CH"));
        let links: Vec<&str> = page.links.iter().map(Url::as_str).collect();
        assert_eq!(
            links,
            [
                "https://docs.example/guide/pumps.html",
                "https://docs.example/other/",
                "https://elsewhere.example/x"
            ]
        );
    }

    #[test]
    fn a_base_element_moves_relative_links() {
        let url = Url::parse("https://docs.example/a/b.html").unwrap();
        let page = read(
            r#"<html><head><base href="/c/"></head><body><a href="d.html">d</a></body></html>"#,
            &url,
        );
        assert_eq!(page.links[0].as_str(), "https://docs.example/c/d.html");
        assert_eq!(page.title, None);
        assert_eq!(page.language, None);
    }
}
