use super::*;

fn document(text: &str) -> DocumentWords {
    DocumentWords::of([text])
}

#[test]
fn a_name_or_number_the_document_lacks_leaves_no_support() {
    let passage = "The Normans gave their name to Normandy in the 10th and 11th centuries.";
    let words = document(passage);
    let swapped = Demands::of("Who gave their name to Normandy in the 1000's and 1100's?");
    assert!(!swapped.met_by(passage, passage, &words));
    let named = Demands::of("What did the Normans give their name to?");
    assert!(named.met_by(passage, passage, &words));
    let absent = Demands::of("What did the Vikings give their name to?");
    assert!(!absent.met_by(passage, passage, &words));
}

#[test]
fn names_forgive_a_typo_and_count_by_their_longest_word() {
    let passage = "Braddock led an expedition to take Fort Duquesne; Turing described the machine.";
    let words = document(passage);
    for question in [
        "What did Braddock lead the expedition to Fort Dusquesne for?",
        "What machine did Alan Turing describe?",
    ] {
        assert!(
            Demands::of(question).met_by(passage, passage, &words),
            "{question}"
        );
    }
    // Numbers are exact: 1755 is not 1756.
    let dated = Demands::of("What did Braddock take in 1756?");
    assert!(!dated.met_by(passage, passage, &document(&format!("{passage} in 1755"))));
}

#[test]
fn a_sentence_with_the_product_code_needs_no_brand_name() {
    let sentence = "The XR-200 is covered for 24 months from the date of purchase.";
    let demands = Demands::of("What warranty does Acme give on the XR-200?");
    assert!(demands.met_by(sentence, sentence, &document(sentence)));
    let other = "The XR-300 is covered for 12 months.";
    assert!(!demands.met_by(other, other, &document(other)));
    let no_code = Demands::of("What warranty does Acme give?");
    assert!(!no_code.met_by(sentence, sentence, &document(sentence)));
}

#[test]
fn accents_do_not_matter() {
    let passage = "Möngke Khan attacked the Song dynasty.";
    let demands = Demands::of("What did Mongke Khan attack?");
    assert!(demands.met_by(passage, passage, &document(passage)));
}

#[test]
fn a_negated_question_needs_a_negated_passage() {
    let plain = "The Normans adopted the Catholic faith.";
    let negated = "The Normans did not adopt the Catholic faith.";
    let demands = Demands::of("What faith did the Normans not adopt?");
    assert!(!demands.met_by(plain, plain, &document(plain)));
    assert!(demands.met_by(negated, negated, &document(negated)));
    let contracted = Demands::of("What faith didn't the Normans adopt?");
    assert!(!contracted.met_by(plain, plain, &document(plain)));
}

#[test]
fn the_sentence_must_hold_the_kind_of_answer_asked_for() {
    let words =
        document("Kublai founded the Yuan dynasty in 1271. Kublai was a grandson of Genghis Khan.");
    let when = Demands::of("When did Kublai found the Yuan dynasty?");
    assert!(when.met_by("Kublai founded the Yuan dynasty in 1271.", "", &words));
    assert!(!when.met_by("Kublai founded the Yuan dynasty.", "", &words));
    let how_many = Demands::of("How many dynasties did Kublai found?");
    assert!(!how_many.met_by("Kublai founded the Yuan dynasty.", "", &words));
    assert!(how_many.met_by("Kublai founded two dynasties.", "", &words));
    let who = Demands::of("Who was Kublai's grandfather?");
    assert!(who.met_by("Kublai was a grandson of Genghis Khan.", "", &words));
    assert!(!who.met_by("Kublai was the grandson of a great ruler.", "", &words));
    // A clause opening with "when" does not make the question ask for a time.
    let clause = Demands::of("When a pathogen is eaten, what vesicle traps it?");
    assert!(clause.met_by("It is trapped in a phagosome.", "", &document("phagosome")));
}

#[test]
fn word_lists_are_sorted_for_binary_search() {
    for list in [
        NEGATIONS,
        MONTHS,
        TIME_WORDS,
        NUMBER_WORDS,
        QUESTION_OPENINGS,
    ] {
        assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
    }
}

