//! Throw-away schemas on a PostgreSQL server, for test suites and benches: a schema is much
//! quicker to make than a database and just as separate for a store whose connections see only
//! it (through `search_path`).

use sqlx::{Connection, PgConnection};

use crate::location::redact_password;
use crate::{StoreError, StoreResult};

/// The URL of `schema` on the server `server` (a `postgres://` URL): the server's URL with a
/// `search_path` option, so every connection of a store opened on it sees only that schema.
pub fn schema_url(server: &str, schema: &str) -> String {
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}

/// Makes `schema` on `server` (nothing if it exists) and returns its URL ([`schema_url`]).
pub async fn create_schema(server: &str, schema: &str) -> StoreResult<String> {
    run(
        server,
        &format!("CREATE SCHEMA IF NOT EXISTS {}", name(schema)?),
    )
    .await?;
    Ok(schema_url(server, schema))
}

/// Drops `schema` on `server` with everything in it.
pub async fn drop_schema(server: &str, schema: &str) -> StoreResult<()> {
    run(
        server,
        &format!("DROP SCHEMA IF EXISTS {} CASCADE", name(schema)?),
    )
    .await
}

/// `schema` if it is a plain lower-case identifier (it is spliced into the statement).
fn name(schema: &str) -> StoreResult<&str> {
    let plain = !schema.is_empty()
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if plain {
        Ok(schema)
    } else {
        Err(StoreError::Invalid(format!(
            "{schema:?} is not a plain schema name (a-z, 0-9, _)"
        )))
    }
}

async fn run(server: &str, statement: &str) -> StoreResult<()> {
    let mut admin = PgConnection::connect(server)
        .await
        .map_err(|e| StoreError::Open(format!("{}: {e}", redact_password(server))))?;
    sqlx::raw_sql(statement).execute(&mut admin).await?;
    admin.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_urls_add_the_search_path_to_the_servers_options() {
        assert_eq!(
            schema_url("postgres://u@h:5432/db", "quire_t"),
            "postgres://u@h:5432/db?options=-c%20search_path%3Dquire_t"
        );
        assert_eq!(
            schema_url("postgres://u@h/db?sslmode=disable", "s"),
            "postgres://u@h/db?sslmode=disable&options=-c%20search_path%3Ds"
        );
    }

    #[test]
    fn only_plain_schema_names_are_spliced_into_a_statement() {
        assert!(name("quire_bench_0a1b").is_ok());
        for bad in ["", "1abc", "Quire", "a;drop table x", "a b", "a\"b"] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
    }
}
