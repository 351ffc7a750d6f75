//! Compact codes of the vectors and the kernels that score them.
//!
//! Each vector is normalised and kept three times, in three precisions, and
//! never as `f32` (those stay in SQLite):
//!
//! - **signs**: 1 bit per dimension (32 bytes for 256 dimensions), the only
//!   codes every query reads in full: 32 MB at a million chunks. They are
//!   stored transposed in blocks of 32 rows (byte `p` of 32 rows side by
//!   side), so the kernel scores 32 rows at once by table lookups: the query
//!   is turned into one 16-entry table per 4 dimensions (its partial sums for
//!   every pattern of 4 sign bits), and one `vpshufb` looks up 32 rows'
//!   patterns, as in the "fast scan" of product quantisation. That is about
//!   two lookups per row for 256 dimensions, against the tens of
//!   instructions of a per-row dot product. The estimate is RaBitQ's:
//!   `⟨sign(u), q⟩ / ⟨sign(u), u⟩`, unbiased along `u`.
//! - **coarse**: 2 bits per dimension (64 bytes for 256 dimensions), a
//!   uniform 4-level quantiser whose step is set from the vector's RMS. They
//!   re-rank the rows the signs keep (or scan every passing row when a filter
//!   leaves few). Sign bits alone are too coarse for the final cut: on
//!   vectors without structure (the bench's random ones, the hardest case)
//!   they put the true top 10 within the first tens of thousands of a
//!   million, two bits within the first ~2,000.
//! - **fine**: one `i8` per dimension, scaled to the largest component. It
//!   re-ranks the coarse candidates; its top few are then rescored exactly.
//!
//! The coarse kernel is AVX2 (`vpmaddubsw`), reached through `pulp`'s safe
//! intrinsics after a runtime check of the CPU, with a portable loop where
//! AVX2 is missing. Codes are laid out for it: 32-byte blocks, each holding
//! 128 dimensions, byte `j` carrying dimensions `j`, `32 + j`, `64 + j` and
//! `96 + j` of the block in its four bit pairs, so one shift and one mask give
//! 32 codes lined up with 32 query bytes.

/// Rows per block of sign codes: one byte of each per AVX2 register.
pub(crate) const SIGN_BLOCK_ROWS: usize = 32;

/// The largest magnitude of a query component in the sign tables: four of
/// them sum to at most 124, two table entries to 248, within a byte.
const SIGN_QUERY_MAX: f32 = 31.0;

/// Sign-table positions summed in `u16` lanes before widening: 264 × 248
/// is the most a `u16` holds.
const SIGN_CHUNK: usize = 256;

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

    /// Sign bytes per vector (bit `i % 8` of byte `i / 8` is dimension `i`).
    pub fn sign_bytes(&self) -> usize {
        self.dim.div_ceil(8)
    }

    /// Bytes per block of [`SIGN_BLOCK_ROWS`] rows of sign codes.
    pub fn sign_block_bytes(&self) -> usize {
        self.sign_bytes() * SIGN_BLOCK_ROWS
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

/// How far a sign estimate may be from the cosine, in RaBitQ's error bound
/// `ε₀ · √((1 − a²) / a²) / √(D − 1)` (`a = ⟨sign(u)/√D, u⟩`). RaBitQ
/// reports near-perfect recall from 1.9.
const SIGN_EPSILON: f32 = 1.9;

/// What one vector's sign codes need besides their bits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SignFactors {
    /// Multiplies the sign score into an estimate of the cosine:
    /// `1 / Σ|u_i|` for the unit vector `u` (0 for the zero vector).
    pub scale: f32,
    /// How far the estimate may be below the cosine (see [`SIGN_EPSILON`]).
    pub bound: f32,
}

/// Writes the sign bits of `v` into `signs` (`layout.sign_bytes()` bytes,
/// row order) and returns the factors of its sign estimate.
pub(crate) fn encode_signs(layout: Layout, v: &[f32], signs: &mut [u8]) -> SignFactors {
    debug_assert_eq!(v.len(), layout.dim);
    signs.fill(0);
    let inv = inv_norm(v);
    if inv == 0.0 {
        return SignFactors::default();
    }
    let mut sum_abs = 0.0f32;
    for (i, &x) in v.iter().enumerate() {
        sum_abs += (x * inv).abs();
        if x >= 0.0 {
            signs[i / 8] |= 1 << (i % 8);
        }
    }
    let dim = layout.dim as f32;
    let agreement = (sum_abs / dim.sqrt()).min(1.0);
    let bound = if layout.dim > 1 && agreement > 0.0 {
        SIGN_EPSILON * ((1.0 - agreement * agreement) / (agreement * agreement)).sqrt() / (dim - 1.0).sqrt()
    } else {
        0.0
    };
    SignFactors { scale: if sum_abs > 0.0 { 1.0 / sum_abs } else { 0.0 }, bound }
}

