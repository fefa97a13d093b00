//! The records use cases hand to adapters, re-exported so that adapters need not (and cannot)
//! depend on the store.

pub use quire_store::{
    AdminSession, AuditEntry, Created, DeliveryAttempt, DocumentPage, DocumentProgress,
    ProcessingStage, RateBucket, ReviewDecision, ReviewRecord, SyncCounts, SyncRun, WebhookRecord,
};
