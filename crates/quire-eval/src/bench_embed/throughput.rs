//! What an embedding costs and what the machine can do: floating-point operations of one BERT
//! forward pass, and the measured single-precision matrix-multiply rate of the same tensor
//! library, so embedding throughput can be stated as a fraction of the hardware's reach. Only
//! `quire bench embed` needs them, so they live here rather than in quire-models.

use std::time::Instant;

use candle_core::{Device, Tensor};
use quire_models::BertConfig;

/// Floating-point operations (a multiply-add counts 2) of one forward pass over `tokens`
/// tokens: the four attention projections and the two feed-forward matrices (`24·L·H²` with a
/// 4H feed-forward) plus the attention scores and their weighted sum (`4·L²·H`), per layer.
pub(super) fn forward_flops(config: &BertConfig, tokens: usize) -> f64 {
    let (l, h) = (tokens as f64, config.hidden_size as f64);
    let intermediate = config.intermediate_size.unwrap_or(config.hidden_size * 4) as f64;
    let projections = 4.0 * 2.0 * l * h * h;
    let feed_forward = 2.0 * 2.0 * l * h * intermediate;
    let attention = 2.0 * 2.0 * l * l * h;
    config.num_hidden_layers as f64 * (projections + feed_forward + attention)
}

/// Measured rate of `[m, k] × [k, n]` single-precision products on the CPU, in GFLOP/s: the
/// median of `rounds` timings of `repeats` products each, after one warm-up.
pub(super) fn matmul_gflops(m: usize, k: usize, n: usize, repeats: usize, rounds: usize) -> f64 {
    let device = Device::Cpu;
    let a = Tensor::rand(0f32, 1f32, (m, k), &device).expect("a random matrix");
    let b = Tensor::rand(0f32, 1f32, (k, n), &device).expect("a random matrix");
    let _ = a.matmul(&b).expect("warm-up product");
    let flops = 2.0 * (m * k * n) as f64 * repeats as f64;
    let mut rates: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let started = Instant::now();
            for _ in 0..repeats {
                let _ = a.matmul(&b).expect("product");
            }
            flops / started.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}
