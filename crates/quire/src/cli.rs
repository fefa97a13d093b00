//! The command-line contract. Operators script against it, so commands, flags and `--json`
//! output stay stable; `docs/cli.md` documents them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use quire_app::Ledger;
use quire_app::records::ReviewDecision;
use quire_core::{Permission, SystemClock};
use quire_store::Store;
use tracing_subscriber::EnvFilter;

use quire_eval::{
    bench, bench_cluster, bench_embed, bench_filters, bench_fuzz, bench_generate, bench_ingest,
    bench_queries, bench_sync, bench_vectors, eval, eval_answers, eval_ocr, eval_pages, eval_pii,
    eval_retrieval,
};
use quire_server::{Config, Overrides, open_store};

use crate::{admin_cli, keys, review_cli, webhooks_cli};

/// Quire: a self-hosted document knowledge base for AI agents.
#[derive(Debug, Parser)]
#[command(name = "quire", version, about, max_term_width = 100)]
struct Cli {
    /// TOML configuration file (see `quire config print-default`).
    #[arg(long, global = true, value_name = "FILE", env = "QUIRE_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (default ./quire-data; env QUIRE_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the API server and the background workers.
    Serve {
        /// Address to listen on (default 127.0.0.1:8080; env QUIRE_BIND).
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Manage API keys (works while the server runs).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// The admin web interface (works while the server runs).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// The personal-data review queue (works while the server runs).
    Review {
        #[command(subcommand)]
        command: ReviewCommand,
    },
    /// Registered webhooks and their delivery log (works while the server runs).
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Show configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Measure quality on real data.
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Measure performance on synthetic or real data.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Manage the embedding model's files.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Parse documents for the server: a JSON request on stdin, the answer on stdout (with
    /// `--serve`, one of each per line until stdin ends).
    #[command(hide = true)]
    ParseWorker {
        /// Parse documents until stdin ends: a request per line, an answer per line.
        #[arg(long)]
        serve: bool,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key and print it (the only time the secret is shown).
    Create {
        /// A label for the key.
        #[arg(long)]
        name: String,
        /// read, read-write or admin.
        #[arg(long, value_parser = parse_permission)]
        permission: Permission,
        /// Limit the key to these source ids (comma-separated); default all sources.
        #[arg(long, value_delimiter = ',', value_name = "ID[,ID...]")]
        sources: Option<Vec<String>>,
        /// Requests per minute for search and for generate (default from config).
        #[arg(long, value_name = "N")]
        rate_limit: Option<u32>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List keys (never their secrets).
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key; it stops working at once.
    Revoke {
        /// The key's id.
        id: String,
        /// Print the revoked key as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Set the admin password, read as one line from standard input (at least 10
    /// characters); signs every admin session out.
    SetPassword,
}

#[derive(Debug, Subcommand)]
enum ReviewCommand {
    /// Documents waiting for review.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A held document's findings: type, page, text and the text around it.
    Show {
        /// The document's id.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Index the document as it is.
    Approve {
        /// The document's id.
        id: String,
    },
    /// Index the document with each finding replaced by a placeholder such as [EMAIL]; the
    /// original file is kept.
    Redact {
        /// The document's id.
        id: String,
    },
    /// Delete the document and its file.
    Reject {
        /// The document's id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum WebhooksCommand {
    /// List webhooks (never their secrets).
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A webhook's delivery attempts, newest first: time, event, status or error, latency.
    Deliveries {
        /// The webhook's id.
        id: String,
        /// How many attempts to show.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the compiled-in defaults as a TOML file.
    PrintDefault,
    /// Print the effective configuration (defaults, file, environment and flags applied).
    Show,
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Parse every file below a directory; report per format what parsed, failed or crashed.
    Parse(eval::ParseEvalArgs),
    /// Ingest a BEIR corpus, run its judged queries; report nDCG@10, Recall@100, MRR@10.
    Retrieval(eval_retrieval::RetrievalEvalArgs),
    /// Ingest a directory of documents, ask page-labelled questions (own JSONL or
    /// FinanceBench's); report page recall@1/5/10, document recall@10 and search latency.
    Pages(eval_pages::PagesEvalArgs),
    /// Ingest a question set's contexts, ask every question as `POST /api/v1/generate` would;
    /// report answers with a gold answer and its citation, abstentions on unanswerable
    /// questions (SQuAD 2.0) or cited evidence pages (FinanceBench), and answer latency.
    Answers(eval_answers::AnswersEvalArgs),
    /// Personal-data detection: per-type precision/recall on a labelled set, how many ordinary
    /// documents each review policy would hold, and detector throughput.
    Pii(eval_pii::PiiEvalArgs),
    /// OCR quality and speed: pages of PDFs with a text layer rendered (by pdftoppm), read
    /// back by OCR and compared with the text layer by token F1.
    Ocr(eval_ocr::OcrEvalArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Ingest documents through the real pipeline and time keyword searches.
    Search(bench::SearchBenchArgs),
    /// Embedding throughput of the local model, against this machine's matrix-multiply rate.
    Embed(bench_embed::EmbedBenchArgs),
    /// The vector index (HNSW graph and exact scan) on a synthetic corpus of N chunks.
    Vectors(bench_vectors::VectorBenchArgs),
    /// Search restricted to the documents a filter matched, against an exact scan of them, at
    /// 50%, 10%, 1% and 0.1% of the documents of a synthetic corpus of N chunks.
    Filters(bench_filters::FilterBenchArgs),
    /// `POST /api/v1/generate` over real HTTP on an ingested BEIR corpus: retrieval overhead,
    /// added latency per streamed delta, memory of idle queued streams, extractive citations.
    Generate(bench_generate::GenerateBenchArgs),
    /// Bulk-upload a BEIR corpus or a directory through the HTTP API into a fresh server and
    /// report documents/s, chunks/s, seconds per stage, peak memory and the embedder's own rate.
    /// The server's data directory is a new one under `TMPDIR`, removed afterwards
    /// (`--data-dir` is not used).
    Ingest(bench_ingest::IngestBenchArgs),
    /// Search throughput and latency over HTTP with 1, 8, 32… concurrent clients, on a BEIR
    /// corpus ingested into a fresh server with an embedding model.
    Queries(bench_queries::QueriesBenchArgs),
    /// The embedded store against clusters of 1, 2, 3… nodes on one PostgreSQL database, on
    /// the same BEIR corpus: ingest rate, how soon the last node finds the last document,
    /// search latency through it, and PostgreSQL's share of the CPU.
    Cluster(bench_cluster::ClusterBenchArgs),
    /// Feed every parser damaged files for a time budget, each through the parse worker as the
    /// server parses uploads; report per format what parsed, failed, panicked, crashed, timed
    /// out or ran out of memory, and save the findings.
    Fuzz(bench_fuzz::FuzzBenchArgs),
    /// Syncing sources against a local site of N pages (by sitemap and by crawl) and N objects
    /// in an S3-compatible bucket: first sync and unchanged re-sync, items/s and the requests
    /// each origin received.
    Sync(bench_sync::SyncBenchArgs),
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Download the default embedding model (or another sentence-transformers model) from the
    /// model hub into the model cache, and print its directory.
    Fetch(crate::model_fetch::FetchArgs),
}

fn parse_permission(s: &str) -> Result<Permission, String> {
    s.parse()
        .map_err(|e: quire_core::permission::UnknownPermission| e.to_string())
}

/// Parses the command line, runs the command and turns errors into a message and exit code 1.
pub fn main() -> ExitCode {
    // Everything Quire writes (the database with webhook secrets and key hashes, originals,
    // indexes, staged uploads) is readable by the service's own user only, whatever the
    // umask it was started with: other local users have no business reading a knowledge base.
    // PostgreSQL's server does the same.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    if let Command::ParseWorker { serve } = cli.command {
        return parse_worker(serve);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let overrides = Overrides {
        data_dir: cli.data_dir.clone(),
        bind: match &cli.command {
            Command::Serve { bind } => bind.clone(),
            _ => None,
        },
    };
    if let Command::Config {
        command: ConfigCommand::PrintDefault,
    } = &cli.command
    {
        print!("{}", Config::default_toml());
        return Ok(());
    }
    let config = Config::load(cli.config.as_deref(), std::env::vars(), &overrides)?;
    match cli.command {
        Command::Serve { .. } => {
            init_logging(&config, &config.log.level);
            serve(config).await
        }
        Command::Keys { command } => {
            init_logging(&config, "warn");
            let store = open_store(&config).await?;
            let out = match offline_ledger(&config, &store) {
                Err(e) => Err(e),
                Ok(ledger) => match command {
                    KeysCommand::Create {
                        name,
                        permission,
                        sources,
                        rate_limit,
                        json,
                    } => {
                        let args = keys::CreateArgs {
                            name,
                            permission,
                            sources,
                            rate_limit,
                        };
                        keys::create(&ledger, args, json).await
                    }
                    KeysCommand::List { json } => keys::list(&ledger, json).await,
                    KeysCommand::Revoke { id, json } => keys::revoke(&ledger, &id, json).await,
                },
            };
            store.close().await;
            println!("{}", out?);
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::SetPassword,
        } => {
            init_logging(&config, "warn");
            let store = open_store(&config).await?;
            let out = match offline_ledger(&config, &store) {
                Err(e) => Err(e),
                Ok(ledger) => admin_cli::set_password(&ledger, std::io::stdin().lock()).await,
            };
            store.close().await;
            println!("{}", out?);
            Ok(())
        }
        Command::Review { command } => {
            init_logging(&config, "warn");
            let store = open_store(&config).await?;
            let out = match offline_ledger(&config, &store) {
                Err(e) => Err(e),
                Ok(ledger) => match command {
                    ReviewCommand::List { json } => review_cli::list(&ledger, json).await,
                    ReviewCommand::Show { id, json } => review_cli::show(&ledger, &id, json).await,
                    ReviewCommand::Approve { id } => {
                        review_cli::decide(&ledger, &id, ReviewDecision::Approve).await
                    }
                    ReviewCommand::Redact { id } => {
                        review_cli::decide(&ledger, &id, ReviewDecision::Redact).await
                    }
                    ReviewCommand::Reject { id } => review_cli::reject(&ledger, &id).await,
                },
            };
            store.close().await;
            println!("{}", out?);
            Ok(())
        }
        Command::Webhooks { command } => {
            init_logging(&config, "warn");
            let store = open_store(&config).await?;
            let out = match offline_ledger(&config, &store) {
                Err(e) => Err(e),
                Ok(ledger) => match command {
                    WebhooksCommand::List { json } => webhooks_cli::list(&ledger, json).await,
                    WebhooksCommand::Deliveries { id, limit, json } => {
                        webhooks_cli::deliveries(&ledger, &id, limit, json).await
                    }
                },
            };
            store.close().await;
            println!("{}", out?);
            Ok(())
        }
        Command::Config {
            command: ConfigCommand::Show,
        } => {
            print!("{}", toml::to_string_pretty(&config.redacted())?);
            Ok(())
        }
        Command::Config {
            command: ConfigCommand::PrintDefault,
        } => Ok(()),
        Command::Eval {
            command: EvalCommand::Parse(args),
        } => eval::parse_dir(args),
        Command::Eval {
            command: EvalCommand::Ocr(args),
        } => tokio::task::spawn_blocking(move || eval_ocr::ocr(args)).await?,
        Command::Eval {
            command: EvalCommand::Pii(args),
        } => tokio::task::spawn_blocking(move || eval_pii::pii(args)).await?,
        Command::Eval {
            command: EvalCommand::Retrieval(args),
        } => {
            init_logging(&config, "warn");
            eval_retrieval::retrieval(&config, args).await
        }
        Command::Eval {
            command: EvalCommand::Pages(args),
        } => {
            init_logging(&config, "warn");
            eval_pages::pages(&config, args).await
        }
        Command::Eval {
            command: EvalCommand::Answers(args),
        } => {
            init_logging(&config, "warn");
            eval_answers::answers(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Search(args),
        } => {
            init_logging(&config, "warn");
            bench::search(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Generate(args),
        } => {
            init_logging(&config, "warn");
            bench_generate::generate(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Ingest(args),
        } => {
            init_logging(&config, "warn");
            bench_ingest::ingest(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Queries(args),
        } => {
            init_logging(&config, "warn");
            bench_queries::queries(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Cluster(args),
        } => {
            init_logging(&config, "warn");
            bench_cluster::cluster(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Sync(args),
        } => {
            init_logging(&config, "warn");
            bench_sync::sync(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Fuzz(args),
        } => {
            // Each input's end is in the report; the workers' crash logs would only repeat it.
            init_logging(&config, "off");
            bench_fuzz::fuzz(&config, args).await
        }
        Command::Bench {
            command: BenchCommand::Embed(args),
        } => tokio::task::spawn_blocking(move || bench_embed::embed(args)).await?,
        Command::Bench {
            command: BenchCommand::Vectors(args),
        } => tokio::task::spawn_blocking(move || bench_vectors::vectors(args)).await?,
        Command::Bench {
            command: BenchCommand::Filters(args),
        } => tokio::task::spawn_blocking(move || bench_filters::filters(args)).await?,
        Command::Model {
            command: ModelCommand::Fetch(args),
        } => crate::model_fetch::fetch(args).await,
        // Handled in `main`, before the runtime starts.
        Command::ParseWorker { .. } => Ok(()),
    }
}

/// The ledger the commands that work beside a running server (`keys`, `admin set-password`,
/// `review`, `webhooks`) act through, as the operator: the opened `store`, the wall clock, the
/// originals (not the staging area: `Staging::open` clears it, and a running server may be
/// receiving an upload there) and the configured personal-data policy (what a redact decision
/// takes out of a document's name).
fn offline_ledger(config: &Config, store: &Arc<dyn Store>) -> anyhow::Result<Ledger> {
    let (location, s3) = config.files.store_settings(&config.data_dir)?;
    let originals = quire_files::open(&location, &s3)?;
    let screening = quire_ingest::Review::new(config.pii.policy()?);
    Ok(Ledger::offline(
        Arc::clone(store),
        Arc::new(SystemClock),
        originals,
        screening,
    ))
}

/// `quire parse-worker`, started by the server for a document (`--serve`: for one document
/// after another). It runs before the async runtime and reads no configuration: the memory
/// limit covers the whole process, so nothing else should have started, and stdout carries
/// the answers, so nothing else may write there.
fn parse_worker(serve: bool) -> ExitCode {
    let (input, output) = (std::io::stdin().lock(), std::io::stdout().lock());
    let served = if serve {
        quire_ingest::serve_parse_requests(input, output)
    } else {
        quire_ingest::run_parse_worker(input, output)
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: parse worker: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    tracing::info!(?config, "starting quire {}", env!("CARGO_PKG_VERSION"));
    let app = quire_server::build(&config, Arc::new(SystemClock)).await?;
    admin_cli::password_from_env(app.services()).await?;
    let listener = tokio::net::TcpListener::bind(&config.bind)
        .await
        .with_context(|| format!("could not listen on {}", config.bind))?;
    let address = listener.local_addr()?;
    tracing::info!(%address, data_dir = %config.data_dir.display(), "listening");
    eprintln!(
        "quire {} listening on http://{address}",
        env!("CARGO_PKG_VERSION")
    );
    app.serve(listener, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

fn init_logging(config: &Config, default_level: &str) {
    let filter = EnvFilter::try_from_env("RUST_LOG")
        .or_else(|_| EnvFilter::try_new(default_level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if config.log.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
