//! The in-memory vector index: compact codes of every vector (see
//! `quant.rs`), searched in three stages, with exact distances in the answer.
//!
//! 1. **Sign scan.** Every row passing the filter is scored from its sign
//!    bits. This is the only stage that touches every row, and it reads
//!    32 bytes per 256-d row, 32 rows at a time. Each estimate comes with
//!    RaBitQ's error bound; a row whose estimate plus bound cannot reach the
//!    current cut-off of stage 2 goes no further (a few percent of a
//!    million random rows do). When the filter leaves fewer than
//!    [`SIGN_SCAN_MIN_ROWS`], or rows so scattered that they fill less than
//!    a quarter of the blocks they touch, this stage is skipped.
//! 2. **Coarse re-rank.** The rows stage 1 lets through (or every passing
//!    row) are scored from their 2-bit codes; the best [`coarse_candidates`]
//!    are kept.
//! 3. **Fine re-rank.** Those candidates are scored from their `i8` codes;
//!    the best [`exact_candidates`] are kept.
//! 4. **Exact rescore.** Their `f32` vectors are read from SQLite (the
//!    caller's `exact` function) and the cosine distance is computed exactly
//!    as the full scan does ([`VectorIndex::exact_nearest`], kept as the
//!    reference); the best `k` are the answer.
//!
//! So the distances returned are exact, and the rows are the exact top `k`
//! unless a true neighbour ranked below the cut-off of stage 1 or 2. Both
//! cut-offs are generous (`benches/search.rs` measures recall@10 against the
//! exact scan in the same run, on random vectors: the hardest case for
//! quantisation). Every count follows the number of rows passing the filter,
//! not the store's size, so a filtered query does work in proportion to the
//! rows it may return. In memory a row costs its codes (`dim / 8 + dim / 4 +
//! dim` bytes) and 20 bytes of factors instead of `4 · dim`: the store's
//! resident memory is about 410 MB after opening a million 256-d rows.
//!
//! Rows are grouped by what a filter can look at (organization, repository,
//! branch and the document's first line, which holds the path). All chunks of
//! a file share a group, and are written together, so the slots of a group
//! form runs: a filter is evaluated once per namespace (its organization,
//! repository and branch) and once per group for its glob (remembered across
//! queries, see [`GlobAnswers`]), then turned into the slot ranges it passes,
//! and the scans read only those ranges' codes, with no test per row: the
//! filter applies before ranking.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rr_core::{PathClass, PathGlob, SearchFilter};

use crate::quant::{self, Blocks, Codes, Factors, Layout, Query, SIGN_BLOCK_ROWS, SignBlockFactors, Sink, Slots};

/// Everything a [`SearchFilter`] can test about a chunk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    pub organization: String,
    pub repository: String,
    pub branch: String,
    /// The document up to its first `\n`. [`rr_core::PathGlob`]'s expression
    /// (`^Source: [^\n]+:<glob>(?:\n|$)`, no multi-line flag, `.` not matching
    /// `\n`) can only match within the first line, so evaluating it on this
    /// line gives the same answer as on the whole document.
    pub source_line: String,
    /// The class of the file's path, for [`SearchFilter::kinds`].
    pub kind: PathClass,
    /// The chunks' language as filters read it ([`rr_core::filter::filter_language`]), for
    /// [`SearchFilter::languages`].
    pub language: String,
}

impl GroupKey {
    /// Whether the filter's organization, repository and branch pass (its
    /// path glob is [`GlobAnswers`]' job).
    fn source_passes(&self, filter: &SearchFilter) -> bool {
        (filter.organization.is_empty() || self.organization == filter.organization)
            && (filter.repository.is_empty() || self.repository == filter.repository)
            && (filter.branch.is_empty() || self.branch == filter.branch)
    }
}

/// Path globs recently filtered on, each with what is known of its answer
/// for every group, most recent last. A glob costs a regular expression
/// match per group, and every file is a group: about 100,000 matches at a
/// million chunks, 10 ms and more, where the scan itself takes less. Groups
/// are only ever added (a group left without rows keeps its number), so an
/// answer stays right; a glob is matched only on the groups the rest of the
/// filter passes that it has not been matched on yet, and agents come back
/// to the same globs.
#[derive(Debug, Default)]
struct GlobAnswers(Mutex<Vec<(String, Vec<Answer>)>>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Unknown,
    No,
    Yes,
}

/// How many globs [`GlobAnswers`] remembers: a byte per group each.
const GLOB_ANSWERS: usize = 16;

/// Matches past which a glob's evaluation is split over two threads.
const PARALLEL_MIN_MATCHES: usize = 20_000;

impl GlobAnswers {
    /// Clears `pass[g]` for every group `g` whose key does not match `glob`.
    fn apply(&self, glob: &PathGlob, lines: &[Arc<str>], pass: &mut [bool]) {
        let lock = || self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut known = {
            let mut cache = lock();
            match cache.iter().position(|(pattern, _)| pattern == glob.pattern()) {
                Some(i) => cache.remove(i).1,
                None => Vec::new(),
            }
        };
        known.resize(lines.len(), Answer::Unknown);
        let todo: Vec<usize> = (0..lines.len()).filter(|&g| pass[g] && known[g] == Answer::Unknown).collect();
        // Matched without the lock: other queries go on meanwhile.
        let matches =
            |groups: &[usize]| -> Vec<bool> { groups.iter().map(|&g| glob.matches_document(&lines[g])).collect() };
        let found =
            if todo.len() >= PARALLEL_MIN_MATCHES && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
                let (lower, upper) = todo.split_at(todo.len() / 2);
                let (mut lower, upper) = std::thread::scope(|s| {
                    let upper = s.spawn(|| matches(upper));
                    (matches(lower), upper.join().expect("glob thread panicked"))
                });
                lower.extend(upper);
                lower
            } else {
                matches(&todo)
            };
        for (&g, found) in todo.iter().zip(found) {
            known[g] = if found { Answer::Yes } else { Answer::No };
        }
        for (pass, &known) in pass.iter_mut().zip(&known) {
            *pass &= known == Answer::Yes;
        }
        let mut cache = lock();
        cache.retain(|(pattern, _)| pattern != glob.pattern());
        if cache.len() == GLOB_ANSWERS {
            cache.remove(0);
        }
        cache.push((glob.pattern().to_owned(), known));
    }
}

/// The first line of a document, as kept in [`GroupKey::source_line`].
pub(crate) fn source_line(document: &str) -> &str {
    document.split_once('\n').map_or(document, |(first, _)| first)
}

/// Chunks by language and by path class (see [`VectorIndex::facets`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facets {
    pub languages: std::collections::BTreeMap<String, usize>,
    pub kinds: HashMap<PathClass, usize>,
}

/// Which groups pass a filter; `None` when the filter constrains nothing.
#[derive(Debug)]
pub(crate) struct Mask(Option<Vec<bool>>);

impl Mask {
    fn passes(&self, group: u32) -> bool {
        self.0.as_ref().is_none_or(|pass| pass[group as usize])
    }
}

/// Bytes of coarse codes one thread scans before a second thread is worth
/// starting (about 64k rows of 256 dimensions).
const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// Rows passing the filter below which the sign scan is skipped and every
/// passing row is scored from its 2-bit codes. Up to here those codes sit in
/// the CPU's caches (64 bytes a row) and the whole scan takes a few
/// milliseconds, so the rare true neighbour the sign bound misses is not
/// worth risking.
pub(crate) const SIGN_SCAN_MIN_ROWS: usize = 200_000;

