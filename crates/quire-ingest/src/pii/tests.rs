use super::*;

fn found(text: &str) -> Vec<(PiiType, String)> {
    Detector::new()
        .detect_page(text, 1)
        .into_iter()
        .map(|f| (f.kind, f.text))
        .collect()
}

fn of_kind(text: &str, kind: PiiType) -> Vec<String> {
    found(text)
        .into_iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, t)| t)
        .collect()
}

#[test]
fn type_names_round_trip() {
    for t in PiiType::ALL {
        assert_eq!(t.as_str().parse::<PiiType>(), Ok(t));
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            format!("\"{}\"", t.as_str())
        );
        assert_eq!(t.placeholder(), format!("[{}]", t.as_str().to_uppercase()));
    }
    assert!("passport".parse::<PiiType>().is_err());
}

#[test]
fn emails_are_found() {
    assert_eq!(
        of_kind("Write to jane.doe+news@example.co.uk.", PiiType::Email),
        ["jane.doe+news@example.co.uk"]
    );
    assert!(
        of_kind(
            "follow @quire on the web, or user@localhost",
            PiiType::Email
        )
        .is_empty()
    );
}

#[test]
fn phones_international_and_national_are_found() {
    assert_eq!(
        of_kind("Call +44 20 7946 0958 today", PiiType::Phone),
        ["+44 20 7946 0958"]
    );
    assert_eq!(
        of_kind("Phone: (555) 123-4567.", PiiType::Phone),
        ["(555) 123-4567"]
    );
    assert_eq!(
        of_kind("reach me on 415-555-0132 x204", PiiType::Phone),
        ["415-555-0132 x204"]
    );
    assert_eq!(
        of_kind("tel 01.84.17.61.18", PiiType::Phone),
        ["01.84.17.61.18"]
    );
}

#[test]
fn years_dates_pages_dois_isbns_and_decimals_are_not_phones() {
    for text in [
        "Data from 1990-2020 were used.",
        "Published 2020-01-15 in volume 12.",
        "See page 1234 and pp. 123-145.",
        "doi:10.1038/nature12373 and https://doi.org/10.1000/182",
        "ISBN 978-3-16-148410-0",
        "The constant is 3.14159265 and 2.71828182.",
        "A total of 12,345,678 rows.",
    ] {
        assert!(found(text).is_empty(), "{text}: {:?}", found(text));
    }
}

#[test]
fn credit_cards_need_luhn_and_a_known_prefix() {
    assert_eq!(
        of_kind("card 4111 1111 1111 1111 expires", PiiType::CreditCard),
        ["4111 1111 1111 1111"]
    );
    assert_eq!(
        of_kind("amex 3782-822463-10005", PiiType::CreditCard),
        ["3782-822463-10005"]
    );
    assert!(of_kind("card 4111 1111 1111 1112", PiiType::CreditCard).is_empty());
    assert!(of_kind("id 9111111111111111", PiiType::CreditCard).is_empty());
}

#[test]
fn ibans_need_a_valid_checksum() {
    assert_eq!(
        of_kind("to GB82 WEST 1234 5698 7654 32 please", PiiType::Iban),
        ["GB82 WEST 1234 5698 7654 32"]
    );
    assert_eq!(
        of_kind("DE89370400440532013000", PiiType::Iban),
        ["DE89370400440532013000"]
    );
    assert!(of_kind("GB83 WEST 1234 5698 7654 32", PiiType::Iban).is_empty());
}

#[test]
fn ssns_exclude_invalid_areas_groups_and_serials() {
    assert_eq!(of_kind("SSN 123-45-6789", PiiType::UsSsn), ["123-45-6789"]);
    for bad in [
        "000-12-3456",
        "666-12-3456",
        "912-12-3456",
        "123-00-4567",
        "123-45-0000",
    ] {
        assert!(
            of_kind(&format!("SSN {bad}"), PiiType::UsSsn).is_empty(),
            "{bad}"
        );
    }
}

#[test]
fn ip_addresses_but_not_versions() {
    assert_eq!(
        of_kind("connect to 192.168.10.254 now", PiiType::IpAddress),
        ["192.168.10.254"]
    );
    assert_eq!(
        of_kind(
            "host 2001:0db8:85a3:0000:0000:8a2e:0370:7334 and ::1",
            PiiType::IpAddress
        ),
        ["2001:0db8:85a3:0000:0000:8a2e:0370:7334", "::1"]
    );
    assert_eq!(
        of_kind("at 2001:db8::8a2e:370:7334.", PiiType::IpAddress),
        ["2001:db8::8a2e:370:7334"]
    );
    assert!(of_kind("Upgrade to version 1.2.3.4 first.", PiiType::IpAddress).is_empty());
    assert!(of_kind("See section 2.1.3.4 below.", PiiType::IpAddress).is_empty());
    assert!(of_kind("Released 10.20.30.400, at 12:30:45.", PiiType::IpAddress).is_empty());
}

#[test]
fn salutation_with_title_finds_the_name() {
    assert_eq!(
        of_kind("Dear Dr. Jane Smith,\nThank you.", PiiType::PersonName),
        ["Jane Smith"]
    );
    assert_eq!(
        of_kind("My name is Aloisia Kowalczyk.", PiiType::PersonName),
        ["Aloisia Kowalczyk"]
    );
}

