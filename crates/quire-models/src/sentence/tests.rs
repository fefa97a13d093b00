use std::path::Path;

use super::*;
use crate::local::{Engine, EngineOptions, LocalEmbedder};
use crate::onnx::tests::{HIDDEN, VOCAB, tiny_bert};
use crate::token_count::tests::tiny_tokenizer;

/// Three tokens of width 2, as rows: (1, 0), (3, 4), (0, -2).
const ROWS: [f32; 6] = [1.0, 0.0, 3.0, 4.0, 0.0, -2.0];

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

fn pooled(modes: &[PoolingMode], include_prompt: bool, prompt_tokens: usize) -> Vec<f32> {
    let settings = SentenceSettings {
        pooling: modes.to_vec(),
        include_prompt,
        ..SentenceSettings::default()
    };
    settings.pool(&ROWS, 2, prompt_tokens)
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
}

#[test]
fn each_pooling_mode_reads_the_token_states_as_sentence_transformers_does() {
    use PoolingMode::*;
    let cases: [(PoolingMode, [f32; 2]); 6] = [
        (Cls, [1.0, 0.0]),
        (LastToken, [0.0, -2.0]),
        (Max, [3.0, 4.0]),
        (Mean, [4.0 / 3.0, 2.0 / 3.0]),
        // The same direction as the mean once normalised; it differs when concatenated.
        (MeanSqrtLen, [4.0 / 3f32.sqrt(), 2.0 / 3f32.sqrt()]),
        // Weights 1, 2, 3 by position: (1·1 + 2·3 + 3·0, 1·0 + 2·4 − 3·2) / 6.
        (WeightedMean, [7.0 / 6.0, 2.0 / 6.0]),
    ];
    for (mode, expected) in cases {
        let got = pooled(&[mode], true, 0);
        assert!(close(&got, &unit(&expected)), "{mode:?}: {got:?}");
    }
}

#[test]
fn several_modes_are_concatenated_in_sentence_transformers_order_then_normalised() {
    let got = pooled(&[PoolingMode::Cls, PoolingMode::MeanSqrtLen], true, 0);
    let raw = [1.0, 0.0, 4.0 / 3f32.sqrt(), 2.0 / 3f32.sqrt()];
    assert!(close(&got, &unit(&raw)), "{got:?}");
    let settings = SentenceSettings {
        pooling: vec![PoolingMode::Cls, PoolingMode::Mean],
        ..SentenceSettings::default()
    };
    assert_eq!(settings.dimensions(384), 768);
}

#[test]
fn a_prompt_left_out_of_the_pooling_is_left_out_of_every_mode_but_cls_and_last() {
    // The first token ([CLS] standing in for `[CLS]` + prompt) is masked.
    let mean = pooled(&[PoolingMode::Mean], false, 1);
    assert!(close(&mean, &unit(&[1.5, 1.0])), "{mean:?}");
    let max = pooled(&[PoolingMode::Max], false, 2);
    assert!(close(&max, &unit(&[0.0, -2.0])), "{max:?}");
    // Weighted positions keep counting from the sequence's start.
    let weighted = pooled(&[PoolingMode::WeightedMean], false, 1);
    assert!(
        close(&weighted, &unit(&[6.0 / 5.0, 2.0 / 5.0])),
        "{weighted:?}"
    );
    assert!(close(&pooled(&[PoolingMode::Cls], false, 2), &[1.0, 0.0]));
    // With the prompt included, nothing is masked whatever its length.
    assert!(close(
        &pooled(&[PoolingMode::Mean], true, 2),
        &pooled(&[PoolingMode::Mean], true, 0)
    ));
}

fn write(dir: &Path, name: &str, json: serde_json::Value) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, json.to_string()).unwrap();
}

fn modules(dir: &Path, kinds: &[(&str, &str)]) {
    let list: Vec<serde_json::Value> = kinds
        .iter()
        .enumerate()
        .map(|(i, (path, kind))| {
            serde_json::json!({"idx": i, "name": i.to_string(), "path": path,
                "type": format!("sentence_transformers.models.{kind}")})
        })
        .collect();
    write(dir, "modules.json", serde_json::Value::Array(list));
}

fn pooling_config(dir: &Path, modes: &[&str], include_prompt: bool) {
    let mut config = serde_json::json!({"word_embedding_dimension": 384,
        "include_prompt": include_prompt});
    for mode in modes {
        config[format!("pooling_mode_{mode}")] = true.into();
    }
    write(dir, "1_Pooling/config.json", config);
}

