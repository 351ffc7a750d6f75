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
//! holding it: FTS5's IDF input), the write generation that last changed
//! it, and its tail: its last rows, fewer than [`BLOCK`], as one block.
//! Its other rows are in `postings`, in blocks of [`BLOCK`] rows keyed by
//! (token, first pk), each block's header repeated in `blocks` (the
//! token's directory: key, last pk, header, the generation that wrote the
//! block). A block is its header (the row count, the shortest row among
//! them, the largest count in each column) and its rows, bit-packed at
//! fixed widths: pk deltas at the width of the largest, each column's
//! count at the width of the largest in that column (see
//! [`Block::encode`]). The largest counts and the shortest row bound the
//! BM25 term of any row of the block for any IDF and average length (the
//! term grows with the frequency and falls with the row's length), so no
//! stored bound goes stale when the table's statistics change.
//!
//! **Writes** touch only the blocks that hold the rows they change. Rows
//! added with new pks go to the token's tail: a write that only adds rows
//! reads and rewrites the token's `lexicon` row, and a full tail becomes a
//! stored block. A row removed or replaced below the tail changes the
//! stored block holding it in place (an `UPDATE` by key), so a write costs
//! in proportion to its own rows, never a rebuild.
//!
//! **Queries** read a token's directory (not its rows) once per generation
//! of the token, and each stored block only when a probe or a scan reaches
//! it, kept compressed in a cache of blocks bounded by
//! [`BLOCK_CACHE_BYTES`] (least recently used dropped), each valid for the
//! generation that wrote it: a write that appends to a frequent token's
//! tail leaves every cached block of that token valid. Ranking is
//! block-max MaxScore ([`best_rows`]): lists whose bounds cannot lift a row
//! into the top are only probed, blocks whose bounds cannot are skipped
//! without being read.

use std::cell::RefCell;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rr_core::SearchFilter;
use rusqlite::{Connection, OptionalExtension, params};

use crate::fts::{self, Term};
use crate::lexical::{self, RowSet, Scored, TableStats};

/// Most rows in one block.
pub(crate) const BLOCK: usize = 128;
/// Most bytes of stored blocks kept in memory between queries. At a million
/// chunks the blocks take 217 MB; the 200 queries of the search bench read
/// 68 MiB of them, and with a budget below that every query reads about
/// half of its blocks again (with plain LRU, nearly all).
pub(crate) const BLOCK_CACHE_BYTES: usize = 96 << 20;
/// Most bytes of tokens' directories (and tails) kept between queries.
const DIRECTORY_BYTES: usize = 12 << 20;
/// The number of weighted columns.
const NCOL: usize = fts::COLUMNS.len();
/// Most bytes of phrase lists (read from FTS5) kept until the next write.
const PHRASE_BYTES: usize = 32 << 20;
/// Slack on bounds for the rounding of sums taken in another order.
const BOUND_SLACK: f64 = 1e-9;
/// The per-connection FTS5 table a write tokenizes its rows with.
const STAGING: &str = "temp.lexicon_staging";
/// Its `fts5vocab` instance table.
const STAGING_INSTANCES: &str = "temp.lexicon_staging_instances";
/// The settings key of the write generation.
const GENERATION_KEY: &str = "lexicon_generation";

