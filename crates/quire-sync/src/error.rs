//! The one error type of the crate, split by who has to act: the configuration's author
//! (a 400) or the run that met a failing origin.

/// Why an origin could not be set up or read. Messages never carry credentials.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The configuration cannot work (bad URL, path outside the allowed roots, bad pattern):
    /// a 400 for the caller.
    #[error("{0}")]
    Invalid(String),
    /// The origin could not be listed or read (unreachable, denied, gone): recorded on the
    /// run or the item.
    #[error("{0}")]
    Origin(String),
}
