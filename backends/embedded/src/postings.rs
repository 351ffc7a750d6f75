//! Lexical top-k over postings held in memory (MaxScore), scored exactly as
//! FTS5's `bm25()` scores.
//!
//! However it plans, FTS5 costs time in proportion to the rows of every
//! phrase of the expression: it walks each phrase's doclist to match, and
//! `bm25()` walks it again on every statement to count the phrase's rows for
//! its IDF. The frequent phrases of a query (a number, a common identifier
//! part: tens of thousands of rows at 100k chunks) are most of that work,
//! and most of them cannot change which rows make the top.
//!
//! So FTS5 is asked once per phrase, between writes, for the rows holding it
//! (the doclist as FTS5 indexed it, so tokenization, columns and deletions
//! are FTS5's own): a token's count per column from the `fts5vocab`
//! `instance` table, or, for a phrase of several tokens, a token repeated
//! so often that one row per document is cheaper to read than one per
//! instance, or a tokenizer this module cannot vouch for, the phrase's
//! `bm25()` term in each row (a one-phrase query returns exactly the term it
//! adds to a longer one). Those
//! postings stay in memory, sorted by pk, up to [`CACHE_BYTES`]; a query
//! that would need more is left to FTS5's plan (see [`Cache`]).
//!
//! A query then runs MaxScore over them: each phrase's list has an exact
//! bound (the largest term it adds to any row); the lists whose bounds add
//! up to less than the current `need`-th best score are *non-essential*: a
//! row holding only those cannot enter the top. Candidates are the rows of
//! the essential lists in pk order; the non-essential lists are probed (by
//! galloping search) only while the row can still reach the top. A row's
//! score is each phrase's term computed with FTS5's formula (`idf`, the
//! phrase frequency as FTS5 sums column weights, the row's length from
//! `docsize`, `avgdl` from the averages record) and added in the
//! expression's phrase order, so it is bit for bit `bm25()`'s.
//!
//! The filter applies before ranking: a row the filter rejects is never
//! scored.

use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, OnceLock};

use rusqlite::{Connection, OptionalExtension};

use crate::fts::{self, Term};
use crate::lexical::{self, RowSet, Scored, TableStats};

/// Most bytes of postings kept between writes (see [`Cache`]).
pub(crate) const CACHE_BYTES: usize = 128 << 20;
/// The per-connection `fts5vocab` row table (see the store's `open`).
const VOCABULARY: &str = "temp.chunks_fts_vocab";
/// Instances per row above which a token is read as FTS5 scores it.
const INSTANCES_PER_ROW: f64 = 2.0;
/// Slack on bounds for the rounding of sums taken in another order.
const BOUND_SLACK: f64 = 1e-9;

/// The rows holding one phrase.
#[derive(Debug)]
pub(crate) struct Postings {
    pks: Vec<u32>,
    weights: Weights,
    /// The largest term the phrase adds to a row (valid for the table
    /// statistics it was computed with, which hold as long as the postings).
    bound: OnceLock<f64>,
}

#[derive(Debug)]
enum Weights {
    /// A token: its count in each column, [`fts::COLUMNS`]`.len()` per row.
    Counts(Vec<u16>),
    /// A phrase FTS5 scored: its `bm25()` term in each row.
    Terms(Vec<f64>),
}

impl Postings {
    /// Lists live until the next write: give back what growing them left.
    fn new(mut pks: Vec<u32>, mut weights: Weights) -> Self {
        pks.shrink_to_fit();
        match &mut weights {
            Weights::Counts(c) => c.shrink_to_fit(),
            Weights::Terms(t) => t.shrink_to_fit(),
        }
        Postings { pks, weights, bound: OnceLock::new() }
    }

    fn bytes(&self) -> usize {
        self.pks.len() * 4
            + match &self.weights {
                Weights::Counts(c) => c.len() * 2,
                Weights::Terms(t) => t.len() * 8,
            }
    }

