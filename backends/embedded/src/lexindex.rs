//! The persistent lexical index: every full-text token's rows, in
//! compressed blocks with a score bound each, kept in SQLite and changed in
//! the same transaction as the chunks.
//!
//! **Why our own format and not `tantivy`.** Tantivy has everything a
//! search engine needs (block-max WAND, mmap, merges), but it would be a
//! second store beside SQLite: its commits cannot join SQLite's
//! transaction, its single-writer lock does not fit a store that several
//! processes write, and its BM25 (per-field norms quantised to a byte, an
//! IDF of its own, one score per field) is not FTS5's `bm25()`, so every
//! ranking measured and tuned on the real query sets would move. Here the
//! index is two tables of the same database: a write that commits has
//! changed the chunks, FTS5 and these postings together, or none of them,
//! and the scores stay bit for bit `bm25()`'s (the same statistics, the same
//! formula, the same order of additions), so what FTS5 answers remains the
//! reference every test compares with.
//!
//! **Tokens are FTS5's own.** A write hands the rows it adds (and, before
//! changing them, the rows it replaces or removes, recomputed from `chunks`
//! by `fts::columns`) to a per-connection FTS5 table declared exactly like
//! `chunks_fts`, and reads the tokens back from its `fts5vocab` instance
//! table: the tokenizer, the columns and the texts are FTS5's, whatever
//! `fts.rs` puts in them.
//!
//! **Format.** `lexicon` holds each token's document frequency (the rows
//! holding it: FTS5's IDF input) and the write generation that last changed
//! it; `postings` holds its rows in blocks of at most [`BLOCK`], keyed by
//! (token, last pk). A block is: the row count, the shortest row among them,
//! the largest count in each column, then pk deltas and per-row column
//! counts (2 bits a column, larger counts escaped), all varints. The largest
//! counts and the shortest row bound the BM25 term of any row of the block
//! for any IDF and average length (the term grows with the frequency and
//! falls with the row's length), so no stored bound goes stale when the
//! table's statistics change.
//!
//! **Writes** touch only the blocks that hold the rows they change (rows
//! added with new pks go to a token's last block), so a write costs in
//! proportion to its own rows, never a rebuild.
//!
//! **Queries** read a token's blocks once and keep them, compressed, in a
//! cache bounded by [`CACHE_BYTES`]; a token is read again only when a write
//! changed it (its generation moved). Ranking is block-max MaxScore
//! ([`best_rows`]): lists whose bounds cannot lift a row into the top are
//! only probed, blocks whose bounds cannot are skipped without decoding.

use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

use crate::fts::{self, Term};
use crate::lexical::{self, RowSet, Scored, TableStats};

/// Most rows in one block.
pub(crate) const BLOCK: usize = 128;
/// Most bytes of compressed blocks kept in memory between queries.
pub(crate) const CACHE_BYTES: usize = 96 << 20;
/// Most bytes of phrase lists (read from FTS5) kept until the next write.
const PHRASE_BYTES: usize = 8 << 20;
/// Slack on bounds for the rounding of sums taken in another order.
const BOUND_SLACK: f64 = 1e-9;
/// The per-connection FTS5 table a write tokenizes its rows with.
const STAGING: &str = "temp.lexicon_staging";
/// Its `fts5vocab` instance table.
const STAGING_INSTANCES: &str = "temp.lexicon_staging_instances";
/// The settings key of the write generation.
const GENERATION_KEY: &str = "lexicon_generation";

/// The tables (schema version 3).
pub(crate) const SCHEMA: &str = r#"
    CREATE TABLE lexicon (
        term TEXT PRIMARY KEY,
        df   INTEGER NOT NULL,
        gen  INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE postings (
        term    TEXT NOT NULL,
        last_pk INTEGER NOT NULL,
        block   BLOB NOT NULL,
        PRIMARY KEY (term, last_pk)
    ) WITHOUT ROWID;
"#;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn get_u32(buf: &[u8], at: &mut usize) -> Option<u32> {
    get_varint(buf, at).and_then(|v| u32::try_from(v).ok())
}

/// The rows of one block, decoded: pks ascending, and the token's count in
/// each of [`fts::COLUMNS`] for each row.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Block {
    pub pks: Vec<u32>,
    pub counts: Vec<u32>,
    /// No row of the block is shorter (in tokens, all columns).
    pub min_len: u32,
}

/// Bytes of packed 2-bit counts per row.
fn packed_bytes() -> usize {
    fts::COLUMNS.len().div_ceil(4)
}

impl Block {
    fn len(&self) -> usize {
        self.pks.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let columns = fts::COLUMNS.len();
        let mut out = Vec::with_capacity(8 + self.len() * (2 + packed_bytes()));
        put_varint(&mut out, self.len() as u64);
        put_varint(&mut out, u64::from(self.min_len));
        for c in 0..columns {
            let max = self.counts.iter().skip(c).step_by(columns).copied().max().unwrap_or(0);
            put_varint(&mut out, u64::from(max));
        }
        let mut previous = 0;
        for &pk in &self.pks {
            put_varint(&mut out, u64::from(pk - previous));
            previous = pk;
        }
        // Every row's packed counts, then the escaped ones: a row's counts
        // are found without reading the rows before it (but for the rare
        // escapes).
        for row in self.counts.chunks(columns) {
            let at = out.len();
            out.resize(at + packed_bytes(), 0);
            for (c, &n) in row.iter().enumerate() {
                out[at + c / 4] |= (n.min(3) as u8) << (2 * (c % 4));
            }
        }
        for &n in self.counts.iter().filter(|&&n| n >= 3) {
            put_varint(&mut out, u64::from(n - 3));
        }
        out
    }

    /// `None` when `bytes` is not a block this module wrote.
    pub fn decode(bytes: &[u8]) -> Option<Block> {
        let mut block = Block::default();
        let header = Header::read(bytes)?;
        block.min_len = header.min_len;
        decode_rows(bytes, &header, &mut block.pks, &mut block.counts)?;
        Some(block)
    }
}

/// What a block says before its rows.
#[derive(Debug, Clone)]
struct Header {
    n: usize,
    min_len: u32,
    max_counts: Vec<u32>,
    /// Where the pk deltas start.
    rows_at: usize,
}

