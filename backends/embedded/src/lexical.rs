//! Top-k BM25 without scoring every matching row.
//!
//! FTS5 computes `bm25()` for every row its MATCH expression yields (about
//! 0.5 µs a row) and has no top-k shortcut: even `ORDER BY rank` scores and
//! sorts every match. Two things make a query cheaper while keeping its
//! answer exactly the same:
//!
//! * **Rows are chosen before they are scored.** The rows a query may return
//!   (those passing the filter, minus those already found) travel as a
//!   bitmap blob that the `rr_in(set, rowid)` SQL function tests in the
//!   `WHERE` clause, which SQLite evaluates before the result columns, so
//!   `bm25()` runs only for rows that pass, and `LIMIT` lets SQLite keep only
//!   the best rows instead of sorting them all.
//! * **Rows that cannot reach the top are not scored (MaxScore).** FTS5's
//!   BM25 is a sum over the expression's phrases of
//!   `idf · f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))`, and each term is below
//!   `idf · (k1+1)`. So a row matching only phrases of a set `L` scores below
//!   `Σ_L idf·(k1+1)`. The query is first scored over the rows matching a
//!   phrase outside `L` (the rare ones); when its `need`-th best score is
//!   above that bound, no other row can displace any of them and the answer
//!   is final. Otherwise (or when the filter allows so few rows that scoring
//!   them all is about as cheap) every allowed row is scored. Scores always come
//!   from FTS5 with the whole expression (the IDFs and `avgdl` are those of
//!   the whole table, whichever rows are scored), so they are bit for bit
//!   the ones a full scan gives.
//!
//! This is the execution lexical search falls back to; the default is the
//! in-memory MaxScore of `postings.rs`, which never lets FTS5 walk the
//! frequent phrases per query. Both give exactly these scores.

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::{Connection, OptionalExtension};

use crate::fts::{self, Term};

/// FTS5's `bm25()` constant `k1`; a phrase adds at most `idf · (K1 + 1)`.
pub(crate) const K1: f64 = 1.2;
/// FTS5's `bm25()` constant `b`.
pub(crate) const B: f64 = 0.75;

/// Slack on the MaxScore bound for the rounding of FTS5's sum.
const BOUND_SLACK: f64 = 1e-9;
/// Rows the rare phrases should offer per row wanted before they alone are
/// tried (fewer would rarely leave `need` rows above the bound).
const CANDIDATES_PER_ROW: f64 = 4.0;

/// Least share of the table a filter must allow for rounds to be tried:
/// below it, scoring every allowed row costs little more than one round
/// (measured with the bench at 100k chunks, a source filter allowing 7%).
const MIN_PRUNED_FRACTION: f64 = 0.25;

/// Name of the SQL function testing a [`RowSet`] blob.
const ROW_SET_FUNCTION: &str = "rr_in";

/// Registers `rr_in(set, rowid)` on `conn`.
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        ROW_SET_FUNCTION,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx: &Context<'_>| {
            let bits = ctx.get_raw(0).as_blob().unwrap_or(&[]);
            let pk: i64 = ctx.get(1)?;
            Ok(RowSet::test(bits, pk))
        },
    )
}

/// A set of chunk pks, as a bitmap.
#[derive(Debug, Default, Clone)]
pub(crate) struct RowSet {
    bits: Vec<u8>,
    len: usize,
}

impl RowSet {
    pub fn insert(&mut self, pk: i64) {
        // pks are SQLite's automatic row ids, from 1 up.
        let Ok(i) = usize::try_from(pk) else { return };
        if i / 8 >= self.bits.len() {
            self.bits.resize(i / 8 + 1, 0);
        }
        let bit = 1u8 << (i % 8);
        if self.bits[i / 8] & bit == 0 {
            self.bits[i / 8] |= bit;
            self.len += 1;
        }
    }

    pub fn remove(&mut self, pk: i64) {
        if self.contains(pk) {
            let i = pk as usize;
            self.bits[i / 8] &= !(1u8 << (i % 8));
            self.len -= 1;
        }
    }

