//! Compares inference engines for the local embedder (all-MiniLM-L6-v2) on this machine:
//! candle (the product's own forward pass in `quire-models`), ONNX Runtime through `ort`
//! (the shared library loaded at run time) and tract, the last two on an ONNX export of the
//! same weights (`scripts/dev/export-onnx.py`).
//!
//! Every engine gets the same token ids (the product's tokenizer) and, for the ONNX engines,
//! the same pooling (masked mean, L2 normalisation, here in Rust). Per engine it reports:
//! agreement with the sentence-transformers reference vectors (minimum cosine over the 24
//! sentences, embedded both in batches of 4 and one at a time), chunks/second over SciFact
//! abstracts in batches of 1, 4 and 16 sequences sorted by length, and single-query latency
//! (p50, p99). Rounds are interleaved across engines so that all share the machine's
//! conditions; the report gives the median of the rounds.
//!
//! ```text
//! embed-bench --model-dir DIR --onnx FILE --ort-lib LIB --reference JSON
//!             --corpus corpus.jsonl --queries queries.jsonl
//!             [--chunks 200] [--query-count 300] [--rounds 3] [--threads 2]
//!             [--engines candle,ort,ort-nospin,tract]
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, anyhow, bail, ensure};
use quire_models::LocalEmbedder;

/// Batch sizes of the throughput measurement; 4 is the product's.
const BATCHES: [usize; 3] = [1, 4, 16];

fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let started = Instant::now();
    let embedder = LocalEmbedder::load(&args.model_dir)
        .with_context(|| format!("could not load {}", args.model_dir.display()))?;
    let candle_load = started.elapsed().as_secs_f64();

    let reference = load_reference(&args.reference)?;
    let chunks = load_jsonl(&args.corpus, args.chunks, |doc| {
        format!(
            "{}\n\n{}",
            doc["title"].as_str().unwrap_or(""),
            doc["text"].as_str().unwrap_or("")
        )
    })?;
    let queries = load_jsonl(&args.queries, args.query_count, |q| {
        q["text"].as_str().unwrap_or("").to_owned()
    })?;
    let mismatched = reference
        .iter()
        .filter(|case| {
            let ours: Vec<i64> = embedder
                .token_ids(&case.text)
                .iter()
                .map(|&t| t as i64)
                .collect();
            ours != case.token_ids
        })
        .count();
    let chunk_tokens: usize = chunks.iter().map(|c| embedder.token_ids(c).len()).sum();
    let query_tokens: usize = queries.iter().map(|q| embedder.token_ids(q).len()).sum();
    println!(
        "{} reference sentences ({} token sequences differ from the reference), {} chunks \
         ({:.1} tokens on average), {} queries ({:.1} tokens), {} rounds, {} threads for ort and tract",
        reference.len(),
        mismatched,
        chunks.len(),
        chunk_tokens as f64 / chunks.len() as f64,
        queries.len(),
        query_tokens as f64 / queries.len() as f64,
        args.rounds,
        args.threads
    );

    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    let mut failures: Vec<(String, String)> = Vec::new();
    for name in &args.engines {
        let started = Instant::now();
        let engine: anyhow::Result<Box<dyn Engine>> = match name.as_str() {
            "candle" => Ok(Box::new(Candle(embedder.clone())) as Box<dyn Engine>),
            "ort" => Ort::load(&args, &embedder, true).map(|e| Box::new(e) as Box<dyn Engine>),
            "ort-nospin" => {
                Ort::load(&args, &embedder, false).map(|e| Box::new(e) as Box<dyn Engine>)
            }
            "tract" => Tract::load(&args, &embedder).map(|e| Box::new(e) as Box<dyn Engine>),
            other => Err(anyhow!("unknown engine {other}")),
        };
        match engine {
            Ok(engine) => {
                let seconds = match name.as_str() {
                    "candle" => candle_load,
                    _ => started.elapsed().as_secs_f64(),
                };
                println!("{name}: loaded in {seconds:.2} s");
                engines.push(engine);
            }
            Err(e) => {
                println!("{name}: FAILED to load: {e:#}");
                failures.push((name.clone(), format!("{e:#}")));
            }
        }
    }

    let chunk_refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
    // Agreement, and a warm-up of every engine at every batch size.
    let texts: Vec<&str> = reference.iter().map(|c| c.text.as_str()).collect();
    let mut agreement: HashMap<String, (f64, f64)> = HashMap::new();
    let mut broken = Vec::new();
    for (i, engine) in engines.iter_mut().enumerate() {
        let result = (|| -> anyhow::Result<(f64, f64)> {
            let batched = engine.embed(&texts, 4)?;
            let single = engine.embed(&texts, 1)?;
            let cos = |vectors: &[Vec<f32>]| {
                reference
                    .iter()
                    .zip(vectors)
                    .map(|(case, v)| cosine(&case.embedding, v))
                    .fold(f64::INFINITY, f64::min)
            };
            for &batch in &BATCHES {
                engine.embed(&chunk_refs[..chunk_refs.len().min(2 * batch)], batch)?;
            }
            Ok((cos(&batched), cos(&single)))
        })();
        match result {
            Ok(values) => {
                println!(
                    "{}: min cosine vs the reference {:.9} in batches of 4, {:.9} one at a time \
                     (1 - cos at most {:.1e})",
                    engine.name(),
                    values.0,
                    values.1,
                    1.0 - values.0.min(values.1)
                );
                agreement.insert(engine.name().to_owned(), values);
            }
            Err(e) => {
                println!("{}: FAILED to run: {e:#}", engine.name());
                failures.push((engine.name().to_owned(), format!("{e:#}")));
                broken.push(i);
            }
        }
    }
    for i in broken.into_iter().rev() {
        engines.remove(i);
    }

    let query_refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    // rates[engine][batch index] and latencies[engine] (p50, p99), one entry per round.
    let mut rates: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); BATCHES.len()]; engines.len()];
    let mut latencies: Vec<Vec<(f64, f64)>> = vec![Vec::new(); engines.len()];
    for round in 0..args.rounds {
        for (e, engine) in engines.iter_mut().enumerate() {
            for (b, &batch) in BATCHES.iter().enumerate() {
                let started = Instant::now();
                let out = engine.embed(&chunk_refs, batch)?;
                let seconds = started.elapsed().as_secs_f64();
                ensure!(out.len() == chunk_refs.len(), "wrong number of vectors");
                rates[e][b].push(chunk_refs.len() as f64 / seconds);
            }
            let mut times: Vec<f64> = Vec::with_capacity(query_refs.len());
            for query in &query_refs {
                let started = Instant::now();
                let out = engine.embed(std::slice::from_ref(query), 1)?;
                times.push(started.elapsed().as_secs_f64() * 1e3);
                std::hint::black_box(out);
            }
            times.sort_by(f64::total_cmp);
            latencies[e].push((percentile(&times, 0.50), percentile(&times, 0.99)));
            println!(
                "round {}: {:<6} chunks/s {} | query p50 {:.2} ms p99 {:.2} ms",
                round + 1,
                engine.name(),
                BATCHES
                    .iter()
                    .enumerate()
                    .map(|(b, batch)| format!("b{batch} {:.1}", rates[e][b][round]))
                    .collect::<Vec<_>>()
                    .join(", "),
                latencies[e][round].0,
                latencies[e][round].1
            );
        }
    }

    println!();
    println!(
        "| engine | min cosine (batch 4 / batch 1) | chunks/s batch 1 | batch 4 | batch 16 | query p50 / p99 ms |"
    );
    println!("|---|---|---|---|---|---|");
    for (e, engine) in engines.iter().enumerate() {
        let (batched, single) = agreement[engine.name()];
        let p50 = median(latencies[e].iter().map(|l| l.0).collect());
        let p99 = median(latencies[e].iter().map(|l| l.1).collect());
        let rate = |b: usize| median(rates[e][b].clone());
        println!(
            "| {} | {:.7} / {:.7} | {:.1} | {:.1} | {:.1} | {:.2} / {:.2} |",
            engine.name(),
            batched,
            single,
            rate(0),
            rate(1),
            rate(2),
            p50,
            p99
        );
    }
    for (name, error) in &failures {
        println!("| {name} | failed: {error} | | | | |");
    }
    println!(
        "(median of {} rounds; {} chunks, {} queries)",
        args.rounds,
        chunks.len(),
        queries.len()
    );
    Ok(())
}

