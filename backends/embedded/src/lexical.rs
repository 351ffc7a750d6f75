//! What FTS5 itself answers: its `bm25()` over the rows a filter allows,
//! the table statistics and row lengths it scores with, and the phrases
//! the persistent index (`lexindex.rs`) leaves to it.
//!
//! Lexical search ranks over the persistent index; this is the reference
//! its answers are tested against, bit for bit, and what a query falls back
//! to when the index cannot serve it (a pk beyond `u32`, a tokenizer other
//! than plain `unicode61`). The rows a query may return travel as a bitmap
//! blob that the `rr_in(set, rowid)` SQL function tests in the `WHERE`
//! clause, which SQLite evaluates before the result columns, so `bm25()`
//! runs only for rows that pass.

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::{Connection, OptionalExtension};

use crate::fts::{self, Term};

/// FTS5's `bm25()` constant `k1`; a phrase adds at most `idf · (K1 + 1)`.
pub(crate) const K1: f64 = 1.2;
/// FTS5's `bm25()` constant `b`.
pub(crate) const B: f64 = 0.75;

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
/// when it is a single token (from the lexicon).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Phrase<'a> {
    pub term: &'a Term,
    pub document_frequency: Option<u64>,
}

/// FTS5's IDF for a phrase found in `hits` of `rows` rows.
pub(crate) fn idf(rows: u64, hits: u64) -> f64 {
    let idf = ((rows as f64 - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// The `need` rows of `allowed` that best match any of `phrases`, by
/// `bm25()` of the whole expression then rowid.
pub(crate) fn best_rows(
    conn: &Connection,
    phrases: &[Phrase<'_>],
    allowed: &RowSet,
    need: usize,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let Some(expression) = fts::match_expression(phrases.iter().map(|p| p.term)) else { return Ok(Vec::new()) };
    if need == 0 {
        return Ok(Vec::new());
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
        let total = column_sizes(&sz).iter().fold(0u32, |a, &n| a.saturating_add(n as u32));
        if pk >= out.len() {
            out.resize(pk + 1, 0);
        }
        out[pk] = total;
    }
    Ok(out)
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
        // One size per column of `fts::COLUMNS` (body, idents, stems);
        // missing trailing sizes are 0, extra ones ignored.
        assert_eq!(column_sizes(&[0x07, 0x81, 0x01, 0x02, 0x03]), [7, 129, 2]);
        assert_eq!(column_sizes(&[0x07, 0x81, 0x01]), [7, 129, 0]);
        assert_eq!(column_sizes(&[0x07]), [7, 0, 0]);
    }

    #[test]
    fn idf_matches_fts5() {
        assert_eq!(idf(100, 10), (90.5f64 / 10.5).ln());
        assert_eq!(idf(100, 60), 1e-6);
    }
}