    /// The term of the `j`-th row, `pk`.
    fn term(&self, j: usize, pk: u32, idf: f64, stats: TableStats, docsize: &[u32]) -> f64 {
        match &self.weights {
            Weights::Terms(t) => t[j],
            Weights::Counts(counts) => {
                let columns = fts::COLUMNS.len();
                // FTS5 adds a column's weight once per instance, in column
                // order.
                let mut f = 0.0;
                for (c, column) in fts::COLUMNS.iter().enumerate() {
                    for _ in 0..counts[j * columns + c] {
                        f += column.weight;
                    }
                }
                let d = f64::from(docsize.get(pk as usize).copied().unwrap_or(0));
                lexical::bm25_term(idf, f, d, stats.avgdl)
            }
        }
    }

    fn bound(&self, idf: f64, stats: TableStats, docsize: &[u32]) -> f64 {
        *self.bound.get_or_init(|| {
            (0..self.pks.len()).map(|j| self.term(j, self.pks[j], idf, stats, docsize)).fold(0.0, f64::max)
        })
    }
}

/// A token's postings from the `fts5vocab` instance table `instances`;
/// `None` when a count or pk does not fit (the caller asks FTS5 to score the
/// token as a phrase instead).
fn token_postings(conn: &Connection, instances: &str, token: &str) -> rusqlite::Result<Option<Postings>> {
    let columns = fts::COLUMNS.len();
    let mut stmt = conn.prepare_cached(&format!("SELECT doc, col FROM {instances} WHERE term = ?1"))?;
    let mut rows = stmt.query([token])?;
    let (mut pks, mut counts) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next()? {
        let (doc, col): (i64, String) = (row.get(0)?, row.get(1)?);
        let Ok(pk) = u32::try_from(doc) else { return Ok(None) };
        if pks.last() != Some(&pk) {
            pks.push(pk);
            counts.resize(counts.len() + columns, 0u16);
        }
        let Some(c) = fts::COLUMNS.iter().position(|x| x.name == col) else { return Ok(None) };
        let at = counts.len() - columns + c;
        let Some(n) = counts[at].checked_add(1) else { return Ok(None) };
        counts[at] = n;
    }
    Ok(Some(Postings::new(pks, Weights::Counts(counts))))
}

/// Whether `token` occurs more than [`INSTANCES_PER_ROW`] times per row
/// holding it: its instance rows would then cost more to read than one row
/// per document of [`phrase_postings`].
fn mostly_repeated(conn: &Connection, token: &str) -> rusqlite::Result<bool> {
    let counts: Option<(i64, i64)> = conn
        .prepare_cached(&format!("SELECT doc, cnt FROM {VOCABULARY} WHERE term = ?1"))?
        .query_row([token], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(counts.is_some_and(|(doc, cnt)| cnt as f64 > INSTANCES_PER_ROW * doc as f64))
}

/// A phrase's postings as FTS5 scores it alone; `None` when a pk does not
/// fit.
fn phrase_postings(conn: &Connection, term: &Term) -> rusqlite::Result<Option<Postings>> {
    Ok(phrase_terms(conn, term)?.map(|(pks, terms)| Postings::new(pks, Weights::Terms(terms))))
}

/// The rows FTS5 matches a phrase in, ascending, with the `bm25()` term the
/// phrase adds to each (a one-phrase query returns exactly the term it adds
/// to a longer one); `None` when a pk does not fit.
pub(crate) fn phrase_terms(conn: &Connection, term: &Term) -> rusqlite::Result<Option<(Vec<u32>, Vec<f64>)>> {
    let Some(expression) = fts::match_expression([term]) else {
        return Ok(Some((Vec::new(), Vec::new())));
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT rowid, {} FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rowid",
        fts::bm25_call()
    ))?;
    let mut rows = stmt.query([expression])?;
    let (mut pks, mut terms) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next()? {
        let Ok(pk) = u32::try_from(row.get::<_, i64>(0)?) else { return Ok(None) };
        pks.push(pk);
        // `bm25()` is minus the sum, here of one term.
        terms.push(-row.get::<_, f64>(1)?);
    }
    Ok(Some((pks, terms)))
}

/// Every row's length in tokens (all columns), by pk, from FTS5's `docsize`.
pub(crate) fn docsizes(conn: &Connection) -> rusqlite::Result<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    let mut stmt = conn.prepare_cached("SELECT id, sz FROM chunks_fts_docsize")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let Ok(pk) = usize::try_from(row.get::<_, i64>(0)?) else { continue };
        let sz: Vec<u8> = row.get(1)?;
        let total = lexical::column_sizes(&sz).iter().fold(0u32, |a, &n| a.saturating_add(n as u32));
        if pk >= out.len() {
            out.resize(pk + 1, 0);
        }
        out[pk] = total;
    }
    Ok(out)
}