impl Header {
    fn read(bytes: &[u8]) -> Option<Header> {
        let mut at = 0;
        let n = get_varint(bytes, &mut at)? as usize;
        let min_len = get_u32(bytes, &mut at)?;
        let max_counts = fts::COLUMNS.iter().map(|_| get_u32(bytes, &mut at)).collect::<Option<Vec<u32>>>()?;
        (n > 0 && n <= BLOCK).then_some(Header { n, min_len, max_counts, rows_at: at })
    }
}

fn decode_rows(bytes: &[u8], header: &Header, pks: &mut Vec<u32>, counts: &mut Vec<u32>) -> Option<()> {
    let columns = fts::COLUMNS.len();
    let packed_at = decode_pks(bytes, header, pks)?;
    counts.clear();
    let mut escapes = packed_at + header.n * packed_bytes();
    for j in 0..header.n {
        let packed = bytes.get(packed_at + j * packed_bytes()..packed_at + (j + 1) * packed_bytes())?;
        for c in 0..columns {
            let n = u32::from((packed[c / 4] >> (2 * (c % 4))) & 3);
            counts.push(if n == 3 { 3 + get_u32(bytes, &mut escapes)? } else { n });
        }
    }
    (escapes == bytes.len()).then_some(())
}

/// The block's pks into `pks`; where its packed counts start.
fn decode_pks(bytes: &[u8], header: &Header, pks: &mut Vec<u32>) -> Option<usize> {
    pks.clear();
    let mut at = header.rows_at;
    let mut pk = 0u32;
    for _ in 0..header.n {
        // Most deltas of a frequent token take one byte.
        let delta = match bytes.get(at) {
            Some(&b) if b < 0x80 => {
                at += 1;
                u32::from(b)
            }
            _ => get_u32(bytes, &mut at)?,
        };
        pk = pk.checked_add(delta)?;
        pks.push(pk);
    }
    (bytes.len() >= at + header.n * packed_bytes()).then_some(at)
}

/// Row `j`'s counts (of `n` rows whose packed counts start at `packed_at`)
/// into `out`.
fn row_counts(bytes: &[u8], packed_at: usize, n: usize, j: usize, out: &mut [u32]) -> Option<()> {
    let pb = packed_bytes();
    let field = |byte: u8, c: usize| u32::from((byte >> (2 * (c % 4))) & 3);
    let row = bytes.get(packed_at + j * pb..packed_at + (j + 1) * pb)?;
    let mut escaped = false;
    for (c, out) in out.iter_mut().enumerate() {
        *out = field(row[c / 4], c);
        escaped |= *out == 3;
    }
    if escaped {
        // Skip the escapes of the rows before, then read this row's.
        let before = bytes[packed_at..packed_at + j * pb]
            .iter()
            .map(|&b| (0..4).filter(|&c| field(b, c) == 3).count())
            .sum::<usize>();
        let mut at = packed_at + n * pb;
        for _ in 0..before {
            get_varint(bytes, &mut at)?;
        }
        for out in out.iter_mut().filter(|n| **n == 3) {
            *out = 3 + get_u32(bytes, &mut at)?;
        }
    }
    Some(())
}

/// A token's frequency in a row as FTS5's `bm25()` sums it: each column's
/// weight once per instance, in column order (so the same bits).
pub(crate) fn weighted_frequency(counts: &[u32]) -> f64 {
    let mut f = 0.0;
    for (column, &n) in fts::COLUMNS.iter().zip(counts) {
        for _ in 0..n {
            f += column.weight;
        }
    }
    f
}

// ---------------------------------------------------------------- writes

/// Creates, on the writing connection, the FTS5 table writes tokenize with:
/// `chunks_fts`'s own declaration under another name.
pub(crate) fn create_staging(conn: &Connection) -> rusqlite::Result<()> {
    let sql: String = conn.query_row("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'", [], |r| r.get(0))?;
    let at = sql.find("chunks_fts").unwrap_or(0);
    let staging = format!("{}{STAGING}{}", &sql[..at], &sql[at + "chunks_fts".len()..]);
    // The staging rows never outlive a write: no need for a file.
    conn.execute_batch(&format!(
        "PRAGMA temp_store = MEMORY;
         DROP TABLE IF EXISTS {STAGING_INSTANCES}; DROP TABLE IF EXISTS {STAGING};
         {staging};
         CREATE VIRTUAL TABLE {STAGING_INSTANCES} USING fts5vocab(temp, lexicon_staging, instance);"
    ))
}

/// Per token, the rows a write takes out and the rows it puts in.
#[derive(Debug, Default)]
struct TokenEdit {
    removed: Vec<u32>,
    added: Block,
    /// The length of each added row.
    added_lens: Vec<u32>,
}

/// The lexicon side of one write: rows staged, then applied at the end of
/// the write's transaction.
#[derive(Debug, Default)]
pub(crate) struct Edit {
    tokens: BTreeMap<String, TokenEdit>,
    /// (pk, length in tokens) of every row written.
    lengths: Vec<(u32, u32)>,
    /// Whether ASCII rows may be tokenized here (`chunks_fts` tokenizes
    /// with plain `unicode61`).
    ascii_tokens: bool,
    /// Rows tokenized here, by pk.
    ascii: HashMap<u32, AsciiRow>,
    /// Rows in the staging table.
    in_staging: HashSet<i64>,
}

/// A row tokenized by [`ascii_row`]: its length and each token's count in
/// each column.
type AsciiRow = (u32, HashMap<String, Vec<u32>>);

/// A row's tokens as `unicode61` makes them from ASCII text.
fn ascii_row(columns: &[String]) -> AsciiRow {
    let mut counts: HashMap<String, Vec<u32>> = HashMap::new();
    let mut len = 0u32;
    for (c, text) in columns.iter().enumerate() {
        for token in text.split(|ch: char| !ch.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
            len = len.saturating_add(1);
            let token = token.to_ascii_lowercase();
            let row = counts.entry(token).or_insert_with(|| vec![0; fts::COLUMNS.len()]);
            row[c] = row[c].saturating_add(1);
        }
    }
    (len, counts)
}