/// Every code of one vector, as a store keeps them on disk so that opening
/// it reads codes instead of encoding every vector again: the factors
/// (coarse, fine, sign scale, sign bound: four little-endian `f32`), then
/// the sign bits (row order), the 2-bit codes and the `i8` codes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowCodes<'a> {
    pub factors: Factors,
    pub sign_factors: SignFactors,
    pub signs: &'a [u8],
    pub coarse: &'a [u8],
    /// The `i8` codes as bytes (two's complement).
    pub fine: &'a [u8],
}

/// Bytes of the factors at the start of a [`RowCodes`] blob.
const ROW_FACTOR_BYTES: usize = 16;

impl Layout {
    /// Bytes of one vector's [`RowCodes`] blob.
    pub fn row_code_bytes(&self) -> usize {
        ROW_FACTOR_BYTES + self.sign_bytes() + self.coarse_bytes() + self.dim
    }
}

/// The [`RowCodes`] blob of `v`: what [`encode`] and [`encode_signs`] give.
pub(crate) fn encode_row(layout: Layout, v: &[f32]) -> Vec<u8> {
    let (signs_at, coarse_at) = (ROW_FACTOR_BYTES, ROW_FACTOR_BYTES + layout.sign_bytes());
    let fine_at = coarse_at + layout.coarse_bytes();
    let mut blob = vec![0u8; layout.row_code_bytes()];
    let sign_factors = encode_signs(layout, v, &mut blob[signs_at..coarse_at]);
    let mut fine = vec![0i8; layout.dim];
    let factors = encode(layout, v, &mut blob[coarse_at..fine_at], &mut fine);
    for (byte, code) in blob[fine_at..].iter_mut().zip(fine) {
        *byte = code as u8;
    }
    for (at, x) in [factors.coarse, factors.fine, sign_factors.scale, sign_factors.bound].into_iter().enumerate() {
        blob[4 * at..4 * at + 4].copy_from_slice(&x.to_le_bytes());
    }
    blob
}

/// Reads a [`RowCodes`] blob of `layout`; `None` when its length is not
/// that of the layout.
pub(crate) fn decode_row(layout: Layout, blob: &[u8]) -> Option<RowCodes<'_>> {
    if blob.len() != layout.row_code_bytes() {
        return None;
    }
    let float = |at: usize| f32::from_le_bytes([blob[4 * at], blob[4 * at + 1], blob[4 * at + 2], blob[4 * at + 3]]);
    let (signs, rest) = blob[ROW_FACTOR_BYTES..].split_at(layout.sign_bytes());
    let (coarse, fine) = rest.split_at(layout.coarse_bytes());
    Some(RowCodes {
        factors: Factors { coarse: float(0), fine: float(1) },
        sign_factors: SignFactors { scale: float(2), bound: float(3) },
        signs,
        coarse,
        fine,
    })
}

/// The [`SignFactors`] of a block of [`SIGN_BLOCK_ROWS`] rows, field by
/// field, so that the scan tests a whole block's estimates against its
/// cut-off with a few vector instructions instead of a branch per row.
/// Lanes past the last row are zero.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SignBlockFactors {
    pub scale: [f32; SIGN_BLOCK_ROWS],
    pub bound: [f32; SIGN_BLOCK_ROWS],
    /// Each row's [`Factors::coarse`], copied here so that a row the sign
    /// scan lets through costs one cache miss (its 2-bit codes), not two.
    pub coarse: [f32; SIGN_BLOCK_ROWS],
}

impl SignBlockFactors {
    pub fn get(&self, lane: usize) -> SignFactors {
        SignFactors { scale: self.scale[lane], bound: self.bound[lane] }
    }

    pub fn set(&mut self, lane: usize, factors: SignFactors) {
        self.scale[lane] = factors.scale;
        self.bound[lane] = factors.bound;
    }
}

/// Rows to scan: slot ranges in increasing order, disjoint (what a filter
/// leaves, see `index.rs`).
pub(crate) type Slots<'a> = &'a [std::ops::Range<usize>];

/// `(block, lanes)` for every block of [`SIGN_BLOCK_ROWS`] rows that some
/// range of a [`Slots`] touches, in order, `lanes` the bits of the rows the
/// ranges cover; two ranges ending and starting in one block give it once.
/// An iterator rather than a callback so that the kernels in the loop body
/// are compiled with the scan's CPU features.
pub(crate) struct Blocks<'a> {
    ranges: std::slice::Iter<'a, std::ops::Range<usize>>,
    range: std::ops::Range<usize>,
    pending: Option<(usize, u32)>,
}

impl<'a> Blocks<'a> {
    pub fn new(slots: Slots<'a>) -> Self {
        Blocks { ranges: slots.iter(), range: 0..0, pending: None }
    }
}

