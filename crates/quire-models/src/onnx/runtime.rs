//! The encoder on ONNX Runtime, loaded at run time from a shared library (nothing is linked
//! or downloaded at build time), running the graph [`super::graph`] writes from the model
//! directory's weights.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::Session;
use ort::session::builder::SessionBuilder;
use ort::value::Tensor;

use super::graph::{Linear, bert_model};
use super::pool::Pool;
use crate::ModelError;
use crate::bert::BertConfig;

/// The encoder's sessions. ONNX Runtime runs one call at a time per session here (its own
/// threads parallelise inside the call), so a call takes a free session, or, when all are
/// busy, waits its turn for the first one given back ([`Pool`]).
///
/// Why several: ingest workers each embed their own document. With one session holding every
/// core, they took turns. A session per worker, the cores shared among them, lets them embed
/// side by side; the gain, the memory each session costs and the unchanged latency of a lone
/// query are measured in `docs/performance.md`, "One session per worker".
pub(crate) struct OnnxEncoder {
    sessions: Pool<Session>,
    /// The fewest and the most threads of a session.
    threads: (usize, usize),
    library: PathBuf,
    linear: Linear,
}

impl std::fmt::Debug for OnnxEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEncoder")
            .field("library", &self.library)
            .field("linear", &self.linear)
            .finish_non_exhaustive()
    }
}

