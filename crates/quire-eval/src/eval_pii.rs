//! `quire eval pii`: measures the personal-data detector (`quire_ingest::pii`).
//!
//! - Accuracy on a labelled dataset in Presidio's synthetic layout (`full_text` and `spans`
//!   with `entity_type`, `start_position`, `end_position` as Python string indices, i.e.
//!   characters): per type precision, recall and F1. A predicted span matches a gold span of
//!   the same type when they overlap by at least half of the shorter one; each gold span is
//!   matched at most once. Exact-boundary numbers are printed too.
//! - Flag rate on ordinary documents: every file below `--docs` parsed by the product's
//!   parser, run through the detector, and held or not by `Policy::default()` and a few
//!   alternatives, per folder; the held files are listed with their trigger types.
//! - Throughput: bytes of page text through `Detector::detect` per second, median of runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use quire_ingest::pii::{Detector, Finding, PiiType, Policy};
use serde::Deserialize;

use crate::eval::{Outcome, collect, page_texts, run_one, short_path};
use crate::progress::Progress;
use crate::text_quality::median;

/// Options of `quire eval pii`.
#[derive(Debug, Args)]
pub struct PiiEvalArgs {
    /// Labelled sentences in Presidio's synthetic-dataset layout (a JSON array).
    #[arg(long, value_name = "FILE")]
    dataset: Option<PathBuf>,
    /// Directory of ordinary documents (read recursively) for the flag rate.
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Timed runs of the detector over all text; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds one file may take to parse.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Print every missed and spurious span of the dataset, and every finding at the default minimum confidence in every document.
    #[arg(long)]
    verbose: bool,
}

#[derive(Debug, Deserialize)]
struct Record {
    full_text: String,
    spans: Vec<GoldSpan>,
}

#[derive(Debug, Deserialize)]
struct GoldSpan {
    entity_type: String,
    start_position: usize,
    end_position: usize,
}

/// Presidio's entity types that the detector covers; the others are ignored both ways.
fn presidio_type(entity: &str) -> Option<PiiType> {
    Some(match entity {
        "PERSON" => PiiType::PersonName,
        "EMAIL_ADDRESS" => PiiType::Email,
        "PHONE_NUMBER" => PiiType::Phone,
        "CREDIT_CARD" => PiiType::CreditCard,
        "IBAN_CODE" => PiiType::Iban,
        "US_SSN" => PiiType::UsSsn,
        "IP_ADDRESS" => PiiType::IpAddress,
        _ => return None,
    })
}

/// Counts for one type.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    gold: usize,
    predicted: usize,
    matched: usize,
    exact: usize,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.gold += other.gold;
        self.predicted += other.predicted;
        self.matched += other.matched;
        self.exact += other.exact;
    }
}

fn prf(hits: usize, predicted: usize, gold: usize) -> (f64, f64, f64) {
    let p = hits as f64 / predicted.max(1) as f64;
    let r = hits as f64 / gold.max(1) as f64;
    let f = if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    };
    (p, r, f)
}

/// Runs the evaluation and prints the report.
pub fn pii(args: PiiEvalArgs) -> anyhow::Result<()> {
    if args.dataset.is_none() && args.docs.is_none() {
        anyhow::bail!("nothing to evaluate: pass --dataset FILE and/or --docs DIR");
    }
    let detector = Detector::new();
    let mut texts: Vec<String> = Vec::new();
    if let Some(path) = &args.dataset {
        let records: Vec<Record> = serde_json::from_slice(
            &std::fs::read(path).with_context(|| format!("could not read {}", path.display()))?,
        )
        .with_context(|| format!("{} is not a Presidio-style dataset", path.display()))?;
        dataset_report(&detector, &records, args.verbose);
        texts.extend(records.into_iter().map(|r| r.full_text));
    }
    if let Some(dir) = &args.docs {
        let pages = docs_report(&detector, dir, &args)?;
        texts.extend(pages);
    }
    throughput(&detector, &texts, args.runs.max(1));
    Ok(())
}

/// Byte offset of each char index (and of the end), to convert Python string indices.
fn char_to_byte(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect()
}