/// Row lengths a committed write changed, for the readers' copy.
#[derive(Debug, Default)]
pub(crate) struct LengthUpdate(Vec<(u32, u32)>);

impl Edit {
    /// An edit for a store whose `chunks_fts` tokenizes ASCII text as
    /// [`ascii_row`] does when `ascii_tokens`.
    pub fn new(ascii_tokens: bool) -> Self {
        Edit { ascii_tokens, ..Edit::default() }
    }

    /// Takes the current full-text rows of the chunks `ids` out of the index:
    /// called before the write changes `chunks`.
    pub fn remove_ids<'a>(
        &mut self,
        conn: &Connection,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> rusqlite::Result<()> {
        let mut select = conn.prepare_cached("SELECT pk, document, metadata FROM chunks WHERE id = ?1")?;
        let mut any = false;
        for id in ids {
            let row: Option<(i64, String, String)> =
                select.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?;
            let Some((pk, document, metadata)) = row else { continue };
            // A record that cannot be parsed was indexed with its document
            // and default metadata (see the write path's `fts::columns`).
            let metadata = serde_json::from_str(&metadata).unwrap_or_default();
            self.stage(conn, pk, &fts::columns(&document, &metadata))?;
            any = true;
        }
        if any {
            let (postings, _) = self.harvest(conn)?;
            for (token, block, _) in postings {
                self.tokens.entry(token).or_default().removed.extend(block.pks);
            }
        }
        Ok(())
    }

    /// Stages a row the write puts in (the same texts as its `chunks_fts`
    /// row); a row staged again replaces the one before, as in FTS5.
    ///
    /// On ASCII text `unicode61` (without options but `remove_diacritics`)
    /// makes exactly the runs of ASCII letters and digits, lower-cased (see
    /// `lexical::tokenizer_is_unicode61`): such rows are tokenized here, the
    /// others by FTS5 in the staging table.
    pub fn stage(&mut self, conn: &Connection, pk: i64, columns: &[String]) -> rusqlite::Result<()> {
        let row = u32::try_from(pk).ok().filter(|_| self.ascii_tokens && columns.iter().all(|c| c.is_ascii()));
        if self.in_staging.remove(&pk) {
            conn.prepare_cached(&format!("DELETE FROM {STAGING} WHERE rowid = ?1"))?.execute([pk])?;
        }
        if let Some(row) = row {
            self.ascii.insert(row, ascii_row(columns));
            return Ok(());
        }
        if let Ok(row) = u32::try_from(pk) {
            self.ascii.remove(&row);
        }
        let mut insert = conn.prepare_cached(&fts::insert_statement().replacen("chunks_fts", STAGING, 1))?;
        let mut values: Vec<&dyn rusqlite::ToSql> = vec![&pk];
        values.extend(columns.iter().map(|c| c as &dyn rusqlite::ToSql));
        insert.execute(values.as_slice())?;
        self.in_staging.insert(pk);
        Ok(())
    }

    /// The staged rows' postings by token (pks ascending) and lengths; the
    /// staging emptied.
    fn harvest(&mut self, conn: &Connection) -> rusqlite::Result<Harvest> {
        let (fts5, mut lens) = match self.in_staging.is_empty() {
            true => (Vec::new(), HashMap::new()),
            false => harvest(conn)?,
        };
        self.in_staging.clear();
        let mut tokens: BTreeMap<String, (Block, Vec<u32>)> =
            fts5.into_iter().map(|(token, block, lens)| (token, (block, lens))).collect();
        let mut rows: Vec<(u32, AsciiRow)> = self.ascii.drain().collect();
        rows.sort_by_key(|(pk, _)| *pk);
        for (pk, (len, counts)) in rows {
            lens.insert(pk, len);
            for (token, counts) in counts {
                let (block, block_lens) = tokens.entry(token).or_default();
                block.pks.push(pk);
                block.counts.extend(counts);
                block_lens.push(len);
            }
        }
        let mut out = Vec::with_capacity(tokens.len());
        for (token, (mut block, mut block_lens)) in tokens {
            if !block.pks.is_sorted() {
                let columns = fts::COLUMNS.len();
                let mut order: Vec<usize> = (0..block.pks.len()).collect();
                order.sort_by_key(|&j| block.pks[j]);
                block = Block {
                    pks: order.iter().map(|&j| block.pks[j]).collect(),
                    counts: order.iter().flat_map(|&j| block.counts[j * columns..(j + 1) * columns].to_vec()).collect(),
                    min_len: 0,
                };
                block_lens = order.iter().map(|&j| block_lens[j]).collect();
            }
            out.push((token, block, block_lens));
        }
        Ok((out, lens))
    }

    /// Applies the edit to `lexicon` and `postings`, inside the write's
    /// transaction; the row lengths for the readers once it commits.
    pub fn apply(mut self, conn: &Connection) -> rusqlite::Result<LengthUpdate> {
        if !self.in_staging.is_empty() || !self.ascii.is_empty() {
            // The rows taken out were harvested already: what is staged now
            // is what the write puts in.
            let (postings, lengths) = self.harvest(conn)?;
            self.lengths.extend(lengths);
            for (token, block, lens) in postings {
                let edit = self.tokens.entry(token).or_default();
                edit.added = block;
                edit.added_lens = lens;
            }
        }
        if self.tokens.is_empty() {
            return Ok(LengthUpdate(self.lengths));
        }
        let generation: i64 = conn.query_row(
            &format!(
                "INSERT INTO settings (key, value) VALUES ('{GENERATION_KEY}', '1')
                 ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING CAST(value AS INTEGER)"
            ),
            [],
            |r| r.get(0),
        )?;
        for (token, edit) in &self.tokens {
            apply_token(conn, token, edit, generation)?;
        }
        Ok(LengthUpdate(self.lengths))
    }
}

/// Postings by token of the staged rows, each row's length, and the rows'
/// lengths by pk.
type Harvest = (Vec<(String, Block, Vec<u32>)>, HashMap<u32, u32>);

