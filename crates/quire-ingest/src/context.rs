//! What a chunk is indexed and embedded with besides its own text: the document it comes
//! from. A passage of a long filing rarely names its company or year ("Net cash provided by
//! operating activities … 1,469,502"), while the question does ("Adobe's FY2015 operating
//! cash flow"); giving every chunk its document's title lets both indexes tie the two. The
//! stored chunk, and so what search shows and cites, stays the passage alone.

/// The title a document's chunks carry: its file name made readable, extension dropped and
/// `_`, `-` and `.` read as spaces (`ADOBE_2015_10K.pdf` → `ADOBE 2015 10K`). A name without a
/// letter (`4983.md`, a corpus id) tells nothing about the text and gives an empty title.
pub fn document_title(file_name: &str) -> String {
    let stem = match file_name.rsplit_once('.') {
        Some((stem, extension))
            if !stem.is_empty()
                && (1..=5).contains(&extension.len())
                && extension.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            stem
        }
        _ => file_name,
    };
    if !stem.chars().any(char::is_alphabetic) {
        return String::new();
    }
    stem.split(|c: char| c == '_' || c == '-' || c == '.' || c.is_whitespace())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_become_readable_titles() {
        assert_eq!(document_title("ADOBE_2015_10K.pdf"), "ADOBE 2015 10K");
        assert_eq!(
            document_title("AMCOR_2022_8K_dated-2022-07-01.pdf"),
            "AMCOR 2022 8K dated 2022 07 01"
        );
        assert_eq!(
            document_title("Annual report  v2.final.docx"),
            "Annual report v2 final"
        );
        assert_eq!(document_title("README"), "README");
        assert_eq!(document_title(".hidden"), "hidden");
        // Ids carry no words: no title rather than noise in every chunk.
        assert_eq!(document_title("4983.md"), "");
        assert_eq!(document_title("2021-03-04.txt"), "");
        assert_eq!(document_title(""), "");
    }
}
