//! Similarity kernels and the int8 copy of the vectors.
//!
//! Int8 codes are symmetric with one scale per vector: each vector is divided by its largest
//! absolute component and multiplied by 127, so every vector uses the full code range however
//! its energy is spread, and the dot product of two codes times both scales approximates the
//! dot product of the vectors. A code is a quarter of the `f32` row, so the graph walk touches a
//! quarter of the memory; the final ranking is always recomputed in `f32`.

/// Dot product of two `f32` vectors; for unit vectors, their cosine.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    ARCH.dispatch(DotF32 { a, b })
}

/// Dot product of two int8 codes, exact in `i32` (384 × 127² is far below its range).
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    ARCH.dispatch(DotI8 { a, b })
}

/// The widest vector instructions this CPU has, found once. Each kernel is compiled for each
/// instruction set pulp knows (AVX2 and FMA where present, else the x86-64 baseline) and the
/// CPU's own is run, because a binary built for any x86-64 otherwise computes four lanes at a
/// time. `quire bench vectors` measured the effect (docs/performance.md, "Kernels chosen by the
/// CPU, and a session pool tried"): the graph built with int8 distances in half the time.
static ARCH: std::sync::LazyLock<pulp::Arch> = std::sync::LazyLock::new(pulp::Arch::new);

struct DotF32<'a> {
    a: &'a [f32],
    b: &'a [f32],
}

impl pulp::WithSimd for DotF32<'_> {
    type Output = f32;

    // Inlined into the function pulp compiles for each instruction set, so the loop below is
    // vectorised for it.
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> f32 {
        // Sixteen independent sums: two 256-bit registers, so the adds do not wait on each
        // other.
        let mut sums = [0f32; 16];
        let (a_chunks, b_chunks) = (self.a.chunks_exact(16), self.b.chunks_exact(16));
        let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
        for (x, y) in a_chunks.zip(b_chunks) {
            for i in 0..16 {
                sums[i] += x[i] * y[i];
            }
        }
        let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
        sums.iter().sum::<f32>() + tail
    }
}

struct DotI8<'a> {
    a: &'a [i8],
    b: &'a [i8],
}

impl pulp::WithSimd for DotI8<'_> {
    type Output = i32;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> i32 {
        // Thirty-two lanes of widening multiply-adds: the shape the compiler vectorises best.
        let mut sums = [0i32; 32];
        let (a_chunks, b_chunks) = (self.a.chunks_exact(32), self.b.chunks_exact(32));
        let tail: i32 = a_chunks
            .remainder()
            .iter()
            .zip(b_chunks.remainder())
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        for (x, y) in a_chunks.zip(b_chunks) {
            for i in 0..32 {
                sums[i] += i32::from(x[i]) * i32::from(y[i]);
            }
        }
        sums.iter().sum::<i32>() + tail
    }
}

/// A vector as int8 codes and the scale that maps them back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quantized {
    /// The codes, one per dimension.
    pub codes: Vec<i8>,
    /// Multiplier from a code to the component it stands for.
    pub scale: f32,
}

impl Quantized {
    /// The int8 code of `vector`.
    pub fn new(vector: &[f32]) -> Self {
        let mut codes = Vec::with_capacity(vector.len());
        let scale = encode(vector, &mut codes);
        Self { codes, scale }
    }
}

/// Appends the codes of `vector` to `out` and returns its scale.
fn encode(vector: &[f32], out: &mut Vec<i8>) -> f32 {
    let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 || !largest.is_finite() {
        out.extend(std::iter::repeat_n(0, vector.len()));
        return 0.0;
    }
    let scale = largest / 127.0;
    out.extend(
        vector
            .iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// The int8 codes of every row, row-major.
#[derive(Debug, Default)]
pub(crate) struct Codes {
    dims: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

impl Codes {
    /// No rows yet, for vectors of `dims` dimensions.
    pub fn new(dims: usize) -> Self {
        Self {
            dims,
            ..Self::default()
        }
    }

    /// Adds the next row.
    pub fn push(&mut self, vector: &[f32]) {
        let scale = encode(vector, &mut self.codes);
        self.scales.push(scale);
    }

    fn row(&self, row: u32) -> &[i8] {
        let row = row as usize;
        &self.codes[row * self.dims..(row + 1) * self.dims]
    }

    /// Approximate similarity of two rows.
    pub fn between(&self, a: u32, b: u32) -> f32 {
        dot_i8(self.row(a), self.row(b)) as f32 * self.scales[a as usize] * self.scales[b as usize]
    }

    /// Approximate similarity of a quantised query and a row.
    pub fn to_query(&self, query: &Quantized, row: u32) -> f32 {
        dot_i8(&query.codes, self.row(row)) as f32 * query.scale * self.scales[row as usize]
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.codes.len() + 4 * self.scales.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatched kernels against plain sums, at lengths that leave every kind of tail.
    #[test]
    fn the_kernels_give_the_plain_sums_at_any_length() {
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 384, 385] {
            let a: Vec<f32> = (0..len).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..len).map(|i| (i % 5) as f32 * 0.5).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            // Small integers and halves: every partial sum is exact in f32, in any order.
            assert_eq!(dot(&a, &b), plain, "f32 at {len}");
            let x: Vec<i8> = (0..len).map(|i| (i * 37 % 255) as u8 as i8).collect();
            let y: Vec<i8> = (0..len).map(|i| (i * 91 % 255) as u8 as i8).collect();
            let plain: i32 = x
                .iter()
                .zip(&y)
                .map(|(p, q)| i32::from(*p) * i32::from(*q))
                .sum();
            assert_eq!(dot_i8(&x, &y), plain, "int8 at {len}");
        }
    }

    #[test]
    fn int8_similarity_is_within_a_percent_of_the_exact_one() {
        let a: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let b: Vec<f32> = (0..384)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 44.0)
            .collect();
        let unit = |v: &[f32]| {
            let n = dot(v, v).sqrt();
            v.iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let (a, b) = (unit(&a), unit(&b));
        let mut codes = Codes::new(384);
        codes.push(&a);
        codes.push(&b);
        let exact = dot(&a, &b);
        assert!((codes.between(0, 1) - exact).abs() < 0.01, "{exact}");
        assert!((codes.to_query(&Quantized::new(&a), 1) - exact).abs() < 0.01);
        assert!((codes.between(0, 0) - 1.0).abs() < 0.01);
        codes.push(&[0.0; 384]);
        assert_eq!(codes.between(0, 2), 0.0);
    }
}