/// The staged rows' postings by token and lengths; clears the staging table.
fn harvest(conn: &Connection) -> rusqlite::Result<Harvest> {
    let columns = fts::COLUMNS.len();
    let mut lens: HashMap<u32, u32> = HashMap::new();
    {
        let mut stmt = conn.prepare_cached("SELECT id, sz FROM temp.lexicon_staging_docsize")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let Ok(pk) = u32::try_from(row.get::<_, i64>(0)?) else { continue };
            let total = lexical::column_sizes(&row.get::<_, Vec<u8>>(1)?).iter().sum::<u64>();
            lens.insert(pk, u32::try_from(total).unwrap_or(u32::MAX));
        }
    }
    let mut out: Vec<(String, Block, Vec<u32>)> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(&format!("SELECT term, doc, col FROM {STAGING_INSTANCES}"))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (term, doc, col): (String, i64, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let (Ok(pk), Some(c)) = (u32::try_from(doc), fts::COLUMNS.iter().position(|x| x.name == col)) else {
                continue;
            };
            if out.last().is_none_or(|(t, _, _)| *t != term) {
                out.push((term, Block::default(), Vec::new()));
            }
            let (_, block, block_lens) = out.last_mut().expect("pushed above");
            if block.pks.last() != Some(&pk) {
                block.pks.push(pk);
                block.counts.resize(block.counts.len() + columns, 0);
                block_lens.push(lens.get(&pk).copied().unwrap_or(0));
            }
            let at = block.counts.len() - columns + c;
            block.counts[at] = block.counts[at].saturating_add(1);
        }
    }
    conn.execute(&format!("INSERT INTO {STAGING} ({0}) VALUES ('delete-all')", &STAGING["temp.".len()..]), [])?;
    Ok((out, lens))
}

/// One token's rows taken out and put in, block by block.
fn apply_token(conn: &Connection, token: &str, edit: &TokenEdit, generation: i64) -> rusqlite::Result<()> {
    let columns = fts::COLUMNS.len();
    let mut at_or_after = conn.prepare_cached(
        "SELECT last_pk, block FROM postings WHERE term = ?1 AND last_pk >= ?2 ORDER BY last_pk LIMIT 1",
    )?;
    let mut last =
        conn.prepare_cached("SELECT last_pk, block FROM postings WHERE term = ?1 ORDER BY last_pk DESC LIMIT 1")?;
    let mut delete = conn.prepare_cached("DELETE FROM postings WHERE term = ?1 AND last_pk = ?2")?;
    let mut insert = conn.prepare_cached("INSERT INTO postings (term, last_pk, block) VALUES (?1, ?2, ?3)")?;
    let corrupt = |last_pk: i64| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            format!("postings block of {token:?} ending at pk {last_pk} is not a valid block").into(),
        )
    };
    // Every pk the edit touches, ascending, with what happens to it.
    let mut ops: Vec<(u32, Option<usize>)> = edit.removed.iter().map(|&pk| (pk, None)).collect();
    ops.extend(edit.added.pks.iter().enumerate().map(|(i, &pk)| (pk, Some(i))));
    ops.sort_by_key(|&(pk, add)| (pk, add.is_some()));
    let mut df_delta: i64 = 0;
    let mut i = 0;
    while i < ops.len() {
        let pk = ops[i].0;
        let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?));
        // Rows a write adds have new pks, past the token's last block: one
        // lookup finds where all of them go.
        let tail: Option<(i64, Vec<u8>)> = match i {
            0 => last.query_row([token], row).optional()?,
            _ => None,
        };
        let found = match tail {
            Some((last_pk, bytes)) if last_pk < i64::from(pk) => Some((last_pk, bytes)),
            None if i == 0 => None,
            _ => match at_or_after.query_row(params![token, pk], row).optional()? {
                Some(found) => Some(found),
                None => last.query_row([token], row).optional()?,
            },
        };
        // The ops that land in this block: the pks up to its last one; all
        // that remain when it is the token's last block, or there is none.
        let (end, old_last, mut rows) = match found {
            Some((last_pk, bytes)) => {
                let block = Block::decode(&bytes).ok_or_else(|| corrupt(last_pk))?;
                let end = match last_pk >= i64::from(pk) {
                    true => i + ops[i..].partition_point(|&(p, _)| i64::from(p) <= last_pk),
                    false => ops.len(),
                };
                (end, Some(last_pk), block)
            }
            None => (ops.len(), None, Block::default()),
        };
        // Rows already stored keep the block's shortest length as theirs.
        let mut lens = vec![rows.min_len; rows.len()];
        for &(pk, add) in &ops[i..end] {
            let at = rows.pks.partition_point(|&p| p < pk);
            let present = rows.pks.get(at) == Some(&pk);
            match add {
                None => {
                    if present {
                        rows.pks.remove(at);
                        rows.counts.drain(at * columns..(at + 1) * columns);
                        lens.remove(at);
                        df_delta -= 1;
                    }
                }
                Some(j) => {
                    let counts = &edit.added.counts[j * columns..(j + 1) * columns];
                    if present {
                        rows.counts[at * columns..(at + 1) * columns].copy_from_slice(counts);
                        lens[at] = edit.added_lens[j];
                    } else {
                        rows.pks.insert(at, pk);
                        rows.counts.splice(at * columns..at * columns, counts.iter().copied());
                        lens.insert(at, edit.added_lens[j]);
                        df_delta += 1;
                    }
                }
            }
        }
        if let Some(l) = old_last {
            delete.execute(params![token, l])?;
        }
        for (pks, (counts, lens)) in
            rows.pks.chunks(BLOCK).zip(rows.counts.chunks(BLOCK * columns).zip(lens.chunks(BLOCK)))
        {
            let block =
                Block { pks: pks.to_vec(), counts: counts.to_vec(), min_len: lens.iter().copied().min().unwrap_or(0) };
            insert.execute(params![token, pks[pks.len() - 1], block.encode()])?;
        }
        i = end;
    }
    let df: i64 = conn
        .prepare_cached(
            "INSERT INTO lexicon (term, df, gen) VALUES (?1, ?2, ?3)
             ON CONFLICT (term) DO UPDATE SET df = df + excluded.df, gen = excluded.gen RETURNING df",
        )?
        .query_row(params![token, df_delta, generation], |r| r.get(0))?;
    if df <= 0 {
        conn.prepare_cached("DELETE FROM lexicon WHERE term = ?1")?.execute([token])?;
    }
    Ok(())
}

