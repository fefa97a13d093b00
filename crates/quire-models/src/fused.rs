//! Fused CPU kernels for the passes candle would run as chains of small operations: LayerNorm
//! (mean, variance, scale and shift of each row in one pass instead of eight allocating ones)
//! and the attention softmax (scale, padding mask, max, exp, sum and divide in one). With the
//! matrix products already near the hardware's rate, these passes were most of the forward
//! pass's time.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

/// LayerNorm over the last dimension with a learned scale and shift.
pub(crate) struct LayerNormOp {
    pub(crate) weight: Vec<f32>,
    pub(crate) bias: Vec<f32>,
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
            candle_core::bail!("layer norm: rows of {} values expected", width);
        }
        let mut out = Vec::with_capacity(input.len());
        for row in input.chunks_exact(width) {
            let mean = row.iter().sum::<f32>() / width as f32;
            let variance = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / width as f32;
            let inverse = 1.0 / (variance + self.eps).sqrt();
            out.extend(
                row.iter()
                    .zip(&self.weight)
                    .zip(&self.bias)
                    .map(|((x, w), b)| (x - mean) * inverse * w + b),
            );
        }
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
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
            candle_core::bail!("masked softmax: rows of {} scores expected", keys);
        }
        let mut out = Vec::with_capacity(input.len());
        for (r, row) in input.chunks_exact(keys).enumerate() {
            let sequence = r / self.rows_per_sequence;
            let mask = &self.mask[sequence * keys..(sequence + 1) * keys];
            let start = out.len();
            let mut max = f32::NEG_INFINITY;
            for (x, m) in row.iter().zip(mask) {
                let v = x * self.scale + m;
                max = max.max(v);
                out.push(v);
            }
            let mut sum = 0.0;
            for v in &mut out[start..] {
                *v = (*v - max).exp();
                sum += *v;
            }
            for v in &mut out[start..] {
                *v /= sum;
            }
        }
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
