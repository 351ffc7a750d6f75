//! The repository catalogue: `navigation.sqlite` in the store folder (in
//! memory over a Chroma collection).
//!
//! Repositories are the store's namespaces. Each gets a numeric id the first
//! time the catalogue sees it (SQLite `AUTOINCREMENT`, so an id is never
//! reused), with the status and counts the tools report. Repositories added
//! with `add_repository` get their row before indexing starts. The
//! definitions of each completed repository are derived from its chunks and
//! stored here with an FTS5 index for `search_code`; they are rebuilt when
//! the namespace's files change (a fingerprint of paths and file hashes).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::entities::Entity;

pub const CATALOGUE_FILE: &str = "navigation.sqlite";

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS repositories (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace_id    TEXT NOT NULL UNIQUE,
    organization    TEXT NOT NULL,
    repository      TEXT NOT NULL,
    index_branch    TEXT NOT NULL,
    name            TEXT NOT NULL,
    url             TEXT,
    branch          TEXT,
    commit_sha      TEXT,
    status          TEXT NOT NULL,
    total_files     INTEGER NOT NULL DEFAULT 0,
    processed_files INTEGER NOT NULL DEFAULT 0,
    total_entities  INTEGER NOT NULL DEFAULT 0,
    error_message   TEXT,
    processed_at    TEXT,
    description     TEXT,
    language        TEXT,
    framework       TEXT,
    fingerprint     TEXT NOT NULL DEFAULT '',
    managed         INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entities (
    id          INTEGER PRIMARY KEY,
    repo_id     INTEGER NOT NULL,
    entity_type TEXT NOT NULL,
    entity_name TEXT NOT NULL,
    file_path   TEXT NOT NULL,
    line_start  INTEGER NOT NULL,
    line_end    INTEGER NOT NULL,
    language    TEXT NOT NULL,
    signature   TEXT NOT NULL,
    body        TEXT NOT NULL,
    description TEXT NOT NULL,
    is_test     INTEGER NOT NULL,
    rank_weight INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entities_by_repo ON entities (repo_id, file_path, line_start, id);
CREATE VIRTUAL TABLE IF NOT EXISTS entities_fts USING fts5 (
    entity_name, name_parts, signature, description, body,
    tokenize = 'unicode61 remove_diacritics 2'
);
"#;

/// One row of `repositories`, as `list_repositories` shows it (plus the
/// fields the tools need).
#[derive(Debug, Clone, Serialize)]
pub struct Repository {
    pub id: i64,
    pub name: String,
    pub url: Option<String>,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
    pub status: String,
    pub total_files: i64,
    pub total_entities: i64,
    pub error_message: Option<String>,
    pub processed_at: Option<String>,
    #[serde(skip)]
    pub namespace_id: String,
    #[serde(skip)]
    pub index_branch: String,
    #[serde(skip)]
    pub processed_files: i64,
    #[serde(skip)]
    pub language: Option<String>,
    #[serde(skip)]
    pub framework: Option<String>,
    #[serde(skip)]
    pub fingerprint: String,
    #[serde(skip)]
    pub managed: bool,
}

const REPO_COLUMNS: &str = "id, name, url, branch, commit_sha, status, total_files, total_entities, error_message, \
     processed_at, namespace_id, index_branch, processed_files, language, framework, fingerprint, managed";

fn repo_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Repository> {
    Ok(Repository {
        id: r.get(0)?,
        name: r.get(1)?,
        url: r.get(2)?,
        branch: r.get(3)?,
        commit_sha: r.get(4)?,
        status: r.get(5)?,
        total_files: r.get(6)?,
        total_entities: r.get(7)?,
        error_message: r.get(8)?,
        processed_at: r.get(9)?,
        namespace_id: r.get(10)?,
        index_branch: r.get(11)?,
        processed_files: r.get(12)?,
        language: r.get(13)?,
        framework: r.get(14)?,
        fingerprint: r.get(15)?,
        managed: r.get::<_, i64>(16)? != 0,
    })
}

/// What a new row holds.
#[derive(Debug, Clone, Default)]
pub struct NewRepository {
    pub namespace_id: String,
    pub organization: String,
    pub repository: String,
    pub index_branch: String,
    pub name: String,
    pub url: Option<String>,
    pub branch: Option<String>,
    pub description: Option<String>,
    pub status: String,
    pub managed: bool,
}

/// `(label, count)` pairs, by label.
pub type Counts = Vec<(String, i64)>;

/// The catalogue database.
#[derive(Debug)]
pub struct Catalogue {
    conn: Connection,
}

/// Filters of `list_definitions`.
#[derive(Debug, Default)]
pub struct DefinitionFilter {
    pub path_prefix: Option<String>,
    pub entity_type: Option<String>,
    pub name: Option<String>,
}

/// A search hit with its entity.
#[derive(Debug, Clone)]
pub struct StoredEntity {
    pub repo_id: i64,
    pub entity: Entity,
}

impl Catalogue {
    pub fn open(dir: &Path) -> rusqlite::Result<Self> {
        let conn = Connection::open(dir.join(CATALOGUE_FILE))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous = NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Catalogue { conn })
    }

    /// A catalogue that lives as long as the process: for a source with no
    /// folder of ours (a Chroma collection), rebuilt from it at start-up.
    pub fn in_memory() -> rusqlite::Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Catalogue { conn })
    }

    pub fn repositories(&self) -> rusqlite::Result<Vec<Repository>> {
        let mut stmt = self.conn.prepare_cached(&format!("SELECT {REPO_COLUMNS} FROM repositories ORDER BY id"))?;
        stmt.query_map([], repo_row)?.collect()
    }

    pub fn repository(&self, id: i64) -> rusqlite::Result<Option<Repository>> {
        self.conn
            .prepare_cached(&format!("SELECT {REPO_COLUMNS} FROM repositories WHERE id = ?1"))?
            .query_row([id], repo_row)
            .optional()
    }

    pub fn by_namespace(&self, namespace_id: &str) -> rusqlite::Result<Option<Repository>> {
        self.conn
            .prepare_cached(&format!("SELECT {REPO_COLUMNS} FROM repositories WHERE namespace_id = ?1"))?
            .query_row([namespace_id], repo_row)
            .optional()
    }

    pub fn insert(&self, new: &NewRepository) -> rusqlite::Result<i64> {
        self.conn.execute(
            "INSERT INTO repositories (namespace_id, organization, repository, index_branch, name, url, branch, \
             description, status, managed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                new.namespace_id,
                new.organization,
                new.repository,
                new.index_branch,
                new.name,
                new.url,
                new.branch,
                new.description,
                new.status,
                new.managed as i64
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn delete(&self, id: i64) -> rusqlite::Result<()> {
        self.clear_entities(id)?;
        self.conn.execute("DELETE FROM repositories WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Sets the status, with an optional error message (cleared otherwise).
    pub fn set_status(&self, id: i64, status: &str, error: Option<&str>) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE repositories SET status = ?2, error_message = ?3 WHERE id = ?1",
            params![id, status, error],
        )?;
        Ok(())
    }

    pub fn set_progress(&self, id: i64, processed: i64, total: i64) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE repositories SET processed_files = ?2, total_files = ?3 WHERE id = ?1",
            params![id, processed, total],
        )?;
        Ok(())
    }

    pub fn set_commit(&self, id: i64, commit: Option<&str>, index_branch: &str) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE repositories SET commit_sha = ?2, index_branch = ?3 WHERE id = ?1",
            params![id, commit, index_branch],
        )?;
        Ok(())
    }

    fn clear_entities(&self, id: i64) -> rusqlite::Result<()> {
        self.conn
            .execute("DELETE FROM entities_fts WHERE rowid IN (SELECT id FROM entities WHERE repo_id = ?1)", [id])?;
        self.conn.execute("DELETE FROM entities WHERE repo_id = ?1", [id])?;
        Ok(())
    }

    /// Replaces a repository's entities and marks it completed with its counts.
    #[allow(clippy::too_many_arguments)]
    pub fn complete(
        &mut self,
        id: i64,
        entities: &[Entity],
        total_files: i64,
        commit_sha: Option<&str>,
        language: Option<&str>,
        framework: Option<&str>,
        fingerprint: &str,
        error_message: Option<&str>,
    ) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM entities_fts WHERE rowid IN (SELECT id FROM entities WHERE repo_id = ?1)", [id])?;
        tx.execute("DELETE FROM entities WHERE repo_id = ?1", [id])?;
        {
            let mut ins = tx.prepare_cached(
                "INSERT INTO entities (repo_id, entity_type, entity_name, file_path, line_start, line_end, language, \
                 signature, body, description, is_test, rank_weight) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
            )?;
            let mut fts = tx.prepare_cached(
                "INSERT INTO entities_fts (rowid, entity_name, name_parts, signature, description, body) \
                 VALUES (?1,?2,?3,?4,?5,?6)",
            )?;
            for e in entities {
                ins.execute(params![
                    id,
                    e.entity_type,
                    e.entity_name,
                    e.file_path,
                    e.line_start,
                    e.line_end,
                    e.language,
                    e.signature,
                    e.body,
                    e.description,
                    e.is_test as i64,
                    e.rank_weight()
                ])?;
                let rowid = tx.last_insert_rowid();
                fts.execute(params![
                    rowid,
                    e.entity_name,
                    name_parts(&e.entity_name),
                    e.signature,
                    e.description,
                    e.body
                ])?;
            }
        }
        let now = now_iso();
        tx.execute(
            "UPDATE repositories SET status = 'completed', total_files = ?2, processed_files = ?2, \
             total_entities = ?3, commit_sha = ?4, language = ?5, framework = ?6, fingerprint = ?7, \
             error_message = ?8, processed_at = ?9 WHERE id = ?1",
            params![
                id,
                total_files,
                entities.len() as i64,
                commit_sha,
                language,
                framework,
                fingerprint,
                error_message,
                now
            ],
        )?;
        tx.commit()
    }

    /// Entities of a repository matching the filters, ordered by file, line
    /// and id: up to `limit` of them, and the count of all matches.
    pub fn definitions(
        &self,
        repo_id: i64,
        filter: &DefinitionFilter,
        limit: i64,
    ) -> rusqlite::Result<(i64, Vec<Entity>)> {
        let mut clauses = vec!["repo_id = ?1".to_owned()];
        let mut values: Vec<rusqlite::types::Value> = vec![repo_id.into()];
        if let Some(p) = &filter.path_prefix {
            values.push(p.clone().into());
            clauses.push(format!("substr(file_path, 1, length(?{n})) = ?{n}", n = values.len()));
        }
        if let Some(t) = &filter.entity_type {
            values.push(t.clone().into());
            clauses.push(format!("entity_type = ?{}", values.len()));
        }
        if let Some(n) = &filter.name {
            values.push(n.to_lowercase().into());
            clauses.push(format!("instr(lower(entity_name), ?{}) > 0", values.len()));
        }
        let wh = clauses.join(" AND ");
        let total: i64 = self.conn.query_row(
            &format!("SELECT count(*) FROM entities WHERE {wh}"),
            rusqlite::params_from_iter(values.iter()),
            |r| r.get(0),
        )?;
        values.push(limit.into());
        let sql = format!(
            "SELECT {ENTITY_COLUMNS} FROM entities WHERE {wh} ORDER BY file_path, line_start, id LIMIT ?{}",
            values.len()
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), entity_row)?;
        Ok((total, rows.collect::<rusqlite::Result<_>>()?))
    }

    /// Entity counts of a repository: by type, and by file language.
    pub fn entity_counts(&self, repo_id: i64) -> rusqlite::Result<(Counts, Counts)> {
        let group = |col: &str| -> rusqlite::Result<Counts> {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT CASE WHEN {col} = '' THEN 'unknown' ELSE {col} END, count(*) FROM entities \
                 WHERE repo_id = ?1 GROUP BY 1 ORDER BY 1"
            ))?;
            stmt.query_map([repo_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
        };
        Ok((group("entity_type")?, group("language")?))
    }

    /// Full-text search over entities: BM25 (name weighted highest), then
    /// source before tests, then the entity type's rank weight. Returns the
    /// total number of matches and one page.
    pub fn search(
        &self,
        fts_query: &str,
        repo_id: Option<i64>,
        language: Option<&str>,
        entity_type: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> rusqlite::Result<(i64, Vec<StoredEntity>)> {
        let mut clauses = vec!["entities_fts MATCH ?1".to_owned()];
        let mut values: Vec<rusqlite::types::Value> = vec![fts_query.to_owned().into()];
        if let Some(id) = repo_id {
            values.push(id.into());
            clauses.push(format!("e.repo_id = ?{}", values.len()));
        }
        if let Some(l) = language {
            values.push(l.to_owned().into());
            clauses.push(format!("e.language = ?{}", values.len()));
        }
        match entity_type {
            Some(t) => {
                values.push(t.to_owned().into());
                clauses.push(format!("e.entity_type = ?{}", values.len()));
            }
            None => clauses.push("e.entity_type <> 'import'".into()),
        }
        let wh = clauses.join(" AND ");
        let from = "entities_fts JOIN entities e ON e.id = entities_fts.rowid";
        let total: i64 = self.conn.query_row(
            &format!("SELECT count(*) FROM {from} WHERE {wh}"),
            rusqlite::params_from_iter(values.iter()),
            |r| r.get(0),
        )?;
        values.push(limit.into());
        values.push(offset.into());
        let n = values.len();
        let sql = format!(
            "SELECT e.repo_id, {cols} FROM {from} WHERE {wh} \
             ORDER BY round(bm25(entities_fts, 10.0, 8.0, 3.0, 2.0, 1.0), 6), e.is_test, e.rank_weight, e.id \
             LIMIT ?{} OFFSET ?{n}",
            n - 1,
            cols = ENTITY_COLUMNS.split(", ").map(|c| format!("e.{c}")).collect::<Vec<_>>().join(", ")
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| {
            Ok(StoredEntity { repo_id: r.get(0)?, entity: entity_row_at(r, 1)? })
        })?;
        Ok((total, rows.collect::<rusqlite::Result<_>>()?))
    }
}