/// The sign scan reads every block of 32 slots that holds a passing row,
/// whole (32 bytes a slot and 12 of factors), where the 2-bit scan reads 64
/// bytes and 8 of factors a passing row, and scores it with more
/// instructions. Where the passing rows fill less than a quarter of the
/// slots of the blocks they touch, the sign scan is skipped. (A glob passing
/// one file in five, each file a run of ~10 slots, fills about 40 %: at a
/// million chunks the sign scan took 8.1 ms of CPU a query there, the 2-bit
/// scan 10.6 in a run under a little more load.)
fn sign_scan_pays(passing: usize, slots: Slots<'_>) -> bool {
    let touched = Blocks::new(slots).count();
    4 * passing >= touched * SIGN_BLOCK_ROWS
}

/// Rows kept from the 2-bit codes behind the sign scan. The cut-off of
/// these is what the sign bound is tested against, so the fewer, the fewer
/// rows get past the signs; but enough that the exact top 10 stay among
/// them: random 256-d vectors put it within the first ~270 coarse ranks of a
/// million (99th percentile 180).
pub(crate) fn sign_scan_candidates(k: usize) -> usize {
    (25 * k).max(500)
}

/// Rows kept by the coarse scan out of `rows` passing the filter: at least
/// 1,000 (re-ranking them costs tens of microseconds), and more as the store
/// grows, since more rows then crowd the cut-off. Random 256-d vectors put
/// the exact top 10 within the first ~330 coarse ranks at 100k rows and
/// ~230 at 1M (99th percentile 102 and 150); this keeps 1,000 and 4,000 for `k` = 10, and
/// proportionally more for a larger `k`.
pub(crate) fn coarse_candidates(k: usize, rows: usize) -> usize {
    let per_result = ((rows as f64).powf(0.6) / 10.0).ceil() as usize;
    (k.max(10) * per_result).max(1000).min(rows)
}

/// Rows whose `f32` vectors are read for the exact rescore. The `i8` ranking
/// put the exact top 10 within its first 12 on a million random vectors,
/// but hash embeddings (sparse, many near ties) need more: with `k + k/2 + 8`
/// the fixture store's exact top 10 lost a row (`tests/store.rs`).
pub(crate) fn exact_candidates(k: usize) -> usize {
    2 * k + 24
}

/// Which codes [`VectorIndex::nearest`] scans every passing row of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstStage {
    /// The sign bits, when the filter leaves at least
    /// [`SIGN_SCAN_MIN_ROWS`] (the search).
    Signs,
    /// The 2-bit codes: what the index did before it had sign codes, kept
    /// for the bench to compare.
    Coarse,
}

/// The `f32` vector of every row, in the index's slot order: the exact scan
/// the quantised search is measured against (benches and tests).
#[derive(Debug, Default)]
pub(crate) struct ExactVectors {
    vectors: Vec<f32>,
    inv_norms: Vec<f32>,
}

/// Each row's slot, by pk: a vector indexed by pk while the pks are dense,
/// as SQLite assigns them, with a map for those that are not (negative, or
/// far above the others). At a million rows the vector takes 4 MB where a
/// map takes 34 MiB.
#[derive(Debug, Default)]
struct SlotOf {
    dense: Vec<u32>,
    sparse: HashMap<i64, usize>,
    /// Rows held in `dense`.
    dense_rows: usize,
}

impl SlotOf {
    const NONE: u32 = u32::MAX;
    /// Pks up to this many entries past twice the rows go in `dense`.
    const SLACK: usize = 1 << 16;

    fn get(&self, pk: i64) -> Option<usize> {
        match usize::try_from(pk).ok().and_then(|i| self.dense.get(i)) {
            Some(&slot) if slot != Self::NONE => Some(slot as usize),
            // A pk kept in `sparse` before `dense` grew past it.
            _ => self.sparse.get(&pk).copied(),
        }
    }

    fn insert(&mut self, pk: i64, slot: usize) {
        let fits = u32::try_from(slot).is_ok_and(|s| s != Self::NONE);
        if let (Ok(i), true) = (usize::try_from(pk), fits) {
            if i >= self.dense.len() && i < 2 * (self.dense_rows + self.sparse.len()) + Self::SLACK {
                self.dense.resize(i + 1, Self::NONE);
            }
            if let Some(entry) = self.dense.get_mut(i) {
                if *entry == Self::NONE {
                    self.dense_rows += 1;
                    if !self.sparse.is_empty() {
                        self.sparse.remove(&pk);
                    }
                }
                *entry = slot as u32;
                return;
            }
        }
        self.sparse.insert(pk, slot);
    }