/// Writes the whole index from `chunks_fts` (a new schema version, or a
/// refill of the full-text table), inside the migration's transaction.
pub(crate) fn rebuild(conn: &Connection) -> rusqlite::Result<()> {
    let columns = fts::COLUMNS.len();
    conn.execute_batch(
        "DELETE FROM lexicon; DELETE FROM postings;
         DROP TABLE IF EXISTS temp.lexicon_build;
         CREATE VIRTUAL TABLE temp.lexicon_build USING fts5vocab(main, chunks_fts, instance);",
    )?;
    let lens = crate::postings::docsizes(conn)?;
    {
        let mut insert = conn.prepare("INSERT INTO postings (term, last_pk, block) VALUES (?1, ?2, ?3)")?;
        let mut lexicon = conn.prepare("INSERT INTO lexicon (term, df, gen) VALUES (?1, ?2, 0)")?;
        let mut select = conn.prepare("SELECT term, doc, col FROM temp.lexicon_build")?;
        let mut rows = select.query([])?;
        let mut term = String::new();
        let mut block = Block::default();
        let mut df: u64 = 0;
        let mut flush = |term: &str, block: &mut Block| -> rusqlite::Result<()> {
            if let Some(&last) = block.pks.last() {
                block.min_len =
                    block.pks.iter().map(|&pk| lens.get(pk as usize).copied().unwrap_or(0)).min().unwrap_or(0);
                insert.execute(params![term, last, block.encode()])?;
                block.pks.clear();
                block.counts.clear();
            }
            Ok(())
        };
        while let Some(row) = rows.next()? {
            let (token, doc, col): (String, i64, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let (Ok(pk), Some(c)) = (u32::try_from(doc), fts::COLUMNS.iter().position(|x| x.name == col)) else {
                continue;
            };
            if token != term {
                flush(&term, &mut block)?;
                if df > 0 {
                    lexicon.execute(params![term, df as i64])?;
                }
                term = token;
                df = 0;
            }
            if block.pks.last() != Some(&pk) {
                if block.len() == BLOCK {
                    flush(&term, &mut block)?;
                }
                block.pks.push(pk);
                block.counts.resize(block.counts.len() + columns, 0);
                df += 1;
            }
            let at = block.counts.len() - columns + c;
            block.counts[at] = block.counts[at].saturating_add(1);
        }
        flush(&term, &mut block)?;
        if df > 0 {
            lexicon.execute(params![term, df as i64])?;
        }
    }
    conn.execute_batch("DROP TABLE temp.lexicon_build")
}

// --------------------------------------------------------------- queries

/// Where one block of a token lies in [`TermData::data`], and its bound.
#[derive(Debug, Clone, Copy)]
struct Meta {
    first_pk: u32,
    last_pk: u32,
    start: u32,
    end: u32,
    min_len: u32,
    /// The largest weighted frequency of a row of the block.
    max_f: f64,
}

/// A token's blocks as stored, for one generation of the token.
#[derive(Debug)]
pub(crate) struct TermData {
    generation: i64,
    df: u64,
    blocks: Vec<Meta>,
    data: Vec<u8>,
    /// The largest BM25 term ratio of its blocks (the term without its IDF
    /// factor), for the average length (its bits) it was computed with.
    bound: Mutex<Option<(u64, f64)>>,
}

impl TermData {
    /// The largest term any row can have, with IDF `idf`.
    fn list_bound(&self, idf: f64, avgdl: f64) -> f64 {
        let mut cached = self.bound.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ratio = match *cached {
            Some((bits, ratio)) if bits == avgdl.to_bits() => ratio,
            _ => {
                let ratio = self
                    .blocks
                    .iter()
                    .map(|m| lexical::bm25_ratio(m.max_f, f64::from(m.min_len), avgdl))
                    .fold(0.0, f64::max);
                *cached = Some((avgdl.to_bits(), ratio));
                ratio
            }
        };
        // `bm25_term` is `idf` times the ratio: the same product bounds it.
        idf * ratio
    }
}

impl TermData {
    fn bytes(&self) -> usize {
        self.data.len() + self.blocks.len() * std::mem::size_of::<Meta>() + 64
    }

    fn load(conn: &Connection, term: &str, generation: i64, df: u64) -> rusqlite::Result<Option<TermData>> {
        let mut stmt = conn.prepare_cached("SELECT last_pk, block FROM postings WHERE term = ?1 ORDER BY last_pk")?;
        let mut rows = stmt.query([term])?;
        let (mut blocks, mut data) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next()? {
            let Ok(last_pk) = u32::try_from(row.get::<_, i64>(0)?) else { return Ok(None) };
            let bytes = row.get_ref(1)?.as_blob()?;
            let Some(header) = Header::read(bytes) else { return Ok(None) };
            // The first delta is the first pk; the rest is decoded when a
            // query needs the block.
            let Some(first_pk) = get_u32(bytes, &mut header.rows_at.clone()) else { return Ok(None) };
            let start = data.len() as u32;
            data.extend_from_slice(bytes);
            blocks.push(Meta {
                first_pk,
                last_pk,
                start,
                end: data.len() as u32,
                min_len: header.min_len,
                max_f: weighted_frequency(&header.max_counts),
            });
        }
        data.shrink_to_fit();
        Ok(Some(TermData { generation, df, blocks, data, bound: Mutex::new(None) }))
    }
}

/// A phrase's rows and their `bm25()` terms, as FTS5 scores the phrase
/// alone (see `postings.rs`), with the largest term of each block.
#[derive(Debug)]
pub(crate) struct PhraseList {
    pks: Vec<u32>,
    terms: Vec<f64>,
    block_max: Vec<f64>,
}

impl PhraseList {
    fn new(pks: Vec<u32>, terms: Vec<f64>) -> Self {
        let block_max = terms.chunks(BLOCK).map(|c| c.iter().copied().fold(0.0, f64::max)).collect();
        PhraseList { pks, terms, block_max }
    }

    fn bytes(&self) -> usize {
        self.pks.len() * 12 + self.block_max.len() * 8 + 64
    }
}

/// One list of a query.
#[derive(Debug, Clone)]
pub(crate) enum List {
    Token(Arc<TermData>),
    Phrase(Arc<PhraseList>),
}

/// A token kept by the [`Cache`].
#[derive(Debug)]
struct Entry {
    data: Arc<TermData>,
    /// The cache's clock when a query last used it.
    used: u64,
    /// The store's change when its generation was last checked.
    checked_at: u64,
}

/// (document frequency, generation) of `token` in the lexicon; a token no
/// row holds has generation -1.
fn lookup(conn: &Connection, token: &str) -> rusqlite::Result<(u64, i64)> {
    let found: Option<(i64, i64)> = conn
        .prepare_cached("SELECT df, gen FROM lexicon WHERE term = ?1")?
        .query_row([token], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(found.map_or((0, -1), |(df, g)| (df.max(0) as u64, g)))
}

/// What queries keep between writes: tokens' blocks (valid for their
/// generation, so only the tokens a write changed are read again), phrase
/// lists and every row's length (valid until the store changes; this
/// process's writes update the lengths in place).
#[derive(Debug)]
pub(crate) struct Cache {
    tokens: HashMap<String, Entry>,
    bytes: usize,
    budget: usize,
    tick: u64,
    phrases: HashMap<String, Arc<PhraseList>>,
    phrase_bytes: usize,
    phrases_at: u64,
    lengths: Option<Vec<u32>>,
    lengths_at: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            tokens: HashMap::new(),
            bytes: 0,
            budget: CACHE_BYTES,
            tick: 0,
            phrases: HashMap::new(),
            phrase_bytes: 0,
            phrases_at: 0,
            lengths: None,
            lengths_at: 0,
        }
    }
}