#[test]
fn a_bge_style_directory_gives_cls_pooling_and_a_query_instruction() {
    let dir = tempfile::tempdir().unwrap();
    modules(
        dir.path(),
        &[
            ("", "Transformer"),
            ("1_Pooling", "Pooling"),
            ("2_Normalize", "Normalize"),
        ],
    );
    pooling_config(dir.path(), &["cls_token"], true);
    write(
        dir.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {"query": "Represent this sentence for searching relevant passages: ",
            "document": ""}, "default_prompt_name": null, "similarity_fn_name": "cosine"}),
    );
    write(
        dir.path(),
        "sentence_bert_config.json",
        serde_json::json!({"max_seq_length": 512, "do_lower_case": true}),
    );
    let settings = SentenceSettings::load(dir.path()).unwrap();
    assert_eq!(settings.pooling, [PoolingMode::Cls]);
    assert!(settings.normalize && settings.lower_case && settings.include_prompt);
    assert_eq!(settings.max_seq_length, Some(512));
    assert_eq!(
        settings.prompt(Purpose::Query),
        "Represent this sentence for searching relevant passages: "
    );
    assert_eq!(settings.prompt(Purpose::Document), "");
    assert!(!settings.is_default());
}

#[test]
fn e5_style_passage_prompts_and_a_default_prompt_are_found() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {"query": "query: ", "passage": "passage: "}}),
    );
    let settings = SentenceSettings::load(dir.path()).unwrap();
    assert_eq!(settings.prompt(Purpose::Document), "passage: ");
    assert_eq!(settings.prompt(Purpose::Query), "query: ");
    // A default prompt covers the purposes without one of their own.
    write(
        dir.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {"query": "q: ", "all": "text: "},
            "default_prompt_name": "all"}),
    );
    let settings = SentenceSettings::load(dir.path()).unwrap();
    assert_eq!(settings.prompt(Purpose::Document), "text: ");
    assert_eq!(settings.prompt(Purpose::Query), "q: ");
}

#[test]
fn a_directory_without_sentence_transformers_files_is_read_as_minilm() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SentenceSettings::load(dir.path()).unwrap();
    assert_eq!(settings, SentenceSettings::default());
    assert!(settings.is_default());
    // all-MiniLM-L6-v2's own files say the same (its window aside).
    modules(
        dir.path(),
        &[
            ("", "Transformer"),
            ("1_Pooling", "Pooling"),
            ("2_Normalize", "Normalize"),
        ],
    );
    pooling_config(dir.path(), &["mean_tokens"], true);
    write(
        dir.path(),
        "sentence_bert_config.json",
        serde_json::json!({"max_seq_length": 256, "do_lower_case": false}),
    );
    write(
        dir.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {}, "default_prompt_name": null}),
    );
    assert!(SentenceSettings::load(dir.path()).unwrap().is_default());
}

#[test]
fn what_the_engines_cannot_run_is_refused_by_name() {
    let refused = |setup: &dyn Fn(&Path)| -> String {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        SentenceSettings::load(dir.path()).unwrap_err().to_string()
    };
    let dense = refused(&|dir| {
        modules(
            dir,
            &[
                ("", "Transformer"),
                ("1_Pooling", "Pooling"),
                ("2_Dense", "Dense"),
            ],
        );
        pooling_config(dir, &["mean_tokens"], true);
    });
    assert!(
        dense.contains("sentence_transformers.models.Dense"),
        "{dense}"
    );
    let no_pooling = refused(&|dir| modules(dir, &[("", "Transformer")]));
    assert!(no_pooling.contains("no Pooling module"), "{no_pooling}");
    let no_mode = refused(&|dir| {
        modules(dir, &[("", "Transformer"), ("1_Pooling", "Pooling")]);
        pooling_config(dir, &[], true);
    });
    assert!(no_mode.contains("no pooling mode"), "{no_mode}");
    let dot = refused(&|dir| {
        modules(dir, &[("", "Transformer"), ("1_Pooling", "Pooling")]);
        pooling_config(dir, &["cls_token"], true);
        write(
            dir,
            "config_sentence_transformers.json",
            serde_json::json!({"similarity_fn_name": "dot"}),
        );
    });
    assert!(dot.contains("by dot without normalising"), "{dot}");
    let unknown_default = refused(&|dir| {
        write(
            dir,
            "config_sentence_transformers.json",
            serde_json::json!({"prompts": {"query": "q: "}, "default_prompt_name": "web"}),
        );
    });
    assert!(unknown_default.contains("\"web\""), "{unknown_default}");
}

/// A tiny random BERT as a model directory: weights, `config.json` and a vocabulary.
fn tiny_model(dir: &Path) {
    tiny_bert(dir);
    write(
        dir,
        "config.json",
        serde_json::json!({"hidden_size": HIDDEN, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 256,
            "max_position_embeddings": 32, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}),
    );
    let mut vocab = vec![
        "[PAD]".to_owned(),
        "[UNK]".into(),
        "[CLS]".into(),
        "[SEP]".into(),
    ];
    vocab.extend(["q", ":", "pumps", "prime", "valves", "seal"].map(String::from));
    while vocab.len() < VOCAB {
        vocab.push(format!("w{}", vocab.len()));
    }
    std::fs::write(dir.join("vocab.txt"), vocab.join("\n")).unwrap();
}

