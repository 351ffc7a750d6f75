//! The on-disk schema and its migrations.
//!
//! `schema_version` holds one row, the number of migrations applied. A build
//! applies the ones it has not yet, in one transaction together with the
//! version bump, and refuses a store whose version is higher than it knows
//! (a newer build wrote it). To change the schema, append a migration; never
//! edit one that has shipped.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{EmbeddedError, OPEN_OPERATION};
use crate::fts;

/// Migrations in order; migration `i` brings the store to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    // Version 1.
    //
    // `chunks` is the main table; `vectors` and `chunks_fts` are keyed by its
    // `pk`, and every write touches all three in one transaction, so a record
    // is either in all three or in none. `source_line` is the document's first
    // line, all the path glob ever looks at, so filters can be evaluated
    // without reading documents.
    //
    // `chunks_fts` is contentless (the text lives in `chunks` only) with
    // `contentless_delete=1`, so rows can be deleted by rowid alone. Column
    // `body` is the document; `idents` holds the camelCase parts of its
    // identifiers (`loadConfig` → `load config`), which `unicode61` would
    // otherwise keep as one token (it already splits on `_`).
    r#"
    CREATE TABLE settings (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE chunks (
        pk           INTEGER PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        namespace_id TEXT NOT NULL,
        organization TEXT NOT NULL,
        repository   TEXT NOT NULL,
        branch       TEXT NOT NULL,
        path         TEXT NOT NULL,
        source_line  TEXT NOT NULL,
        document     TEXT NOT NULL,
        metadata     TEXT NOT NULL
    );
    CREATE INDEX chunks_by_namespace ON chunks (namespace_id, id);

    CREATE TABLE vectors (
        pk        INTEGER PRIMARY KEY,
        embedding BLOB NOT NULL
    );

    CREATE VIRTUAL TABLE chunks_fts USING fts5 (
        body, idents,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );

    CREATE TABLE files (
        namespace_id TEXT NOT NULL,
        path         TEXT NOT NULL,
        file_hash    TEXT NOT NULL,
        content      TEXT NOT NULL,
        PRIMARY KEY (namespace_id, path)
    );
    "#,
    // Version 2.
    //
    // `chunks_fts` gains `stems` (word stems) and `names` (path, symbols and
    // defined names, weighted above the text); see `fts.rs`. Its rows are
    // computed in Rust, so `migrate` refills the new table from `chunks` in
    // the same transaction (`REFILL_FTS_AT`).
    r#"
    DROP TABLE chunks_fts;
    CREATE VIRTUAL TABLE chunks_fts USING fts5 (
        body, idents, stems, names,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    "#,
    // Version 3.
    //
    // The persistent lexical index (`lexicon`, `postings`; see
    // `lexindex.rs`), changed by every write in its transaction. `migrate`
    // writes it from `chunks_fts` in the same transaction
    // (`REBUILD_LEXICON_AT`).
    r#"
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
    "#,
    // Version 4.
    //
    // `body` keeps the document's code lines only and `comments` gets its
    // comment lines, weighted below code (see `fts.rs`); refilled as in
    // version 2.
    r#"
    DROP TABLE chunks_fts;
    CREATE VIRTUAL TABLE chunks_fts USING fts5 (
        body, idents, stems, names, comments,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    "#,
    // Version 5.
    //
    // The lexical index in bit-packed blocks keyed by their first pk, with
    // a directory of their bounds (`blocks`) and each token's last rows in
    // its `lexicon` row (see `lexindex.rs`); rewritten from `chunks_fts`
    // (`REBUILD_LEXICON_AT`).
    crate::lexindex::SCHEMA,
    // Version 6.
    //
    // `stems` also holds the word each short form of code stands for
    // (`num` → `number`, see `fts::SPELLED_OUT`): the table keeps its
    // columns, is emptied and refilled as in version 2.
    "INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all');",
    // Version 7.
    //
    // A stored file records the chunking its records were cut with and how
    // many there are, so that `index` can skip a file whose text and
    // chunking are unchanged (and check that its records are all there).
    // Files stored before have an empty chunking: the first run re-chunks
    // them once, finds their records unchanged and records the chunking.
    r#"
    ALTER TABLE files ADD COLUMN chunking TEXT NOT NULL DEFAULT '';
    ALTER TABLE files ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;
    "#,
    // Version 8.
    //
    // `chunks_fts` keeps the text, its identifiers' parts and its stems:
    // the `names` and `comments` columns go, and short forms are no longer
    // spelled out (see `fts.rs`); refilled as in version 2.
    r#"
    DROP TABLE chunks_fts;
    CREATE VIRTUAL TABLE chunks_fts USING fts5 (
        body, idents, stems,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    "#,
    // Version 9.
    //
    // Each vector's codes (`quant::encode_row`) with what a filter tests of
    // its chunk, so that opening a store reads these short rows instead of
    // every `f32` vector and every chunk row, and encodes nothing. Written
    // with the vector in every write's transaction; `migrate` fills it from
    // `chunks` and `vectors` (`REFILL_CODES_AT`). `language` and `file_type`
    // are the metadata's, `''` when not a string.
    r#"
    CREATE TABLE vector_codes (
        pk           INTEGER PRIMARY KEY,
        organization TEXT NOT NULL,
        repository   TEXT NOT NULL,
        branch       TEXT NOT NULL,
        source_line  TEXT NOT NULL,
        path         TEXT NOT NULL,
        language     TEXT NOT NULL,
        file_type    TEXT NOT NULL,
        codes        BLOB NOT NULL
    );
    "#,
];

/// The last version that changed what the lexical index holds: a store
/// older than it (or whose `chunks_fts` is refilled) gets the index written
/// from `chunks_fts` once its migrations have run.
const REBUILD_LEXICON_AT: i64 = 5;

/// The last version that changed what `chunks_fts` holds: a store older
/// than it gets every row rewritten from `chunks` by this build's
/// `fts::columns` once its migrations have run (so a later change of the
/// columns moves this number, and the refill always writes the current
/// columns).
const REFILL_FTS_AT: i64 = 8;

/// The last version that changed how vectors are coded: a store older than
/// it gets `vector_codes` written from `vectors` by this build's
/// `quant::encode_row` once its migrations have run. A change of the codes
/// appends a migration that empties the table and moves this number.
const REFILL_CODES_AT: i64 = 9;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the store to [`SCHEMA_VERSION`], or refuses a newer one.
/// `refill_codes` writes the vector codes of a store written before they
/// were kept (the store's own encoder, handed in so that this module stays
/// below the store's).
pub(crate) fn migrate(
    conn: &mut Connection,
    refill_codes: fn(&Connection) -> Result<(), EmbeddedError>,
) -> Result<(), EmbeddedError> {
    let err = EmbeddedError::sqlite(OPEN_OPERATION);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
    let found: Option<i64> = tx
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .optional()
        .map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
    let found = match found {
        Some(v) => v,
        None => {
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", [])
                .map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
            0
        }
    };
    if found > SCHEMA_VERSION {
        return Err(EmbeddedError::SchemaTooNew { found, supported: SCHEMA_VERSION });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql).map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
        tx.execute("UPDATE schema_version SET version = ?1", [i as i64 + 1])
            .map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
    }
    if found < REFILL_FTS_AT {
        refill_fts(&tx)?;
    }
    if found < REFILL_FTS_AT.max(REBUILD_LEXICON_AT) {
        crate::lexindex::rebuild(&tx).map_err(EmbeddedError::sqlite(OPEN_OPERATION))?;
    }
    if found < REFILL_CODES_AT {
        refill_codes(&tx)?;
    }
    tx.commit().map_err(EmbeddedError::sqlite(OPEN_OPERATION))
}

/// Writes the `chunks_fts` row of every chunk (none in a new store).
fn refill_fts(conn: &Connection) -> Result<(), EmbeddedError> {
    let err = || EmbeddedError::sqlite(OPEN_OPERATION);
    let mut insert = conn.prepare(&fts::insert_statement()).map_err(err())?;
    let mut select = conn.prepare("SELECT pk, document FROM chunks").map_err(err())?;
    let mut rows = select.query([]).map_err(err())?;
    while let Some(row) = rows.next().map_err(err())? {
        let (pk, document): (i64, String) = (row.get(0).map_err(err())?, row.get(1).map_err(err())?);
        let [body, idents, stems] = fts::columns(&document);
        insert.execute(rusqlite::params![pk, body, idents, stems]).map_err(err())?;
    }
    Ok(())
}