/// An inference engine: texts in, unit-length vectors out, in order, run in batches of at
/// most `batch` sequences of similar length.
trait Engine {
    fn name(&self) -> &str;
    fn embed(&mut self, texts: &[&str], batch: usize) -> anyhow::Result<Vec<Vec<f32>>>;
}

/// The product's embedder. Its `embed` sorts by length and runs batches of 4; a batch of one
/// is one call per text. Larger batches are not reachable through its public interface, so
/// "batch 16" for candle is 16 texts per call, run internally as 4 batches of 4.
struct Candle(LocalEmbedder);

impl Engine for Candle {
    fn name(&self) -> &str {
        "candle"
    }

    fn embed(&mut self, texts: &[&str], batch: usize) -> anyhow::Result<Vec<Vec<f32>>> {
        if batch == 4 {
            return Ok(self.0.embed(texts)?);
        }
        let mut sorted: Vec<usize> = (0..texts.len()).collect();
        sorted.sort_by_key(|&i| self.0.token_ids(texts[i]).len());
        let mut out = vec![Vec::new(); texts.len()];
        for group in sorted.chunks(batch) {
            let group_texts: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            for (&i, v) in group.iter().zip(self.0.embed(&group_texts)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// What an ONNX engine runs: one padded batch of token ids in, `last_hidden_state` out.
trait Encoder {
    fn name(&self) -> &str;
    fn tokenizer(&self) -> &LocalEmbedder;
    /// `[batch, len]` int64 inputs; returns `[batch, len, hidden]` flattened.
    fn hidden_states(
        &mut self,
        ids: Vec<i64>,
        mask: Vec<i64>,
        batch: usize,
        len: usize,
    ) -> anyhow::Result<Vec<f32>>;
}

impl<T: Encoder> Engine for T {
    fn name(&self) -> &str {
        Encoder::name(self)
    }

    /// As the product does: tokenize, sort by length, run groups of `batch`, then pool each
    /// sequence over its real tokens and normalise.
    fn embed(&mut self, texts: &[&str], batch: usize) -> anyhow::Result<Vec<Vec<f32>>> {
        let sequences: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokenizer().token_ids(t))
            .collect();
        let mut order: Vec<usize> = (0..sequences.len()).collect();
        order.sort_by_key(|&i| sequences[i].len());
        let mut out = vec![Vec::new(); sequences.len()];
        for group in order.chunks(batch.max(1)) {
            let len = group.iter().map(|&i| sequences[i].len()).max().unwrap_or(1);
            let (mut ids, mut mask) = (Vec::new(), Vec::new());
            for &i in group {
                let s = &sequences[i];
                ids.extend(s.iter().map(|&t| t as i64));
                ids.extend(std::iter::repeat_n(0, len - s.len()));
                mask.extend(std::iter::repeat_n(1, s.len()));
                mask.extend(std::iter::repeat_n(0, len - s.len()));
            }
            let hidden = self.hidden_states(ids, mask, group.len(), len)?;
            let width = hidden.len() / (group.len() * len);
            for (row, &i) in group.iter().enumerate() {
                let mut pooled = vec![0f32; width];
                let real = sequences[i].len();
                for token in 0..real {
                    let start = (row * len + token) * width;
                    for (p, h) in pooled.iter_mut().zip(&hidden[start..start + width]) {
                        *p += h;
                    }
                }
                pooled.iter_mut().for_each(|p| *p /= real as f32);
                quire_models::normalize(&mut pooled);
                out[i] = pooled;
            }
        }
        Ok(out)
    }
}

/// ONNX Runtime. Its intra-op threads spin while waiting for work by default, which is fast
/// on an idle machine and costly on a shared one; `ort-nospin` turns the spinning off.
struct Ort {
    name: &'static str,
    session: ort::session::Session,
    tokenizer: LocalEmbedder,
}

impl Ort {
    fn load(args: &Args, tokenizer: &LocalEmbedder, spin: bool) -> anyhow::Result<Self> {
        let library = args
            .ort_lib
            .clone()
            .or_else(|| std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from))
            .context("no ONNX Runtime library: pass --ort-lib or set ORT_DYLIB_PATH")?;
        let onnx = args.onnx.as_ref().context("--onnx is required for ort")?;
        // ONNX Runtime allows one environment per process: both ort engines share it.
        static ENVIRONMENT: std::sync::OnceLock<ort::environment::Environment> =
            std::sync::OnceLock::new();
        if ENVIRONMENT.get().is_none() {
            let environment = ort::init_from(&library)
                .with_context(|| format!("could not load {}", library.display()))?
                .with_name("embed-bench")
                .build()?;
            let _ = ENVIRONMENT.set(environment);
        }
        let environment = ENVIRONMENT.get().expect("set above");
        let session = ort::session::Session::builder(environment)?
            .with_intra_threads(args.threads)
            .map_err(ort::Error::<()>::from)?
            .with_inter_threads(1)
            .map_err(ort::Error::<()>::from)?
            .with_intra_op_spinning(spin)
            .map_err(ort::Error::<()>::from)?
            .commit_from_file(onnx)?;
        Ok(Self {
            name: if spin { "ort" } else { "ort-nospin" },
            session,
            tokenizer: tokenizer.clone(),
        })
    }
}

impl Encoder for Ort {
    fn name(&self) -> &str {
        self.name
    }

    fn tokenizer(&self) -> &LocalEmbedder {
        &self.tokenizer
    }

    fn hidden_states(
        &mut self,
        ids: Vec<i64>,
        mask: Vec<i64>,
        batch: usize,
        len: usize,
    ) -> anyhow::Result<Vec<f32>> {
        use ort::value::Tensor;
        let shape = [batch as i64, len as i64];
        let types = vec![0i64; batch * len];
        let outputs = self.session.run(ort::inputs![
            "input_ids" => Tensor::from_array((shape, ids))?,
            "attention_mask" => Tensor::from_array((shape, mask))?,
            "token_type_ids" => Tensor::from_array((shape, types))?,
        ])?;
        let (_, data) = outputs["last_hidden_state"].try_extract_tensor::<f32>()?;
        Ok(data.to_vec())
    }
}

type TractPlan = tract_onnx::prelude::TypedRunnableModel;

struct Tract {
    plan: std::sync::Arc<TractPlan>,
    tokenizer: LocalEmbedder,
}

impl Tract {
    fn load(args: &Args, tokenizer: &LocalEmbedder) -> anyhow::Result<Self> {
        use tract_onnx::prelude::*;
        let onnx = args.onnx.as_ref().context("--onnx is required for tract")?;
        let model = tract_onnx::onnx()
            .model_for_path(onnx)
            .map_err(|e| anyhow!("model_for_path: {e:?}"))?
            .into_optimized()
            .map_err(|e| anyhow!("into_optimized: {e:?}"))?;
        let options = RunOptions {
            executor: Some(multithread::Executor::multithread(args.threads)),
            ..Default::default()
        };
        let plan = model
            .into_runnable_with_options(&options)
            .map_err(|e| anyhow!("into_runnable: {e:?}"))?;
        Ok(Self {
            plan,
            tokenizer: tokenizer.clone(),
        })
    }
}

impl Encoder for Tract {
    fn name(&self) -> &str {
        "tract"
    }

    fn tokenizer(&self) -> &LocalEmbedder {
        &self.tokenizer
    }

    fn hidden_states(
        &mut self,
        ids: Vec<i64>,
        mask: Vec<i64>,
        batch: usize,
        len: usize,
    ) -> anyhow::Result<Vec<f32>> {
        use tract_onnx::prelude::*;
        let types = vec![0i64; batch * len];
        let tensor = |data: &[i64]| -> TractResult<TValue> {
            Ok(Tensor::from_shape(&[batch, len], data)?.into_tvalue())
        };
        let outputs = self
            .plan
            .run(tvec![tensor(&ids)?, tensor(&mask)?, tensor(&types)?])
            .map_err(|e| anyhow!("run: {e:?}"))?;
        let data = outputs[0].try_as_plain_ram()?.as_slice::<f32>()?.to_vec();
        Ok(data)
    }
}

struct Args {
    model_dir: PathBuf,
    onnx: Option<PathBuf>,
    ort_lib: Option<PathBuf>,
    reference: PathBuf,
    corpus: PathBuf,
    queries: PathBuf,
    chunks: usize,
    query_count: usize,
    rounds: usize,
    threads: usize,
    engines: Vec<String>,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut map: HashMap<String, String> = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(key) = args.next() {
            let Some(name) = key.strip_prefix("--") else {
                bail!("unexpected argument {key} (see the usage at the top of src/main.rs)");
            };
            let value = args
                .next()
                .with_context(|| format!("{key} needs a value"))?;
            map.insert(name.to_owned(), value);
        }
        let path = |name: &str| map.get(name).map(PathBuf::from);
        let required = |name: &str| path(name).with_context(|| format!("--{name} is required"));
        let number = |name: &str, default: usize| -> anyhow::Result<usize> {
            map.get(name).map_or(Ok(default), |v| {
                v.parse().with_context(|| format!("--{name}"))
            })
        };
        Ok(Self {
            model_dir: required("model-dir")?,
            onnx: path("onnx"),
            ort_lib: path("ort-lib"),
            reference: required("reference")?,
            corpus: required("corpus")?,
            queries: required("queries")?,
            chunks: number("chunks", 200)?,
            query_count: number("query-count", 300)?,
            rounds: number("rounds", 3)?.max(1),
            threads: number("threads", 2)?.max(1),
            engines: map
                .get("engines")
                .map_or("candle,ort,ort-nospin,tract", String::as_str)
                .split(',')
                .map(str::to_owned)
                .collect(),
        })
    }
}

struct Case {
    text: String,
    token_ids: Vec<i64>,
    embedding: Vec<f32>,
}

fn load_reference(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    json["cases"]
        .as_array()
        .context("no cases in the reference")?
        .iter()
        .map(|case| {
            Ok(Case {
                text: case["text"].as_str().context("text")?.to_owned(),
                token_ids: case["token_ids"]
                    .as_array()
                    .context("token_ids")?
                    .iter()
                    .map(|v| v.as_i64().unwrap_or(-1))
                    .collect(),
                embedding: case["embedding"]
                    .as_array()
                    .context("embedding")?
                    .iter()
                    .map(|v| v.as_f64().unwrap_or(f64::NAN) as f32)
                    .collect(),
            })
        })
        .collect()
}

fn load_jsonl(
    path: &Path,
    max: usize,
    text: impl Fn(&serde_json::Value) -> String,
) -> anyhow::Result<Vec<String>> {
    let data = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .take(max)
        .map(|line| Ok(text(&serde_json::from_str(line)?)))
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