impl Iterator for Blocks<'_> {
    type Item = (usize, u32);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u32)> {
        loop {
            if self.range.is_empty() {
                match self.ranges.next() {
                    Some(range) => self.range = range.clone(),
                    None => return self.pending.take(),
                }
                continue;
            }
            let start = self.range.start;
            let block = start / SIGN_BLOCK_ROWS;
            let first = block * SIGN_BLOCK_ROWS;
            let end = self.range.end.min(first + SIGN_BLOCK_ROWS);
            self.range.start = end;
            let width = end - start;
            let lanes = if width == SIGN_BLOCK_ROWS { u32::MAX } else { ((1u32 << width) - 1) << (start - first) };
            match &mut self.pending {
                Some((b, pending)) if *b == block => *pending |= lanes,
                _ => {
                    if let Some(done) = self.pending.replace((block, lanes)) {
                        return Some(done);
                    }
                }
            }
        }
    }
}

/// The sign and 2-bit codes of every row, as the index holds them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Codes<'a> {
    pub layout: Layout,
    /// In blocks of [`SIGN_BLOCK_ROWS`] rows.
    pub signs: &'a [u8],
    /// One per block of signs.
    pub sign_factors: &'a [SignBlockFactors],
    /// Row after row.
    pub coarse: &'a [u8],
}