fn dataset_report(detector: &Detector, records: &[Record], verbose: bool) {
    let policy = Policy::default();
    let thresholds = [0.0, policy.min_confidence];
    let mut counts: Vec<BTreeMap<PiiType, Counts>> = vec![BTreeMap::new(); thresholds.len()];
    for record in records {
        let text = &record.full_text;
        let bytes = char_to_byte(text);
        let gold: Vec<(PiiType, usize, usize)> = record
            .spans
            .iter()
            .filter_map(|s| {
                let kind = presidio_type(&s.entity_type)?;
                Some((
                    kind,
                    *bytes.get(s.start_position)?,
                    *bytes.get(s.end_position)?,
                ))
            })
            .collect();
        let findings = detector.detect_page(text, 1);
        for (t, &threshold) in thresholds.iter().enumerate() {
            let predicted: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.confidence >= threshold)
                .collect();
            for kind in PiiType::ALL {
                let g: Vec<(usize, usize)> = gold
                    .iter()
                    .filter(|s| s.0 == kind)
                    .map(|s| (s.1, s.2))
                    .collect();
                let p: Vec<(usize, usize)> = predicted
                    .iter()
                    .filter(|f| f.kind == kind)
                    .map(|f| (f.start, f.end))
                    .collect();
                let c = match_spans(&g, &p);
                counts[t].entry(kind).or_default().add(c);
                if verbose && t == 0 && (c.matched < g.len() || c.matched < p.len()) {
                    let show = |s: &[(usize, usize)]| -> Vec<&str> {
                        s.iter().map(|&(a, b)| &text[a..b]).collect()
                    };
                    println!(
                        "{kind}: gold {:?} predicted {:?} in {:?}",
                        show(&g),
                        show(&p),
                        text.chars().take(160).collect::<String>()
                    );
                }
            }
        }
    }
    println!(
        "PII detection on {} labelled records. Match rule: a predicted span matches an unmatched \
         gold span of the same type when they overlap by at least 50% of the shorter span; \
         \"exact\" requires identical boundaries. Presidio types outside the seven are ignored.",
        records.len()
    );
    for (t, threshold) in thresholds.iter().enumerate() {
        println!("\nfindings with confidence >= {threshold:.2}");
        println!(
            "{:<12} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6}   {:>6} {:>6} {:>6}",
            "type", "gold", "pred", "match", "P", "R", "F1", "P=", "R=", "F1="
        );
        let mut total = Counts::default();
        for (kind, c) in &counts[t] {
            total.add(*c);
            print_counts(kind.as_str(), c);
        }
        print_counts("all", &total);
    }
}

fn print_counts(label: &str, c: &Counts) {
    let (p, r, f) = prf(c.matched, c.predicted, c.gold);
    let (pe, re, fe) = prf(c.exact, c.predicted, c.gold);
    println!(
        "{label:<12} {:>5} {:>5} {:>5} {p:>6.3} {r:>6.3} {f:>6.3}   {pe:>6.3} {re:>6.3} {fe:>6.3}",
        c.gold, c.predicted, c.matched
    );
}

/// Greedy one-to-one matching under the overlap rule.
fn match_spans(gold: &[(usize, usize)], predicted: &[(usize, usize)]) -> Counts {
    let mut used = vec![false; gold.len()];
    let mut counts = Counts {
        gold: gold.len(),
        predicted: predicted.len(),
        ..Counts::default()
    };
    for &(ps, pe) in predicted {
        let overlap = |&(gs, ge): &(usize, usize)| pe.min(ge).saturating_sub(ps.max(gs));
        let best = (0..gold.len())
            .filter(|&k| !used[k])
            .filter(|&k| {
                let (gs, ge) = gold[k];
                let shorter = (pe - ps).min(ge - gs).max(1);
                overlap(&gold[k]) > 0 && overlap(&gold[k]) * 2 >= shorter
            })
            .max_by_key(|&k| overlap(&gold[k]))
            .map(|k| (k, &gold[k]));
        if let Some((k, &(gs, ge))) = best {
            used[k] = true;
            counts.matched += 1;
            if (gs, ge) == (ps, pe) {
                counts.exact += 1;
            }
        }
    }
    counts
}

/// One parsed document and what the detector found in it.
struct Document {
    folder: String,
    shown: String,
    findings: Vec<Finding>,
}

/// A policy to compare, with its label.
struct Candidate {
    label: &'static str,
    policy: Policy,
    /// The page limit of the name-with-contact rule.
    profile_max_page: u32,
}