    fn remove(&mut self, pk: i64) -> Option<usize> {
        match usize::try_from(pk).ok().and_then(|i| self.dense.get_mut(i)) {
            Some(entry) if *entry != Self::NONE => {
                self.dense_rows -= 1;
                Some(std::mem::replace(entry, Self::NONE) as usize)
            }
            _ => self.sparse.remove(&pk),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct VectorIndex {
    layout: Layout,
    pks: Vec<i64>,
    groups: Vec<u32>,
    factors: Vec<Factors>,
    /// Sign codes in blocks of [`SIGN_BLOCK_ROWS`] slots (see `quant.rs`);
    /// lanes past the last slot are zero.
    signs: Vec<u8>,
    /// One per block of `signs`; lanes past the last slot are zero.
    sign_factors: Vec<SignBlockFactors>,
    /// 2-bit codes, each row starting on a cache line when rows are 64 bytes.
    coarse: Lines,
    fine: Vec<i8>,
    slot_of: SlotOf,
    /// Each group's source line; its organization, repository and branch
    /// are its namespace's. A store has a group per file: a whole key per
    /// group took some 270 bytes more.
    lines: Vec<Arc<str>>,
    /// The first group with a source line; a group whose line an earlier
    /// group of another namespace has is in `other_groups` (a source line
    /// names its namespace, so mostly none is).
    group_of: HashMap<Arc<str>, u32>,
    other_groups: HashMap<GroupKey, u32>,
    /// Each group's namespace: the index in `namespaces` of its
    /// organization, repository and branch. A source filter is tested once
    /// per namespace (tens) instead of once per group (every file).
    group_namespace: Vec<u32>,
    namespaces: Vec<GroupKey>,
    namespace_of: HashMap<(String, String, String), u32>,
    members: Vec<u32>,
    /// Each group's path class.
    group_kind: Vec<PathClass>,
    /// Each group's language, an index in `languages`.
    group_language: Vec<u32>,
    languages: Vec<String>,
    language_of: HashMap<String, u32>,
    /// Runs of consecutive slots of one group, as (first slot, group), built
    /// when a query needs them after a change that is not an append. The
    /// chunks of a file are written together, so a store has about as many
    /// runs as files, and the rows a filter passes come as slot ranges: a
    /// filtered scan reads only their codes, with no test per row.
    runs: OnceLock<Vec<(u32, u32)>>,
    glob_answers: GlobAnswers,
    /// [`SIGN_SCAN_MIN_ROWS`]; tests lower it.
    sign_scan_min_rows: usize,
}

impl VectorIndex {
    /// An empty index for `dim`-dimensional vectors (0 = not yet known).
    pub fn new(dim: usize) -> Self {
        VectorIndex { layout: Layout::new(dim), sign_scan_min_rows: SIGN_SCAN_MIN_ROWS, ..Default::default() }
    }

    pub fn dim(&self) -> usize {
        self.layout.dim
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn set_dim(&mut self, dim: usize) {
        debug_assert!(self.pks.is_empty() || self.layout.dim == dim);
        self.layout = Layout::new(dim);
    }

    pub fn len(&self) -> usize {
        self.pks.len()
    }

    /// Makes room for `rows` more rows.
    pub fn reserve(&mut self, rows: usize) {
        self.pks.reserve(rows);
        self.groups.reserve(rows);
        self.factors.reserve(rows);
        self.sign_factors.reserve((self.len() + rows).div_ceil(SIGN_BLOCK_ROWS) - self.sign_factors.len());
        self.signs.reserve((self.len() + rows).div_ceil(SIGN_BLOCK_ROWS) * self.layout.sign_block_bytes());
        self.coarse.reserve(rows * self.layout.coarse_bytes());
        self.fine.reserve(rows * self.layout.dim);
    }

    /// Adds a row, or replaces the row with the same `pk` (the store writes
    /// codes it has stored: [`VectorIndex::insert_codes`]).
    #[cfg(test)]
    pub fn insert(&mut self, pk: i64, key: GroupKey, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.layout.dim);
        let blob = quant::encode_row(self.layout, vector);
        let codes = quant::decode_row(self.layout, &blob).expect("a blob of the layout's length");
        let group = self.group(key);
        self.insert_codes(pk, group, codes);
    }

    /// [`VectorIndex::insert`] of a row whose codes were made by
    /// [`quant::encode_row`] with this index's layout, in group `group`
    /// (from [`VectorIndex::group`]).
    pub fn insert_codes(&mut self, pk: i64, group: u32, codes: quant::RowCodes<'_>) {
        let slot = match self.slot_of.get(pk) {
            Some(slot) => {
                self.members[self.groups[slot] as usize] -= 1;
                if self.groups[slot] != group {
                    self.runs.take();
                }
                self.groups[slot] = group;
                slot
            }
            None => {
                let slot = self.pks.len();
                self.slot_of.insert(pk, slot);
                self.pks.push(pk);
                self.groups.push(group);
                if let Some(runs) = self.runs.get_mut()
                    && runs.last().is_none_or(|&(_, last)| last != group)
                {
                    runs.push((slot as u32, group));
                }
                self.factors.push(Factors::default());
                if slot.is_multiple_of(SIGN_BLOCK_ROWS) {
                    self.signs.resize(self.signs.len() + self.layout.sign_block_bytes(), 0);
                    self.sign_factors.push(SignBlockFactors::default());
                }
                self.coarse.resize((slot + 1) * self.layout.coarse_bytes());
                self.fine.resize((slot + 1) * self.layout.dim, 0);
                slot
            }
        };
        let (bytes, dim) = (self.layout.coarse_bytes(), self.layout.dim);
        self.factors[slot] = codes.factors;
        self.coarse.as_mut_slice()[slot * bytes..(slot + 1) * bytes].copy_from_slice(codes.coarse);
        for (fine, &byte) in self.fine[slot * dim..(slot + 1) * dim].iter_mut().zip(codes.fine) {
            *fine = byte as i8;
        }
        let block = &mut self.sign_factors[slot / SIGN_BLOCK_ROWS];
        block.set(slot % SIGN_BLOCK_ROWS, codes.sign_factors);
        block.coarse[slot % SIGN_BLOCK_ROWS] = codes.factors.coarse;
        self.set_signs(slot, codes.signs);
        self.members[group as usize] += 1;
    }

    /// Where byte `p` of `slot`'s sign codes sits in `signs`.
    fn sign_position(&self, slot: usize, p: usize) -> usize {
        let block = slot / SIGN_BLOCK_ROWS;
        block * self.layout.sign_block_bytes() + p * SIGN_BLOCK_ROWS + slot % SIGN_BLOCK_ROWS
    }

    fn set_signs(&mut self, slot: usize, bytes: &[u8]) {
        for (p, &byte) in bytes.iter().enumerate() {
            let at = self.sign_position(slot, p);
            self.signs[at] = byte;
        }
    }

    fn signs_of(&self, slot: usize) -> Vec<u8> {
        (0..self.layout.sign_bytes()).map(|p| self.signs[self.sign_position(slot, p)]).collect()
    }

    fn sign_factors_of(&self, slot: usize) -> quant::SignFactors {
        self.sign_factors[slot / SIGN_BLOCK_ROWS].get(slot % SIGN_BLOCK_ROWS)
    }

    /// Removes the row `pk` if present.
    pub fn remove(&mut self, pk: i64) {
        let Some(slot) = self.slot_of.remove(pk) else { return };
        self.members[self.groups[slot] as usize] -= 1;
        self.runs.take();
        let last = self.pks.len() - 1;
        let (bytes, dim) = (self.layout.coarse_bytes(), self.layout.dim);
        if slot != last {
            let moved = self.pks[last];
            self.slot_of.insert(moved, slot);
            self.coarse.as_mut_slice().copy_within(last * bytes..(last + 1) * bytes, slot * bytes);
            self.fine.copy_within(last * dim..(last + 1) * dim, slot * dim);
            let signs = self.signs_of(last);
            self.set_signs(slot, &signs);
            let factors = self.sign_factors_of(last);
            let block = &mut self.sign_factors[slot / SIGN_BLOCK_ROWS];
            block.set(slot % SIGN_BLOCK_ROWS, factors);
            block.coarse[slot % SIGN_BLOCK_ROWS] = self.factors[last].coarse;
        }
        self.set_signs(last, &vec![0; self.layout.sign_bytes()]);
        let block = &mut self.sign_factors[last / SIGN_BLOCK_ROWS];
        block.set(last % SIGN_BLOCK_ROWS, Default::default());
        block.coarse[last % SIGN_BLOCK_ROWS] = 0.0;
        if last.is_multiple_of(SIGN_BLOCK_ROWS) {
            self.signs.truncate(self.signs.len() - self.layout.sign_block_bytes());
            self.sign_factors.pop();
        }
        self.pks.swap_remove(slot);
        self.groups.swap_remove(slot);
        self.factors.swap_remove(slot);
        self.coarse.resize(last * bytes);
        self.fine.truncate(last * dim);
    }

    /// The group of rows with `key`, made when it is new.
    pub fn group(&mut self, key: GroupKey) -> u32 {
        if let Some(&g) = self.group_of.get(key.source_line.as_str()) {
            let ns = &self.namespaces[self.group_namespace[g as usize] as usize];
            if (&ns.organization, &ns.repository, &ns.branch) == (&key.organization, &key.repository, &key.branch) {
                return g;
            }
            if let Some(&g) = self.other_groups.get(&key) {
                return g;
            }
        }
        let g = self.lines.len() as u32;
        self.group_kind.push(key.kind);
        let next = self.languages.len() as u32;
        let language = *self.language_of.entry(key.language.clone()).or_insert(next);
        if language == next {
            self.languages.push(key.language.clone());
        }
        self.group_language.push(language);
        let namespace = (key.organization.clone(), key.repository.clone(), key.branch.clone());
        let next = self.namespaces.len() as u32;
        let ns = *self.namespace_of.entry(namespace).or_insert(next);
        if ns == next {
            self.namespaces.push(GroupKey { source_line: String::new(), ..key.clone() });
        }
        self.group_namespace.push(ns);
        let line: Arc<str> = Arc::from(key.source_line.as_str());
        self.lines.push(line.clone());
        match self.group_of.entry(line) {
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(g);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.other_groups.insert(key, g);
            }
        }
        self.members.push(0);
        g
    }

    /// The chunks of each language and each path class, of the rows that
    /// pass `filter`'s organization, repository, branch and path (not its
    /// languages and kinds): what a filter by language or kind can find.
    pub fn facets(&self, filter: &SearchFilter) -> Facets {
        let unfaceted = SearchFilter { languages: Vec::new(), kinds: Vec::new(), ..filter.clone() };
        let mask = self.mask(&unfaceted);
        let mut facets = Facets::default();
        for (g, &rows) in self.members.iter().enumerate() {
            if rows == 0 || !mask.passes(g as u32) {
                continue;
            }
            *facets.languages.entry(self.languages[self.group_language[g] as usize].clone()).or_default() +=
                rows as usize;
            *facets.kinds.entry(self.group_kind[g]).or_default() += rows as usize;
        }
        facets
    }

    /// Evaluates `filter` once per live group.
    pub fn mask(&self, filter: &SearchFilter) -> Mask {
        let unconstrained = filter.organization.is_empty()
            && filter.repository.is_empty()
            && filter.branch.is_empty()
            && filter.path.is_none()
            && filter.languages.is_empty()
            && filter.kinds.is_empty();
        if unconstrained {
            return Mask(None);
        }
        let namespace_passes: Vec<bool> = self.namespaces.iter().map(|ns| ns.source_passes(filter)).collect();
        let mut pass: Vec<bool> = self
            .group_namespace
            .iter()
            .zip(&self.members)
            .map(|(&ns, &n)| n > 0 && namespace_passes[ns as usize])
            .collect();
        if !filter.kinds.is_empty() {
            for (pass, kind) in pass.iter_mut().zip(&self.group_kind) {
                *pass &= filter.kinds.contains(kind);
            }
        }
        if !filter.languages.is_empty() {
            let wanted: Vec<bool> = self.languages.iter().map(|l| filter.languages.contains(l)).collect();
            for (pass, &language) in pass.iter_mut().zip(&self.group_language) {
                *pass &= wanted[language as usize];
            }
        }
        if let Some(glob) = &filter.path {
            self.glob_answers.apply(glob, &self.lines, &mut pass);
        }
        Mask(Some(pass))
    }

    /// Forgets every remembered glob answer (see [`GlobAnswers`]).
    pub fn forget_glob_answers(&self) {
        self.glob_answers.0.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The slots of the rows passing `mask`, as ranges in increasing order.
    pub fn slots(&self, mask: &Mask) -> Vec<Range<usize>> {
        let rows = self.len();
        if mask.0.is_none() {
            return if rows == 0 { Vec::new() } else { std::iter::once(0..rows).collect() };
        }
        let runs = self.runs.get_or_init(|| {
            let mut runs: Vec<(u32, u32)> = Vec::new();
            for (slot, &group) in self.groups.iter().enumerate() {
                if runs.last().is_none_or(|&(_, last)| last != group) {
                    runs.push((slot as u32, group));
                }
            }
            runs
        });
        let mut slots: Vec<Range<usize>> = Vec::new();
        for (i, &(start, group)) in runs.iter().enumerate() {
            if !mask.passes(group) {
                continue;
            }
            let (start, end) = (start as usize, runs.get(i + 1).map_or(rows, |&(next, _)| next as usize));
            match slots.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => slots.push(start..end),
            }
        }
        slots
    }

    /// The rows of the files `score` names (a score above 0 from the file's
    /// path), at most `files` files, the highest score first (ties: the
    /// file stored first), each file's first `per_file` rows in the order
    /// they were written (the file's order). Groups are files: the path is
    /// the source line after its namespace's `Source: org/repo@branch:`.
    pub fn named_rows(&self, mask: &Mask, files: usize, per_file: usize, score: impl Fn(&str) -> f64) -> Vec<i64> {
        // One source-line prefix per namespace (tens), not per file.
        let prefixes: Vec<String> = self
            .namespaces
            .iter()
            .map(|ns| format!("Source: {}/{}@{}:", ns.organization, ns.repository, ns.branch))
            .collect();
        let mut named: Vec<(f64, u32)> = Vec::new();
        for (group, line) in self.lines.iter().enumerate() {
            let group = group as u32;
            if self.members[group as usize] == 0 || !mask.passes(group) {
                continue;
            }
            let prefix = &prefixes[self.group_namespace[group as usize] as usize];
            let Some(path) = line.strip_prefix(prefix.as_str()) else { continue };
            let s = score(path);
            if s > 0.0 {
                named.push((s, group));
            }
        }
        named.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        named.truncate(files);
        let mut rows = Vec::new();
        for (_, group) in named {
            rows.extend(
                self.pks.iter().zip(&self.groups).filter(|&(_, &g)| g == group).map(|(&pk, _)| pk).take(per_file),
            );
        }
        rows
    }

    /// The pks of the rows passing `mask`.
    pub fn passing<'a>(&'a self, mask: &'a Mask) -> impl Iterator<Item = i64> + 'a {
        self.pks.iter().zip(&self.groups).filter(move |&(_, &group)| mask.passes(group)).map(|(&pk, _)| pk)
    }

    /// The `k` rows passing `mask` with the smallest cosine distance to
    /// `query`, closest first; ties go to the smaller `pk`. A zero vector is
    /// at distance 1 from everything. `exact(pk, buf)` fills `buf` with the
    /// row's `f32` vector, or returns `false` when the row is gone; the
    /// distances come from those vectors (see the module docs).
    pub fn nearest<E>(
        &self,
        query: &[f32],
        k: usize,
        mask: &Mask,
        first: FirstStage,
        mut exact: impl FnMut(i64, &mut Vec<f32>) -> Result<bool, E>,
    ) -> Result<Vec<(i64, f64)>, E> {
        debug_assert_eq!(query.len(), self.layout.dim);
        let rows = self.pks.len();
        if k == 0 || rows == 0 || self.layout.dim == 0 {
            return Ok(Vec::new());
        }
        let slots = self.slots(mask);
        let passing = slots.iter().map(ExactSizeIterator::len).sum();
        if passing == 0 {
            return Ok(Vec::new());
        }
        let prepared = Query::new(self.layout, query);
        let mut candidates = self.candidates(&prepared, k, &slots, passing, first);
        prepared.fine_scores(&self.fine, &self.factors, &mut candidates);
        keep_best(&mut candidates, exact_candidates(k));

        let dim = self.layout.dim;
        let q_inv = quant::inv_norm(query);
        let mut vector = Vec::with_capacity(dim);
        let mut hits = Vec::with_capacity(candidates.len());
        for &(_, slot) in &candidates {
            let pk = self.pks[slot as usize];
            vector.clear();
            if exact(pk, &mut vector)? && vector.len() == dim {
                hits.push(Hit { distance: exact_distance(query, q_inv, &vector, quant::inv_norm(&vector)), pk });
            }
        }
        hits.sort();
        hits.truncate(k);
        Ok(hits.into_iter().map(|h| (h.pk, f64::from(h.distance))).collect())
    }

    /// Stages 1 and 2 (see the module docs): the best
    /// [`coarse_candidates`] of the `passing` rows in `slots`, with their
    /// coarse estimates, in no order.
    fn candidates(
        &self,
        query: &Query,
        k: usize,
        slots: Slots<'_>,
        passing: usize,
        first: FirstStage,
    ) -> Vec<(f32, u32)> {
        let signs = first == FirstStage::Signs && passing >= self.sign_scan_min_rows && sign_scan_pays(passing, slots);
        let keep = if signs { sign_scan_candidates(k) } else { coarse_candidates(k, passing) };
        let mut candidates = if signs {
            let floor = self.sampled_floor(query, keep, slots);
            split_scan(slots, self.layout.sign_bytes(), |part| {
                let mut best = Best::new(keep);
                best.threshold = floor;
                query.sign_coarse_scan(self.codes(), part, &mut best);
                best.found
            })
        } else {
            split_scan(slots, self.layout.coarse_bytes(), |part| {
                let mut best = Best::new(keep);
                let visit = |slot, estimate| best.offer(slot, estimate);
                query.coarse_scan(self.layout, self.coarse.as_slice(), &self.factors, part, visit);
                best.found
            })
        };
        keep_best(&mut candidates, keep);
        candidates
    }

    fn codes(&self) -> Codes<'_> {
        Codes {
            layout: self.layout,
            signs: &self.signs,
            sign_factors: &self.sign_factors,
            coarse: self.coarse.as_slice(),
        }
    }

    /// A cut-off for the sign scan before it starts: the coarse estimate of
    /// about the `2 · keep`-th best row, from every 16th block of rows. Only
    /// rows above it are offered. Without it the cut-off starts at nothing
    /// and rises as the scan goes, and the first part of the store lets
    /// through to the 2-bit codes several times more rows than the rest.
    /// A strided sample, not a prefix, because rows are stored in the order
    /// they were written (a prefix would be one repository's). `-∞` when
    /// the sample is too small to say.
    fn sampled_floor(&self, query: &Query, keep: usize, slots: Slots<'_>) -> f32 {
        const EVERY: usize = 16;
        let mut best = Best::new((2 * keep).div_ceil(EVERY));
        let stride = EVERY * SIGN_BLOCK_ROWS;
        let mut sampled = Vec::new();
        for range in slots {
            let mut slot = range.start;
            while slot < range.end {
                let period = slot / stride * stride;
                if slot < period + SIGN_BLOCK_ROWS {
                    sampled.push(slot..range.end.min(period + SIGN_BLOCK_ROWS));
                }
                slot = period + stride;
            }
        }
        query.sign_coarse_scan(self.codes(), &sampled, &mut best);
        if best.found.len() < best.keep {
            return f32::NEG_INFINITY;
        }
        keep_best(&mut best.found, best.keep);
        best.found.iter().map(|c| c.0).fold(f32::INFINITY, f32::min)
    }

    /// Reads every row's `f32` vector through `exact` (as in
    /// [`VectorIndex::nearest`]), for [`VectorIndex::exact_nearest`].
    pub fn exact_vectors<E>(
        &self,
        mut exact: impl FnMut(i64, &mut Vec<f32>) -> Result<bool, E>,
    ) -> Result<ExactVectors, E> {
        let dim = self.layout.dim;
        let mut out = ExactVectors { vectors: vec![0.0; self.len() * dim], inv_norms: vec![0.0; self.len()] };
        let mut vector = Vec::with_capacity(dim);
        for (slot, &pk) in self.pks.iter().enumerate() {
            vector.clear();
            if exact(pk, &mut vector)? && vector.len() == dim {
                out.vectors[slot * dim..(slot + 1) * dim].copy_from_slice(&vector);
                out.inv_norms[slot] = quant::inv_norm(&vector);
            }
        }
        Ok(out)
    }

    /// What [`VectorIndex::nearest`] approximates: every passing row scored
    /// from its `f32` vector, on two threads when there are many.
    /// The passing rows are read range by range, as the quantised search
    /// reads them, so a filter makes this scan cheaper too.
    pub fn exact_nearest(&self, vectors: &ExactVectors, query: &[f32], k: usize, mask: &Mask) -> Vec<(i64, f64)> {
        let dim = self.layout.dim;
        let rows = self.pks.len();
        if k == 0 || rows == 0 || dim == 0 || vectors.inv_norms.len() != rows {
            return Vec::new();
        }
        let q_inv = quant::inv_norm(query);
        let scan = |part: Slots<'_>| {
            let mut heap = BinaryHeap::with_capacity(k + 1);
            for slot in part.iter().flat_map(Clone::clone) {
                let v = &vectors.vectors[slot * dim..(slot + 1) * dim];
                let distance = exact_distance(query, q_inv, v, vectors.inv_norms[slot]);
                push_bounded(&mut heap, Hit { distance, pk: self.pks[slot] }, k);
            }
            heap.into_vec()
        };
        // Two threads from 8 MiB of codes' worth of rows (32 MiB of `f32`),
        // as before the scans shared `split_scan`.
        let mut hits = BinaryHeap::with_capacity(k + 1);
        for hit in split_scan(&self.slots(mask), dim, scan) {
            push_bounded(&mut hits, hit, k);
        }
        let mut hits = hits.into_vec();
        hits.sort();
        hits.into_iter().map(|h| (h.pk, f64::from(h.distance))).collect()
    }
}