/// Where [`Query::sign_coarse_scan`] puts what it finds.
pub(crate) trait Sink {
    /// Rows whose estimate could not reach this are not worth offering.
    fn threshold(&self) -> f32;
    fn offer(&mut self, slot: usize, estimate: f32);
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
    /// For every 4 dimensions (two per sign byte, low nibble first), the sum
    /// over a pattern of sign bits of `q⁺` where the bit is set and `q⁻`
    /// where it is not, `q` the query scaled to ±[`SIGN_QUERY_MAX`] and
    /// rounded. `Σ q·(2b − 1) = 2 Σ entries − Σ |q|` then holds exactly.
    sign_tables: Vec<[u8; 16]>,
    /// `Σ |q|` of the scaled query.
    sign_offset: f32,
    /// Undoes the scaling of the sign tables.
    sign_unscale: f32,
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
        let sign_scale = if largest > 0.0 { SIGN_QUERY_MAX / largest } else { 0.0 };
        let scaled: Vec<i32> = fine.iter().map(|x| (x * sign_scale).round() as i32).collect();
        let sign_tables = (0..2 * layout.sign_bytes())
            .map(|nibble| {
                let dims = &scaled[(4 * nibble).min(layout.dim)..(4 * nibble + 4).min(layout.dim)];
                std::array::from_fn(|pattern| {
                    let entry: i32 = dims
                        .iter()
                        .enumerate()
                        .map(|(i, &q)| if pattern >> i & 1 == 1 { q.max(0) } else { (-q).max(0) })
                        .sum();
                    entry as u8
                })
            })
            .collect();
        Query {
            coarse,
            offset: 1.5 * sum as f32,
            unscale: largest / 127.0,
            fine,
            sign_tables,
            sign_offset: scaled.iter().map(|q| q.abs()).sum::<i32>() as f32,
            sign_unscale: if largest > 0.0 { largest / SIGN_QUERY_MAX } else { 0.0 },
        }
    }

    /// Calls `visit(slot, estimate)` for every slot in `slots`, with the sign
    /// estimate of its cosine. `blocks` holds the sign codes in blocks of
    /// [`SIGN_BLOCK_ROWS`] rows (see the module docs), `factors` each
    /// block's [`encode_signs`] factors. A block with no slot in `slots` is
    /// not scored. (The search uses [`Query::sign_coarse_scan`]; this
    /// measures the sign estimates alone.)
    #[cfg(test)]
    pub fn sign_scan(
        &self,
        layout: Layout,
        blocks: &[u8],
        factors: &[SignBlockFactors],
        slots: Slots<'_>,
        mut visit: impl FnMut(usize, f32),
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            let kernels = Avx2::new(simd, self);
            return simd.vectorize(
                #[inline(always)]
                || self.sign_blocks(layout, blocks, factors, slots, &mut visit, &kernels),
            );
        }
        self.sign_blocks(layout, blocks, factors, slots, &mut visit, &Portable)
    }

    /// Scores every slot in `slots` from its sign codes
    /// (as [`Query::sign_scan`]), and offers to `sink` the coarse estimate
    /// (as [`Query::coarse_scan`]) of those whose sign estimate plus its
    /// bound reaches the sink's threshold. Those rows are scored in batches:
    /// their coarse codes are scattered, and a batch of independent loads
    /// lets the CPU wait for many cache misses at once instead of one by one.
    pub fn sign_coarse_scan(&self, codes: Codes<'_>, slots: Slots<'_>, sink: &mut impl Sink) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            let kernels = Avx2::new(simd, self);
            return simd.vectorize(
                #[inline(always)]
                || self.sign_coarse_with(codes, slots, sink, &kernels),
            );
        }
        self.sign_coarse_with(codes, slots, sink, &Portable)
    }

    /// [`Query::sign_coarse_scan`] with the given kernels.
    #[inline(always)]
    fn sign_coarse_with<S: Sink, K: Kernels>(&self, codes: Codes<'_>, slots: Slots<'_>, sink: &mut S, kernels: &K) {
        let mut batch = Batch {
            query: self,
            kernels,
            coarse: codes.coarse,
            bytes: codes.layout.coarse_bytes(),
            sink,
            pending: [(0, 0.0); BATCH],
            len: 0,
        };
        self.sign_blocks(codes.layout, codes.signs, codes.sign_factors, slots, &mut batch, kernels);
        batch.flush();
    }

    #[inline(always)]
    fn sign_blocks(
        &self,
        layout: Layout,
        blocks: &[u8],
        factors: &[SignBlockFactors],
        slots: Slots<'_>,
        visit: &mut impl Visit,
        kernels: &impl Kernels,
    ) {
        let bytes = layout.sign_block_bytes();
        let mut sums = [0u32; SIGN_BLOCK_ROWS];
        for (b, lanes) in Blocks::new(slots) {
            kernels.sign_block(self, &blocks[b * bytes..(b + 1) * bytes], &mut sums);
            let f = &factors[b];
            let mut wanted = lanes & kernels.sign_pass(self, &sums, f, visit.floor());
            while wanted != 0 {
                let lane = wanted.trailing_zeros() as usize;
                wanted &= wanted - 1;
                let estimate = self.sign_estimate(sums[lane], f.scale[lane]);
                visit.visit(b * SIGN_BLOCK_ROWS + lane, estimate, f.coarse[lane]);
            }
        }
    }

    /// The sign estimate of the cosine from a row's table sum and scale.
    #[inline(always)]
    fn sign_estimate(&self, sum: u32, scale: f32) -> f32 {
        (2.0 * sum as f32 - self.sign_offset) * self.sign_unscale * scale
    }

    /// The lanes of a block whose sign estimate plus bound reaches `floor`.
    #[inline(always)]
    fn sign_pass_portable(&self, sums: &[u32; SIGN_BLOCK_ROWS], factors: &SignBlockFactors, floor: f32) -> u32 {
        let mut pass = 0u32;
        for (lane, &sum) in sums.iter().enumerate() {
            if self.sign_estimate(sum, factors.scale[lane]) + factors.bound[lane] >= floor {
                pass |= 1 << lane;
            }
        }
        pass
    }

    /// Σ of table entries for each of a block's rows.
    #[inline(always)]
    fn sign_block_portable(&self, block: &[u8], sums: &mut [u32; SIGN_BLOCK_ROWS]) {
        sums.fill(0);
        for (p, bytes) in block.chunks_exact(SIGN_BLOCK_ROWS).enumerate() {
            let (low, high) = (&self.sign_tables[2 * p], &self.sign_tables[2 * p + 1]);
            for (sum, &x) in sums.iter_mut().zip(bytes) {
                *sum += u32::from(low[usize::from(x & 15)]) + u32::from(high[usize::from(x >> 4)]);
            }
        }
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

    /// Calls `visit(slot, estimate)` for every slot in `slots`, with the
    /// coarse estimate of its cosine. `codes` holds every slot's coarse
    /// codes back to back.
    pub fn coarse_scan(
        &self,
        layout: Layout,
        codes: &[u8],
        factors: &[Factors],
        slots: Slots<'_>,
        visit: impl FnMut(usize, f32),
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            let kernels = Avx2::new(simd, self);
            return simd.vectorize(
                #[inline(always)]
                || self.scan_rows(layout, codes, factors, slots, visit, &kernels),
            );
        }
        self.scan_rows(layout, codes, factors, slots, visit, &Portable)
    }

    #[inline(always)]
    fn scan_rows(
        &self,
        layout: Layout,
        codes: &[u8],
        factors: &[Factors],
        slots: Slots<'_>,
        mut visit: impl FnMut(usize, f32),
        kernels: &impl Kernels,
    ) {
        let bytes = layout.coarse_bytes();
        for range in slots {
            let (rows, factors) = (&codes[range.start * bytes..range.end * bytes], &factors[range.clone()]);
            for ((slot, row), factors) in range.clone().zip(rows.chunks_exact(bytes)).zip(factors) {
                let dot = kernels.coarse_dot(self, row);
                visit(slot, self.coarse_estimate(dot, factors.coarse));
            }
        }
    }

    /// The coarse estimate of the cosine from a coarse integer score.
    #[inline(always)]
    fn coarse_estimate(&self, dot: i32, factor: f32) -> f32 {
        (dot as f32 - self.offset) * self.unscale * factor
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

/// Rows let through to the 2-bit codes per batch.
const BATCH: usize = 64;

/// What [`Query::sign_blocks`] hands each estimate to. A trait rather than a
/// closure so that the fused scan's coarse kernel, called from it, is
/// compiled with the CPU features of the scan (a closure is compiled apart,
/// without them, and every intrinsic in it becomes a call).
trait Visit {
    /// Rows whose sign estimate plus bound is below this are not visited.
    fn floor(&self) -> f32 {
        f32::NEG_INFINITY
    }
    /// `coarse` is the row's [`Factors::coarse`].
    fn visit(&mut self, slot: usize, estimate: f32, coarse: f32);
}

impl<F: FnMut(usize, f32)> Visit for F {
    #[inline(always)]
    fn visit(&mut self, slot: usize, estimate: f32, _: f32) {
        self(slot, estimate)
    }
}

/// The rows a sign scan lets through, scored from their 2-bit codes a batch
/// at a time.
struct Batch<'a, S, K> {
    query: &'a Query,
    kernels: &'a K,
    coarse: &'a [u8],
    bytes: usize,
    sink: &'a mut S,
    /// Slots and their coarse factors.
    pending: [(u32, f32); BATCH],
    len: usize,
}