/// ONNX Runtime allows one environment per process, and a process can load only one copy of
/// the library: the first library that loads is the one every session uses. A library that
/// fails to load is not remembered, so a later call may name a good one.
static ENVIRONMENT: Mutex<Option<(&'static ort::environment::Environment, PathBuf)>> =
    Mutex::new(None);

pub(super) fn environment(
    library: &Path,
) -> Result<&'static ort::environment::Environment, ModelError> {
    let mut loaded = ENVIRONMENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((environment, first)) = loaded.as_ref() {
        return if same_file(first, library) {
            Ok(environment)
        } else {
            Err(ModelError::Unsupported(format!(
                "ONNX Runtime is already loaded from {}; one process cannot also load {}",
                first.display(),
                library.display()
            )))
        };
    }
    if !library.is_file() {
        return Err(ModelError::Unsupported(format!(
            "no ONNX Runtime library at {}",
            library.display()
        )));
    }
    let failed = |reason: String| {
        ModelError::Unsupported(format!(
            "could not load ONNX Runtime from {}: {reason}",
            library.display()
        ))
    };
    let environment = ort::init_from(library)
        .map_err(|e| failed(e.to_string()))?
        .with_name("quire")
        .build()
        .map_err(|e| failed(e.to_string()))?;
    // Lives as long as the process, like the library it came from.
    let environment: &'static _ = Box::leak(Box::new(environment));
    *loaded = Some((environment, library.to_owned()));
    Ok(environment)
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The threads of each of `sessions` sessions (at least one, at most one per core: more would
/// only make their threads take turns on the cores) sharing `cores` cores: every core goes to
/// a session, the first ones getting one more where the cores do not divide evenly (3 sessions
/// on 8 cores: 3, 3 and 2).
fn threads_per_session(cores: usize, sessions: usize) -> Vec<usize> {
    let cores = cores.max(1);
    let sessions = sessions.clamp(1, cores);
    (0..sessions)
        .map(|i| cores / sessions + usize::from(i < cores % sessions))
        .collect()
}

/// Graph fusions the sessions leave out. ONNX Runtime fuses each residual `Add` and the
/// `LayerNormalization` after it into its `SkipLayerNormalization` kernel; ONNX Runtime 1.32's
/// profiler put that kernel at a quarter of a forward pass, the unfused pair at 5 %. Without
/// the fusion, `quire bench embed` embeds 1.23 times as many int8 chunks a second. See
/// docs/performance.md, "The encoder's operators and sequences per pass".
pub(super) const UNFUSED: &str = "SkipLayerNormFusion";

/// A session for the serialized model `model` on the library `library`, with `threads` threads
/// of its own.
pub(super) fn session(library: &Path, model: &[u8], threads: usize) -> Result<Session, ModelError> {
    builder(library, threads)?
        .commit_from_memory(model)
        .map_err(|e| ModelError::Unsupported(format!("ONNX Runtime: {e}")))
}

/// The options of every session: `threads` threads of its own, no spinning, and the fusions
/// in [`UNFUSED`] left out.
pub(super) fn builder(library: &Path, threads: usize) -> Result<SessionBuilder, ModelError> {
    let environment = environment(library)?;
    let failed = |e: ort::Error| ModelError::Unsupported(format!("ONNX Runtime: {e}"));
    Session::builder(environment)
        .map_err(failed)?
        .with_intra_threads(threads)
        .map_err(|e| failed(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| failed(e.into()))?
        // Spinning threads win a little latency on an idle machine and burn a core on a
        // busy one, next to the search index and the HTTP server.
        .with_intra_op_spinning(false)
        .map_err(|e| failed(e.into()))?
        .with_disabled_optimizers(UNFUSED)
        .map_err(|e| failed(e.into()))
}

impl OnnxEncoder {
    /// Loads ONNX Runtime from `library` and builds `sessions` sessions (at least one, at most
    /// one per core) for the encoder in `weights`, its linear layers computed as `linear` says.
    /// The machine's cores are shared among the sessions.
    pub(crate) fn load(
        library: &Path,
        weights: &Path,
        config: &BertConfig,
        linear: Linear,
        sessions: usize,
    ) -> Result<Self, ModelError> {
        // The library first: a missing library is the likelier and cheaper error.
        environment(library)?;
        let model = bert_model(weights, config, linear)?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = threads_per_session(cores, sessions);
        Ok(Self {
            sessions: Pool::new(
                threads
                    .iter()
                    .map(|&threads| session(library, &model, threads))
                    .collect::<Result<_, _>>()?,
            ),
            threads: (threads[threads.len() - 1], threads[0]),
            library: library.to_owned(),
            linear,
        })
    }

    /// How many sessions run calls side by side.
    pub(crate) fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// The fewest and the most threads a session computes a call with (the same unless the
    /// cores do not divide among the sessions).
    pub(crate) fn threads(&self) -> (usize, usize) {
        self.threads
    }

    /// How the session computes the linear layers.
    pub(crate) fn linear(&self) -> Linear {
        self.linear
    }

    /// The library the session runs on.
    pub(crate) fn library(&self) -> &Path {
        &self.library
    }

    /// The last layer's token states of each sequence (its real tokens' rows, padding left
    /// out), run as one padded batch.
    pub(crate) fn token_states(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if sequences.is_empty() {
            return Ok(Vec::new());
        }
        let batch = sequences.len();
        let len = sequences.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(batch * len);
        let mut bias = Vec::with_capacity(batch * len);
        for sequence in sequences {
            ids.extend(sequence.iter().map(|&id| i64::from(id)));
            ids.extend(std::iter::repeat_n(0, len - sequence.len()));
            bias.extend(std::iter::repeat_n(0f32, sequence.len()));
            bias.extend(std::iter::repeat_n(-1e9f32, len - sequence.len()));
        }
        let positions: Vec<i64> = (0..len as i64).collect();
        let failed = |e: ort::Error| ModelError::Inference(format!("ONNX Runtime: {e}"));
        let inputs = ort::inputs![
            "input_ids" => Tensor::from_array(([batch as i64, len as i64], ids)).map_err(failed)?,
            "position_ids" => Tensor::from_array(([len as i64], positions)).map_err(failed)?,
            "attention_bias" => Tensor::from_array(([batch as i64, 1, 1, len as i64], bias)).map_err(failed)?,
        ];
        let mut session = self.sessions.take();
        let outputs = session.run(inputs).map_err(failed)?;
        let (_, hidden_states) = outputs["last_hidden_state"]
            .try_extract_tensor::<f32>()
            .map_err(failed)?;
        let width = hidden_states.len() / (batch * len);
        Ok(sequences
            .iter()
            .enumerate()
            .map(|(b, sequence)| {
                hidden_states[b * len * width..(b * len + sequence.len()) * width].to_vec()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::threads_per_session;

    #[test]
    fn every_core_goes_to_a_session() {
        assert_eq!(threads_per_session(2, 2), [1, 1]);
        assert_eq!(
            threads_per_session(2, 3),
            [1, 1],
            "at most a session per core"
        );
        assert_eq!(threads_per_session(8, 3), [3, 3, 2]);
        assert_eq!(threads_per_session(4, 3), [2, 1, 1]);
        assert_eq!(threads_per_session(8, 2), [4, 4]);
        assert_eq!(threads_per_session(1, 0), [1], "at least one session");
    }
}