/// `scan` over `slots`, split in two halves of their rows (at a block
/// boundary) on two threads when the codes it reads, `row_bytes` per row,
/// are many.
fn split_scan<T: Send>(slots: Slots<'_>, row_bytes: usize, scan: impl Fn(Slots<'_>) -> Vec<T> + Sync) -> Vec<T> {
    let rows: usize = slots.iter().map(ExactSizeIterator::len).sum();
    let parallel =
        rows * row_bytes >= 2 * PARALLEL_MIN_BYTES && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if !parallel {
        return scan(slots);
    }
    let (lower, upper) = halves(slots, rows / 2);
    let (mut lower, upper) = std::thread::scope(|s| {
        let upper = s.spawn(|| scan(&upper));
        (scan(&lower), upper.join().expect("scan thread panicked"))
    });
    lower.extend(upper);
    lower
}

/// `slots` cut in two after about `half` rows, on a block boundary where
/// the range allows, so the two halves rarely share a block of codes.
fn halves(slots: Slots<'_>, half: usize) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
    let mut seen = 0;
    for (i, range) in slots.iter().enumerate() {
        if seen + range.len() >= half {
            let cut = (range.start + (half - seen)).next_multiple_of(SIGN_BLOCK_ROWS).min(range.end);
            let mut lower = slots[..i].to_vec();
            lower.push(range.start..cut);
            let mut upper: Vec<_> = std::iter::once(cut..range.end).chain(slots[i + 1..].iter().cloned()).collect();
            lower.retain(|r| !r.is_empty());
            upper.retain(|r| !r.is_empty());
            return (lower, upper);
        }
        seen += range.len();
    }
    (slots.to_vec(), Vec::new())
}