impl<S: Sink, K: Kernels> Batch<'_, S, K> {
    #[inline(always)]
    fn flush(&mut self) {
        let mut dots = [0i32; BATCH];
        let pending = &self.pending[..self.len];
        // All loads first: they are independent, so their misses overlap
        // (and each was prefetched when its row was let through).
        for (d, &(slot, _)) in dots.iter_mut().zip(pending) {
            let slot = slot as usize;
            *d = self.kernels.coarse_dot(self.query, &self.coarse[slot * self.bytes..(slot + 1) * self.bytes]);
        }
        for (&d, &(slot, factor)) in dots.iter().zip(pending) {
            self.sink.offer(slot as usize, self.query.coarse_estimate(d, factor));
        }
        self.len = 0;
    }
}

impl<S: Sink, K: Kernels> Visit for Batch<'_, S, K> {
    #[inline(always)]
    fn floor(&self) -> f32 {
        self.sink.threshold()
    }

    #[inline(always)]
    fn visit(&mut self, slot: usize, _: f32, coarse: f32) {
        self.kernels.prefetch(&self.coarse[slot * self.bytes..(slot + 1) * self.bytes]);
        self.pending[self.len] = (slot as u32, coarse);
        self.len += 1;
        if self.len == BATCH {
            self.flush();
        }
    }
}

/// The two scoring kernels, portable or for a CPU feature level.
trait Kernels {
    /// [`Query::sign_block_portable`].
    fn sign_block(&self, query: &Query, block: &[u8], sums: &mut [u32; SIGN_BLOCK_ROWS]);
    /// [`Query::sign_pass_portable`].
    fn sign_pass(&self, query: &Query, sums: &[u32; SIGN_BLOCK_ROWS], factors: &SignBlockFactors, floor: f32) -> u32;
    /// [`Query::coarse_dot_portable`].
    fn coarse_dot(&self, query: &Query, row: &[u8]) -> i32;
    /// Asks for `row`'s first cache line ahead of its use, where the CPU
    /// can be asked.
    fn prefetch(&self, row: &[u8]);
}

struct Portable;

impl Kernels for Portable {
    #[inline(always)]
    fn sign_block(&self, query: &Query, block: &[u8], sums: &mut [u32; SIGN_BLOCK_ROWS]) {
        query.sign_block_portable(block, sums)
    }

    #[inline(always)]
    fn sign_pass(&self, query: &Query, sums: &[u32; SIGN_BLOCK_ROWS], factors: &SignBlockFactors, floor: f32) -> u32 {
        query.sign_pass_portable(sums, factors, floor)
    }

    #[inline(always)]
    fn coarse_dot(&self, query: &Query, row: &[u8]) -> i32 {
        query.coarse_dot_portable(row)
    }

    #[inline(always)]
    fn prefetch(&self, _: &[u8]) {}
}

