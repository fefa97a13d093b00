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

impl StoreError {
    /// True when the database could not be reached or stopped answering (connection refused
    /// or lost, pool exhausted or closed): a condition that passes when the database is back,
    /// unlike a bad query or a damaged record.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Database(e) => matches!(
                e,
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::WorkerCrashed
            ),
            Self::Invalid(_) | Self::Corrupt(_) | Self::Open(_) => false,
        }
    }
}