impl Cache {
    /// Forgets everything (the bench's cold row).
    pub fn clear(&mut self) {
        *self = Cache { budget: self.budget, ..Cache::default() };
    }

    #[cfg(test)]
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    #[cfg(test)]
    pub fn kept_bytes(&self) -> usize {
        self.bytes
    }

    /// After this process committed a write that moved the store from
    /// change `before` to `after`: the rows' lengths follow it in place.
    pub fn written(&mut self, before: u64, after: u64, update: &LengthUpdate) {
        if self.lengths_at != before {
            self.lengths = None;
            return;
        }
        if let Some(lengths) = &mut self.lengths {
            for &(pk, len) in &update.0 {
                if pk as usize >= lengths.len() {
                    lengths.resize(pk as usize + 1, 0);
                }
                lengths[pk as usize] = len;
            }
        }
        self.lengths_at = after;
    }

    /// Every row's length in tokens, by pk, as of change `changes`.
    pub fn lengths(&mut self, conn: &Connection, changes: u64) -> rusqlite::Result<&[u32]> {
        if self.lengths.is_none() || self.lengths_at != changes {
            self.lengths = Some(crate::postings::docsizes(conn)?);
            self.lengths_at = changes;
        }
        Ok(self.lengths.as_deref().unwrap_or_default())
    }

    /// The number of rows holding `token`, as of change `changes`.
    pub fn document_frequency(&mut self, conn: &Connection, token: &str, changes: u64) -> rusqlite::Result<u64> {
        if let Some(entry) = self.tokens.get(token)
            && entry.checked_at == changes
        {
            return Ok(entry.data.df);
        }
        Ok(lookup(conn, token)?.0)
    }

    /// The rows holding `token` as of change `changes` (none when no row
    /// does); `None` when the stored blocks are not readable.
    pub fn token(&mut self, conn: &Connection, token: &str, changes: u64) -> rusqlite::Result<Option<List>> {
        self.tick += 1;
        if let Some(entry) = self.tokens.get_mut(token)
            && entry.checked_at == changes
        {
            entry.used = self.tick;
            return Ok(Some(List::Token(entry.data.clone())));
        }
        // The store changed since: the token's generation says whether a
        // write changed its rows.
        let (df, generation) = lookup(conn, token)?;
        if let Some(entry) = self.tokens.get_mut(token)
            && entry.data.generation == generation
            && entry.data.df == df
        {
            (entry.used, entry.checked_at) = (self.tick, changes);
            return Ok(Some(List::Token(entry.data.clone())));
        }
        if let Some(old) = self.tokens.remove(token) {
            self.bytes -= old.data.bytes();
        }
        let data = match df {
            0 => TermData { generation, df, blocks: Vec::new(), data: Vec::new(), bound: Mutex::new(None) },
            _ => match TermData::load(conn, token, generation, df)? {
                Some(data) => data,
                None => return Ok(None),
            },
        };
        let data = Arc::new(data);
        self.keep(token, data.clone(), changes);
        Ok(Some(List::Token(data)))
    }

    /// Keeps `data` within the budget, dropping the least recently used.
    fn keep(&mut self, token: &str, data: Arc<TermData>, changes: u64) {
        let size = data.bytes();
        if size > self.budget {
            return;
        }
        while self.bytes + size > self.budget {
            let Some(oldest) = self.tokens.iter().min_by_key(|(_, e)| e.used).map(|(t, _)| t.clone()) else {
                break;
            };
            if let Some(old) = self.tokens.remove(&oldest) {
                self.bytes -= old.data.bytes();
            }
        }
        self.bytes += size;
        self.tokens.insert(token.to_owned(), Entry { data, used: self.tick, checked_at: changes });
    }

    /// The rows of a phrase FTS5 matches, with their terms, as of change
    /// `changes`; `None` when a pk does not fit.
    pub fn phrase(&mut self, conn: &Connection, term: &Term, changes: u64) -> rusqlite::Result<Option<List>> {
        if self.phrases_at != changes {
            self.phrases.clear();
            self.phrase_bytes = 0;
            self.phrases_at = changes;
        }
        if let Some(list) = self.phrases.get(&term.text) {
            return Ok(Some(List::Phrase(list.clone())));
        }
        let Some((pks, terms)) = crate::postings::phrase_terms(conn, term)? else { return Ok(None) };
        let list = Arc::new(PhraseList::new(pks, terms));
        if self.phrase_bytes + list.bytes() <= PHRASE_BYTES {
            self.phrase_bytes += list.bytes();
            self.phrases.insert(term.text.clone(), list.clone());
        }
        Ok(Some(List::Phrase(list)))
    }
}