/// The AVX2 kernels, with the query's codes as vectors.
#[cfg(target_arch = "x86_64")]
struct Avx2 {
    simd: pulp::x86::V3,
    /// The sign tables, each repeated in both 128-bit lanes.
    tables: Vec<std::arch::x86_64::__m256i>,
    /// [`Query::coarse`].
    coarse: Vec<std::arch::x86_64::__m256i>,
}

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    fn new(simd: pulp::x86::V3, query: &Query) -> Self {
        Avx2 {
            simd,
            tables: query.sign_tables.iter().map(|t| pulp::cast([*t, *t])).collect(),
            coarse: query.coarse.iter().map(|q| pulp::cast(*q)).collect(),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx2 {
    #[inline(always)]
    fn sign_block(&self, _: &Query, block: &[u8], sums: &mut [u32; SIGN_BLOCK_ROWS]) {
        sign_block_avx2(self.simd, &self.tables, block, sums)
    }

    #[inline(always)]
    fn sign_pass(&self, query: &Query, sums: &[u32; SIGN_BLOCK_ROWS], factors: &SignBlockFactors, floor: f32) -> u32 {
        sign_pass_avx2(self.simd, query, sums, factors, floor)
    }

    #[inline(always)]
    fn coarse_dot(&self, _: &Query, row: &[u8]) -> i32 {
        coarse_dot_avx2(self.simd, &self.coarse, row)
    }

    #[inline(always)]
    fn prefetch(&self, row: &[u8]) {
        // A hint: it reads nothing and cannot fault.
        self.simd.sse._mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(row.as_ptr().cast());
    }
}

/// [`Query::sign_block_portable`] in AVX2: `tables` are the query's sign
/// tables, each repeated in both 128-bit lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sign_block_avx2(
    simd: pulp::x86::V3,
    tables: &[std::arch::x86_64::__m256i],
    block: &[u8],
    sums: &mut [u32; SIGN_BLOCK_ROWS],
) {
    let (avx, avx2) = (simd.avx, simd.avx2);
    let nibble = avx._mm256_set1_epi8(15);
    let low_byte = avx._mm256_set1_epi16(0xff);
    sums.fill(0);
    for (chunk, tables) in block.chunks(SIGN_CHUNK * SIGN_BLOCK_ROWS).zip(tables.chunks(2 * SIGN_CHUNK)) {
        // Even rows in the low byte of each 16-bit lane, odd rows in the high.
        let (mut even, mut odd) = (avx._mm256_setzero_si256(), avx._mm256_setzero_si256());
        for (bytes, t) in chunk.chunks_exact(SIGN_BLOCK_ROWS).zip(tables.chunks_exact(2)) {
            let bytes: [u8; SIGN_BLOCK_ROWS] = bytes.try_into().expect("blocks of 32 rows");
            let x = pulp::cast(bytes);
            let low = avx2._mm256_and_si256(x, nibble);
            let high = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(x), nibble);
            let s = avx2._mm256_add_epi8(avx2._mm256_shuffle_epi8(t[0], low), avx2._mm256_shuffle_epi8(t[1], high));
            even = avx2._mm256_add_epi16(even, avx2._mm256_and_si256(s, low_byte));
            odd = avx2._mm256_add_epi16(odd, avx2._mm256_srli_epi16::<8>(s));
        }
        let (even, odd): ([u16; 16], [u16; 16]) = (pulp::cast(even), pulp::cast(odd));
        for i in 0..16 {
            sums[2 * i] += u32::from(even[i]);
            sums[2 * i + 1] += u32::from(odd[i]);
        }
    }
}