    pub fn contains(&self, pk: i64) -> bool {
        Self::test(&self.bits, pk)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn test(bits: &[u8], pk: i64) -> bool {
        usize::try_from(pk).is_ok_and(|i| bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
    }
}

/// One phrase of a match expression, with the number of rows holding it
/// when known exactly (single tokens, from FTS5's vocabulary), else at most
/// how many (a phrase of several tokens: its rarest token's count).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Phrase<'a> {
    pub term: &'a Term,
    pub document_frequency: Option<u64>,
    pub at_most: Option<u64>,
}

/// FTS5's IDF for a phrase found in `hits` of `rows` rows.
pub(crate) fn idf(rows: u64, hits: u64) -> f64 {
    let idf = ((rows as f64 - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// Which phrases are scored first, and the bound on every other row.
#[derive(Debug, PartialEq)]
struct Plan<'a> {
    /// Rows matching one of these are scored.
    essential: Vec<&'a Term>,
    /// A row matching none of them scores (as `-bm25()`) below this.
    bound: f64,
}

/// How much a plan counts on the best rows scoring.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// As much as a row holding each phrase once: the rows holding a rare
    /// identifier usually hold its camelCase parts too.
    Every,
    /// As much as a row holding the rarest phrase once.
    Rarest,
}

/// Picks the set `L` of phrases left out of the first round: the most
/// frequent single tokens whose bounds add up to less than what the best
/// rows are expected to score, keeping enough rare phrases that the round
/// likely finds `need` rows. `None` when nothing can be left out.
fn plan<'a>(phrases: &[Phrase<'a>], rows: u64, allowed: usize, need: usize, expect: Expect) -> Option<Plan<'a>> {
    if rows == 0 {
        return None;
    }
    // (index, bound, document frequency) of the phrases `L` may take.
    let mut optional: Vec<(usize, f64, u64)> = phrases
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.document_frequency.map(|df| (i, idf(rows, df) * (K1 + 1.0), df)))
        .collect();
    optional.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    // A phrase's IDF once (g(1, avgdl) = 1), from at most its frequency.
    let idfs = phrases.iter().filter_map(|p| p.document_frequency.or(p.at_most)).map(|df| idf(rows, df));
    let target = match expect {
        Expect::Every => idfs.sum::<f64>(),
        Expect::Rarest => idfs.fold(0.0, f64::max),
    };
    #[cfg(test)]
    let target = target * tests::TARGET_SCALE.get();
    let mut cut = 0;
    let mut sum = 0.0;
    while cut < optional.len() && sum + optional[cut].1 < target {
        sum += optional[cut].1;
        cut += 1;
    }
    let fraction = allowed as f64 / rows as f64;
    let left_out = |cut: usize| -> Vec<usize> { optional[..cut].iter().map(|o| o.0).collect() };
    let expected = |cut: usize| {
        let left_out = left_out(cut);
        let essential = phrases.iter().enumerate().filter(|(i, _)| !left_out.contains(i));
        essential.map(|(_, p)| p.document_frequency.or(p.at_most).unwrap_or(0) as f64 * fraction).sum::<f64>()
    };
    while cut > 0 && expected(cut) < CANDIDATES_PER_ROW * need as f64 {
        cut -= 1;
    }
    if cut == 0 {
        return None;
    }
    let left_out = left_out(cut);
    let bound = optional[..cut].iter().map(|o| o.1).sum::<f64>() * (1.0 + BOUND_SLACK);
    let essential = phrases.iter().enumerate().filter(|(i, _)| !left_out.contains(i)).map(|(_, p)| p.term).collect();
    Some(Plan { essential, bound })
}