/// Postings and row lengths of one state of the table, kept until it
/// changes.
///
/// Lists are kept while they fit in [`CACHE_BYTES`] and never evicted
/// before the next write: with more frequent phrases than fit, evicting
/// would read a large list again for almost every query, which costs more
/// than FTS5's own plan. A query needing a large list that does not fit is
/// left to that plan; small lists are read for the query that needs them
/// whether or not they can be kept.
#[derive(Debug)]
pub(crate) struct Cache {
    postings: HashMap<String, Arc<Postings>>,
    bytes: usize,
    docsize: Option<Arc<Vec<u32>>>,
    /// [`CACHE_BYTES`] and [`SMALL_LIST_ROWS`], smaller in tests.
    budget: usize,
    small_rows: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Cache { postings: HashMap::new(), bytes: 0, docsize: None, budget: CACHE_BYTES, small_rows: SMALL_LIST_ROWS }
    }
}

/// Lists of at most this many rows are read even when they cannot be kept.
pub(crate) const SMALL_LIST_ROWS: u64 = 20_000;

/// What a list of `rows` rows takes, at most.
fn estimated_bytes(rows: u64) -> usize {
    rows as usize * (4 + 8.max(2 * fts::COLUMNS.len()))
}

impl Cache {
    pub fn clear(&mut self) {
        *self = Cache { budget: self.budget, small_rows: self.small_rows, ..Cache::default() };
    }

    #[cfg(test)]
    pub fn kept_bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    pub fn set_limits(&mut self, budget: usize, small_rows: u64) {
        (self.budget, self.small_rows) = (budget, small_rows);
    }

    pub fn docsize(&mut self, conn: &Connection) -> rusqlite::Result<Arc<Vec<u32>>> {
        if self.docsize.is_none() {
            self.docsize = Some(Arc::new(docsizes(conn)?));
        }
        Ok(self.docsize.clone().unwrap_or_default())
    }

    fn key(term: &Term, tokens: bool) -> String {
        if term.single_token && tokens { format!("t:{}", term.text) } else { format!("p:{}", term.text) }
    }

    /// Whether lists for `terms` (each with about how many rows hold it,
    /// when known) are cached or can be read: a large one only when it can
    /// be kept.
    pub fn can_serve(&self, terms: &[(&Term, Option<u64>)], tokens: bool) -> bool {
        let mut bytes = self.bytes;
        for &(term, rows) in terms {
            if self.postings.contains_key(&Self::key(term, tokens)) {
                continue;
            }
            let rows = rows.unwrap_or(0);
            if rows > self.small_rows {
                bytes += estimated_bytes(rows);
                if bytes > self.budget {
                    return false;
                }
            }
        }
        true
    }

    /// The postings of `term`: a token's counts when `tokens` (the table's
    /// tokenizer makes a single-token term exactly that token), else what
    /// FTS5 scores. `None` when neither fits.
    pub fn postings(
        &mut self,
        conn: &Connection,
        instances: &str,
        term: &Term,
        tokens: bool,
    ) -> rusqlite::Result<Option<Arc<Postings>>> {
        let key = Self::key(term, tokens);
        if let Some(p) = self.postings.get(&key) {
            return Ok(Some(p.clone()));
        }
        let mut built = None;
        if term.single_token && tokens && !mostly_repeated(conn, &term.text)? {
            built = token_postings(conn, instances, &term.text)?;
        }
        if built.is_none() {
            built = phrase_postings(conn, term)?;
        }
        let Some(built) = built else { return Ok(None) };
        let built = Arc::new(built);
        if self.bytes + built.bytes() <= self.budget {
            self.bytes += built.bytes();
            self.postings.insert(key, built.clone());
        }
        Ok(Some(built))
    }
}

/// The IDF FTS5 gives a phrase of these postings.
fn idf_of(postings: &Postings, stats: TableStats) -> f64 {
    lexical::idf(stats.rows, postings.pks.len() as u64)
}

