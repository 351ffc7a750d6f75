//! Compact codes of the vectors and the kernels that score them.
//!
//! Each vector is normalised and kept twice, in two precisions, and never as
//! `f32` (those stay in SQLite):
//!
//! - **coarse**: 2 bits per dimension (64 bytes for 256 dimensions), a
//!   uniform 4-level quantiser whose step is set from the vector's RMS. The
//!   scan reads only these, so at a million chunks it streams 64 MB per query
//!   instead of the 1 GB of `f32`. Two bits, not one: on vectors without
//!   structure (the bench's random ones, the hardest case) sign bits alone
//!   put the true top 10 anywhere in the first 20,000 of a million, two bits
//!   within the first ~2,000.
//! - **fine**: one `i8` per dimension, scaled to the largest component. It
//!   re-ranks the coarse candidates; its top few are then rescored exactly.
//!
//! The coarse kernel is AVX2 (`vpmaddubsw`), reached through `pulp`'s safe
//! intrinsics after a runtime check of the CPU, with a portable loop where
//! AVX2 is missing. Codes are laid out for it: 32-byte blocks, each holding
//! 128 dimensions, byte `j` carrying dimensions `j`, `32 + j`, `64 + j` and
//! `96 + j` of the block in its four bit pairs, so one shift and one mask give
//! 32 codes lined up with 32 query bytes.

/// Dimensions per 32-byte block of coarse codes.
const BLOCK_DIMS: usize = 128;
/// Bytes per block.
const BLOCK: usize = 32;

/// The coarse quantiser's step as a multiple of the components' RMS: the
/// optimum of a uniform 4-level quantiser for a Gaussian.
const COARSE_STEP: f32 = 0.996;

/// How vectors of one dimension are coded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    pub dim: usize,
    /// Coarse blocks per vector.
    pub blocks: usize,
}

impl Layout {
    pub fn new(dim: usize) -> Self {
        Layout { dim, blocks: dim.div_ceil(BLOCK_DIMS) }
    }

    /// Coarse bytes per vector.
    pub fn coarse_bytes(&self) -> usize {
        self.blocks * BLOCK
    }

    /// Where dimension `i` sits: (byte, shift).
    fn coarse_position(i: usize) -> (usize, u32) {
        let (block, within) = (i / BLOCK_DIMS, i % BLOCK_DIMS);
        (block * BLOCK + within % BLOCK, 2 * (within / BLOCK) as u32)
    }
}

/// What one vector's codes need besides their bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Factors {
    /// Multiplies the coarse integer score into an estimate of the cosine.
    pub coarse: f32,
    /// Multiplies the fine integer score into an estimate of the cosine.
    pub fine: f32,
}

/// `1 / |v|`, or 0 for the zero vector.
pub(crate) fn inv_norm(v: &[f32]) -> f32 {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 { 1.0 / norm } else { 0.0 }
}

/// Writes the codes of `v` into `coarse` (`layout.coarse_bytes()` bytes) and
/// `fine` (`layout.dim` bytes).
pub(crate) fn encode(layout: Layout, v: &[f32], coarse: &mut [u8], fine: &mut [i8]) -> Factors {
    debug_assert_eq!(v.len(), layout.dim);
    coarse.fill(0);
    let inv = inv_norm(v);
    if inv == 0.0 {
        fine.fill(0);
        return Factors::default();
    }
    // The unit vector's components have RMS 1/sqrt(dim).
    let step = COARSE_STEP / (layout.dim as f32).sqrt();
    // Σ û·u of the reconstruction û = (code − 1.5)·step: dividing by it
    // makes the estimate unbiased along u (as in RaBitQ), which ranks better
    // than the plain reconstruction.
    let mut agreement = 0.0f32;
    let mut largest = 0.0f32;
    for (i, &x) in v.iter().enumerate() {
        let u = x * inv;
        largest = largest.max(u.abs());
        // `floor(u / step) + 2` clamped to 0..=3; `as` truncates, which is
        // the floor of a non-negative number (and costs no libm call).
        let code = ((u / step + 2.0).max(0.0) as u8).min(3);
        agreement += (f32::from(code) - 1.5) * step * u;
        let (byte, shift) = Layout::coarse_position(i);
        coarse[byte] |= code << shift;
    }
    let scale = largest / 127.0;
    for (c, &x) in fine.iter_mut().zip(v) {
        *c = (x * inv / scale).round() as i8;
    }
    Factors { coarse: if agreement > 0.0 { step / agreement } else { 0.0 }, fine: scale }
}

/// Runs `f` compiled for AVX2 and FMA when the CPU has them (checked once),
/// as it is otherwise. Only code inlined into `f` (`#[inline(always)]`)
/// profits.
#[inline(always)]
fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(f);
    }
    f()
}