impl Candidate {
    fn holds(&self, findings: &[Finding]) -> Option<Vec<PiiType>> {
        self.policy
            .holds_with_profile_pages(findings, self.profile_max_page)
    }
}

fn candidates() -> Vec<Candidate> {
    let default = Policy::default();
    let with = |f: &dyn Fn(&mut Policy)| {
        let mut p = Policy::default();
        f(&mut p);
        p
    };
    vec![
        Candidate {
            label: "default",
            policy: default,
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "strong types only",
            policy: with(&|p| {
                p.min_findings = usize::MAX;
                p.name_with_contact = false;
            }),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "contacts >= 3",
            policy: with(&|p| p.min_findings = 3),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "contacts >= 5",
            policy: with(&|p| p.min_findings = 5),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "contacts >= 20",
            policy: with(&|p| p.min_findings = 20),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "no profile rule",
            policy: with(&|p| p.name_with_contact = false),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "profile: <= 1 page",
            policy: Policy::default(),
            profile_max_page: 1,
        },
        Candidate {
            label: "profile: <= 8 pages",
            policy: Policy::default(),
            profile_max_page: 8,
        },
        Candidate {
            label: "profile: any length",
            policy: Policy::default(),
            profile_max_page: u32::MAX,
        },
        Candidate {
            label: "+ names >= 10",
            policy: with(&|p| p.min_names = Some(10)),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "+ names >= 25",
            policy: with(&|p| p.min_names = Some(25)),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "+ names >= 50",
            policy: with(&|p| p.min_names = Some(50)),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "min confidence 0.7",
            policy: with(&|p| p.min_confidence = 0.7),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
        Candidate {
            label: "any finding >= 0.5",
            policy: with(&|p| {
                p.min_findings = 1;
                p.min_names = Some(1);
            }),
            profile_max_page: Policy::PROFILE_MAX_PAGE,
        },
    ]
}

/// A made-up document with the decision a policy should make on it.
struct Sample {
    label: &'static str,
    must_hold: bool,
    pages: &'static [&'static str],
}

/// Documents a policy exists for (CVs, customer lists, payment and HR records) and ordinary
/// documents it must let through, to check both sides of each policy.
const SAMPLES: &[Sample] = &[
    Sample {
        label: "cv",
        must_hold: true,
        pages: &["Curriculum Vitae\n\nJane Miller\n12 Harbour Road, Leeds\n\
                  jane.miller@example.com | +44 7700 900123\n\nExperience\n\
                  Software engineer, Example Ltd, 2015-2020.\n\
                  Education\nBSc Computer Science, University of Leeds."],
    },
    Sample {
        label: "cv, 2 pages",
        must_hold: true,
        pages: &[
            "Peter Novak\npeter.novak@example.net\n(415) 555-0188\nSan Francisco, CA",
            "Experience\nData analyst, 2018-2023.\nReferences\nDr. Helen Carter, available on request.",
        ],
    },
    Sample {
        label: "customer list",
        must_hold: true,
        pages: &[
            "name,email\nAnna Keller,anna.keller@example.org\nBrian Lopez,b.lopez@example.org\n\
                  Carla Jensen,carla@example.net\nDavid Nguyen,dnguyen@example.com\n\
                  Emma Fischer,emma.f@example.org\nFrank Moreno,frank@example.org\n\
                  Grace Olsen,golsen@example.com\nHenry Walsh,hwalsh@example.com\n\
                  Irene Costa,irene.costa@example.org\nJacob Brennan,jb@example.net\n",
        ],
    },
    Sample {
        label: "phone list",
        must_hold: true,
        pages: &[
            "Team phone list\nOlivia Hart 020 7946 0011\nNoah Reid 020 7946 0012\n\
                  Liam Ford 020 7946 0013\nAva Stone 020 7946 0014\nMia Chen 020 7946 0015\n\
                  Ethan Cole 020 7946 0016\nIsla Grant 020 7946 0017\nLeo Marsh 020 7946 0018\n\
                  Ella Nash 020 7946 0019\nJack Webb 020 7946 0020\n",
        ],
    },
    Sample {
        label: "payment form",
        must_hold: true,
        pages: &[
            "Order 1182. Card holder: Mark Evans. Card number 4111 1111 1111 1111, expiry 04/27.",
        ],
    },
    Sample {
        label: "HR record",
        must_hold: true,
        pages: &["Employee: Robert Hayes\nSSN: 512-44-6789\nStart date: 2021-03-01"],
    },
    Sample {
        label: "bank details",
        must_hold: true,
        pages: &["Please transfer the deposit to IBAN DE89 3704 0044 0532 0130 00 (Anna Schmidt)."],
    },
    Sample {
        label: "signed letter",
        must_hold: true,
        pages: &[
            "Dear Ms. Patel,\nthank you for your application.\nKind regards,\nThomas Becker\n\
                  thomas.becker@example.de\n+49 30 901820",
        ],
    },
    Sample {
        label: "paper",
        must_hold: false,
        pages: &[
            "Dense Retrieval for Scientific Claims\nJohn A. Smith, Maria Garcia and Wei Zhang\n\
             {jsmith, mgarcia, wzhang}@cs.example.edu\nAbstract. We study retrieval for claims \
             (1990-2020, n = 1,409).",
            "Results are in Table 2 (p. 12); see doi:10.1234/abcd.5678 and ISBN 978-3-16-148410-0.",
            "References\nS. E. Robertson and H. Zaragoza. The probabilistic relevance framework. \
             2009.\nC. D. Manning, P. Raghavan and H. Schütze. Introduction to Information \
             Retrieval. 2008.\nJ. Devlin, M. Chang, K. Lee and K. Toutanova. BERT. 2019.",
        ],
    },
    Sample {
        label: "meeting minutes",
        must_hold: false,
        pages: &[
            "Minutes, 12 May 2024. Present: Sarah Jones, Michael Brown, Laura Chen, David \
                  Wilson, Emily Clark, James Taylor, Olivia Martin, Daniel Lewis. Sarah opened \
                  the meeting; David presented the budget for 2024-2025.",
        ],
    },
    Sample {
        label: "network guide",
        must_hold: false,
        pages: &[
            "Set the gateway to 192.168.1.1 and the DNS server to 10.0.0.53. Firmware \
                  version 2.4.1.7 fixes the bug; see section 3.2.1.4.",
        ],
    },
    Sample {
        label: "press release",
        must_hold: false,
        pages: &[
            "Example Corp reports record revenue.\nMedia contact: Jane Doe, \
                  press@example.com, +1 415 555 0100",
        ],
    },
];