#[test]
fn abbreviations_are_not_required_and_a_name_counts_by_any_word() {
    let passage = "Harold Wilson's government supported the Israelis; the US and the UK agreed.";
    let words = document(passage);
    for question in [
        "Which country did Harold Winston's government support?",
        "What did the USA and the UK agree?",
    ] {
        assert!(
            Demands::of(question).met_by(passage, passage, &words),
            "{question}"
        );
    }
}

#[test]
fn numbers_are_compared_whole() {
    let passage =
        "Families with incomes below $60,000 pay nothing; in the 1990s, 1.5 million applied.";
    let words = document(passage);
    assert!(
        !Demands::of("What did families with incomes below $38,000 pay?")
            .met_by(passage, passage, &words)
    );
    assert!(
        Demands::of("What did families with incomes below 60000 dollars pay?")
            .met_by(passage, passage, &words)
    );
    assert!(Demands::of("What happened in the 1990's?").met_by(passage, passage, &words));
    assert_eq!(numbers("$38,000 and 1.5, then 7."), ["38000", "1.5", "7"]);
}

#[test]
fn a_sentence_saying_the_opposite_does_not_answer() {
    let sentence = "Neutrophils are the most abundant type of phagocyte.";
    let words = document(sentence);
    assert!(
        !Demands::of("What is the least abundant type of phagocyte?")
            .met_by(sentence, sentence, &words)
    );
    assert!(
        Demands::of("What is the most abundant type of phagocyte?")
            .met_by(sentence, sentence, &words)
    );
    let both = "The northern and the western Chinese were ranked higher.";
    assert!(
        Demands::of("Why were western Chinese ranked higher?").met_by(both, both, &document(both))
    );
}

#[test]
fn weighing_both_sides_is_not_a_negation() {
    let sentence = "Computability theory asks which problems can be solved by algorithms.";
    let demands = Demands::of("Which field asks whether or not a problem can be solved?");
    assert!(demands.met_by(sentence, sentence, &document(sentence)));
}

#[test]
fn words_of_one_root_and_ordinals_count_as_the_same() {
    let passage = "In September 1760, Governor Vaudreuil negotiated from Montreal. The Italian title was Il Milione; Genghis' third son was Ögedei.";
    let words = document(passage);
    for question in [
        "In Sept 1760 who negotiated from Montreal?",
        "What was the title of the book in Italy?",
        "What was the name of Genghis's 3rd son?",
    ] {
        assert!(
            Demands::of(question).met_by(passage, passage, &words),
            "{question}"
        );
    }
    assert!(!same_root("austria", "australia"));
}

#[test]
fn capitals_opening_a_sentence_of_the_question_are_not_names() {
    let passage = "Adobe's net cash provided by operating activities in fiscal 2015 rose.";
    let question = "You are an investment banker. Here's the question: what is the FY2015 \
                    operating cash flow ratio for Adobe? Operating cash flow ratio is defined as \
                    cash from operations / total current liabilities.";
    assert!(Demands::of(question).met_by(passage, passage, &document(passage)));
    let other_year = "Adobe's net cash provided by operating activities in fiscal 2014 rose.";
    assert!(!Demands::of(question).met_by(other_year, other_year, &document(other_year)));
}

#[test]
fn an_instruction_after_the_question_does_not_negate_it() {
    let sentence = "Operating margin improved to 15% in 2022.";
    let question = "Does AMEX have an improving operating margin as of 2022? If operating margin \
                    is not a useful metric, then state that and explain why.";
    assert!(Demands::of(question).met_by(sentence, sentence, &document(sentence)));
}

#[test]
fn a_statement_to_check_demands_nothing() {
    let evidence = "Aspirin did not lower the risk of stroke in 12 trials.";
    let claim = Demands::of("Aspirin raises the risk of stroke in 20% of patients.");
    assert_eq!(claim, Demands::default());
    assert!(claim.met_by(evidence, evidence, &document(evidence)));
    assert!(is_question("who founded the Yuan dynasty"));
    assert!(!is_question("The Yuan dynasty was founded by Kublai."));
}