/// A position in one list during [`best_rows`].
struct Cursor<'a> {
    list: &'a List,
    idf: f64,
    avgdl: f64,
    lengths: &'a [u32],
    /// The current block; rows below `floor` in it are passed.
    block: usize,
    floor: u32,
    /// The block whose pks are in `pks`, if any; for a token, where its
    /// packed counts start.
    loaded: Option<usize>,
    packed_at: usize,
    pks: Vec<u32>,
    counts: Vec<u32>,
    pos: usize,
    corrupt: bool,
}

impl<'a> Cursor<'a> {
    fn new(list: &'a List, stats: TableStats, lengths: &'a [u32]) -> Self {
        let idf = match list {
            List::Token(data) => lexical::idf(stats.rows, data.df),
            List::Phrase(_) => 0.0,
        };
        Cursor {
            list,
            idf,
            avgdl: stats.avgdl,
            lengths,
            block: 0,
            floor: 0,
            loaded: None,
            packed_at: 0,
            pks: Vec::new(),
            counts: vec![0; fts::COLUMNS.len()],
            pos: 0,
            corrupt: false,
        }
    }

    fn blocks(&self) -> usize {
        match self.list {
            List::Token(data) => data.blocks.len(),
            List::Phrase(p) => p.block_max.len(),
        }
    }

    fn first_last(&self, b: usize) -> (u32, u32) {
        match self.list {
            List::Token(data) => (data.blocks[b].first_pk, data.blocks[b].last_pk),
            List::Phrase(p) => {
                let rows = &p.pks[b * BLOCK..((b + 1) * BLOCK).min(p.pks.len())];
                (rows[0], rows[rows.len() - 1])
            }
        }
    }

    /// No row of block `b` scores more.
    fn block_bound(&self, b: usize) -> f64 {
        match self.list {
            List::Token(data) => {
                let m = &data.blocks[b];
                lexical::bm25_term(self.idf, m.max_f, f64::from(m.min_len), self.avgdl)
            }
            List::Phrase(p) => p.block_max[b],
        }
    }

    fn list_bound(&self) -> f64 {
        match self.list {
            List::Token(data) => data.list_bound(self.idf, self.avgdl),
            List::Phrase(p) => p.block_max.iter().copied().fold(0.0, f64::max),
        }
    }

    /// Decodes block `b`'s pks; a row's counts are read when it is scored.
    fn load(&mut self, b: usize) {
        self.pks.clear();
        match self.list {
            List::Token(data) => {
                let m = &data.blocks[b];
                let bytes = &data.data[m.start as usize..m.end as usize];
                match Header::read(bytes).and_then(|header| decode_pks(bytes, &header, &mut self.pks)) {
                    Some(at) => self.packed_at = at,
                    None => {
                        self.pks.clear();
                        self.corrupt = true;
                    }
                }
            }
            List::Phrase(p) => {
                let range = b * BLOCK..((b + 1) * BLOCK).min(p.pks.len());
                self.pks.extend_from_slice(&p.pks[range]);
            }
        }
        self.loaded = Some(b);
        self.pos = 0;
    }

