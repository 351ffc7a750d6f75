//! The in-memory vector index: every vector of the store in one contiguous
//! `Vec<f32>`, scanned exactly.
//!
//! Rows are grouped by what a filter can look at (organization, repository,
//! branch and the document's first line, which holds the path). All chunks of
//! a file share a group, so a filter is evaluated once per group, not once
//! per chunk, and the scan only tests one bit per row.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use rr_core::SearchFilter;

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
}

impl GroupKey {
    pub fn passes(&self, filter: &SearchFilter) -> bool {
        (filter.organization.is_empty() || self.organization == filter.organization)
            && (filter.repository.is_empty() || self.repository == filter.repository)
            && (filter.branch.is_empty() || self.branch == filter.branch)
            && filter.path.as_ref().is_none_or(|glob| glob.matches_document(&self.source_line))
    }
}

/// The first line of a document, as kept in [`GroupKey::source_line`].
pub(crate) fn source_line(document: &str) -> &str {
    document.split_once('\n').map_or(document, |(first, _)| first)
}

/// Which groups pass a filter; `None` when the filter constrains nothing.
#[derive(Debug)]
pub(crate) struct Mask(Option<Vec<bool>>);

/// Floats one thread scans before a second thread is worth starting.
const PARALLEL_MIN_FLOATS: usize = 4 << 20;

#[derive(Debug, Default)]
pub(crate) struct VectorIndex {
    dim: usize,
    pks: Vec<i64>,
    groups: Vec<u32>,
    inv_norms: Vec<f32>,
    vectors: Vec<f32>,
    slot_of: HashMap<i64, usize>,
    keys: Vec<GroupKey>,
    group_of: HashMap<GroupKey, u32>,
    members: Vec<u32>,
}