/// The `need` rows of `allowed` that best match any of `phrases`, by
/// `bm25()` of the whole expression then rowid: exactly what scoring every
/// allowed row would give. `rows` is the number of rows in the table.
pub(crate) fn best_rows(
    conn: &Connection,
    phrases: &[Phrase<'_>],
    allowed: &RowSet,
    rows: u64,
    need: usize,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let Some(expression) = fts::match_expression(phrases.iter().map(|p| p.term)) else { return Ok(Vec::new()) };
    if need == 0 || allowed.len() == 0 {
        return Ok(Vec::new());
    }
    // A round walks every match and recomputes the IDFs like a full scan,
    // and only saves `bm25()` calls, so it pays when the filter allows many
    // rows; an optimistic plan is tried first and a cautious one second.
    let plans: &[Expect] = match allowed.len() as f64 >= MIN_PRUNED_FRACTION * rows as f64 {
        true => &[Expect::Every, Expect::Rarest],
        false => &[],
    };
    let mut tried: Vec<&Term> = Vec::new();
    for &expect in plans {
        let Some(plan) = plan(phrases, rows, allowed.len(), need, expect) else { continue };
        if plan.essential == tried {
            continue;
        }
        let Some(essential) = fts::match_expression(plan.essential.iter().copied()) else { continue };
        tried = plan.essential;
        let mut candidates = RowSet::default();
        let mut stmt = conn.prepare_cached("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1")?;
        let mut matched = stmt.query([essential])?;
        while let Some(row) = matched.next()? {
            let pk: i64 = row.get(0)?;
            if allowed.contains(pk) {
                candidates.insert(pk);
            }
        }
        let hits = scored(conn, &expression, &candidates, need)?;
        if hits.len() == need && hits.last().is_some_and(|&(_, score)| -score > plan.bound) {
            #[cfg(test)]
            tests::count(true);
            return Ok(hits);
        }
        #[cfg(test)]
        tests::count(false);
    }
    scored(conn, &expression, allowed, need)
}

/// The `need` best rows of `set` matching `expression`.
fn scored(conn: &Connection, expression: &str, set: &RowSet, need: usize) -> rusqlite::Result<Vec<(i64, f64)>> {
    if set.len() == 0 {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT rowid, {} AS score FROM chunks_fts
         WHERE chunks_fts MATCH ?1 AND rr_in(?2, rowid) ORDER BY score, rowid LIMIT ?3",
        fts::bm25_call()
    ))?;
    let rows = stmt.query_map(rusqlite::params![expression, set.bits, need as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// What `bm25()` reads from the whole table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TableStats {
    /// FTS5's row count.
    pub rows: u64,
    /// Tokens per row, over every column.
    pub avgdl: f64,
}

/// Reads FTS5's averages record (rowid 1 of `chunks_fts_data`: the row
/// count, then each column's total of tokens, as varints). `None` for an
/// empty table.
pub(crate) fn table_stats(conn: &Connection) -> rusqlite::Result<Option<TableStats>> {
    let block: Option<Vec<u8>> = conn
        .prepare_cached("SELECT block FROM chunks_fts_data WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let Some(block) = block else { return Ok(None) };
    let mut at = 0;
    let mut next = || {
        let (v, n) = varint(&block[at.min(block.len())..])?;
        at += n;
        Some(v)
    };
    let Some(rows) = next() else { return Ok(None) };
    let mut tokens: u64 = 0;
    for _ in fts::COLUMNS {
        tokens = tokens.wrapping_add(next().unwrap_or(0));
    }
    // FTS5 divides the totals as 64-bit integers turned into doubles.
    Ok((rows > 0).then(|| TableStats { rows, avgdl: tokens as i64 as f64 / rows as i64 as f64 }))
}

/// One term of FTS5's `bm25()` sum: a phrase of IDF `idf` found with
/// frequency `f` (column weights summed) in a row of `d` tokens. The same
/// operations in the same order as `fts5Bm25Function`, so the same bits.
pub(crate) fn bm25_term(idf: f64, f: f64, d: f64, avgdl: f64) -> f64 {
    idf * bm25_ratio(f, d, avgdl)
}

/// [`bm25_term`] without its IDF factor.
pub(crate) fn bm25_ratio(f: f64, d: f64, avgdl: f64) -> f64 {
    (f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl))
}

/// A `docsize` record's token count of each of [`fts::COLUMNS`] (missing
/// ones are 0).
pub(crate) fn column_sizes(record: &[u8]) -> Vec<u64> {
    let mut at = 0;
    fts::COLUMNS
        .iter()
        .map(|_| match varint(&record[at.min(record.len())..]) {
            Some((n, len)) => {
                at += len;
                n
            }
            None => 0,
        })
        .collect()
}

/// SQLite's varint (FTS5 uses it for its records): big-endian groups of 7
/// bits, the high bit set on all but the last; a 9th byte carries 8 bits.
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((v << 8) | u64::from(b), 9));
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Whether `sql`, the `CREATE VIRTUAL TABLE` of `chunks_fts`, tokenizes with
/// `unicode61` and no option but `remove_diacritics`: on ASCII text it then
/// makes exactly the tokens of [`ascii_tokens`] (its default categories,
/// `L* N* Co`, hold no other ASCII character than letters and digits).
pub(crate) fn tokenizer_is_unicode61(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    let Some(at) = lower.find("tokenize") else { return false };
    let rest = lower[at + "tokenize".len()..].trim_start();
    let Some(rest) = rest.strip_prefix('=') else { return false };
    let rest = rest.trim_start();
    let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else { return false };
    let Some(value) = rest[1..].split(quote).next() else { return false };
    let words: Vec<&str> = value.split_whitespace().collect();
    words.first() == Some(&"unicode61")
        && words.len() % 2 == 1
        && words[1..].chunks(2).all(|kv| kv[0] == "remove_diacritics" && ["0", "1", "2"].contains(&kv[1]))
}

/// Offers `row` to the `need` best rows kept in `best`; the worst kept
/// score once `need` rows are kept (the threshold a row must beat).
pub(crate) fn offer(best: &mut std::collections::BinaryHeap<Scored>, row: Scored, need: usize) -> Option<f64> {
    if best.len() < need {
        best.push(row);
    } else if best.peek().is_some_and(|worst| row < *worst) {
        best.pop();
        best.push(row);
    }
    best.peek().filter(|_| best.len() == need).map(|worst| worst.score)
}

/// A scored row: `score` is `-bm25()`, higher is better; ties go to the
/// smaller pk. Ordered worst first, so a max-heap keeps the worst on top.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scored {
    pub score: f64,
    pub pk: i64,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.score.total_cmp(&self.score).then(self.pk.cmp(&other.pk))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Scales the estimate of the best score, so tests can make the
        /// first round leave out too much and fall back.
        pub(crate) static TARGET_SCALE: Cell<f64> = const { Cell::new(1.0) };
        /// First rounds that were final, and that were not.
        pub(crate) static ROUNDS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    pub(crate) fn count(final_round: bool) {
        ROUNDS.with(|r| {
            let (ok, fallback) = r.get();
            r.set(if final_round { (ok + 1, fallback) } else { (ok, fallback + 1) });
        });
    }

    fn term(text: &str) -> Term {
        Term { text: text.into(), single_token: !text.contains('_') }
    }

    #[test]
    fn row_set_counts_and_tests_members() {
        let mut set = RowSet::default();
        for pk in [1, 9, 9, 64, -3] {
            set.insert(pk);
        }
        assert_eq!(set.len(), 3);
        assert!(set.contains(9) && set.contains(64) && !set.contains(8) && !set.contains(-3) && !set.contains(1000));
        set.remove(9);
        set.remove(10);
        assert_eq!(set.len(), 2);
        assert!(!set.contains(9));
        assert!(!RowSet::test(&[], 0));
    }

    #[test]
    fn only_plain_unicode61_counts_as_its_own_tokens() {
        let sql =
            |tokenize: &str| format!("CREATE VIRTUAL TABLE chunks_fts USING fts5 (body, content = '', {tokenize})");
        assert!(tokenizer_is_unicode61(&sql("tokenize = 'unicode61 remove_diacritics 2'")));
        assert!(tokenizer_is_unicode61(&sql("TOKENIZE=\"unicode61\"")));
        assert!(!tokenizer_is_unicode61(&sql("tokenize = 'porter unicode61'")));
        assert!(!tokenizer_is_unicode61(&sql("tokenize = 'unicode61 tokenchars _'")));
        assert!(!tokenizer_is_unicode61(&sql("tokenize = 'unicode61 remove_diacritics'")));
        assert!(!tokenizer_is_unicode61(&sql("tokenize = 'trigram'")));
        // No tokenize option means `unicode61` with its defaults, but say
        // nothing rather than guess.
        assert!(!tokenizer_is_unicode61("CREATE VIRTUAL TABLE chunks_fts USING fts5 (body)"));
    }

    #[test]
    fn varints_and_docsize_records_decode() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
        // One size per column of `fts::COLUMNS` (body, idents, stems, names,
        // comments); missing trailing sizes are 0.
        assert_eq!(column_sizes(&[0x07, 0x81, 0x01, 0x02, 0x03, 0x04]), [7, 129, 2, 3, 4]);
        assert_eq!(column_sizes(&[0x07, 0x81, 0x01]), [7, 129, 0, 0, 0]);
        assert_eq!(column_sizes(&[0x07]), [7, 0, 0, 0, 0]);
    }

    #[test]
    fn idf_matches_fts5() {
        assert_eq!(idf(100, 10), (90.5f64 / 10.5).ln());
        assert_eq!(idf(100, 60), 1e-6);
    }

    #[test]
    fn plan_leaves_out_frequent_tokens_whose_bound_stays_below_the_expected_best() {
        let (rare, mid, common, snake) = (term("bakori42"), term("bako"), term("42"), term("bako_ri43"));
        let phrase = |term, df| Phrase { term, document_frequency: Some(df), at_most: None };
        let snake_phrase = Phrase { term: &snake, document_frequency: None, at_most: None };
        let phrases = [phrase(&rare, 50), phrase(&mid, 12_000), phrase(&common, 30_000), snake_phrase];
        let bound = |dfs: &[u64]| dfs.iter().map(|&df| idf(100_000, df) * 2.2).sum::<f64>() * (1.0 + BOUND_SLACK);
        let plan = plan(&phrases, 100_000, 100_000, 10, Expect::Rarest).unwrap();
        assert_eq!(plan.essential, [&rare, &snake]);
        assert_eq!(plan.bound, bound(&[30_000, 12_000]));
        // The rare token alone would likely not fill the answer, so the next
        // one is scored too.
        let plan = super::plan(&phrases, 100_000, 100_000, 15, Expect::Rarest).unwrap();
        assert_eq!(plan.essential, [&rare, &mid, &snake]);
        assert_eq!(plan.bound, bound(&[30_000]));
        assert_eq!(super::plan(&phrases, 100_000, 200, 15, Expect::Rarest), None);
        // Equally frequent tokens bound each other: nothing is left out.
        let flat = [phrases[1], phrase(&common, 12_000)];
        assert_eq!(super::plan(&flat, 100_000, 100_000, 15, Expect::Rarest), None);

        // A less rare token: only the optimistic plan leaves `bako` out.
        let phrases = [phrase(&rare, 2000), phrase(&mid, 12_000), phrase(&common, 30_000), snake_phrase];
        let cautious = super::plan(&phrases, 100_000, 100_000, 15, Expect::Rarest).unwrap();
        assert_eq!(cautious.essential, [&rare, &mid, &snake]);
        let optimistic = super::plan(&phrases, 100_000, 100_000, 15, Expect::Every).unwrap();
        assert_eq!(optimistic.essential, [&rare, &snake]);
        assert_eq!(optimistic.bound, bound(&[30_000, 12_000]));
        // A rare phrase of several tokens raises the expected best score and
        // offers candidates of its own.
        let phrases = [phrase(&mid, 12_000), phrase(&common, 30_000), Phrase { at_most: Some(100), ..snake_phrase }];
        let plan = super::plan(&phrases, 100_000, 100_000, 15, Expect::Rarest).unwrap();
        assert_eq!(plan.essential, [&snake]);
        assert_eq!(plan.bound, bound(&[30_000, 12_000]));
    }
}