    /// The first row at or above the floor.
    fn current(&mut self) -> Option<u32> {
        // Mostly the row is where the last call left it, or the next one.
        if self.loaded == Some(self.block) {
            for step in 0..2 {
                match self.pks.get(self.pos + step) {
                    Some(&pk) if pk >= self.floor => {
                        self.pos += step;
                        return Some(pk);
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        }
        while self.block < self.blocks() {
            if self.loaded != Some(self.block) {
                self.load(self.block);
            }
            let floor = self.floor;
            self.pos += self.pks[self.pos..].partition_point(|&p| p < floor);
            if let Some(&pk) = self.pks.get(self.pos) {
                return Some(pk);
            }
            self.block += 1;
        }
        None
    }

    /// The term of the current row (after [`Cursor::current`]).
    fn term(&mut self) -> f64 {
        let b = self.block;
        match self.list {
            List::Token(data) => {
                let m = &data.blocks[b];
                let bytes = &data.data[m.start as usize..m.end as usize];
                if row_counts(bytes, self.packed_at, self.pks.len(), self.pos, &mut self.counts).is_none() {
                    self.corrupt = true;
                    return 0.0;
                }
                let f = weighted_frequency(&self.counts);
                let d = f64::from(self.lengths.get(self.pks[self.pos] as usize).copied().unwrap_or(0));
                lexical::bm25_term(self.idf, f, d, self.avgdl)
            }
            List::Phrase(p) => p.terms[b * BLOCK + self.pos],
        }
    }

    /// Passes every row up to `pk`, skipping whole blocks undecoded.
    fn pass(&mut self, pk: u32) {
        self.floor = self.floor.max(pk.saturating_add(1));
        self.skip_blocks_below(self.floor);
    }

    fn skip_blocks_below(&mut self, pk: u32) {
        let n = self.blocks();
        if self.block < n && self.first_last(self.block).1 >= pk {
            return;
        }
        // Galloping, then binary search, over the blocks' last pks.
        let (mut lo, mut step) = (self.block, 1);
        while lo + step < n && self.first_last(lo + step).1 < pk {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step + 1).min(n);
        let mut a = lo + 1;
        let mut b = hi;
        while a < b {
            let mid = (a + b) / 2;
            if self.first_last(mid).1 < pk { a = mid + 1 } else { b = mid }
        }
        self.block = a.min(n);
    }

    /// The bound of the block that may hold `pk` (0 when none can), the
    /// cursor moved to it.
    fn bound_at(&mut self, pk: u32) -> f64 {
        self.floor = self.floor.max(pk);
        self.skip_blocks_below(pk);
        match self.block < self.blocks() && self.first_last(self.block).0 <= pk {
            true => self.block_bound(self.block),
            false => 0.0,
        }
    }

    /// The term of row `pk`, if the list holds it.
    fn term_at(&mut self, pk: u32) -> Option<f64> {
        self.floor = self.floor.max(pk);
        self.skip_blocks_below(pk);
        (self.current() == Some(pk)).then(|| self.term())
    }
}

/// A stored block could not be decoded.
#[derive(Debug)]
pub(crate) struct CorruptBlock;

/// The `need` rows of `allowed` that best match any of `lists` (the
/// expression's phrases, in order), by `bm25()` of the whole expression then
/// pk: exactly what FTS5 gives scoring every row.
///
/// Block-max MaxScore: lists by bound, the smallest first; those whose
/// bounds add up to less than the `need`-th best score so far are
/// non-essential (a row holding only them cannot enter). Candidates come
/// from the essential lists in pk order; a stretch of their blocks whose
/// bounds (with the non-essential lists' bounds) cannot reach the top is
/// skipped undecoded, and a candidate probes the non-essential lists only
/// while their block bounds at its pk can still lift it in.
pub(crate) fn best_rows(
    lists: &[List],
    stats: TableStats,
    lengths: &[u32],
    allowed: &RowSet,
    need: usize,
) -> Result<Vec<(i64, f64)>, CorruptBlock> {
    let n = lists.len();
    if need == 0 || n == 0 || allowed.len() == 0 {
        return Ok(Vec::new());
    }
    let mut cursors: Vec<Cursor<'_>> = lists.iter().map(|l| Cursor::new(l, stats, lengths)).collect();
    let bounds: Vec<f64> = cursors.iter().map(Cursor::list_bound).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| bounds[a].total_cmp(&bounds[b]).then(a.cmp(&b)));
    let mut below = vec![0.0; n + 1];
    for i in 0..n {
        below[i + 1] = below[i] + bounds[order[i]];
    }
    let below_threshold = |bound: f64, threshold: f64| bound * (1.0 + BOUND_SLACK) < threshold;
    let mut terms = vec![0.0f64; n];
    let mut at_pk = vec![0.0f64; n];
    let mut best: BinaryHeap<Scored> = BinaryHeap::with_capacity(need + 1);
    let mut threshold = f64::NEG_INFINITY;
    let mut first_essential = 0;
    loop {
        while first_essential < n && below_threshold(below[first_essential + 1], threshold) {
            first_essential += 1;
        }
        if first_essential == n {
            break;
        }
        let essential = &order[first_essential..];
        if best.len() == need {
            // The essential lists' current blocks, up to the first of them
            // to end: can any row there reach the top?
            let (mut bound, mut end, mut live) = (below[first_essential], u32::MAX, false);
            for &i in essential {
                let c = &cursors[i];
                if c.block < c.blocks() {
                    bound += c.block_bound(c.block);
                    end = end.min(c.first_last(c.block).1);
                    live = true;
                }
            }
            if !live {
                break;
            }
            if below_threshold(bound, threshold) {
                for &i in essential {
                    cursors[i].pass(end);
                }
                continue;
            }
        }
        let Some(pk) = essential.iter().filter_map(|&i| cursors[i].current()).min() else { break };
        if allowed.contains(i64::from(pk)) {
            terms.iter_mut().for_each(|t| *t = 0.0);
            let mut partial = 0.0;
            for &i in essential {
                if cursors[i].current() == Some(pk) {
                    terms[i] = cursors[i].term();
                    partial += terms[i];
                }
            }
            let mut rest = 0.0;
            for k in 0..first_essential {
                at_pk[k] = cursors[order[k]].bound_at(pk);
                rest += at_pk[k];
            }
            let mut reachable = best.len() < need || !below_threshold(partial + rest, threshold);
            for k in (0..first_essential).rev() {
                if !reachable {
                    break;
                }
                rest -= at_pk[k];
                if at_pk[k] > 0.0
                    && let Some(t) = cursors[order[k]].term_at(pk)
                {
                    terms[order[k]] = t;
                    partial += t;
                }
                reachable = best.len() < need || !below_threshold(partial + rest, threshold);
            }
            if reachable {
                // In the expression's order, as `bm25()` adds them.
                let score = terms.iter().fold(0.0, |sum, t| sum + t);
                if let Some(worst) = lexical::offer(&mut best, Scored { score, pk: i64::from(pk) }, need) {
                    threshold = worst;
                }
            }
        }
        for &i in essential {
            if cursors[i].current() == Some(pk) {
                cursors[i].pass(pk);
            }
        }
    }
    if cursors.iter().any(|c| c.corrupt) {
        return Err(CorruptBlock);
    }
    Ok(best.into_sorted_vec().into_iter().map(|r| (r.pk, -r.score)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_with_large_counts_and_pks() {
        let columns = fts::COLUMNS.len();
        let pks: Vec<u32> = vec![1, 2, 300, 70_000, u32::MAX - 1];
        let counts: Vec<u32> = (0..pks.len() * columns).map(|i| [0, 1, 2, 3, 4, 1000][i % 6]).collect();
        let block = Block { pks, counts, min_len: 17 };
        let bytes = block.encode();
        assert_eq!(Block::decode(&bytes), Some(block.clone()));
        let header = Header::read(&bytes).unwrap();
        for c in 0..columns {
            let max = block.counts.iter().skip(c).step_by(columns).max().copied().unwrap();
            assert_eq!(header.max_counts[c], max);
        }
        // Any row's counts, read alone.
        let mut pks = Vec::new();
        let packed_at = decode_pks(&bytes, &header, &mut pks).unwrap();
        let mut row = vec![0; columns];
        for j in 0..block.len() {
            row_counts(&bytes, packed_at, block.len(), j, &mut row).unwrap();
            assert_eq!(row, block.counts[j * columns..(j + 1) * columns], "row {j}");
        }
        assert_eq!(Block::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Block::decode(&[]), None);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut at = 0;
            assert_eq!(get_varint(&out, &mut at), Some(v));
            assert_eq!(at, out.len());
        }
        assert_eq!(get_varint(&[0x80], &mut 0), None);
    }
}