/// A byte buffer whose first byte sits on a 64-byte boundary, so that a
/// 64-byte row of codes read at random costs one cache line, not two (a
/// large `Vec<u8>` from the allocator starts 16 bytes past a page).
#[derive(Debug, Default)]
struct Lines {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Lines {
    const LINE: usize = 64;

    fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    fn reserve(&mut self, additional: usize) {
        self.buf.reserve((self.start + self.len + additional + Self::LINE).saturating_sub(self.buf.len()));
        self.realign();
    }

    /// Grows (with zeros) or shrinks to `len` bytes.
    fn resize(&mut self, len: usize) {
        if len > self.len {
            self.buf.resize(self.buf.len().max(self.start + len + Self::LINE), 0);
            self.realign();
            self.buf[self.start + self.len..self.start + len].fill(0);
        }
        self.len = len;
    }

    /// Moves the bytes to the first line boundary of the buffer, which a
    /// reallocation may have moved.
    fn realign(&mut self) {
        let start = (self.buf.as_ptr() as usize).wrapping_neg() % Self::LINE;
        if start != self.start {
            if self.buf.len() < start + self.len {
                self.buf.resize(start + self.len, 0);
            }
            self.buf.copy_within(self.start..self.start + self.len, start);
            self.start = start;
        }
    }
}

/// The best `keep` of the estimates offered, as (estimate, slot), in no
/// order. Everything above the running threshold is collected, and cut back
/// to the best `keep` whenever the buffer doubles: cheaper than a heap when
/// `keep` is in the thousands.
struct Best {
    found: Vec<(f32, u32)>,
    threshold: f32,
    keep: usize,
}

impl Best {
    fn new(keep: usize) -> Self {
        let keep = keep.max(1);
        Best { found: Vec::with_capacity(2 * keep), threshold: f32::NEG_INFINITY, keep }
    }
}

impl Sink for Best {
    #[inline(always)]
    fn threshold(&self) -> f32 {
        self.threshold
    }

