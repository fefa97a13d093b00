//! Fused CPU kernels for the passes candle would run as chains of small, single-threaded
//! operations: the bias, residual and LayerNorm after a projection (one pass instead of
//! ten allocating ones), the bias and exact GELU of the feed-forward block, and the attention
//! softmax (scale, padding mask, max, exp, sum and divide in one). With the matrix products
//! already near the hardware's rate, these passes were most of the rest of the forward pass.
//!
//! Every kernel works row by row, spreads the rows over rayon's pool (the one candle's matrix
//! products use, so the two never compete for cores) and keeps its inner loops free of
//! branches and pushes so the compiler vectorises them.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Rows handed to one rayon task: enough work (tens of microseconds) to amortise the
/// scheduling, few enough that both cores stay busy on a single short sequence.
const ROWS_PER_TASK: usize = 16;

/// `LayerNorm(x + bias + residual)` over the last dimension, with a learned scale and shift:
/// what follows each projection of a BERT layer. `x` is the projection's output without its
/// bias.
pub(crate) struct BiasResidualNormOp {
    pub(crate) bias: Vec<f32>,
    pub(crate) weight: Vec<f32>,
    pub(crate) shift: Vec<f32>,
    pub(crate) eps: f32,
}

impl CustomOp2 for BiasResidualNormOp {
    fn name(&self) -> &'static str {
        "quire-bias-residual-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(s1, l1)?;
        let residual = contiguous_f32(s2, l2)?;
        let width = self.weight.len();
        if x.len() != residual.len() || !x.len().is_multiple_of(width) {
            candle_core::bail!("bias, residual and norm: rows of {width} values expected");
        }
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(width)
            .zip(x.par_chunks(width).zip(residual.par_chunks(width)))
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(out, (x, residual))| {
                for ((o, (x, r)), b) in out.iter_mut().zip(x.iter().zip(residual)).zip(&self.bias) {
                    *o = x + b + r;
                }
                normalise_row(out, &self.weight, &self.shift, self.eps);
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// LayerNorm over the last dimension with a learned scale and shift.
pub(crate) struct LayerNormOp {
    pub(crate) weight: Vec<f32>,
    pub(crate) shift: Vec<f32>,
    pub(crate) eps: f32,
}

impl CustomOp1 for LayerNormOp {
    fn name(&self) -> &'static str {
        "quire-layer-norm"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let input = contiguous_f32(storage, layout)?;
        let width = self.weight.len();
        if !input.len().is_multiple_of(width) {
            candle_core::bail!("layer norm: rows of {width} values expected");
        }
        let mut out = input.to_vec();
        out.par_chunks_mut(width)
            .with_min_len(ROWS_PER_TASK)
            .for_each(|row| normalise_row(row, &self.weight, &self.shift, self.eps));
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// Normalises one row in place: zero mean, unit variance, then scale and shift.
fn normalise_row(row: &mut [f32], weight: &[f32], shift: &[f32], eps: f32) {
    let width = row.len() as f32;
    let mean = row.iter().sum::<f32>() / width;
    let variance = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / width;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((x, w), b) in row.iter_mut().zip(weight).zip(shift) {
        *x = (*x - mean) * inverse * w + b;
    }
}

/// `gelu(x + bias)` with the exact (erf-based) GELU BERT uses, over rows of `bias.len()`.
pub(crate) struct BiasGeluOp {
    pub(crate) bias: Vec<f32>,
}

impl CustomOp1 for BiasGeluOp {
    fn name(&self) -> &'static str {
        "quire-bias-gelu"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let input = contiguous_f32(storage, layout)?;
        let width = self.bias.len();
        if !input.len().is_multiple_of(width) {
            candle_core::bail!("bias and gelu: rows of {width} values expected");
        }
        let mut out = vec![0f32; input.len()];
        out.par_chunks_mut(width)
            .zip(input.par_chunks(width))
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(out, x)| {
                for ((o, x), b) in out.iter_mut().zip(x).zip(&self.bias) {
                    let v = x + b;
                    *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
                }
            });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// The error function, to within 1.2e-7 everywhere (the Chebyshev-fitted `erfc` of Numerical
/// Recipes, evaluated in f64), so the embeddings still match sentence-transformers'.
fn erf(x: f32) -> f32 {
    let z = x.abs() as f64;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let magnitude = (1.0 - erfc) as f32;
    magnitude.copysign(x)
}

/// Softmax over the last dimension of attention scores `[batch, heads, queries, keys]`, after
/// scaling them and adding `mask` (`[batch, keys]`: 0 for tokens, a large negative number for
/// padding).
pub(crate) struct MaskedSoftmaxOp {
    pub(crate) scale: f32,
    pub(crate) mask: Vec<f32>,
    pub(crate) keys: usize,
    /// `heads × queries`: rows of scores per sequence of the batch.
    pub(crate) rows_per_sequence: usize,
}

impl CustomOp1 for MaskedSoftmaxOp {
    fn name(&self) -> &'static str {
        "quire-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let input = contiguous_f32(storage, layout)?;
        let keys = self.keys;
        if !input.len().is_multiple_of(keys) || !self.mask.len().is_multiple_of(keys) {
            candle_core::bail!("masked softmax: rows of {keys} scores expected");
        }
        let mut out = vec![0f32; input.len()];
        out.par_chunks_mut(keys)
            .zip(input.par_chunks(keys))
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(r, (out, row))| {
                let sequence = r / self.rows_per_sequence;
                let mask = &self.mask[sequence * keys..(sequence + 1) * keys];
                let mut max = f32::NEG_INFINITY;
                for ((o, x), m) in out.iter_mut().zip(row).zip(mask) {
                    *o = x * self.scale + m;
                    max = if *o > max { *o } else { max };
                }
                let mut sum = 0.0;
                for o in out.iter_mut() {
                    *o = (*o - max).exp();
                    sum += *o;
                }
                let inverse = 1.0 / sum;
                for o in out.iter_mut() {
                    *o *= inverse;
                }
            });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// The values of a tensor as one contiguous f32 slice.
fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(values) = storage else {
        candle_core::bail!("f32 tensors only");
    };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&values[start..end]),
        None => candle_core::bail!("contiguous tensors only"),
    }
}

/// A tensor's values, flattened.
pub(crate) fn values(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.flatten_all()?.to_vec1::<f32>()
}

#[cfg(test)]
mod tests {
    use super::erf;

    /// Reference values of erf to 9 digits (Abramowitz and Stegun, table 7.1).
    #[test]
    fn erf_matches_the_table() {
        for (x, expected) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916),
            (0.5, 0.520_499_878),
            (1.0, 0.842_700_793),
            (1.5, 0.966_105_146),
            (2.0, 0.995_322_265),
            (3.0, 0.999_977_910),
            (-1.0, -0.842_700_793),
            (-0.5, -0.520_499_878),
        ] {
            assert!(
                (f64::from(erf(x)) - expected).abs() < 2e-7,
                "erf({x}) = {} against {expected}",
                erf(x)
            );
        }
    }
}