/// A query prepared for both kernels.
#[derive(Debug)]
pub(crate) struct Query {
    /// The unit query as `i8` (scaled to its largest component), in coarse
    /// layout: for each block, four runs of 32 bytes, one per bit pair.
    coarse: Vec<[i8; BLOCK]>,
    /// `1.5 ×` the sum of `coarse`: the codes are offsets from level 0, the
    /// reconstruction is centred on 1.5.
    offset: f32,
    /// Undoes the scaling of `coarse`.
    unscale: f32,
    /// The unit query.
    fine: Vec<f32>,
}

impl Query {
    pub fn new(layout: Layout, q: &[f32]) -> Self {
        let inv = inv_norm(q);
        let fine: Vec<f32> = q.iter().map(|x| x * inv).collect();
        let largest = fine.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let scale = if largest > 0.0 { 127.0 / largest } else { 0.0 };
        let mut coarse = vec![[0i8; BLOCK]; layout.blocks * 4];
        let mut sum = 0i64;
        for (i, &x) in fine.iter().enumerate() {
            let c = (x * scale).round() as i8;
            sum += i64::from(c);
            let (block, within) = (i / BLOCK_DIMS, i % BLOCK_DIMS);
            coarse[block * 4 + within / BLOCK][within % BLOCK] = c;
        }
        Query { coarse, offset: 1.5 * sum as f32, unscale: largest / 127.0, fine }
    }

    /// Replaces the estimate of each (estimate, slot) by the fine one; `codes`
    /// holds every slot's fine codes back to back.
    pub fn fine_scores(&self, codes: &[i8], factors: &[Factors], candidates: &mut [(f32, u32)]) {
        let dim = self.fine.len();
        vectorized(
            #[inline(always)]
            || {
                for (estimate, slot) in candidates {
                    let slot = *slot as usize;
                    *estimate = self.fine_score(&codes[slot * dim..(slot + 1) * dim], factors[slot]);
                }
            },
        )
    }

    /// The fine estimate of the cosine with a vector coded as `codes`.
    #[inline(always)]
    fn fine_score(&self, codes: &[i8], factors: Factors) -> f32 {
        const LANES: usize = 16;
        let mut acc = [0.0f32; LANES];
        let (cq, cc) = (self.fine.chunks_exact(LANES), codes.chunks_exact(LANES));
        let tail: f32 = cq.remainder().iter().zip(cc.remainder()).map(|(q, &c)| q * f32::from(c)).sum();
        for (q, c) in cq.zip(cc) {
            for i in 0..LANES {
                acc[i] += q[i] * f32::from(c[i]);
            }
        }
        (acc.iter().sum::<f32>() + tail) * factors.fine
    }

    /// Calls `visit(slot, estimate)` for every slot in `slots` that `keep`
    /// accepts, with the coarse estimate of its cosine. `codes` holds every
    /// slot's coarse codes back to back.
    pub fn coarse_scan(
        &self,
        layout: Layout,
        codes: &[u8],
        factors: &[Factors],
        slots: std::ops::Range<usize>,
        keep: impl Fn(usize) -> bool,
        visit: impl FnMut(usize, f32),
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            let query: Vec<std::arch::x86_64::__m256i> = self.coarse.iter().map(|q| pulp::cast(*q)).collect();
            return simd.vectorize(
                #[inline(always)]
                || self.scan_rows(layout, codes, factors, slots, keep, visit, |row| coarse_dot_avx2(simd, &query, row)),
            );
        }
        self.scan_rows(layout, codes, factors, slots, keep, visit, |row| self.coarse_dot_portable(row))
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn scan_rows(
        &self,
        layout: Layout,
        codes: &[u8],
        factors: &[Factors],
        slots: std::ops::Range<usize>,
        keep: impl Fn(usize) -> bool,
        mut visit: impl FnMut(usize, f32),
        dot: impl Fn(&[u8]) -> i32,
    ) {
        let bytes = layout.coarse_bytes();
        for slot in slots {
            if keep(slot) {
                let dot = dot(&codes[slot * bytes..(slot + 1) * bytes]) as f32;
                visit(slot, (dot - self.offset) * self.unscale * factors[slot].coarse);
            }
        }
    }

    /// Σ query byte × code over one row's coarse codes.
    #[inline(always)]
    fn coarse_dot_portable(&self, row: &[u8]) -> i32 {
        let mut dot = 0i32;
        for (block, q) in row.chunks_exact(BLOCK).zip(self.coarse.chunks_exact(4)) {
            for (shift, q) in q.iter().enumerate() {
                for (&x, &q) in block.iter().zip(q) {
                    dot += i32::from((x >> (2 * shift)) & 3) * i32::from(q);
                }
            }
        }
        dot
    }
}