/// [`Query::sign_pass_portable`] in AVX2, with the same operations in the
/// same order (no fused multiply-add), so both give the same lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sign_pass_avx2(
    simd: pulp::x86::V3,
    query: &Query,
    sums: &[u32; SIGN_BLOCK_ROWS],
    factors: &SignBlockFactors,
    floor: f32,
) -> u32 {
    use std::arch::x86_64::{__m256, __m256i, _CMP_GE_OQ};
    let avx = simd.avx;
    let (two, offset) = (avx._mm256_set1_ps(2.0), avx._mm256_set1_ps(query.sign_offset));
    let (unscale, floor) = (avx._mm256_set1_ps(query.sign_unscale), avx._mm256_set1_ps(floor));
    let sums: [__m256i; 4] = pulp::cast(*sums);
    let scale: [__m256; 4] = pulp::cast(factors.scale);
    let bound: [__m256; 4] = pulp::cast(factors.bound);
    let mut pass = 0u32;
    for i in 0..4 {
        // Sums stay far below 2^24: exact as `f32`, and as `i32`.
        let dot = avx._mm256_sub_ps(avx._mm256_mul_ps(two, avx._mm256_cvtepi32_ps(sums[i])), offset);
        let estimate = avx._mm256_mul_ps(avx._mm256_mul_ps(dot, unscale), scale[i]);
        let reach = avx._mm256_cmp_ps::<_CMP_GE_OQ>(avx._mm256_add_ps(estimate, bound[i]), floor);
        pass |= (avx._mm256_movemask_ps(reach) as u32) << (8 * i);
    }
    pass
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
// Slot lists of one range are what the scans take.
#[allow(clippy::single_range_in_vec_init)]
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

    /// A stored row holds exactly what encoding the vector gives, bit for
    /// bit, and a blob of another length is refused.
    #[test]
    fn stored_row_codes_are_the_encoded_codes() {
        for dim in [3, 128, 256, 300] {
            let layout = Layout::new(dim);
            for v in [vector(7, dim), vec![0.0; dim]] {
                let blob = encode_row(layout, &v);
                let row = decode_row(layout, &blob).unwrap();
                let (mut coarse, mut fine, mut signs) =
                    (vec![0u8; layout.coarse_bytes()], vec![0i8; dim], vec![0u8; layout.sign_bytes()]);
                let factors = encode(layout, &v, &mut coarse, &mut fine);
                let sign_factors = encode_signs(layout, &v, &mut signs);
                assert_eq!(row.factors.coarse.to_bits(), factors.coarse.to_bits());
                assert_eq!(row.factors.fine.to_bits(), factors.fine.to_bits());
                assert_eq!(row.sign_factors, sign_factors);
                assert_eq!((row.signs, row.coarse), (signs.as_slice(), coarse.as_slice()));
                assert!(row.fine.iter().zip(&fine).all(|(&b, &c)| b as i8 == c));
                assert_eq!(row.fine.len(), dim);
                assert!(decode_row(layout, &blob[1..]).is_none());
            }
        }
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
            let slots = [0..7, 8..rows];
            query.coarse_scan(layout, &coarse, &factors, &slots, |s, e| fast.push((s, e)));
            let mut portable = Vec::new();
            query.scan_rows(layout, &coarse, &factors, &slots, |s, e| portable.push((s, e)), &Portable);
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

    /// Rows in sign blocks, as the index lays them out.
    fn sign_blocks(layout: Layout, vectors: &[Vec<f32>]) -> (Vec<u8>, Vec<SignBlockFactors>) {
        let bytes = layout.sign_bytes();
        let mut blocks = vec![0u8; vectors.len().div_ceil(SIGN_BLOCK_ROWS) * layout.sign_block_bytes()];
        let mut factors = vec![SignBlockFactors::default(); vectors.len().div_ceil(SIGN_BLOCK_ROWS)];
        let mut row = vec![0u8; bytes];
        for (slot, v) in vectors.iter().enumerate() {
            factors[slot / SIGN_BLOCK_ROWS].set(slot % SIGN_BLOCK_ROWS, encode_signs(layout, v, &mut row));
            let block = slot / SIGN_BLOCK_ROWS * layout.sign_block_bytes();
            for (p, &b) in row.iter().enumerate() {
                blocks[block + p * SIGN_BLOCK_ROWS + slot % SIGN_BLOCK_ROWS] = b;
            }
        }
        (blocks, factors)
    }

    /// The table kernel (AVX2 where the CPU has it) and the portable loop
    /// give the same sums; the sum is exactly `Σ q·sign` of the scaled query;
    /// the estimate tracks the cosine; rows outside the slot ranges and
    /// blocks with no wanted row are left out. 2,200 dimensions exercise the widening of
    /// the 16-bit sums.
    #[test]
    fn sign_kernels_agree_and_estimate_the_cosine() {
        for dim in [3, 64, 256, 300, 2200] {
            let layout = Layout::new(dim);
            let rows = 100;
            let vectors: Vec<Vec<f32>> = (0..rows as u64).map(|i| vector(i + 7, dim)).collect();
            let (blocks, factors) = sign_blocks(layout, &vectors);
            let q = vector(4242, dim);
            let query = Query::new(layout, &q);
            let keep = |s: usize| s != 5 && !(32..64).contains(&s);
            let slots = [1..5, 6..32, 64..rows];
            let mut fast = Vec::new();
            query.sign_scan(layout, &blocks, &factors, &slots, |s, e| fast.push((s, e)));
            let mut portable = Vec::new();
            let mut visit = |s, e| portable.push((s, e));
            query.sign_blocks(layout, &blocks, &factors, &slots, &mut visit, &Portable);
            assert_eq!(fast, portable, "dim {dim}");
            assert_eq!(
                fast.iter().map(|f| f.0).collect::<Vec<_>>(),
                (1..rows).filter(|&s| keep(s)).collect::<Vec<_>>()
            );

            let largest = q.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scaled: Vec<f32> = q.iter().map(|x| (x / largest * SIGN_QUERY_MAX).round()).collect();
            // Sign bits say little about a vector of a few dimensions.
            let tolerance = if dim < 100 { f32::INFINITY } else { 0.25 };
            for &(slot, estimate) in &fast {
                let v = &vectors[slot];
                let signed: f32 = scaled.iter().zip(v).map(|(q, x)| if *x >= 0.0 { *q } else { -q }).sum();
                let want = signed * largest / SIGN_QUERY_MAX
                    * factors[slot / SIGN_BLOCK_ROWS].scale[slot % SIGN_BLOCK_ROWS]
                    * inv_norm(&q);
                assert!((estimate - want).abs() < 1e-4 * want.abs().max(1.0), "dim {dim}: {estimate} vs {want}");
                let exact = cosine(&q, v);
                assert!((estimate - exact).abs() < tolerance, "dim {dim}: sign {estimate} vs {exact}");
            }
        }
    }

    /// Collects every offer; the threshold stays where the test puts it.
    struct All(f32, Vec<(usize, f32)>);

    impl Sink for All {
        fn threshold(&self) -> f32 {
            self.0
        }
        fn offer(&mut self, slot: usize, estimate: f32) {
            self.1.push((slot, estimate));
        }
    }

    /// The fused scan offers exactly the rows whose sign estimate plus bound
    /// reaches the threshold, with their coarse estimate, on both kernels;
    /// and the bound holds for nearly every row.
    #[test]
    fn sign_coarse_scan_offers_what_the_bound_lets_through() {
        let dim = 256;
        let layout = Layout::new(dim);
        let rows = 2000;
        let vectors: Vec<Vec<f32>> = (0..rows as u64).map(|i| vector(i + 11, dim)).collect();
        let (signs, sign_factors) = sign_blocks(layout, &vectors);
        let mut coarse = vec![0u8; rows * layout.coarse_bytes()];
        let mut fine = vec![0i8; rows * dim];
        let mut factors = Vec::new();
        let mut sign_factors = sign_factors;
        for (i, v) in vectors.iter().enumerate() {
            let c = &mut coarse[i * layout.coarse_bytes()..(i + 1) * layout.coarse_bytes()];
            factors.push(encode(layout, v, c, &mut fine[i * dim..(i + 1) * dim]));
            sign_factors[i / SIGN_BLOCK_ROWS].coarse[i % SIGN_BLOCK_ROWS] = factors[i].coarse;
        }
        let q = vector(77, dim);
        let query = Query::new(layout, &q);
        let mut sign = Vec::new();
        let bound = |s: usize| sign_factors[s / SIGN_BLOCK_ROWS].bound[s % SIGN_BLOCK_ROWS];
        query.sign_scan(layout, &signs, &sign_factors, &[0..rows], |s, e| sign.push(e + bound(s)));
        let mut coarse_all = Vec::new();
        query.coarse_scan(layout, &coarse, &factors, &[0..rows], |s, e| coarse_all.push((s, e)));
        let threshold = 0.2;
        let want: Vec<(usize, f32)> = coarse_all.iter().copied().filter(|&(s, _)| sign[s] >= threshold).collect();
        assert!(!want.is_empty() && want.len() < rows / 2, "{} let through", want.len());
        let mut fast = All(threshold, Vec::new());
        let codes = Codes { layout, signs: &signs, sign_factors: &sign_factors, coarse: &coarse };
        query.sign_coarse_scan(codes, &[0..rows], &mut fast);
        assert_eq!(fast.1, want);
        let mut portable = All(threshold, Vec::new());
        query.sign_coarse_with(codes, &[0..rows], &mut portable, &Portable);
        assert_eq!(portable.1, want);
        let within = (0..rows).filter(|&s| sign[s] >= cosine(&q, &vectors[s])).count();
        assert!(within * 100 >= rows * 95, "the bound held for {within} of {rows}");
    }

    /// Ranges become each touched block once, with the lanes they cover,
    /// however they fall across block boundaries.
    #[test]
    fn blocks_merge_ranges_that_share_a_block() {
        let blocks = |slots: &[std::ops::Range<usize>]| Blocks::new(slots).collect::<Vec<_>>();
        assert_eq!(blocks(&[]), []);
        assert_eq!(blocks(&[0..32]), [(0, u32::MAX)]);
        assert_eq!(
            blocks(&[3..5, 7..8, 31..33, 40..41, 64..64, 96..160]),
            [(0, 0b11000 | 1 << 7 | 1 << 31), (1, 0b1 | 1 << 8), (3, u32::MAX), (4, u32::MAX)]
        );
        assert_eq!(blocks(&[33..34, 100..101]), [(1, 0b10), (3, 0b10000)]);
    }

    #[test]
    fn zero_vector_scores_zero() {
        let layout = Layout::new(8);
        let (mut coarse, mut fine) = (vec![0u8; layout.coarse_bytes()], vec![0i8; 8]);
        let factors = encode(layout, &[0.0; 8], &mut coarse, &mut fine);
        let query = Query::new(layout, &vector(5, 8));
        let mut seen = Vec::new();
        query.coarse_scan(layout, &coarse, &[factors], &[0..1], |_, e| seen.push(e));
        assert_eq!(seen, [0.0]);
        let mut candidate = [(1.0, 0)];
        query.fine_scores(&fine, &[factors], &mut candidate);
        assert_eq!(candidate[0].0, 0.0);
        let (blocks, sign_factors) = sign_blocks(layout, &[vec![0.0; 8]]);
        let mut seen = Vec::new();
        query.sign_scan(layout, &blocks, &sign_factors, &[0..1], |_, e| seen.push(e));
        assert_eq!(seen, [0.0]);
    }
}
