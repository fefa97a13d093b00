//! The store's error type.

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The request contradicts stored data (for example a key scoped to an unknown source).
    #[error("{0}")]
    Invalid(String),
    /// The database failed or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Stored data could not be decoded; a bug or a damaged database.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// Setting up the database failed.
    #[error("could not open the database: {0}")]
    Open(String),
}