impl VectorIndex {
    /// An empty index for `dim`-dimensional vectors (0 = not yet known).
    pub fn new(dim: usize) -> Self {
        VectorIndex { dim, ..Default::default() }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn set_dim(&mut self, dim: usize) {
        debug_assert!(self.pks.is_empty() || self.dim == dim);
        self.dim = dim;
    }

    pub fn len(&self) -> usize {
        self.pks.len()
    }

    /// Makes room for `rows` more rows.
    pub fn reserve(&mut self, rows: usize) {
        self.pks.reserve(rows);
        self.groups.reserve(rows);
        self.inv_norms.reserve(rows);
        self.vectors.reserve(rows * self.dim);
        self.slot_of.reserve(rows);
    }

    /// Adds a row, or replaces the row with the same `pk`.
    pub fn insert(&mut self, pk: i64, key: GroupKey, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dim);
        let group = self.group(key);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let inv_norm = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        if let Some(&slot) = self.slot_of.get(&pk) {
            let old = self.groups[slot];
            self.members[old as usize] -= 1;
            self.groups[slot] = group;
            self.inv_norms[slot] = inv_norm;
            self.vectors[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(vector);
        } else {
            self.slot_of.insert(pk, self.pks.len());
            self.pks.push(pk);
            self.groups.push(group);
            self.inv_norms.push(inv_norm);
            self.vectors.extend_from_slice(vector);
        }
        self.members[group as usize] += 1;
    }

    /// Removes the row `pk` if present.
    pub fn remove(&mut self, pk: i64) {
        let Some(slot) = self.slot_of.remove(&pk) else { return };
        self.members[self.groups[slot] as usize] -= 1;
        let last = self.pks.len() - 1;
        if slot != last {
            let moved = self.pks[last];
            self.slot_of.insert(moved, slot);
            self.vectors.copy_within(last * self.dim..(last + 1) * self.dim, slot * self.dim);
        }
        self.pks.swap_remove(slot);
        self.groups.swap_remove(slot);
        self.inv_norms.swap_remove(slot);
        self.vectors.truncate(last * self.dim);
    }

    fn group(&mut self, key: GroupKey) -> u32 {
        if let Some(&g) = self.group_of.get(&key) {
            return g;
        }
        let g = self.keys.len() as u32;
        self.keys.push(key.clone());
        self.group_of.insert(key, g);
        self.members.push(0);
        g
    }

    /// Evaluates `filter` once per live group.
    pub fn mask(&self, filter: &SearchFilter) -> Mask {
        let unconstrained = filter.organization.is_empty()
            && filter.repository.is_empty()
            && filter.branch.is_empty()
            && filter.path.is_none();
        if unconstrained {
            return Mask(None);
        }
        let pass = self.keys.iter().zip(&self.members).map(|(key, &n)| n > 0 && key.passes(filter)).collect();
        Mask(Some(pass))
    }

    /// The pks of the rows passing `mask`.
    pub fn passing<'a>(&'a self, mask: &'a Mask) -> impl Iterator<Item = i64> + 'a {
        self.pks
            .iter()
            .zip(&self.groups)
            .filter(move |&(_, &group)| mask.0.as_ref().is_none_or(|pass| pass[group as usize]))
            .map(|(&pk, _)| pk)
    }

    /// The `k` rows passing `mask` with the smallest cosine distance to
    /// `query`, closest first; ties go to the smaller `pk`. Exact: every
    /// passing row is scored. A zero vector is at distance 1 from everything.
    pub fn nearest(&self, query: &[f32], k: usize, mask: &Mask) -> Vec<(i64, f64)> {
        debug_assert_eq!(query.len(), self.dim);
        if k == 0 || self.pks.is_empty() || self.dim == 0 {
            return Vec::new();
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let q_inv = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        let rows = self.pks.len();
        let parallel = rows * self.dim >= 2 * PARALLEL_MIN_FLOATS
            && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        let heap = if parallel {
            let mid = rows / 2;
            let (a, b) = std::thread::scope(|s| {
                let upper = s.spawn(|| self.scan(query, q_inv, k, mask, mid..rows));
                let lower = self.scan(query, q_inv, k, mask, 0..mid);
                (lower, upper.join().expect("scan thread panicked"))
            });
            let mut heap = a;
            for hit in b {
                push_bounded(&mut heap, hit, k);
            }
            heap
        } else {
            self.scan(query, q_inv, k, mask, 0..rows)
        };
        let mut hits = heap.into_vec();
        hits.sort();
        hits.into_iter().map(|h| (h.pk, f64::from(h.distance))).collect()
    }

    fn scan(&self, query: &[f32], q_inv: f32, k: usize, mask: &Mask, slots: std::ops::Range<usize>) -> BinaryHeap<Hit> {
        let mut heap = BinaryHeap::with_capacity(k + 1);
        let dim = self.dim;
        for slot in slots {
            if let Some(pass) = &mask.0
                && !pass[self.groups[slot] as usize]
            {
                continue;
            }
            let v = &self.vectors[slot * dim..(slot + 1) * dim];
            let distance = 1.0 - dot(query, v) * q_inv * self.inv_norms[slot];
            push_bounded(&mut heap, Hit { distance, pk: self.pks[slot] }, k);
        }
        heap
    }
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
mod tests {
    use super::*;
    use rr_core::PathGlob;

    fn key(org: &str, line: &str) -> GroupKey {
        GroupKey { organization: org.into(), repository: "r".into(), branch: "main".into(), source_line: line.into() }
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

    #[test]
    fn insert_replace_remove_keep_slots_consistent() {
        let mut ix = VectorIndex::new(2);
        ix.insert(1, key("a", "x"), &[1.0, 0.0]);
        ix.insert(2, key("b", "y"), &[0.0, 1.0]);
        ix.insert(3, key("a", "z"), &[0.6, 0.8]);
        ix.insert(1, key("b", "y"), &[0.0, 2.0]);
        ix.remove(2);
        ix.remove(42);
        assert_eq!(ix.len(), 2);
        let all = Mask(None);
        let hits = ix.nearest(&[0.0, 1.0], 5, &all);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 3]);
        assert!(hits[0].1.abs() < 1e-6);
        let only_a = ix.mask(&SearchFilter { organization: "a".into(), ..Default::default() });
        assert_eq!(ix.nearest(&[0.0, 1.0], 5, &only_a).iter().map(|h| h.0).collect::<Vec<_>>(), [3]);
        assert_eq!(ix.passing(&only_a).collect::<Vec<_>>(), [3]);
        assert_eq!(ix.passing(&all).collect::<Vec<_>>(), [1, 3]);
    }

    #[test]
    fn dot_handles_tails() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let want: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), want);
    }
}