    #[inline(always)]
    fn offer(&mut self, slot: usize, estimate: f32) {
        if estimate >= self.threshold {
            self.found.push((estimate, slot as u32));
            if self.found.len() == 2 * self.keep {
                keep_best(&mut self.found, self.keep);
                self.threshold = self.found[self.keep - 1].0;
            }
        }
    }
}

/// Keeps the `keep` highest estimates (ties: lower slot), in no order.
fn keep_best(candidates: &mut Vec<(f32, u32)>, keep: usize) {
    if candidates.len() > keep && keep > 0 {
        candidates.select_nth_unstable_by(keep - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    }
    candidates.truncate(keep);
}

/// The cosine distance both the rescore and the exact scan report.
fn exact_distance(query: &[f32], q_inv: f32, v: &[f32], v_inv: f32) -> f32 {
    1.0 - dot(query, v) * q_inv * v_inv
}

/// Keeps the `k` smallest hits in a max-heap.
fn push_bounded(heap: &mut BinaryHeap<Hit>, hit: Hit, k: usize) {
    if heap.len() < k {
        heap.push(hit);
    } else if let Some(mut worst) = heap.peek_mut()
        && hit < *worst
    {
        *worst = hit;
    }
}

/// A scored row, ordered by distance then pk.
#[derive(Debug, Clone, Copy)]
struct Hit {
    distance: f32,
    pk: i64,
}

impl PartialEq for Hit {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Hit {}
impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        self.distance.total_cmp(&other.distance).then(self.pk.cmp(&other.pk))
    }
}

/// Dot product with 16 independent lanes, which the compiler turns into
/// vector instructions on the baseline target (no `unsafe`, no CPU checks).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
// Slot lists of one range are what the scans take.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use rr_core::PathGlob;

    const RECALL_AT: usize = 10;

    #[test]
    fn one_source_line_in_two_namespaces_makes_two_groups() {
        let mut ix = VectorIndex::new(2);
        let line = "Source: shared:a.go";
        for round in 0..2 {
            ix.insert(1, key("o1", line), &[1.0, 0.0]);
            ix.insert(2, key("o2", line), &[0.0, 1.0]);
            ix.insert(3, key("o1", "Source: o1/r@main:b.go"), &[1.0, 1.0]);
            assert_eq!(ix.lines.len(), 3, "round {round}");
            assert_eq!(ix.other_groups.len(), 1);
        }
        let passing = |org: &str| {
            ix.mask(&SearchFilter { organization: org.into(), path: PathGlob::new("*.go"), ..Default::default() }).0
        };
        assert_eq!(passing("o1"), Some(vec![true, false, true]));
        assert_eq!(passing("o2"), Some(vec![false, true, false]));
    }

    #[test]
    fn slots_are_found_by_pk_dense_or_not() {
        let mut slots = SlotOf::default();
        // Negative, or past twice the rows plus the slack when inserted:
        // kept aside.
        for (slot, pk) in [(0, -3), (1, 1 << 40), (2, 70_000)] {
            slots.insert(pk, slot);
            assert!(slots.sparse.contains_key(&pk), "pk {pk}");
        }
        for pk in 0..3000 {
            slots.insert(pk, 3 + pk as usize);
        }
        slots.insert(71_000, 3003);
        assert!(slots.dense.len() > 70_000, "dense grew past a pk kept aside");
        let found = |slots: &SlotOf| [-3, 1 << 40, 70_000, 0, 2999, 71_000].map(|pk| slots.get(pk));
        assert_eq!(found(&slots), [Some(0), Some(1), Some(2), Some(3), Some(3002), Some(3003)]);
        assert_eq!((slots.get(3000), slots.get(-1), slots.get(1 << 41)), (None, None, None));
        slots.insert(70_000, 7);
        assert_eq!(slots.get(70_000), Some(7));
        assert!(!slots.sparse.contains_key(&70_000), "moved into dense");
        assert_eq!(slots.remove(70_000), Some(7));
        assert_eq!((slots.remove(70_000), slots.get(70_000)), (None, None));
        assert_eq!((slots.remove(-3), slots.remove(2)), (Some(0), Some(5)));
        assert_eq!((slots.get(-3), slots.get(2), slots.get(3)), (None, None, Some(6)));
    }

    fn key(org: &str, line: &str) -> GroupKey {
        GroupKey {
            organization: org.into(),
            repository: "r".into(),
            branch: "main".into(),
            source_line: line.into(),
            kind: PathClass::Source,
            language: String::new(),
        }
    }

    #[test]
    fn first_line_glob_equals_whole_document_glob() {
        let docs = [
            "Source: o/r@main:docs/a.md\nType: markdown\n\nbody",
            "Source: o/r@main:docs/a.md\r\nType: x",
            "Source: o/r@main:a.md",
            "no source line\nSource: o/r@main:a.md\n",
            "",
        ];
        for glob in ["docs/*", "*.md", "a.md", "**/a.md", "a.m?", "*", "docs/a.md?"] {
            let g = PathGlob::new(glob).unwrap();
            for doc in docs {
                assert_eq!(g.matches_document(doc), g.matches_document(source_line(doc)), "{glob} on {doc:?}");
            }
        }
    }

    /// `f32` vectors by pk, as SQLite holds them.
    #[derive(Default)]
    struct Source(HashMap<i64, Vec<f32>>);

    impl Source {
        fn insert(&mut self, ix: &mut VectorIndex, pk: i64, key: GroupKey, v: &[f32]) {
            ix.insert(pk, key, v);
            self.0.insert(pk, v.to_vec());
        }
        fn read(&self, pk: i64, out: &mut Vec<f32>) -> Result<bool, std::convert::Infallible> {
            out.extend(self.0.get(&pk).into_iter().flatten());
            Ok(self.0.contains_key(&pk))
        }
        fn nearest(&self, ix: &VectorIndex, q: &[f32], k: usize, mask: &Mask) -> Vec<(i64, f64)> {
            let coarse = ix.nearest(q, k, mask, FirstStage::Coarse, |pk, out| self.read(pk, out)).unwrap();
            let hits = ix.nearest(q, k, mask, FirstStage::Signs, |pk, out| self.read(pk, out)).unwrap();
            assert_eq!(hits, coarse);
            hits
        }
    }