#[test]
fn common_words_at_sentence_start_are_not_names() {
    for text in [
        "May the results be repeated. Will this work? Mark the samples.",
        "RESULTS AND DISCUSSION\nThe Long March was long.",
    ] {
        assert!(
            of_kind(text, PiiType::PersonName).is_empty(),
            "{text}: {:?}",
            found(text)
        );
    }
    assert_eq!(
        of_kind("Will Smith starred.", PiiType::PersonName),
        ["Will Smith"]
    );
}

#[test]
fn author_line_names_are_found() {
    assert_eq!(
        of_kind(
            "John A. Smith, Maria Garcia and Wei Zhang",
            PiiType::PersonName
        ),
        ["John A. Smith", "Maria Garcia", "Wei Zhang"]
    );
}

#[test]
fn offsets_are_byte_offsets_on_char_boundaries() {
    let text = "Für Müller: Dear Renée Dupont, mail renée@example.com";
    for f in Detector::new().detect_page(text, 3) {
        assert_eq!(&text[f.start..f.end], f.text);
        assert_eq!(f.page, 3);
        assert!((0.0..=1.0).contains(&f.confidence));
    }
}

const CV: &str = "Curriculum Vitae\n\nJane Miller\njane.miller@example.com | +1 415 555 0132\n\n\
Experience\nSoftware engineer at Example Corp, 2015-2020.";

const ABSTRACT: &str = "Deep Retrieval for Scientific Claims\n\
John A. Smith, Maria Garcia and Wei Zhang\nDepartment of Computer Science\n\n\
Abstract. We study retrieval of evidence for scientific claims. Following Robertson and \
Zaragoza (2009), we combine BM25 with dense embeddings and evaluate on 1,409 claims from \
1990-2020 (see Table 2, p. 12). Results improve nDCG@10 by 4.2 points. \
doi:10.1234/abcd.5678";

fn customer_list() -> String {
    let people = [
        "Anna Keller",
        "Brian Lopez",
        "Carla Jensen",
        "David Nguyen",
        "Emma Fischer",
        "Frank Moreno",
        "Grace Olsen",
        "Henry Walsh",
        "Irene Costa",
        "Jacob Brennan",
    ];
    let mut out = String::from("name,email\n");
    for p in people {
        let email = p.to_lowercase().replace(' ', ".") + "@example.org";
        out.push_str(&format!("{p},{email}\n"));
    }
    out
}

#[test]
fn policy_holds_a_cv_and_a_customer_list_but_not_an_abstract() {
    let detector = Detector::new();
    let policy = Policy::default();
    let cv = policy.holds(&detector.detect(&[(1, CV)]));
    assert_eq!(
        cv,
        Some(vec![PiiType::PersonName, PiiType::Email, PiiType::Phone])
    );
    let list = customer_list();
    let held = policy.holds(&detector.detect(&[(1, &list)]));
    assert!(held.is_some_and(|t| t.contains(&PiiType::Email)));
    let paper = detector.detect(&[(1, ABSTRACT)]);
    assert!(paper.iter().any(|f| f.kind == PiiType::PersonName));
    assert_eq!(policy.holds(&paper), None, "{paper:?}");
}

#[test]
fn policy_holds_any_strong_finding() {
    let findings = Detector::new().detect(&[(2, "Pay to DE89 3704 0044 0532 0130 00.")]);
    assert_eq!(
        Policy::default().holds(&findings),
        Some(vec![PiiType::Iban])
    );
}

#[test]
fn redact_replaces_spans_with_placeholders() {
    let text = "Dear Dr. Jane Smith, your card 4111-1111-1111-1111 and jane@example.com.";
    let findings = Detector::new().detect_page(text, 1);
    assert_eq!(
        redact(text, &findings),
        "Dear Dr. [PERSON_NAME], your card [CREDIT_CARD] and [EMAIL]."
    );
}

#[test]
fn redact_merges_overlaps() {
    let finding = |kind, start, end, confidence| Finding {
        kind,
        page: 1,
        start,
        end,
        text: String::new(),
        confidence,
    };
    let text = "abc 0123456789 xyz";
    let findings = [
        finding(PiiType::Phone, 4, 12, 0.6),
        finding(PiiType::CreditCard, 8, 14, 0.9),
    ];
    assert_eq!(redact(text, &findings), "abc [CREDIT_CARD] xyz");
}

#[test]
fn policy_lets_a_long_document_with_a_contact_block_through() {
    let detector = Detector::new();
    let contact = "Corresponding author: Perry Cook, prc@cs.example.edu, 609-258-1771";
    let references = "References\nJ. Smith and M. Garcia. Audio analysis. 2001.";
    let short = detector.detect(&[(1, contact)]);
    let long = detector.detect(&[(1, contact), (12, references)]);
    let policy = Policy::default();
    assert!(policy.holds(&short).is_some());
    assert_eq!(policy.holds(&long), None);
    assert!(policy.holds_with_profile_pages(&long, u32::MAX).is_some());
}

#[test]
fn arbitrary_text_never_panics_and_offsets_stay_on_boundaries() {
    let alphabet: Vec<char> = "0123456789 +-.()/:@x_aZé€ß😀\n,Mr. Dr Jane Smith GB82 WEST ::1"
        .chars()
        .collect();
    let detector = Detector::new();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..2000 {
        let mut text = String::new();
        for _ in 0..(state % 60) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        for f in detector.detect_page(&text, 1) {
            assert!(text.is_char_boundary(f.start) && text.is_char_boundary(f.end));
            assert_eq!(&text[f.start..f.end], f.text, "{text:?}");
        }
        let _ = redact(&text, &detector.detect_page(&text, 1));
    }
}