/// The `need` rows of `allowed` that best match any of the phrases whose
/// postings are `lists` (in the expression's order), by `bm25()` of the
/// whole expression then pk: what FTS5 gives scoring every row.
pub(crate) fn best_rows(
    lists: &[Arc<Postings>],
    stats: TableStats,
    docsize: &[u32],
    allowed: &RowSet,
    need: usize,
) -> Vec<(i64, f64)> {
    let n = lists.len();
    if need == 0 || n == 0 || allowed.len() == 0 {
        return Vec::new();
    }
    let idfs: Vec<f64> = lists.iter().map(|p| idf_of(p, stats)).collect();
    let bounds: Vec<f64> = lists.iter().zip(&idfs).map(|(p, &idf)| p.bound(idf, stats, docsize)).collect();
    // Lists by bound, smallest first; `below[i]` is the sum of the bounds of
    // `order[..i]`.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| bounds[a].total_cmp(&bounds[b]).then(a.cmp(&b)));
    let mut below = vec![0.0; n + 1];
    for i in 0..n {
        below[i + 1] = below[i] + bounds[order[i]];
    }
    let mut cursor = vec![0usize; n];
    let mut terms = vec![0.0f64; n];
    let mut best: BinaryHeap<Scored> = BinaryHeap::with_capacity(need + 1);
    let mut threshold = f64::NEG_INFINITY;
    // `order[..first_essential]` are the non-essential lists.
    let mut first_essential = 0;
    loop {
        while first_essential < n && below[first_essential + 1] * (1.0 + BOUND_SLACK) < threshold {
            first_essential += 1;
        }
        if first_essential == n {
            break;
        }
        let Some(pk) = order[first_essential..].iter().filter_map(|&i| lists[i].pks.get(cursor[i]).copied()).min()
        else {
            break;
        };
        if allowed.contains(i64::from(pk)) {
            terms.iter_mut().for_each(|t| *t = 0.0);
            let mut partial = 0.0;
            for &i in &order[first_essential..] {
                if lists[i].pks.get(cursor[i]) == Some(&pk) {
                    terms[i] = lists[i].term(cursor[i], pk, idfs[i], stats, docsize);
                    partial += terms[i];
                }
            }
            let mut reachable = true;
            for k in (0..first_essential).rev() {
                if (partial + below[k + 1]) * (1.0 + BOUND_SLACK) < threshold {
                    reachable = false;
                    break;
                }
                let i = order[k];
                cursor[i] = seek(&lists[i].pks, cursor[i], pk);
                if lists[i].pks.get(cursor[i]) == Some(&pk) {
                    terms[i] = lists[i].term(cursor[i], pk, idfs[i], stats, docsize);
                    partial += terms[i];
                }
            }
            if reachable {
                // In the expression's order, as `bm25()` adds them.
                let score = terms.iter().fold(0.0, |sum, t| sum + t);
                if let Some(worst) = lexical::offer(&mut best, Scored { score, pk: i64::from(pk) }, need) {
                    threshold = worst;
                }
            }
        }
        for &i in &order[first_essential..] {
            if lists[i].pks.get(cursor[i]) == Some(&pk) {
                cursor[i] += 1;
            }
        }
    }
    best.into_sorted_vec().into_iter().map(|r| (r.pk, -r.score)).collect()
}

/// The first index at or after `from` whose pk is at least `pk` (galloping,
/// then binary search).
fn seek(pks: &[u32], from: usize, pk: u32) -> usize {
    if pks.get(from).is_none_or(|&p| p >= pk) {
        return from;
    }
    let mut step = 1;
    let mut lo = from;
    while lo + step < pks.len() && pks[lo + step] < pk {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step + 1).min(pks.len());
    lo + 1 + pks[lo + 1..hi].partition_point(|&p| p < pk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_finds_the_first_pk_not_below() {
        let pks = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20];
        for from in 0..pks.len() {
            for pk in 0..23 {
                let want = from + pks[from..].partition_point(|&p| p < pk);
                assert_eq!(seek(&pks, from, pk), want, "from {from} pk {pk}");
            }
        }
        assert_eq!(seek(&[], 0, 5), 0);
    }
}