/// [`Query::coarse_dot_portable`] in AVX2: `query` is [`Query::coarse`] as
/// vectors.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn coarse_dot_avx2(simd: pulp::x86::V3, query: &[std::arch::x86_64::__m256i], row: &[u8]) -> i32 {
    let (avx, avx2) = (simd.avx, simd.avx2);
    let mask = avx._mm256_set1_epi8(3);
    let ones = avx._mm256_set1_epi16(1);
    let mut acc = avx._mm256_setzero_si256();
    for (block, q) in row.chunks_exact(BLOCK).zip(query.chunks_exact(4)) {
        let block: [u8; BLOCK] = block.try_into().expect("blocks of 32 bytes");
        let x = pulp::cast(block);
        // Codes 0..=3 times query bytes, pairs summed into i16 (at most
        // 2 · 3 · 127 each, four of them per block: no overflow), then
        // widened to i32 once per block.
        let c0 = avx2._mm256_and_si256(x, mask);
        let c1 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<2>(x), mask);
        let c2 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(x), mask);
        let c3 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<6>(x), mask);
        let s01 = avx2._mm256_add_epi16(avx2._mm256_maddubs_epi16(c0, q[0]), avx2._mm256_maddubs_epi16(c1, q[1]));
        let s23 = avx2._mm256_add_epi16(avx2._mm256_maddubs_epi16(c2, q[2]), avx2._mm256_maddubs_epi16(c3, q[3]));
        acc = avx2._mm256_add_epi32(acc, avx2._mm256_madd_epi16(avx2._mm256_add_epi16(s01, s23), ones));
    }
    let lanes: [i32; 8] = pulp::cast(acc);
    lanes.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() * inv_norm(a) * inv_norm(b)
    }

    /// Both kernels give the same integer score, and both estimates track the
    /// cosine, for dimensions that fill blocks and ones that do not.
    #[test]
    fn kernels_agree_and_estimate_the_cosine() {
        for dim in [3, 128, 256, 300, 384] {
            let layout = Layout::new(dim);
            let rows = 50;
            let mut coarse = vec![0u8; rows * layout.coarse_bytes()];
            let mut fine = vec![0i8; rows * dim];
            let mut factors = Vec::new();
            let vectors: Vec<Vec<f32>> = (0..rows as u64).map(|i| vector(i + 1, dim)).collect();
            for (i, v) in vectors.iter().enumerate() {
                let c = &mut coarse[i * layout.coarse_bytes()..(i + 1) * layout.coarse_bytes()];
                factors.push(encode(layout, v, c, &mut fine[i * dim..(i + 1) * dim]));
            }
            let q = vector(999, dim);
            let query = Query::new(layout, &q);
            let mut fast = Vec::new();
            query.coarse_scan(layout, &coarse, &factors, 0..rows, |s| s != 7, |s, e| fast.push((s, e)));
            let mut portable = Vec::new();
            let keep = |s: usize| s != 7;
            let dot = |row: &[u8]| query.coarse_dot_portable(row);
            query.scan_rows(layout, &coarse, &factors, 0..rows, keep, |s, e| portable.push((s, e)), dot);
            assert_eq!(fast, portable, "dim {dim}");
            assert_eq!(fast.len(), rows - 1);
            let tolerance = if dim < 100 { 0.6 } else { 0.15 };
            for &(slot, estimate) in &fast {
                let exact = cosine(&q, &vectors[slot]);
                assert!((estimate - exact).abs() < tolerance, "dim {dim}: coarse {estimate} vs {exact}");
                let mut candidate = [(0.0, slot as u32)];
                query.fine_scores(&fine, &factors, &mut candidate);
                let fine_estimate = candidate[0].0;
                assert!((fine_estimate - exact).abs() < 0.02, "dim {dim}: fine {fine_estimate} vs {exact}");
            }
        }
    }

    #[test]
    fn zero_vector_scores_zero() {
        let layout = Layout::new(8);
        let (mut coarse, mut fine) = (vec![0u8; layout.coarse_bytes()], vec![0i8; 8]);
        let factors = encode(layout, &[0.0; 8], &mut coarse, &mut fine);
        let query = Query::new(layout, &vector(5, 8));
        let mut seen = Vec::new();
        query.coarse_scan(layout, &coarse, &[factors], 0..1, |_| true, |_, e| seen.push(e));
        assert_eq!(seen, [0.0]);
        let mut candidate = [(1.0, 0)];
        query.fine_scores(&fine, &[factors], &mut candidate);
        assert_eq!(candidate[0].0, 0.0);
    }
}