/// The tables (schema version 5; version 3's are dropped).
pub(crate) const SCHEMA: &str = r#"
    DROP TABLE IF EXISTS postings;
    DROP TABLE IF EXISTS lexicon;
    DROP TABLE IF EXISTS blocks;
    CREATE TABLE lexicon (
        term      TEXT PRIMARY KEY,
        df        INTEGER NOT NULL,
        gen       INTEGER NOT NULL,
        dir_gen   INTEGER NOT NULL,
        tail_from INTEGER NOT NULL,
        tail      BLOB
    ) WITHOUT ROWID;
    CREATE TABLE postings (
        term     TEXT NOT NULL,
        first_pk INTEGER NOT NULL,
        block    BLOB NOT NULL,
        PRIMARY KEY (term, first_pk)
    ) WITHOUT ROWID;
    CREATE TABLE blocks (
        term     TEXT NOT NULL,
        first_pk INTEGER NOT NULL,
        last_pk  INTEGER NOT NULL,
        head     BLOB NOT NULL,
        gen      INTEGER NOT NULL,
        PRIMARY KEY (term, first_pk)
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

/// Bits needed to write `v`.
fn width(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// `w` (at most 32) bits at bit `bit` of `buf`; `None` past its end.
fn read_bits(buf: &[u8], bit: usize, w: u32) -> Option<u32> {
    if w == 0 {
        return Some(0);
    }
    let at = bit / 8;
    let end = (bit + w as usize).div_ceil(8);
    let bytes = buf.get(at..end)?;
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    let v = u64::from_le_bytes(word) >> (bit % 8);
    Some((v & ((1u64 << w) - 1)) as u32)
}

/// Appends bits to a byte buffer, lowest first.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    filled: u32,
}

impl BitWriter {
    fn put(&mut self, v: u32, w: u32) {
        if w == 0 {
            return;
        }
        self.acc |= u64::from(v) << self.filled;
        self.filled += w;
        while self.filled >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.filled -= 8;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
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

impl Block {
    fn len(&self) -> usize {
        self.pks.len()
    }

    /// The block's bytes: its [`Header`], then the first pk (a varint), the
    /// width of the other pks' deltas less one (a byte), and a bit stream of
    /// those deltas, then each row's counts, every column at the width of
    /// its largest count (no bits for a column no row uses). A frequent
    /// token's rows mostly hold it once in one column: a row then takes its
    /// delta's bits and one bit.
    pub fn encode(&self) -> Vec<u8> {
        let columns = fts::COLUMNS.len();
        let max: Vec<u32> =
            (0..columns).map(|c| self.counts.iter().skip(c).step_by(columns).copied().max().unwrap_or(0)).collect();
        let mut out = Vec::with_capacity(16 + self.len() * 2);
        put_varint(&mut out, self.len() as u64);
        put_varint(&mut out, u64::from(self.min_len));
        for &m in &max {
            put_varint(&mut out, u64::from(m));
        }
        put_varint(&mut out, u64::from(self.pks.first().copied().unwrap_or(0)));
        let delta_width = self.pks.windows(2).map(|w| width(w[1] - w[0] - 1)).max().unwrap_or(0);
        out.push(delta_width as u8);
        let mut bits = BitWriter { out, acc: 0, filled: 0 };
        for w in self.pks.windows(2) {
            bits.put(w[1] - w[0] - 1, delta_width);
        }
        let widths: Vec<u32> = max.iter().map(|&m| width(m)).collect();
        for row in self.counts.chunks(columns) {
            for (&n, &w) in row.iter().zip(&widths) {
                bits.put(n, w);
            }
        }
        bits.finish()
    }

    /// `None` when `bytes` is not a block this module wrote.
    pub fn decode(bytes: &[u8]) -> Option<Block> {
        let layout = Layout::read(bytes)?;
        let mut block = Block { min_len: layout.header.min_len, ..Block::default() };
        layout.pks(bytes, &mut block.pks)?;
        let mut row = vec![0; fts::COLUMNS.len()];
        for j in 0..layout.header.n {
            layout.row_counts(bytes, j, &mut row)?;
            block.counts.extend_from_slice(&row);
        }
        Some(block)
    }
}

/// What a block says before its rows: what bounds its BM25 terms.
#[derive(Debug, Clone)]
struct Header {
    n: usize,
    min_len: u32,
    max_counts: [u32; NCOL],
}

impl Header {
    /// The header, and where it ends.
    fn read(bytes: &[u8]) -> Option<(Header, usize)> {
        let mut at = 0;
        let n = get_varint(bytes, &mut at)? as usize;
        let min_len = get_u32(bytes, &mut at)?;
        let mut max_counts = [0; NCOL];
        for m in &mut max_counts {
            *m = get_u32(bytes, &mut at)?;
        }
        (n > 0 && n <= BLOCK).then_some((Header { n, min_len, max_counts }, at))
    }
}

/// Where a block's fields lie.
#[derive(Debug, Clone)]
struct Layout {
    header: Header,
    first_pk: u32,
    delta_width: u32,
    /// Where the bit stream starts.
    bits_at: usize,
    /// Each column's width, and their sum.
    widths: [u32; NCOL],
    row_bits: usize,
}

impl Layout {
    /// `None` unless `bytes` is exactly as long as the block it starts.
    fn read(bytes: &[u8]) -> Option<Layout> {
        let (header, mut at) = Header::read(bytes)?;
        let first_pk = get_u32(bytes, &mut at)?;
        let delta_width = u32::from(*bytes.get(at)?);
        let bits_at = at + 1;
        let widths = header.max_counts.map(width);
        let row_bits = widths.iter().sum::<u32>() as usize;
        let total = (header.n - 1) * delta_width as usize + header.n * row_bits;
        (delta_width <= 32 && bytes.len() == bits_at + total.div_ceil(8)).then_some(Layout {
            header,
            first_pk,
            delta_width,
            bits_at,
            widths,
            row_bits,
        })
    }

    /// The block's pks into `pks`.
    fn pks(&self, bytes: &[u8], pks: &mut Vec<u32>) -> Option<()> {
        pks.clear();
        let n = self.header.n;
        let w = self.delta_width;
        // Every delta is below 2^32 and the sum is checked once: the pks
        // are summed in 64 bits.
        let mut pk = u64::from(self.first_pk);
        pks.push(self.first_pk);
        if w == 0 {
            pks.extend((1..n as u64).map(|j| (pk + j) as u32));
            pk += n as u64 - 1;
        } else {
            // The stream a byte at a time into a 64-bit window.
            let bits = bytes.get(self.bits_at..self.bits_at + ((n - 1) * w as usize).div_ceil(8))?;
            let mask = (1u64 << w) - 1;
            let (mut window, mut held, mut next) = (0u64, 0u32, 0usize);
            for _ in 1..n {
                while held < w {
                    window |= u64::from(bits[next]) << held;
                    next += 1;
                    held += 8;
                }
                pk += (window & mask) + 1;
                window >>= w;
                held -= w;
                pks.push(pk as u32);
            }
        }
        (pk <= u64::from(u32::MAX)).then_some(())
    }

    /// Row `j`'s counts into `out`.
    fn row_counts(&self, bytes: &[u8], j: usize, out: &mut [u32]) -> Option<()> {
        let bits = &bytes[self.bits_at..];
        let mut at = (self.header.n - 1) * self.delta_width as usize + j * self.row_bits;
        for (out, &w) in out.iter_mut().zip(&self.widths) {
            *out = read_bits(bits, at, w)?;
            at += w as usize;
        }
        Some(())
    }
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
type AsciiRow = (u32, Vec<(String, [u32; NCOL])>);

/// A row's tokens as `unicode61` makes them from ASCII text.
fn ascii_row(columns: &[String]) -> AsciiRow {
    // Each column lower-cased once; a token allocates once per row.
    let lowered: Vec<String> = columns.iter().map(|text| text.to_ascii_lowercase()).collect();
    let mut counts: HashMap<&str, [u32; NCOL]> = HashMap::new();
    let mut len = 0u32;
    for (c, text) in lowered.iter().enumerate().take(NCOL) {
        for token in text.split(|ch: char| !ch.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
            len = len.saturating_add(1);
            let row = counts.entry(token).or_insert([0; NCOL]);
            row[c] = row[c].saturating_add(1);
        }
    }
    (len, counts.into_iter().map(|(token, counts)| (token.to_owned(), counts)).collect())
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
        let mut select = conn.prepare_cached("SELECT pk, document FROM chunks WHERE id = ?1")?;
        let mut any = false;
        for id in ids {
            let row: Option<(i64, String)> = select.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
            let Some((pk, document)) = row else { continue };
            self.stage(conn, pk, &fts::columns(&document))?;
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
        // Hashed while rows are added (a lookup per token of each row), put
        // in token order once.
        let mut tokens: HashMap<String, (Block, Vec<u32>)> =
            fts5.into_iter().map(|(token, block, lens)| (token, (block, lens))).collect();
        let mut rows: Vec<(u32, AsciiRow)> = self.ascii.drain().collect();
        rows.sort_by_key(|(pk, _)| *pk);
        for (pk, (len, counts)) in rows {
            lens.insert(pk, len);
            for (token, counts) in counts {
                let (block, block_lens) = match tokens.get_mut(token.as_str()) {
                    Some(found) => found,
                    None => tokens.entry(token).or_default(),
                };
                block.pks.push(pk);
                block.counts.extend(counts);
                block_lens.push(len);
            }
        }
        let mut tokens: Vec<(String, (Block, Vec<u32>))> = tokens.into_iter().collect();
        tokens.sort_unstable_by(|a, b| a.0.cmp(&b.0));
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

/// One token's lexicon row as stored.
struct LexiconRow {
    df: i64,
    dir_gen: i64,
    tail_from: i64,
    tail: Option<Vec<u8>>,
}

fn corrupt_block(token: &str, key: i64) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Blob,
        format!("postings block of {token:?} at pk {key} is not a valid block").into(),
    )
}

/// The ops on the rows of one block (sorted by pk, a removal before an
/// addition of the same pk), applied to `rows` whose lengths are `lens`;
/// the change of the document frequency.
fn apply_ops(rows: &mut Block, lens: &mut Vec<u32>, ops: &[(u32, Option<usize>)], edit: &TokenEdit) -> i64 {
    let columns = NCOL;
    let mut df_delta = 0;
    for &(pk, add) in ops {
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
    df_delta
}

/// Rows `range` of `rows` as a block (its shortest row from `lens`).
fn piece(rows: &Block, lens: &[u32], range: std::ops::Range<usize>) -> Block {
    Block {
        pks: rows.pks[range.clone()].to_vec(),
        counts: rows.counts[range.start * NCOL..range.end * NCOL].to_vec(),
        min_len: lens[range].iter().copied().min().unwrap_or(0),
    }
}

/// The header bytes of an encoded block (what `blocks.head` holds).
fn head_of(bytes: &[u8]) -> &[u8] {
    Header::read(bytes).map_or(bytes, |(_, end)| &bytes[..end])
}

/// Stores a full block under `key` (its first pk, or below).
fn insert_block(conn: &Connection, token: &str, key: u32, block: &Block, generation: i64) -> rusqlite::Result<()> {
    let bytes = block.encode();
    conn.prepare_cached("INSERT INTO postings (term, first_pk, block) VALUES (?1, ?2, ?3)")?
        .execute(params![token, key, bytes])?;
    conn.prepare_cached("INSERT INTO blocks (term, first_pk, last_pk, head, gen) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![token, key, block.pks[block.len() - 1], head_of(&bytes), generation])?;
    Ok(())
}

fn delete_block(conn: &Connection, token: &str, key: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM postings WHERE term = ?1 AND first_pk = ?2")?.execute(params![token, key])?;
    conn.prepare_cached("DELETE FROM blocks WHERE term = ?1 AND first_pk = ?2")?.execute(params![token, key])?;
    Ok(())
}

/// One token's rows taken out and put in. Rows added with new pks land in
/// the token's tail, which its `lexicon` row holds (so a write that only
/// adds rows reads and writes that one row; once the tail fills a block,
/// the block moves to `postings`); rows below the tail change the stored
/// block that holds them, in place.
fn apply_token(conn: &Connection, token: &str, edit: &TokenEdit, generation: i64) -> rusqlite::Result<()> {
    let found: Option<LexiconRow> = conn
        .prepare_cached("SELECT df, dir_gen, tail_from, tail FROM lexicon WHERE term = ?1")?
        .query_row([token], |r| {
            Ok(LexiconRow { df: r.get(0)?, dir_gen: r.get(1)?, tail_from: r.get(2)?, tail: r.get(3)? })
        })
        .optional()?;
    let LexiconRow { mut df, mut dir_gen, mut tail_from, tail } =
        found.unwrap_or(LexiconRow { df: 0, dir_gen: generation, tail_from: 0, tail: None });
    let mut rows = match tail {
        Some(bytes) => Block::decode(&bytes).ok_or_else(|| corrupt_block(token, tail_from))?,
        None => Block::default(),
    };
    // Every pk the edit touches, ascending, with what happens to it.
    let mut ops: Vec<(u32, Option<usize>)> = edit.removed.iter().map(|&pk| (pk, None)).collect();
    ops.extend(edit.added.pks.iter().enumerate().map(|(i, &pk)| (pk, Some(i))));
    ops.sort_by_key(|&(pk, add)| (pk, add.is_some()));
    let split = ops.partition_point(|&(pk, _)| i64::from(pk) < tail_from);
    let (stored, in_tail) = ops.split_at(split);
    let mut i = 0;
    while i < stored.len() {
        let pk = stored[i].0;
        let row = |r: &rusqlite::Row<'_>| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?));
        let at_or_below = conn
            .prepare_cached(
                "SELECT first_pk, block FROM postings WHERE term = ?1 AND first_pk <= ?2 ORDER BY first_pk DESC LIMIT 1",
            )?
            .query_row(params![token, pk], row)
            .optional()?;
        let found = match at_or_below {
            Some(found) => Some(found),
            None => conn
                .prepare_cached("SELECT first_pk, block FROM postings WHERE term = ?1 ORDER BY first_pk LIMIT 1")?
                .query_row([token], row)
                .optional()?,
        };
        let Some((key, bytes)) = found else {
            // No stored block: the tail takes every row.
            tail_from = 0;
            break;
        };
        let mut block = Block::decode(&bytes).ok_or_else(|| corrupt_block(token, key))?;
        dir_gen = generation;
        let next: Option<i64> = conn
            .prepare_cached("SELECT MIN(first_pk) FROM postings WHERE term = ?1 AND first_pk > ?2")?
            .query_row(params![token, key], |r| r.get(0))?;
        let end = i + stored[i..].partition_point(|&(p, _)| i64::from(p) < next.unwrap_or(tail_from));
        // Rows already stored keep the block's shortest length as theirs.
        let mut lens = vec![block.min_len; block.len()];
        df += apply_ops(&mut block, &mut lens, &stored[i..end], edit);
        let key = key as u32;
        match block.pks.first() {
            None => delete_block(conn, token, key)?,
            Some(&first) => {
                let pieces: Vec<usize> = (0..block.len()).step_by(BLOCK).collect();
                for (p, &from) in pieces.iter().enumerate() {
                    let part = piece(&block, &lens, from..(from + BLOCK).min(block.len()));
                    match (p, first >= key) {
                        // Still keyed as before: changed in place.
                        (0, true) => {
                            let bytes = part.encode();
                            conn.prepare_cached("UPDATE postings SET block = ?3 WHERE term = ?1 AND first_pk = ?2")?
                                .execute(params![token, key, bytes])?;
                            conn.prepare_cached(
                                "UPDATE blocks SET last_pk = ?3, head = ?4, gen = ?5 WHERE term = ?1 AND first_pk = ?2",
                            )?
                            .execute(params![
                                token,
                                key,
                                part.pks[part.len() - 1],
                                head_of(&bytes),
                                generation
                            ])?;
                        }
                        (0, false) => {
                            delete_block(conn, token, key)?;
                            insert_block(conn, token, first, &part, generation)?;
                        }
                        _ => insert_block(conn, token, part.pks[0], &part, generation)?,
                    }
                }
            }
        }
        i = end;
    }
    let in_tail = match i < stored.len() {
        true => &ops[i..],
        false => in_tail,
    };
    let mut lens = vec![rows.min_len; rows.len()];
    df += apply_ops(&mut rows, &mut lens, in_tail, edit);
    // A full tail moves to `postings`.
    let mut from = 0;
    while rows.len() - from >= BLOCK {
        let part = piece(&rows, &lens, from..from + BLOCK);
        insert_block(conn, token, part.pks[0], &part, generation)?;
        tail_from = i64::from(part.pks[BLOCK - 1]) + 1;
        dir_gen = generation;
        from += BLOCK;
    }
    let tail = (from < rows.len()).then(|| piece(&rows, &lens, from..rows.len()).encode());
    if df <= 0 {
        conn.prepare_cached("DELETE FROM lexicon WHERE term = ?1")?.execute([token])?;
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO lexicon (term, df, gen, dir_gen, tail_from, tail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (term) DO UPDATE SET df = excluded.df, gen = excluded.gen, dir_gen = excluded.dir_gen,
            tail_from = excluded.tail_from, tail = excluded.tail",
    )?
    .execute(params![token, df, generation, dir_gen, tail_from, tail])?;
    Ok(())
}

/// Writes the whole index from `chunks_fts` (a new schema version, or a
/// refill of the full-text table), inside the migration's transaction.
pub(crate) fn rebuild(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "DELETE FROM lexicon; DELETE FROM postings; DELETE FROM blocks;
         DROP TABLE IF EXISTS temp.lexicon_build;
         CREATE VIRTUAL TABLE temp.lexicon_build USING fts5vocab(main, chunks_fts, instance);",
    )?;
    let lens = crate::lexical::docsizes(conn)?;
    let min_len = |pks: &[u32]| pks.iter().map(|&pk| lens.get(pk as usize).copied().unwrap_or(0)).min().unwrap_or(0);
    {
        let mut lexicon = conn
            .prepare("INSERT INTO lexicon (term, df, gen, dir_gen, tail_from, tail) VALUES (?1, ?2, 0, 0, ?3, ?4)")?;
        let mut select = conn.prepare("SELECT term, doc, col FROM temp.lexicon_build")?;
        let mut rows = select.query([])?;
        let mut term = String::new();
        let mut block = Block::default();
        let mut df: u64 = 0;
        let mut tail_from: i64 = 0;
        // The token's last rows, under a block, go to its lexicon row.
        let mut finish = |term: &str, block: &mut Block, df: u64, tail_from: i64| -> rusqlite::Result<()> {
            if df == 0 {
                return Ok(());
            }
            block.min_len = min_len(&block.pks);
            let tail = (!block.pks.is_empty()).then(|| block.encode());
            lexicon.execute(params![term, df as i64, tail_from, tail])?;
            block.pks.clear();
            block.counts.clear();
            Ok(())
        };
        while let Some(row) = rows.next()? {
            let (token, doc, col): (String, i64, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let (Ok(pk), Some(c)) = (u32::try_from(doc), fts::COLUMNS.iter().position(|x| x.name == col)) else {
                continue;
            };
            if token != term {
                finish(&term, &mut block, df, tail_from)?;
                term = token;
                df = 0;
                tail_from = 0;
            }
            if block.pks.last() != Some(&pk) {
                if block.len() == BLOCK {
                    block.min_len = min_len(&block.pks);
                    insert_block(conn, &term, block.pks[0], &block, 0)?;
                    tail_from = i64::from(block.pks[BLOCK - 1]) + 1;
                    block.pks.clear();
                    block.counts.clear();
                }
                block.pks.push(pk);
                block.counts.resize(block.counts.len() + NCOL, 0);
                df += 1;
            }
            let at = block.counts.len() - NCOL + c;
            block.counts[at] = block.counts[at].saturating_add(1);
        }
        finish(&term, &mut block, df, tail_from)?;
    }
    conn.execute_batch("DROP TABLE temp.lexicon_build")
}

/// Every token's document frequency and rows (pk and counts), from the
/// stored blocks and tails in pk order; checks that each block's
/// directory row agrees with it.
#[cfg(test)]
pub(crate) fn dump(conn: &Connection) -> Vec<(String, i64, u32, Vec<u32>)> {
    let mut out = Vec::new();
    let tokens: Vec<(String, i64, i64, Option<Vec<u8>>)> = {
        let mut stmt = conn.prepare("SELECT term, df, tail_from, tail FROM lexicon ORDER BY term").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect()
    };
    let mut select = conn
        .prepare(
            "SELECT p.first_pk, p.block, b.last_pk, b.head FROM postings p JOIN blocks b USING (term, first_pk)
             WHERE term = ?1 ORDER BY first_pk",
        )
        .unwrap();
    let mut stored = 0;
    for (term, df, tail_from, tail) in tokens {
        let blocks: Vec<(i64, Vec<u8>, i64, Vec<u8>)> = select
            .query_map([&term], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut rows = Vec::new();
        for (key, bytes, last_pk, head) in &blocks {
            let block = Block::decode(bytes).unwrap();
            assert!(i64::from(block.pks[0]) >= *key && i64::from(block.pks[block.len() - 1]) <= *last_pk, "{term}");
            assert!(*last_pk < tail_from, "{term}: block ending at {last_pk}, tail from {tail_from}");
            assert_eq!(head.as_slice(), head_of(bytes), "{term}");
            rows.push(block);
        }
        stored += blocks.len();
        if let Some(tail) = tail {
            let block = Block::decode(&tail).unwrap();
            assert!(i64::from(block.pks[0]) >= tail_from, "{term}");
            rows.push(block);
        }
        let mut previous = None;
        for block in rows {
            for (j, &pk) in block.pks.iter().enumerate() {
                assert!(previous < Some(pk), "{term}: pks out of order");
                previous = Some(pk);
                out.push((term.clone(), df, pk, block.counts[j * NCOL..(j + 1) * NCOL].to_vec()));
            }
        }
        assert_eq!(out.iter().filter(|r| r.0 == term).count() as i64, df, "{term}");
    }
    let all: i64 = conn.query_row("SELECT count(*) FROM blocks", [], |r| r.get(0)).unwrap();
    assert_eq!(all as usize, stored, "directory rows without a block, or blocks of no token");
    out
}

// --------------------------------------------------------------- queries

/// The generation [`Meta::written`] gives a token's tail (held by its
/// [`TermData`], never by the block cache).
const TAIL: i64 = -1;

/// One block of a token: the pks it may hold and what bounds its terms.
#[derive(Debug, Clone, Copy)]
struct Meta {
    /// Its key: no row of the block has a lower pk.
    first_pk: u32,
    /// No row of the block has a higher pk.
    last_pk: u32,
    min_len: u32,
    /// The largest weighted frequency of a row of the block.
    max_f: f64,
    /// The write generation that last changed the block ([`TAIL`] for the
    /// token's tail): a cached copy of another generation is stale.
    written: i64,
}

impl Meta {
    fn new(first_pk: u32, last_pk: u32, header: &Header, written: i64) -> Meta {
        Meta { first_pk, last_pk, min_len: header.min_len, max_f: weighted_frequency(&header.max_counts), written }
    }
}

/// A token's directory of blocks, for one generation of the token: the
/// stored blocks' keys and bounds, and its tail. The stored blocks' rows
/// are read one block at a time, when a query reaches them (see
/// [`BlockCache`]).
#[derive(Debug)]
pub(crate) struct TermData {
    term: Arc<str>,
    generation: i64,
    df: u64,
    /// The generation that last changed the token's stored blocks.
    dir_gen: i64,
    blocks: Vec<Meta>,
    tail: Option<Arc<[u8]>>,
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

    fn bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<Meta>()
            + self.tail.as_ref().map_or(0, |t| t.len())
            + self.term.len()
            + 96
    }

    /// The directory of `row`'s token; `None` when a block is unreadable.
    /// The stored blocks' part is `previous`'s when no write changed them
    /// since (a write that added rows to the tail only).
    fn load(
        conn: &Connection,
        term: &str,
        row: LexiconEntry,
        previous: Option<&TermData>,
    ) -> rusqlite::Result<Option<TermData>> {
        let mut blocks = Vec::new();
        if let Some(previous) = previous.filter(|p| p.dir_gen == row.dir_gen) {
            blocks.extend(previous.blocks.iter().filter(|m| m.written != TAIL));
        } else if row.tail_from > 0 {
            let mut stmt = conn
                .prepare_cached("SELECT first_pk, last_pk, head, gen FROM blocks WHERE term = ?1 ORDER BY first_pk")?;
            let mut rows = stmt.query([term])?;
            while let Some(r) = rows.next()? {
                let (Ok(first_pk), Ok(last_pk)) =
                    (u32::try_from(r.get::<_, i64>(0)?), u32::try_from(r.get::<_, i64>(1)?))
                else {
                    return Ok(None);
                };
                let Some((header, _)) = Header::read(r.get_ref(2)?.as_blob()?) else { return Ok(None) };
                blocks.push(Meta::new(first_pk, last_pk, &header, r.get(3)?));
            }
        }
        let tail = match row.tail {
            Some(bytes) => {
                let Some(layout) = Layout::read(&bytes) else { return Ok(None) };
                let mut pks = Vec::new();
                if layout.pks(&bytes, &mut pks).is_none() {
                    return Ok(None);
                }
                blocks.push(Meta::new(pks[0], pks[pks.len() - 1], &layout.header, TAIL));
                Some(Arc::from(bytes))
            }
            None => None,
        };
        blocks.shrink_to_fit();
        Ok(Some(TermData {
            term: Arc::from(term),
            generation: row.generation,
            df: row.df,
            dir_gen: row.dir_gen,
            blocks,
            tail,
            bound: Mutex::new(None),
        }))
    }
}

/// A phrase's rows and their `bm25()` terms, as FTS5 scores the phrase
/// alone (see `lexical::phrase_terms`), with the largest term of each block.
///
/// A term is kept as the row's weighted frequency of the phrase (one byte:
/// which of the list's few distinct frequencies), found from FTS5's term
/// and checked to give that term's very bits with the statistics of the
/// state the list was read in (it is dropped when the store changes): a
/// frequent phrase's rows take 5 bytes each instead of 12. A row no
/// frequency reproduces keeps its term as FTS5 gave it.
#[derive(Debug)]
pub(crate) struct PhraseList {
    pks: Vec<u32>,
    /// Each row's frequency in `frequencies`, or [`ESCAPED`].
    which: Vec<u8>,
    frequencies: Vec<f64>,
    /// (row, term) of the rows marked [`ESCAPED`], by row.
    escaped: Vec<(u32, f64)>,
    idf: f64,
    block_max: Vec<f64>,
}

/// A phrase row whose term is kept as FTS5 gave it.
const ESCAPED: u8 = u8::MAX;

/// Every weighted frequency of a row with at most 8 instances, ascending.
fn achievable_frequencies() -> &'static [f64] {
    static VALUES: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    VALUES.get_or_init(|| {
        let mut out = Vec::new();
        let mut counts = [0u32; NCOL];
        fn walk(c: usize, left: u32, counts: &mut [u32; NCOL], out: &mut Vec<f64>) {
            if c == NCOL {
                out.push(weighted_frequency(counts));
                return;
            }
            for n in 0..=left {
                counts[c] = n;
                walk(c + 1, left - n, counts, out);
            }
            counts[c] = 0;
        }
        walk(0, 8, &mut counts, &mut out);
        out.sort_by(f64::total_cmp);
        out.dedup_by(|a, b| a.to_bits() == b.to_bits());
        out
    })
}

impl PhraseList {
    fn new(pks: Vec<u32>, terms: Vec<f64>, stats: TableStats, lengths: &[u32]) -> Self {
        let block_max = terms.chunks(BLOCK).map(|c| c.iter().copied().fold(0.0, f64::max)).collect();
        let idf = lexical::idf(stats.rows, pks.len() as u64);
        let (mut which, mut frequencies, mut escaped) = (Vec::with_capacity(pks.len()), Vec::new(), Vec::new());
        for (j, (&pk, &t)) in pks.iter().zip(&terms).enumerate() {
            let d = f64::from(lengths.get(pk as usize).copied().unwrap_or(0));
            let exact = |f: f64| lexical::bm25_term(idf, f, d, stats.avgdl).to_bits() == t.to_bits();
            let found = frequencies.iter().position(|&f| exact(f)).or_else(|| {
                // The frequency the term was computed from, near the
                // inverse of the formula.
                let k = lexical::K1 * (1.0 - lexical::B + lexical::B * d / stats.avgdl);
                let guess = t * k / (idf * (lexical::K1 + 1.0) - t);
                let values = achievable_frequencies();
                let at = values.partition_point(|&v| v < guess);
                let f = values[at.saturating_sub(3)..(at + 3).min(values.len())].iter().copied().find(|&f| exact(f))?;
                (frequencies.len() < usize::from(ESCAPED)).then(|| {
                    frequencies.push(f);
                    frequencies.len() - 1
                })
            });
            match found {
                Some(i) => which.push(i as u8),
                None => {
                    which.push(ESCAPED);
                    escaped.push((j as u32, t));
                }
            }
        }
        PhraseList { pks, which, frequencies, escaped, idf, block_max }
    }

    /// The term of row `j`, whose length is `d`, for the average length
    /// the list was read with.
    fn term(&self, j: usize, d: f64, avgdl: f64) -> f64 {
        match self.which[j] {
            ESCAPED => {
                let at = self.escaped.partition_point(|&(row, _)| (row as usize) < j);
                self.escaped.get(at).map_or(0.0, |&(_, t)| t)
            }
            i => lexical::bm25_term(self.idf, self.frequencies[usize::from(i)], d, avgdl),
        }
    }

    fn bytes(&self) -> usize {
        self.pks.len() * 5 + self.escaped.len() * 16 + self.block_max.len() * 8 + 64
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

/// A token's `lexicon` row.
struct LexiconEntry {
    df: u64,
    generation: i64,
    dir_gen: i64,
    tail_from: i64,
    tail: Option<Vec<u8>>,
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

/// [`lookup`] with the token's tail.
fn lookup_entry(conn: &Connection, token: &str) -> rusqlite::Result<LexiconEntry> {
    let found = conn
        .prepare_cached("SELECT df, gen, dir_gen, tail_from, tail FROM lexicon WHERE term = ?1")?
        .query_row([token], |r| {
            Ok(LexiconEntry {
                df: r.get::<_, i64>(0)?.max(0) as u64,
                generation: r.get(1)?,
                dir_gen: r.get(2)?,
                tail_from: r.get(3)?,
                tail: r.get(4)?,
            })
        })
        .optional()?;
    Ok(found.unwrap_or(LexiconEntry { df: 0, generation: -1, dir_gen: -1, tail_from: 0, tail: None }))
}

/// Drops the least recently used of `map`'s entries until `bytes` is at
/// most three quarters of `budget` (so a full cache sorts its entries once
/// per quarter of its budget, not once per insertion).
fn evict<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    bytes: &mut usize,
    budget: usize,
    used: impl Fn(&V) -> u64,
    size: impl Fn(&V) -> usize,
) {
    let mut by_age: Vec<(u64, K)> = map.iter().map(|(k, v)| (used(v), k.clone())).collect();
    by_age.sort_unstable_by_key(|(u, _)| *u);
    for (_, key) in by_age {
        if *bytes <= budget / 4 * 3 {
            break;
        }
        if let Some(v) = map.remove(&key) {
            *bytes -= size(&v);
        }
    }
}

/// A stored block kept by the [`BlockCache`].
#[derive(Debug)]
struct KeptBlock {
    written: i64,
    bytes: Arc<[u8]>,
    used: u64,
    /// The ranking that read it from the store.
    read_by: u64,
    /// Whether a later ranking used it again.
    reused: bool,
}

impl KeptBlock {
    fn size(&self) -> usize {
        self.bytes.len() + 96
    }
}

/// Stored blocks read by queries, by (token, key), each valid for the
/// generation that wrote it: a write changes only the blocks it rewrote, so
/// a token's other blocks stay cached across writes.
///
/// Least recently used first, except that blocks used by more than one
/// ranking are kept before blocks one ranking read, up to half the budget
/// (a segmented LRU). Plain LRU keeps nothing useful when the blocks that
/// queries come back to take more than the budget: each ranking's blocks
/// push out the ones the next needs, and a query that reads many blocks
/// once flushes the ones every query uses.
#[derive(Debug)]
pub(crate) struct BlockCache {
    blocks: HashMap<(Arc<str>, u32), KeptBlock>,
    bytes: usize,
    /// Bytes of the blocks marked `reused`.
    reused_bytes: usize,
    budget: usize,
    tick: u64,
    /// Rankings so far.
    ranking: u64,
    /// Blocks read from the store.
    reads: u64,
}

impl BlockCache {
    fn new(budget: usize) -> Self {
        BlockCache { blocks: HashMap::new(), bytes: 0, reused_bytes: 0, budget, tick: 0, ranking: 0, reads: 0 }
    }

    /// Drops blocks until they take three quarters of the budget: the
    /// oldest reused ones while those take more than half of it, then the
    /// oldest of the others.
    fn evict(&mut self) {
        let (target, protected) = (self.budget / 4 * 3, self.budget / 2);
        let mut by_age: Vec<(u64, (Arc<str>, u32))> = self.blocks.iter().map(|(k, v)| (v.used, k.clone())).collect();
        by_age.sort_unstable_by_key(|(used, _)| *used);
        for (_, key) in by_age {
            if self.bytes <= target && self.reused_bytes <= protected {
                break;
            }
            let Some(kept) = self.blocks.get(&key) else { continue };
            let drop = match kept.reused {
                true => self.reused_bytes > protected,
                false => self.bytes > target,
            };
            if drop && let Some(kept) = self.blocks.remove(&key) {
                self.bytes -= kept.size();
                if kept.reused {
                    self.reused_bytes -= kept.size();
                }
            }
        }
    }

    /// Block `b` of `data`'s token.
    fn get(&mut self, conn: &Connection, data: &TermData, b: usize) -> rusqlite::Result<Option<Arc<[u8]>>> {
        let m = &data.blocks[b];
        if m.written == TAIL {
            return Ok(data.tail.clone());
        }
        self.tick += 1;
        let key = (data.term.clone(), m.first_pk);
        if let Some(kept) = self.blocks.get_mut(&key)
            && kept.written == m.written
        {
            kept.used = self.tick;
            if !kept.reused && kept.read_by != self.ranking {
                kept.reused = true;
                self.reused_bytes += kept.size();
            }
            return Ok(Some(kept.bytes.clone()));
        }
        let bytes: Option<Vec<u8>> = conn
            .prepare_cached("SELECT block FROM postings WHERE term = ?1 AND first_pk = ?2")?
            .query_row(params![&*data.term, m.first_pk], |r| r.get(0))
            .optional()?;
        let Some(bytes) = bytes else { return Ok(None) };
        self.reads += 1;
        let bytes: Arc<[u8]> = Arc::from(bytes);
        let kept = KeptBlock {
            written: m.written,
            bytes: bytes.clone(),
            used: self.tick,
            read_by: self.ranking,
            reused: false,
        };
        self.bytes += kept.size();
        if let Some(old) = self.blocks.insert(key, kept) {
            self.bytes -= old.size();
            if old.reused {
                self.reused_bytes -= old.size();
            }
        }
        if self.bytes > self.budget {
            self.evict();
        }
        Ok(Some(bytes))
    }
}

/// What a ranking reads blocks through; remembers the first failure.
struct Fetcher<'c> {
    conn: &'c Connection,
    blocks: &'c mut BlockCache,
    failed: Option<rusqlite::Error>,
}

impl Fetcher<'_> {
    fn get(&mut self, data: &TermData, b: usize) -> Option<Arc<[u8]>> {
        match self.blocks.get(self.conn, data, b) {
            Ok(found) => found,
            Err(e) => {
                self.failed.get_or_insert(e);
                None
            }
        }
    }
}

/// What queries keep between writes: tokens' directories (valid for their
/// generation, so only the tokens a write changed are read again), their
/// stored blocks (each valid for the generation that wrote it), phrase
/// lists and every row's length (valid until the store changes; this
/// process's writes update the lengths in place).
#[derive(Debug)]
pub(crate) struct Cache {
    tokens: HashMap<String, Entry>,
    bytes: usize,
    budget: usize,
    tick: u64,
    blocks: BlockCache,
    phrases: HashMap<String, Arc<PhraseList>>,
    phrase_bytes: usize,
    phrases_at: u64,
    lengths: Option<Vec<u32>>,
    lengths_at: u64,
    /// The rows the last filter let through, as of a change: a million
    /// rows take milliseconds to gather, a copy of their bitmap microseconds.
    allowed: Option<(u64, SearchFilter, RowSet)>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            tokens: HashMap::new(),
            bytes: 0,
            budget: DIRECTORY_BYTES,
            tick: 0,
            blocks: BlockCache::new(BLOCK_CACHE_BYTES),
            phrases: HashMap::new(),
            phrase_bytes: 0,
            phrases_at: 0,
            lengths: None,
            lengths_at: 0,
            allowed: None,
        }
    }
}

impl Cache {
    /// Forgets everything (the bench's cold row).
    pub fn clear(&mut self) {
        *self = Cache { budget: self.budget, blocks: BlockCache::new(self.blocks.budget), ..Cache::default() };
    }

    /// Bounds the directories and the blocks kept to `budget` bytes each.
    #[cfg(test)]
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.blocks.budget = budget;
    }

    /// Stored blocks read since the cache was made or cleared.
    #[cfg(test)]
    pub fn block_reads(&self) -> u64 {
        self.blocks.reads
    }

    /// Rows of the phrase lists kept, and how many of them keep FTS5's
    /// term rather than their frequency.
    #[cfg(test)]
    pub fn phrase_rows(&self) -> (usize, usize) {
        self.phrases.values().fold((0, 0), |(rows, escaped), p| (rows + p.pks.len(), escaped + p.escaped.len()))
    }

    /// Bytes of directories and blocks kept.
    #[cfg(test)]
    pub fn kept_bytes(&self) -> (usize, usize) {
        (self.bytes, self.blocks.bytes)
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

    /// The rows `filter` lets through as of change `changes`, from `gather`
    /// unless the last query asked the same.
    pub fn allowed(&mut self, changes: u64, filter: &SearchFilter, gather: impl FnOnce() -> RowSet) -> RowSet {
        match &self.allowed {
            Some((at, kept, rows)) if *at == changes && kept == filter => rows.clone(),
            _ => {
                let rows = gather();
                self.allowed = Some((changes, filter.clone(), rows.clone()));
                rows
            }
        }
    }

    /// Every row's length in tokens, by pk, as of change `changes`.
    pub fn lengths(&mut self, conn: &Connection, changes: u64) -> rusqlite::Result<&[u32]> {
        if self.lengths.is_none() || self.lengths_at != changes {
            self.lengths = Some(crate::lexical::docsizes(conn)?);
            self.lengths_at = changes;
        }
        Ok(self.lengths.as_deref().unwrap_or_default())
    }

    /// [`best_rows`] over `lists`, reading their blocks through the block
    /// cache; `None` when a stored block is unreadable.
    pub fn best_rows(
        &mut self,
        conn: &Connection,
        lists: &[List],
        stats: TableStats,
        changes: u64,
        allowed: &RowSet,
        need: usize,
    ) -> rusqlite::Result<Option<Vec<(i64, f64)>>> {
        self.lengths(conn, changes)?;
        let Cache { lengths, blocks, .. } = self;
        blocks.ranking += 1;
        let fetch = RefCell::new(Fetcher { conn, blocks, failed: None });
        let found = best_rows(lists, stats, lengths.as_deref().unwrap_or_default(), allowed, need, &fetch);
        if let Some(e) = fetch.into_inner().failed {
            return Err(e);
        }
        Ok(found.ok())
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
    /// does); `None` when the stored directory is not readable.
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
        let row = lookup_entry(conn, token)?;
        if let Some(entry) = self.tokens.get_mut(token)
            && entry.data.generation == row.generation
            && entry.data.df == row.df
        {
            (entry.used, entry.checked_at) = (self.tick, changes);
            return Ok(Some(List::Token(entry.data.clone())));
        }
        let previous = self.tokens.remove(token);
        if let Some(old) = &previous {
            self.bytes -= old.data.bytes();
        }
        let data = match row.df {
            0 => TermData {
                term: Arc::from(token),
                generation: row.generation,
                df: 0,
                dir_gen: row.dir_gen,
                blocks: Vec::new(),
                tail: None,
                bound: Mutex::new(None),
            },
            _ => match TermData::load(conn, token, row, previous.as_ref().map(|e| &*e.data))? {
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
        self.bytes += size;
        self.tokens.insert(token.to_owned(), Entry { data, used: self.tick, checked_at: changes });
        if self.bytes > self.budget {
            evict(&mut self.tokens, &mut self.bytes, self.budget, |e| e.used, |e| e.data.bytes());
        }
    }

    /// The rows of a phrase FTS5 matches, with their terms, as of change
    /// `changes`; `None` when a pk does not fit.
    pub fn phrase(
        &mut self,
        conn: &Connection,
        term: &Term,
        stats: TableStats,
        changes: u64,
    ) -> rusqlite::Result<Option<List>> {
        if self.phrases_at != changes {
            self.phrases.clear();
            self.phrase_bytes = 0;
            self.phrases_at = changes;
        }
        if let Some(list) = self.phrases.get(&term.text) {
            return Ok(Some(List::Phrase(list.clone())));
        }
        let Some((pks, terms)) = crate::lexical::phrase_terms(conn, term)? else { return Ok(None) };
        let lengths = self.lengths(conn, changes)?;
        let list = Arc::new(PhraseList::new(pks, terms, stats, lengths));
        if self.phrase_bytes + list.bytes() <= PHRASE_BYTES {
            self.phrase_bytes += list.bytes();
            self.phrases.insert(term.text.clone(), list.clone());
        }
        Ok(Some(List::Phrase(list)))
    }
}

/// A position in one list during [`best_rows`].
struct Cursor<'a, 'c> {
    list: &'a List,
    fetch: &'a RefCell<Fetcher<'c>>,
    idf: f64,
    avgdl: f64,
    lengths: &'a [u32],
    /// The current block; rows below `floor` in it are passed.
    block: usize,
    floor: u32,
    /// The block whose pks are in `pks`, if any; for a token, its bytes
    /// and their layout.
    loaded: Option<usize>,
    bytes: Option<(Arc<[u8]>, Layout)>,
    pks: Vec<u32>,
    counts: Vec<u32>,
    pos: usize,
    corrupt: bool,
}

impl<'a, 'c> Cursor<'a, 'c> {
    fn new(list: &'a List, fetch: &'a RefCell<Fetcher<'c>>, stats: TableStats, lengths: &'a [u32]) -> Self {
        let idf = match list {
            List::Token(data) => lexical::idf(stats.rows, data.df),
            List::Phrase(_) => 0.0,
        };
        Cursor {
            list,
            fetch,
            idf,
            avgdl: stats.avgdl,
            lengths,
            block: 0,
            floor: 0,
            loaded: None,
            bytes: None,
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
                let bytes = self.fetch.borrow_mut().get(data, b);
                let found = bytes.and_then(|bytes| {
                    let layout = Layout::read(&bytes)?;
                    layout.pks(&bytes, &mut self.pks)?;
                    Some((bytes, layout))
                });
                if found.is_none() {
                    self.pks.clear();
                    self.corrupt = true;
                }
                self.bytes = found;
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
            List::Token(_) => {
                let counted = self
                    .bytes
                    .as_ref()
                    .and_then(|(bytes, layout)| layout.row_counts(bytes, self.pos, &mut self.counts));
                if counted.is_none() {
                    self.corrupt = true;
                    return 0.0;
                }
                let f = weighted_frequency(&self.counts);
                let d = f64::from(self.lengths.get(self.pks[self.pos] as usize).copied().unwrap_or(0));
                lexical::bm25_term(self.idf, f, d, self.avgdl)
            }
            List::Phrase(p) => {
                let d = f64::from(self.lengths.get(self.pks[self.pos] as usize).copied().unwrap_or(0));
                p.term(b * BLOCK + self.pos, d, self.avgdl)
            }
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
fn best_rows(
    lists: &[List],
    stats: TableStats,
    lengths: &[u32],
    allowed: &RowSet,
    need: usize,
    fetch: &RefCell<Fetcher<'_>>,
) -> Result<Vec<(i64, f64)>, CorruptBlock> {
    let n = lists.len();
    if need == 0 || n == 0 || allowed.len() == 0 {
        return Ok(Vec::new());
    }
    let mut cursors: Vec<Cursor<'_, '_>> = lists.iter().map(|l| Cursor::new(l, fetch, stats, lengths)).collect();
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
        let (header, _) = Header::read(&bytes).unwrap();
        for c in 0..columns {
            let max = block.counts.iter().skip(c).step_by(columns).max().copied().unwrap();
            assert_eq!(header.max_counts[c], max);
        }
        // Any row's counts, read alone.
        let layout = Layout::read(&bytes).unwrap();
        let mut pks = Vec::new();
        layout.pks(&bytes, &mut pks).unwrap();
        assert_eq!(pks, block.pks);
        let mut row = vec![0; columns];
        for j in 0..block.len() {
            layout.row_counts(&bytes, j, &mut row).unwrap();
            assert_eq!(row, block.counts[j * columns..(j + 1) * columns], "row {j}");
        }
        assert_eq!(Block::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Block::decode(&[]), None);
    }

    /// A frequent token's rows (mostly once, in one column) take about the
    /// bits of their deltas and one bit each.
    #[test]
    fn frequent_rows_pack_into_a_few_bits_each() {
        let pks: Vec<u32> = (0..BLOCK as u32).map(|i| 1000 + i * 3).collect();
        let mut counts = vec![0; BLOCK * NCOL];
        for j in 0..BLOCK {
            counts[j * NCOL] = 1;
        }
        counts[5 * NCOL + 1] = 2;
        let block = Block { pks, counts, min_len: 4 };
        let bytes = block.encode();
        // Deltas of 3 (2 bits less one), 1 bit for the first column and 2
        // for the second: 5 bits a row, and a few bytes of header.
        assert!(bytes.len() <= 12 + BLOCK * 5 / 8, "{} bytes", bytes.len());
        assert_eq!(Block::decode(&bytes), Some(block));
        // A block of one row has no deltas.
        let one = Block { pks: vec![7], counts: vec![1; NCOL], min_len: 1 };
        assert_eq!(Block::decode(&one.encode()), Some(one));
    }

    #[test]
    fn blocks_used_by_several_rankings_outlast_blocks_read_once() {
        let mut cache = BlockCache::new(40 * 196);
        let term: Arc<str> = Arc::from("t");
        let put = |cache: &mut BlockCache, key: u32, reused: bool| {
            cache.tick += 1;
            let kept = KeptBlock { written: 0, bytes: Arc::from(vec![0u8; 100]), used: cache.tick, read_by: 0, reused };
            cache.bytes += kept.size();
            cache.reused_bytes += if reused { kept.size() } else { 0 };
            cache.blocks.insert((term.clone(), key), kept);
        };
        // 15 blocks that later rankings used again, then a long scan of
        // blocks read once.
        for key in 0..15 {
            put(&mut cache, key, true);
        }
        for key in 100..126 {
            put(&mut cache, key, false);
        }
        cache.evict();
        let kept = |cache: &BlockCache, keys: std::ops::Range<u32>| {
            keys.filter(|&k| cache.blocks.contains_key(&(term.clone(), k))).count()
        };
        assert_eq!(kept(&cache, 0..15), 15, "every reused block stays");
        assert_eq!(kept(&cache, 100..126), 15, "the newest blocks read once fill the rest");
        assert_eq!((cache.bytes, cache.reused_bytes), (30 * 196, 15 * 196));
        // Reused blocks beyond half the budget go, the oldest first.
        for key in 200..30 + 200 {
            put(&mut cache, key, true);
        }
        cache.evict();
        assert!(cache.reused_bytes <= 20 * 196 && cache.bytes <= 30 * 196);
        assert_eq!(kept(&cache, 0..15), 0, "the oldest reused blocks went first");
        assert_eq!(kept(&cache, 210..230), 20);
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