fn candle(dir: &Path) -> LocalEmbedder {
    LocalEmbedder::load_with(
        dir,
        &EngineOptions {
            engine: Engine::Candle,
            ..EngineOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn the_embedder_pools_prompts_and_names_models_by_their_settings() {
    let plain = tempfile::tempdir().unwrap();
    tiny_model(plain.path());
    let mean = candle(plain.path());

    let configured = tempfile::tempdir().unwrap();
    tiny_model(configured.path());
    modules(
        configured.path(),
        &[
            ("", "Transformer"),
            ("1_Pooling", "Pooling"),
            ("2_Normalize", "Normalize"),
        ],
    );
    pooling_config(configured.path(), &["cls_token", "mean_tokens"], true);
    write(
        configured.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {"query": "q: "}}),
    );
    let bge_like = candle(configured.path());

    // The same weights read another way are another model, twice as wide here.
    assert_ne!(mean.model_id(), bge_like.model_id());
    // Defaults keep the id earlier versions gave (no re-embedding on upgrade); other settings
    // add a digest of themselves.
    assert!(!mean.model_id().contains('+'), "{}", mean.model_id());
    let (_, digest) = bge_like.model_id().rsplit_once('+').unwrap();
    assert!(digest.len() == 8 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(bge_like.dimensions(), 2 * HIDDEN);
    let text = "pumps prime valves";
    let plain_vector = &mean.embed_for(&[text], Purpose::Query).unwrap()[0];
    let document = &bge_like.embed_for(&[text], Purpose::Document).unwrap()[0];
    assert_eq!(document.len(), 2 * HIDDEN);
    // The mean half of the concatenation is the plain model's vector, scaled.
    let mean_half = unit(&document[HIDDEN..]);
    assert!(close(&mean_half, plain_vector), "the mean half differs");
    // A query is the document embedding of the prompt followed by the text.
    let query = &bge_like.embed_for(&[text], Purpose::Query).unwrap()[0];
    let prompted = &bge_like
        .embed_for(&["q: pumps prime valves"], Purpose::Document)
        .unwrap()[0];
    assert!(close(query, prompted));
    assert!(!close(query, document));
}

#[test]
fn a_prompt_left_out_of_the_pooling_changes_only_what_is_pooled() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    modules(
        dir.path(),
        &[
            ("", "Transformer"),
            ("1_Pooling", "Pooling"),
            ("2_Normalize", "Normalize"),
        ],
    );
    write(
        dir.path(),
        "config_sentence_transformers.json",
        serde_json::json!({"prompts": {"query": "q: "}}),
    );
    pooling_config(dir.path(), &["mean_tokens"], true);
    let included = candle(dir.path());
    pooling_config(dir.path(), &["mean_tokens"], false);
    let excluded = candle(dir.path());
    assert_ne!(included.model_id(), excluded.model_id());
    let text = ["pumps prime"];
    // Documents have no prompt: excluding it changes nothing.
    assert!(close(
        &included.embed_for(&text, Purpose::Document).unwrap()[0],
        &excluded.embed_for(&text, Purpose::Document).unwrap()[0]
    ));
    // Queries: `[CLS]`, `q` and `:` are left out of the mean, so the vectors differ.
    assert!(!close(
        &included.embed_for(&text, Purpose::Query).unwrap()[0],
        &excluded.embed_for(&text, Purpose::Query).unwrap()[0]
    ));
}

#[test]
fn architectures_other_than_bert_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    for (field, value, expected) in [
        ("model_type", "mpnet", "model_type \"mpnet\""),
        (
            "position_embedding_type",
            "rotary",
            "\"rotary\" (only absolute)",
        ),
    ] {
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).unwrap())
                .unwrap();
        config[field] = value.into();
        write(dir.path(), "config.json", config.clone());
        let error = LocalEmbedder::load_with(
            dir.path(),
            &EngineOptions {
                engine: Engine::Candle,
                ..EngineOptions::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(expected), "{error}");
        config[field] = if field == "model_type" {
            "bert"
        } else {
            "absolute"
        }
        .into();
        write(dir.path(), "config.json", config);
    }
    // Spelled out as BERT's own values, they load.
    candle(dir.path());
}

#[test]
fn the_models_own_tokenizer_json_is_used_with_the_window_of_the_model() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    // Only `tokenizer.json`: its truncation at 4 and padding to 16 are replaced by the
    // model's window (32 positions here) and no padding.
    std::fs::remove_file(dir.path().join("vocab.txt")).unwrap();
    tiny_tokenizer(dir.path());
    let embedder = candle(dir.path());
    // [CLS] the pump ##s . [SEP], lower-cased by the file's own normaliser.
    assert_eq!(
        embedder.token_ids("The PUMPS.").unwrap(),
        [2, 7, 4, 6, 8, 3]
    );
    let long = embedder.token_ids(&"valve ".repeat(40)).unwrap();
    assert_eq!(long.len(), 32);
    assert_eq!((long[0], long[31]), (2, 3));
    assert_eq!(embedder.embed(&["the pumps"]).unwrap()[0].len(), HIDDEN);
}
