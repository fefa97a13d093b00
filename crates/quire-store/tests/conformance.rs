//! The storage conformance suite: every backend must pass the same stories. `conformance!`
//! lists each story once and runs it against every backend (`sqlite::…` and `postgres::…`),
//! each run on a fresh database: a temporary SQLite file, or a schema of its own in the
//! PostgreSQL server named by `QUIRE_TEST_POSTGRES_URL` (`scripts/postgres start` prints one;
//! `scripts/test` starts it). Without that variable the PostgreSQL runs fail rather than skip.
//!
//! The stories live in `conformance/`, one module a topic; `harness` holds the fresh databases
//! and the macro, `fixtures` what the stories share.

// In a folder of their own so cargo does not take them for other test binaries.
#[macro_use]
#[path = "conformance/harness.rs"]
mod harness;
#[path = "conformance/fixtures.rs"]
mod fixtures;

#[path = "conformance/admin.rs"]
mod admin;
#[path = "conformance/cluster.rs"]
mod cluster;
#[path = "conformance/conversations.rs"]
mod conversations;
#[path = "conformance/documents.rs"]
mod documents;
#[path = "conformance/jobs.rs"]
mod jobs;
#[path = "conformance/keys.rs"]
mod keys;
#[path = "conformance/progress.rs"]
mod progress;
#[path = "conformance/rate_limits.rs"]
mod rate_limits;
#[path = "conformance/reviews.rs"]
mod reviews;
#[path = "conformance/schema.rs"]
mod schema;
#[path = "conformance/syncs.rs"]
mod syncs;
#[path = "conformance/versions.rs"]
mod versions;
#[path = "conformance/webhooks.rs"]
mod webhooks;

conformance! {
    // Stories on one store handle.
    stores: {
        documents: [
            sources_and_documents_respect_scope,
            chunks_are_read_back_by_key_and_by_document,
            the_same_bytes_are_one_document_per_source,
            a_bulk_of_documents_is_created_in_order_all_or_none,
            documents_are_listed_page_by_page_in_the_full_lists_order,
            metadata_is_stored_and_merged_within_scope,
            ready_documents_are_listed_across_a_scope_in_one_call,
        ],
        jobs: [
            jobs_are_leased_finished_and_resumed,
            documents_finished_together_each_get_their_own_outcome,
            a_restarted_node_takes_back_only_its_own_jobs,
            leases_are_renewed_until_lost,
        ],
        keys: [keys_are_stored_by_hash_and_revoked],
        rate_limits: [
            rate_windows_count_and_prune,
            concurrent_rate_hits_are_counted_exactly,
        ],
        conversations: [
            conversations_belong_to_the_key_that_started_them,
            recent_messages_are_the_last_ones_oldest_first,
            conversations_are_listed_per_key_newest_first,
            message_text_round_trips_exactly,
        ],
        webhooks: [
            webhooks_are_registered_listed_and_deleted,
            finishing_a_document_writes_one_event_per_subscriber,
            a_scoped_webhook_gets_only_its_sources_events,
            failing_a_document_writes_its_error,
            delivery_log_is_bounded_and_newest_first,
            deleting_a_webhook_drops_its_events_and_log,
            pii_events_carry_the_given_fields,
            a_logged_delivery_never_comes_back,
            released_claims_are_claimable_at_once,
        ],
        reviews: [
            a_decision_replaces_the_findings_and_the_name,
            approval_restores_the_name_and_old_findings_are_reduced,
        ],
        admin: [
            password_and_sessions,
            audit_log_is_newest_first,
            dashboard_counts,
        ],
        progress: [
            progress_is_shown_only_while_processing,
            a_claimed_document_is_parsing_until_its_worker_reports,
            pool_stats_are_consistent,
        ],
        cluster: [the_index_feed_lists_what_became_ready_or_went],
        syncs: [
            sync_runs_are_one_at_a_time_and_recorded,
            a_run_whose_lease_runs_out_is_ended_once_and_announced,
        ],
        versions: [
            an_external_id_makes_a_new_version_of_the_same_document,
            a_failed_or_held_version_leaves_the_live_one,
            a_newer_upload_supersedes_a_version_in_flight,
        ],
    },
    // Stories that open several handles on one database: other processes, other nodes, or
    // the same one after a restart.
    databases: {
        schema: [
            first_opens_at_once_agree_on_the_schema,
            reopening_keeps_data_and_skips_applied_migrations,
        ],
        webhooks: [
            deliveries_are_claimed_once_across_handles_and_restarts,
            a_claimed_delivery_comes_back_when_its_claim_runs_out,
        ],
        jobs: [
            jobs_are_claimed_once_across_handles,
            a_queued_job_wakes_waiting_workers,
            deleting_while_workers_finish_never_fails,
        ],
        versions: [uploads_of_one_new_external_id_at_once_are_one_document],
        syncs: [only_one_of_concurrent_sync_starts_wins],
        cluster: [
            concurrent_changes_take_consecutive_feed_positions,
            a_node_with_another_model_is_refused_while_one_runs,
            the_shared_queue_is_one_fifo_line_for_every_node,
        ],
    },
}
