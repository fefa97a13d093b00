//! One fresh database per test, on every backend, and the macro that runs each story on each.

use std::sync::Arc;

use quire_store::{Store, StoreLocation};

/// The variable naming the PostgreSQL server the `postgres::…` tests use.
const POSTGRES_URL_VARIABLE: &str = "QUIRE_TEST_POSTGRES_URL";

/// A database of its own for one test; [`TestDb::open`] opens as many handles on it as a story
/// needs, the way separate processes or nodes would.
pub enum TestDb {
    /// A SQLite file in a temporary directory.
    Sqlite {
        _dir: tempfile::TempDir,
        location: StoreLocation,
    },
    /// A schema of its own in the test server: handles see only it, through `search_path`.
    Postgres {
        server: String,
        schema: String,
        location: StoreLocation,
    },
}

impl TestDb {
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let location = StoreLocation::Sqlite(dir.path().join("quire.db"));
        Self::Sqlite {
            _dir: dir,
            location,
        }
    }

    /// A new, empty schema in the server `QUIRE_TEST_POSTGRES_URL` names. A schema is much
    /// quicker to make than a database, and just as separate for the store.
    pub async fn postgres() -> Self {
        let server = std::env::var(POSTGRES_URL_VARIABLE).unwrap_or_else(|_| {
            panic!(
                "{POSTGRES_URL_VARIABLE} is not set: the PostgreSQL backend's tests need a server. \
                 Run `scripts/postgres start` and export the URL it prints as \
                 {POSTGRES_URL_VARIABLE} (scripts/test does both)."
            )
        });
        let schema = format!("quire_test_{}", uuid::Uuid::new_v4().simple());
        let url = quire_store::create_schema(&server, &schema)
            .await
            .unwrap_or_else(|e| panic!("{POSTGRES_URL_VARIABLE}: {e}"));
        let location = StoreLocation::parse(&url).unwrap();
        Self::Postgres {
            server,
            schema,
            location,
        }
    }

    /// Whether [`Store::wait_for_jobs`] returns when a job is queued (PostgreSQL's `LISTEN`)
    /// rather than always sleeping its whole time (SQLite).
    pub fn wakes_workers(&self) -> bool {
        matches!(self, Self::Postgres { .. })
    }

    pub async fn open(&self) -> Arc<dyn Store> {
        let (Self::Sqlite { location, .. } | Self::Postgres { location, .. }) = self;
        quire_store::open(location).await.unwrap()
    }

    /// Drops the test's schema (a failed test leaves it behind for a look; the test server is
    /// thrown away with its data).
    pub async fn finish(self) {
        if let Self::Postgres { server, schema, .. } = self {
            quire_store::drop_schema(&server, &schema).await.unwrap();
        }
    }
}

/// Runs every story on every backend: `stores` are `async fn(&dyn Store)` and get one fresh
/// store; `databases` are `async fn(&TestDb)` and open their own handles on one fresh database.
/// Stories are listed under the module that holds them (`module: [story, …]`). Each backend
/// gets a module (`sqlite`, `postgres`) with one test per story, named after the story alone.
macro_rules! conformance {
    (
        stores: { $($module:ident: [$($story:ident),* $(,)?]),* $(,)? },
        databases: { $($db_module:ident: [$($db_story:ident),* $(,)?]),* $(,)? } $(,)?
    ) => {
        conformance!(
            @backend sqlite,
            { $($module: [$($story),*]),* },
            { $($db_module: [$($db_story),*]),* }
        );
        conformance!(
            @backend postgres,
            { $($module: [$($story),*]),* },
            { $($db_module: [$($db_story),*]),* }
        );
    };
    (
        @backend $backend:ident,
        { $($module:ident: [$($story:ident),*]),* },
        { $($db_module:ident: [$($db_story:ident),*]),* }
    ) => {
        mod $backend {
            $($(
                #[tokio::test]
                async fn $story() {
                    let db = crate::harness::TestDb::$backend().await;
                    let store = db.open().await;
                    crate::$module::$story(&*store).await;
                    store.close().await;
                    db.finish().await;
                }
            )*)*
            $($(
                #[tokio::test]
                async fn $db_story() {
                    let db = crate::harness::TestDb::$backend().await;
                    crate::$db_module::$db_story(&db).await;
                    db.finish().await;
                }
            )*)*
        }
    };
}