fn docs_report(detector: &Detector, dir: &Path, args: &PiiEvalArgs) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    collect(dir, &mut files).with_context(|| format!("could not read {}", dir.display()))?;
    files.sort();
    let mut documents = Vec::new();
    let mut unparsed: BTreeMap<String, usize> = BTreeMap::new();
    let mut all_pages = Vec::new();
    let mut progress = Progress::new(
        "screening files",
        u64::try_from(files.len()).unwrap_or(u64::MAX),
    );
    for path in &files {
        // Counted as each file starts: some end early (those that do not parse).
        progress.inc(1);
        let folder = path
            .parent()
            .and_then(|p| p.strip_prefix(dir).ok())
            .map(|p| p.display().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".into());
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        let bytes = std::fs::read(path)?;
        let doc = match run_one(bytes, name, None, Duration::from_secs(args.timeout)) {
            Outcome::Parsed(doc) => doc,
            Outcome::Failed(_) | Outcome::Crashed | Outcome::Hung => {
                *unparsed.entry(folder).or_default() += 1;
                continue;
            }
        };
        let texts = page_texts(&doc);
        let pages: Vec<(u32, &str)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u32 + 1, t.as_str()))
            .collect();
        let findings = detector.detect(&pages);
        documents.push(Document {
            folder,
            shown: short_path(path, dir),
            findings,
        });
        all_pages.extend(texts);
    }
    progress.finish();
    let policies = candidates();
    let default = &policies[0].policy;

    println!(
        "\nFlag rate on {} documents below {} ({} could not be parsed and are left out)",
        documents.len(),
        dir.display(),
        unparsed.values().sum::<usize>()
    );
    println!(
        "\nfindings with confidence >= {:.2} per folder (documents with at least one / total findings)",
        default.min_confidence
    );
    let mut header = format!("{:<16} {:>5}", "folder", "docs");
    for kind in PiiType::ALL {
        header.push_str(&format!(" {:>13}", kind.as_str()));
    }
    println!("{header}");
    let folders: BTreeSet<&str> = documents.iter().map(|d| d.folder.as_str()).collect();
    for folder in &folders {
        let docs: Vec<&Document> = documents.iter().filter(|d| d.folder == *folder).collect();
        let mut line = format!("{folder:<16} {:>5}", docs.len());
        for kind in PiiType::ALL {
            let counted = |d: &&Document| {
                d.findings
                    .iter()
                    .filter(|f| f.kind == kind && f.confidence >= default.min_confidence)
                    .count()
            };
            let with = docs.iter().filter(|d| counted(d) > 0).count();
            let total: usize = docs.iter().map(counted).sum();
            line.push_str(&format!(" {:>13}", format!("{with}/{total}")));
        }
        println!("{line}");
    }

    println!(
        "\nheld documents per policy (per folder, overall, and the made-up samples decided as \
         intended: documents that must be held / must not be)"
    );
    let mut header = format!("{:<22}", "policy");
    for folder in &folders {
        header.push_str(&format!(" {:>11}", truncate(folder, 11)));
    }
    header.push_str(&format!(" {:>12} {:>7} {:>7}", "all", "hold", "pass"));
    println!("{header}");
    let samples: Vec<(&Sample, Vec<Finding>)> = SAMPLES
        .iter()
        .map(|sample| {
            let pages: Vec<(u32, &str)> = sample
                .pages
                .iter()
                .enumerate()
                .map(|(i, text)| (i as u32 + 1, *text))
                .collect();
            (sample, detector.detect(&pages))
        })
        .collect();
    let must = |hold: bool| samples.iter().filter(|(s, _)| s.must_hold == hold).count();
    for candidate in &policies {
        let mut line = format!("{:<22}", candidate.label);
        let mut held_total = 0;
        for folder in &folders {
            let docs: Vec<&Document> = documents.iter().filter(|d| d.folder == *folder).collect();
            let held = docs
                .iter()
                .filter(|d| candidate.holds(&d.findings).is_some())
                .count();
            held_total += held;
            line.push_str(&format!(" {:>11}", format!("{held}/{}", docs.len())));
        }
        let rate = 100.0 * held_total as f64 / documents.len().max(1) as f64;
        let right = |hold: bool| {
            samples
                .iter()
                .filter(|(s, f)| s.must_hold == hold && candidate.holds(f).is_some() == hold)
                .count()
        };
        line.push_str(&format!(
            " {:>12} {:>7} {:>7}",
            format!("{held_total} ({rate:.1}%)"),
            format!("{}/{}", right(true), must(true)),
            format!("{}/{}", right(false), must(false))
        ));
        println!("{line}");
    }
    for (sample, findings) in &samples {
        let held = default.holds(findings);
        if held.is_some() != sample.must_hold {
            let verdict = match &held {
                Some(types) => format!(
                    "held ({})",
                    types
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "not held".into(),
            };
            println!(
                "the default decides the {:?} sample wrongly: {verdict}",
                sample.label
            );
        }
    }

    println!("\nheld by the default policy:");
    for d in &documents {
        if let Some(types) = default.holds(&d.findings) {
            let types: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
            println!("  {:<60} {}", d.shown, types.join(", "));
        }
    }
    if args.verbose {
        println!(
            "\nfindings with confidence >= {:.2}:",
            default.min_confidence
        );
        for d in &documents {
            for f in d
                .findings
                .iter()
                .filter(|f| f.confidence >= default.min_confidence)
            {
                println!(
                    "  {} p{} {} {:.2} {:?}",
                    d.shown, f.page, f.kind, f.confidence, f.text
                );
            }
        }
    }
    Ok(all_pages)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().skip(s.chars().count() - n).collect()
    }
}

fn throughput(detector: &Detector, texts: &[String], runs: usize) {
    let bytes: usize = texts.iter().map(String::len).sum();
    let pages: Vec<(u32, &str)> = texts.iter().map(|t| (1, t.as_str())).collect();
    let mut rates = Vec::with_capacity(runs);
    let mut findings = 0;
    for _ in 0..runs {
        let started = Instant::now();
        findings = detector.detect(&pages).len();
        let seconds = started.elapsed().as_secs_f64();
        rates.push(bytes as f64 / 1e6 / seconds.max(1e-9));
    }
    println!(
        "\nthroughput: {:.1} MB/s (median of {runs} runs over {:.1} MB of text in {} pages, {findings} findings)",
        median(&mut rates),
        bytes as f64 / 1e6,
        texts.len()
    );
}