const ENTITY_COLUMNS: &str =
    "entity_type, entity_name, file_path, line_start, line_end, language, signature, body, description, is_test";

fn entity_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entity> {
    entity_row_at(r, 0)
}

fn entity_row_at(r: &rusqlite::Row<'_>, o: usize) -> rusqlite::Result<Entity> {
    let t: String = r.get(o)?;
    Ok(Entity {
        entity_type: super::entities::ENTITY_TYPES.iter().find(|e| **e == t).copied().unwrap_or("function"),
        entity_name: r.get(o + 1)?,
        file_path: r.get(o + 2)?,
        line_start: r.get(o + 3)?,
        line_end: r.get(o + 4)?,
        language: r.get(o + 5)?,
        signature: r.get(o + 6)?,
        body: r.get(o + 7)?,
        description: r.get(o + 8)?,
        is_test: r.get::<_, i64>(o + 9)? != 0,
    })
}

/// camelCase and snake_case parts of a name plus every run of trailing
/// parts joined (`TestShallowWithState` → `test shallow with state
/// shallowwithstate withstate`), so part of a camelCase name matches.
pub fn name_parts(name: &str) -> String {
    let parts = split_identifier(name);
    let mut out: Vec<String> = parts.clone();
    for i in 1..parts.len().saturating_sub(1) {
        out.push(parts[i..].concat());
    }
    for i in 2..parts.len() {
        out.push(parts[..i].concat());
    }
    out.join(" ")
}

/// Lower-case parts of an identifier split at `_`, `-`, `.` and case changes.
pub fn split_identifier(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

/// Now, ISO 8601 in UTC with a `+00:00` offset and microseconds.
pub fn now_iso() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_parts() {
        assert_eq!(split_identifier("TestShallowWithState"), ["test", "shallow", "with", "state"]);
        assert_eq!(split_identifier("parse_repository_url"), ["parse", "repository", "url"]);
        assert_eq!(split_identifier("HTTPServer"), ["http", "server"]);
        assert!(name_parts("TestShallowWithState").split(' ').any(|p| p == "withstate"));
    }
}