#[test]
fn a_question_in_title_case_has_no_names_from_its_capitals() {
    let demands = Demands::of("What Is The Capital Of France");
    assert_eq!(demands.specifics.len(), 0);
}

#[test]
fn a_sentence_giving_another_figure_of_the_kind_asked_is_no_answer() {
    // The document says 1979 elsewhere; this sentence is about 1974.
    let document_text = "Prices rose again in 1979. By March 1974 the price had risen to $12.";
    let words = document(document_text);
    let demands = Demands::of("What did the price of oil rise to in 1979?");
    let other_year = "By March 1974 the price had risen to $12.";
    assert_eq!(
        demands.support(other_year, "", &words, &words),
        Support::Unfit
    );
    // A sentence without a year may be qualified by its heading, and a table row by its
    // table's header; a sentence that gives the year is fine.
    let undated = "The price had risen to $12 a barrel.";
    assert_eq!(
        demands.support(undated, "", &words, &words),
        Support::Supported
    );
    let row = "Average price | $12 | $31";
    assert_eq!(
        demands.support(
            row,
            "Year | 1974 | 1979\nAverage price | $12 | $31",
            &words,
            &words
        ),
        Support::Supported
    );
    // Numbers in words are of a kind too: a third source is not the fourth.
    let third = "A third possible source of antigens are mutated proteins.";
    let fourth = Demands::of("What is a fourth possible source of antigens?");
    assert_eq!(
        fourth.support(third, "", &document(third), &document(third)),
        Support::Unfit
    );
    let asked_third = Demands::of("What is a third possible source of antigens?");
    assert_eq!(
        asked_third.support(third, "", &document(third), &document(third)),
        Support::Supported
    );
}

#[test]
fn a_question_negated_by_a_prefix_is_not_answered_by_the_plain_word() {
    let approved = "Abercrombie refused to act until Loudoun approved the plans.";
    let demands = Demands::of("Who refused to act until Loudoun disapproved the plans?");
    assert!(!demands.met_by(approved, approved, &document(approved)));
    // A sentence that says it with a negation of its own may answer.
    let not_approved = "Abercrombie refused to act while Loudoun had not approved the plans.";
    assert!(demands.met_by(not_approved, not_approved, &document(not_approved)));
    // Short remainders are not prefixes: "under" is not "un-der".
    let under = Demands::of("Who served under Rollo?");
    let served = "The Normans served under Rollo.";
    assert!(under.met_by(served, served, &document(served)));
}

#[test]
fn before_is_not_after_and_new_is_not_old() {
    let after = "After the war the college admitted women.";
    let demands = Demands::of("What did the college do before the war?");
    assert!(!demands.met_by(after, after, &document(after)));
    let both = "Before and after the war the college admitted women.";
    assert!(demands.met_by(both, both, &document(both)));
}

#[test]
fn an_amount_is_not_a_year_and_one_of_several_years_is_enough() {
    let statement = "Consolidated net income 1,283 6,550 7,366";
    let words = document(&format!("The statements for 2017 follow. {statement}"));
    let asked = Demands::of("What was the net income in 2017?");
    // "1,283" is an amount, of another kind than the year asked: the row's column header
    // may well say 2017.
    assert_eq!(
        asked.support(statement, statement, &words, &words),
        Support::Supported
    );
    let other_year = "Net income in 2016 was 6,550.";
    assert_eq!(
        asked.support(other_year, "", &words, &words),
        Support::Unfit
    );
    // Of the years a question lists, a sentence tells of one.
    let listed = "On August 1, 2022, the Company completed the acquisition of a plant.";
    let words = document(&format!("{listed} In 2021 and 2023 it bought nothing."));
    let acquisitions = Demands::of("What acquisitions were made in 2021, 2022 and 2023?");
    assert_eq!(
        acquisitions.support(listed, "", &words, &words),
        Support::Supported
    );
    assert_eq!(
        acquisitions.support("In 2019 it sold a plant.", "", &words, &words),
        Support::Unfit
    );
}