    #[test]
    fn insert_replace_remove_keep_slots_consistent() {
        let mut ix = VectorIndex::new(2);
        let mut src = Source::default();
        src.insert(&mut ix, 1, key("a", "x"), &[1.0, 0.0]);
        src.insert(&mut ix, 2, key("b", "y"), &[0.0, 1.0]);
        src.insert(&mut ix, 3, key("a", "z"), &[0.6, 0.8]);
        src.insert(&mut ix, 1, key("b", "y"), &[0.0, 2.0]);
        ix.remove(2);
        src.0.remove(&2);
        ix.remove(42);
        assert_eq!(ix.len(), 2);
        let all = Mask(None);
        let hits = src.nearest(&ix, &[0.0, 1.0], 5, &all);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 3]);
        assert!(hits[0].1.abs() < 1e-6);
        assert!((hits[1].1 - 0.2).abs() < 1e-6);
        let only_a = ix.mask(&SearchFilter { organization: "a".into(), ..Default::default() });
        assert_eq!(src.nearest(&ix, &[0.0, 1.0], 5, &only_a).iter().map(|h| h.0).collect::<Vec<_>>(), [3]);
        assert_eq!(ix.passing(&only_a).collect::<Vec<_>>(), [3]);
        assert_eq!(ix.passing(&all).collect::<Vec<_>>(), [1, 3]);
        // A row whose vector is gone from the source is left out.
        src.0.remove(&3);
        assert_eq!(src.nearest(&ix, &[0.0, 1.0], 5, &all).iter().map(|h| h.0).collect::<Vec<_>>(), [1]);
    }

    /// On random vectors, the hardest case for the codes, the stages (with
    /// and without the sign scan)
    /// return what scoring every row exactly returns: same rows, same
    /// distances, same order, with and without filters, after removals.
    #[test]
    fn quantised_search_equals_the_exact_scan() {
        let mut rng = rr_testkit::Rng(42);
        for dim in [64, 200] {
            let mut ix = VectorIndex::new(dim);
            ix.sign_scan_min_rows = 1000;
            let mut src = Source::default();
            for pk in 0..4000 {
                let v = rng.unit_vector(dim);
                src.insert(&mut ix, pk, key(["a", "b", "c"][pk as usize % 3], &format!("f{}", pk / 10)), &v);
            }
            for pk in (0..4000).step_by(7) {
                ix.remove(pk);
                src.0.remove(&pk);
            }
            let exact = ix.exact_vectors(|pk, out| src.read(pk, out)).unwrap();
            let filters = [
                SearchFilter::default(),
                SearchFilter { organization: "b".into(), ..Default::default() },
                SearchFilter { organization: "nobody".into(), ..Default::default() },
            ];
            for q in 0..16 {
                let query = rng.unit_vector(dim);
                let k = [1, 5, 15, 50][q % 4];
                for filter in &filters {
                    let mask = ix.mask(filter);
                    let want = ix.exact_nearest(&exact, &query, k, &mask);
                    assert_eq!(src.nearest(&ix, &query, k, &mask), want, "dim {dim}, query {q}, k {k}");
                    assert_eq!(want.len(), if filter.organization == "nobody" { 0 } else { k });
                }
            }
        }
    }

    /// Every slot's sign codes and factor are those of its vector after
    /// replacements and swap-removals across block boundaries, and lanes
    /// past the last slot stay zero.
    #[test]
    fn sign_blocks_follow_inserts_and_removals() {
        let mut rng = rr_testkit::Rng(7);
        let dim = 20;
        let mut ix = VectorIndex::new(dim);
        let mut vectors = HashMap::new();
        for pk in 0..100 {
            let v = rng.unit_vector(dim);
            ix.insert(pk, key("a", "x"), &v);
            vectors.insert(pk, v);
        }
        for pk in [3, 99, 64, 0, 31, 32, 98, 97, 50] {
            ix.remove(pk);
            vectors.remove(&pk);
        }
        let v = rng.unit_vector(dim);
        ix.insert(10, key("a", "y"), &v);
        vectors.insert(10, v);
        assert_eq!(ix.len(), vectors.len());
        assert_eq!(ix.signs.len(), ix.len().div_ceil(SIGN_BLOCK_ROWS) * ix.layout.sign_block_bytes());
        for (slot, pk) in ix.pks.iter().enumerate() {
            let mut want = vec![0u8; ix.layout.sign_bytes()];
            let factor = quant::encode_signs(ix.layout, &vectors[pk], &mut want);
            assert_eq!(ix.signs_of(slot), want, "slot {slot}");
            assert_eq!(ix.sign_factors_of(slot), factor);
            assert_eq!(ix.sign_factors[slot / SIGN_BLOCK_ROWS].coarse[slot % SIGN_BLOCK_ROWS], ix.factors[slot].coarse);
        }
        assert_eq!(ix.sign_factors.len(), ix.len().div_ceil(SIGN_BLOCK_ROWS));
        for slot in ix.len()..ix.len().next_multiple_of(SIGN_BLOCK_ROWS) {
            assert!(ix.signs_of(slot).iter().all(|&b| b == 0), "slot {slot}");
            assert_eq!(ix.sign_factors_of(slot), quant::SignFactors::default(), "slot {slot}");
            assert_eq!(ix.sign_factors[slot / SIGN_BLOCK_ROWS].coarse[slot % SIGN_BLOCK_ROWS], 0.0, "slot {slot}");
        }
    }

    #[test]
    fn lines_keep_their_bytes_on_a_line_boundary() {
        let mut lines = Lines::default();
        for len in (0..5000).step_by(64) {
            lines.resize(len + 64);
            let n = lines.as_slice().len();
            lines.as_mut_slice()[n - 64..].fill((len / 64) as u8);
            assert_eq!(lines.as_slice().as_ptr() as usize % Lines::LINE, 0);
        }
        lines.resize(64 * 3);
        lines.reserve(1 << 20);
        assert_eq!(lines.as_slice().as_ptr() as usize % Lines::LINE, 0);
        assert_eq!(lines.as_slice(), [[0u8; 64], [1; 64], [2; 64]].concat());
        lines.resize(64 * 4);
        assert_eq!(lines.as_slice()[64 * 3..], [0; 64]);
    }

    /// A mask with a glob passes the groups whose source line the glob
    /// matches, whether the glob's answers are new, partly known from a
    /// narrower filter, or to be extended to groups added since; more globs
    /// than are remembered change nothing.
    #[test]
    fn remembered_glob_answers_equal_matching_every_group() {
        let mut ix = VectorIndex::new(2);
        let globs = ["**/*.go", "a/**", "*.md", "b/x?.go"];
        let files = ["a/x1.go", "a/b.md", "b/x2.go", "b/c/d.go", "c.md", "a/x3.rs"];
        let mut pk = 0;
        for round in 0..4 {
            for (i, file) in files.iter().enumerate() {
                let org = ["o1", "o2"][(i + round) % 2];
                ix.insert(pk, key(org, &format!("Source: {org}/r@main:{round}{file}")), &[1.0, 0.0]);
                ix.insert(pk + 1, key(org, &format!("Source: {org}/r@main:{file}")), &[0.0, 1.0]);
                pk += 2;
            }
            for extra in 0..GLOB_ANSWERS + 2 {
                for (g, glob) in globs.iter().enumerate() {
                    for org in ["o1", "", "o2"] {
                        let path = PathGlob::new(glob);
                        let filter =
                            SearchFilter { organization: org.into(), path: path.clone(), ..Default::default() };
                        let want: Vec<bool> = (0..ix.lines.len())
                            .map(|g| {
                                let ns = &ix.namespaces[ix.group_namespace[g] as usize];
                                (org.is_empty() || ns.organization == org)
                                    && path.as_ref().unwrap().matches_document(&ix.lines[g])
                            })
                            .collect();
                        assert_eq!(ix.mask(&filter).0.unwrap(), want, "round {round}, {glob}, org {org:?}");
                    }
                    if g == 0 {
                        // Crowds the remembered globs out now and then.
                        let other = PathGlob::new(&format!("z{extra}/*"));
                        ix.mask(&SearchFilter { path: other, ..Default::default() });
                    }
                }
            }
        }
    }

    /// The slot ranges of a filter are exactly the slots whose group passes
    /// it, after appends (which extend the runs in place), replacements and
    /// removals (which rebuild them).
    #[test]
    fn slots_are_the_passing_rows_after_any_change() {
        let mut ix = VectorIndex::new(2);
        let mut rng = rr_testkit::Rng(3);
        let filter = SearchFilter { organization: "a".into(), ..Default::default() };
        for step in 0..1500 {
            let pk = rng.below(300) as i64;
            if step % 7 == 3 {
                ix.remove(pk);
            } else {
                let org = if rng.below(3) == 0 { "a" } else { "b" };
                ix.insert(pk, key(org, &format!("f{}", pk / 5)), &[1.0, pk as f32]);
            }
            let mask = ix.mask(&filter);
            let want: Vec<usize> = (0..ix.len()).filter(|&slot| mask.passes(ix.groups[slot])).collect();
            let slots = ix.slots(&mask);
            assert!(slots.windows(2).all(|w| w[0].end < w[1].start), "step {step}: {slots:?}");
            assert_eq!(slots.into_iter().flatten().collect::<Vec<_>>(), want, "step {step}");
            assert_eq!(ix.slots(&Mask(None)), if ix.len() == 0 { vec![] } else { vec![0..ix.len()] });
        }
    }

    #[test]
    fn halves_split_the_rows_on_a_block_boundary() {
        let slots = [0..10, 20..200, 300..301];
        let (lower, upper) = halves(&slots, 95);
        assert_eq!((lower, upper), (vec![0..10, 20..128], vec![128..200, 300..301]));
        let (lower, upper) = halves(&slots, 10);
        assert_eq!((lower, upper), (vec![0..10], vec![20..200, 300..301]));
        let (lower, upper) = halves(&[0..5], 2);
        assert_eq!((lower, upper), (vec![0..5], vec![]));
    }

    /// CPU time of this thread so far, from the scheduler's statistics.
    fn thread_cpu_ms() -> f64 {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        stat.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()).map_or(f64::NAN, |ns| ns / 1e6)
    }

    /// Counts what the sign scan lets through to the 2-bit codes.
    struct Counting<'a>(&'a mut Best, usize);

    impl Sink for Counting<'_> {
        fn threshold(&self) -> f32 {
            self.0.threshold()
        }
        fn offer(&mut self, slot: usize, estimate: f32) {
            self.1 += 1;
            self.0.offer(slot, estimate);
        }
    }

    /// On random vectors, how many of the exact top 10 survive stages 1 and
    /// 2 (with and without the sign scan), how many rows the sign bound lets
    /// through, and what each costs. Slow (it scores every row exactly):
    /// `cargo test --release -p rr-embedded --lib stage_recall -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn stage_recall_on_random_vectors() {
        let (dim, k, queries) = (256, 15, 100);
        let mut rng = rr_testkit::Rng(1);
        for rows in [100_000, 1_000_000] {
            let mut ix = VectorIndex::new(dim);
            ix.reserve(rows);
            let mut vectors = Vec::with_capacity(rows * dim);
            for pk in 0..rows {
                let v = rng.unit_vector(dim);
                ix.insert(pk as i64, key("a", "x"), &v);
                vectors.extend(v);
            }
            let (keep, keep_signs) = (coarse_candidates(k, rows), sign_scan_candidates(k));
            let (mut found_signs, mut found_coarse, mut let_through) = (0, 0, 0);
            let (mut signs_time, mut coarse_time, mut bare_time) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..queries {
                let q = rng.unit_vector(dim);
                let query = Query::new(ix.layout, &q);
                let mut exact: Vec<(f32, usize)> =
                    vectors.chunks_exact(dim).enumerate().map(|(slot, v)| (-dot(&q, v), slot)).collect();
                exact.select_nth_unstable_by(RECALL_AT, |a, b| a.0.total_cmp(&b.0));
                let top: Vec<u32> = exact[..RECALL_AT].iter().map(|e| e.1 as u32).collect();

                let t = thread_cpu_ms();
                let mut best = Best::new(keep_signs);
                best.threshold = ix.sampled_floor(&query, keep_signs, &[0..rows]);
                let mut counting = Counting(&mut best, 0);
                query.sign_coarse_scan(ix.codes(), &[0..rows], &mut counting);
                let_through += counting.1;
                let mut with_signs = best.found;
                keep_best(&mut with_signs, keep_signs);
                signs_time.push(thread_cpu_ms() - t);

                let t = thread_cpu_ms();
                let mut best = Best::new(keep);
                query.coarse_scan(ix.layout, ix.coarse.as_slice(), &ix.factors, &[0..rows], |s, e| best.offer(s, e));
                let mut without = best.found;
                keep_best(&mut without, keep);
                coarse_time.push(thread_cpu_ms() - t);

                let t = thread_cpu_ms();
                let mut n = 0usize;
                query.sign_scan(ix.layout, &ix.signs, &ix.sign_factors, &[0..rows], |_, e| n += (e > 0.5) as usize);
                std::hint::black_box(n);
                bare_time.push(thread_cpu_ms() - t);
                found_signs += top.iter().filter(|slot| with_signs.iter().any(|c| c.1 == **slot)).count();
                found_coarse += top.iter().filter(|slot| without.iter().any(|c| c.1 == **slot)).count();
            }
            let median = |mut t: Vec<f64>| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            };
            let recall = |found: usize| found as f64 / (queries * RECALL_AT) as f64;
            eprintln!(
                "{rows} rows, keep {keep_signs} / {keep}: recall@10 of the candidates {:.4} with the sign scan ({:.2} ms of CPU, one \
                 thread; {:.2} % of rows let through), {:.4} without ({:.2} ms of CPU)",
                recall(found_signs),
                median(signs_time),
                100.0 * let_through as f64 / (queries * rows) as f64,
                recall(found_coarse),
                median(coarse_time),
            );
            eprintln!("bare sign scan {:.2} ms of CPU", median(bare_time));
            assert!(recall(found_signs) >= 0.99, "{rows} rows");
        }
    }

    #[test]
    fn sign_scan_pays_where_passing_rows_fill_their_blocks() {
        assert!(sign_scan_pays(1000, &[0..1000]));
        // One row in every 32 slots.
        let sparse: Vec<Range<usize>> = (0..100).map(|b| 32 * b..32 * b + 1).collect();
        assert!(!sign_scan_pays(100, &sparse));
        let quarter: Vec<Range<usize>> = (0..100).map(|b| 32 * b..32 * b + 8).collect();
        assert!(sign_scan_pays(800, &quarter));
        let sparser: Vec<Range<usize>> = (0..100).map(|b| 32 * b..32 * b + 7).collect();
        assert!(!sign_scan_pays(700, &sparser));
    }

    #[test]
    fn candidate_counts_grow_with_the_store() {
        assert_eq!(coarse_candidates(15, 100), 100);
        assert_eq!(coarse_candidates(15, 5000), 1000);
        assert_eq!(coarse_candidates(10, 100_000), 1000);
        assert_eq!(coarse_candidates(50, 100_000), 5000);
        assert_eq!(coarse_candidates(10, 1_000_000), 3990);
        assert!(coarse_candidates(1, 1_000_000) == coarse_candidates(10, 1_000_000));
        assert!(exact_candidates(15) > 15);
    }

    #[test]
    fn dot_handles_tails() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let want: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), want);
    }
}
