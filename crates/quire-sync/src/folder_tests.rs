use std::os::unix::fs::symlink;
use std::time::{Duration, SystemTime};

use futures_util::TryStreamExt;
use tempfile::TempDir;

use super::*;

/// A root with a `docs` folder inside it, and the root alone allowed.
struct Fixture {
    root: TempDir,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("docs")).unwrap();
        Self { root }
    }

    fn docs(&self) -> PathBuf {
        self.root.path().join("docs")
    }

    fn write(&self, relative: &str, content: &[u8]) {
        let path = self.docs().join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn origin(&self) -> FolderOrigin {
        self.origin_with(Patterns::all())
    }

    fn origin_with(&self, patterns: Patterns) -> FolderOrigin {
        FolderOrigin::open(&[self.root.path().to_path_buf()], &self.docs(), patterns).unwrap()
    }
}

async fn ids(origin: &FolderOrigin) -> Vec<String> {
    origin
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|item| item.external_id)
        .collect()
}

fn invalid_message(result: Result<FolderOrigin, SyncError>) -> String {
    match result {
        Err(SyncError::Invalid(message)) => message,
        Err(other) => panic!("expected Invalid, got {other:?}"),
        Ok(origin) => panic!("expected Invalid, got {origin:?}"),
    }
}

#[tokio::test]
async fn lists_files_with_sizes_fingerprints_and_metadata() {
    let fixture = Fixture::new();
    fixture.write("b.txt", b"bee");
    fixture.write("a.pdf", b"%PDF-1.7");
    let items = fixture.origin().list().await.unwrap();
    assert_eq!(items.len(), 2);
    let a = &items[0];
    assert_eq!(a.external_id, "a.pdf");
    assert_eq!(a.name, "a.pdf");
    assert_eq!(a.size, 8);
    let modified = a.modified.expect("a modification time");
    let nanos = crate::unix_nanos(modified);
    assert_eq!(a.fingerprint, format!("size:8;mtime:{nanos}"));
    assert_eq!(
        a.metadata.get("modifiedAt").and_then(|v| v.as_str()),
        Some(
            modified
                .to_rfc3339_opts(SecondsFormat::AutoSi, true)
                .as_str()
        )
    );
    assert_eq!(a.metadata.len(), 1);
    assert_eq!(items[1].external_id, "b.txt");
    assert_eq!(items[1].size, 3);
}

#[tokio::test]
async fn walks_nested_directories_in_external_id_order() {
    let fixture = Fixture::new();
    fixture.write("z.txt", b"z");
    fixture.write("reports/2024/q1.pdf", b"q1");
    fixture.write("reports/summary.md", b"s");
    fixture.write("a/b/c/d.txt", b"d");
    fs::create_dir_all(fixture.docs().join("empty/dir")).unwrap();
    let items = fixture.origin().list().await.unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i.external_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "a/b/c/d.txt",
            "reports/2024/q1.pdf",
            "reports/summary.md",
            "z.txt"
        ]
    );
    assert_eq!(items[1].name, "q1.pdf");
}

#[tokio::test]
async fn hidden_files_and_directories_are_skipped() {
    let fixture = Fixture::new();
    fixture.write("visible.txt", b"v");
    fixture.write(".hidden.txt", b"h");
    fixture.write(".git/config", b"c");
    fixture.write("sub/.DS_Store", b"x");
    fixture.write("sub/kept.txt", b"k");
    assert_eq!(
        ids(&fixture.origin()).await,
        ["sub/kept.txt", "visible.txt"]
    );
}

#[tokio::test]
async fn patterns_choose_the_items() {
    let fixture = Fixture::new();
    fixture.write("a.pdf", b"a");
    fixture.write("reports/q1.pdf", b"q");
    fixture.write("reports/drafts/q2.pdf", b"q");
    fixture.write("notes.txt", b"n");
    let patterns = Patterns::new(&["**/*.pdf".into()], &["**/drafts/**".into()]).unwrap();
    assert_eq!(
        ids(&fixture.origin_with(patterns)).await,
        ["a.pdf", "reports/q1.pdf"]
    );
}

#[tokio::test]
async fn a_symlink_inside_the_folder_is_followed() {
    let fixture = Fixture::new();
    fixture.write("real/inner.txt", b"inner");
    fixture.write("file.txt", b"file");
    symlink(fixture.docs().join("real"), fixture.docs().join("alias")).unwrap();
    symlink(
        fixture.docs().join("file.txt"),
        fixture.docs().join("link.txt"),
    )
    .unwrap();
    // A link back up to the folder itself must not loop.
    symlink(fixture.docs(), fixture.docs().join("real/up")).unwrap();
    let items = fixture.origin().list().await.unwrap();
    let ids: Vec<&str> = items.iter().map(|i| i.external_id.as_str()).collect();
    // The linked directory is listed once, under its real path.
    assert_eq!(ids, ["file.txt", "link.txt", "real/inner.txt"]);
    assert_eq!(items[1].size, 4);

    // A linked directory whose target is not otherwise reachable is walked under the link.
    let elsewhere = fixture.docs().join(".store");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("kept.txt"), b"kept").unwrap();
    symlink(&elsewhere, fixture.docs().join("shelf")).unwrap();
    let origin = fixture.origin();
    assert!(ids_of(&origin).await.contains(&"shelf/kept.txt".to_owned()));
    let item = origin
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.external_id == "shelf/kept.txt")
        .unwrap();
    assert_eq!(read_all(&origin, &item).await, b"kept");
}

async fn ids_of(origin: &FolderOrigin) -> Vec<String> {
    ids(origin).await
}

#[tokio::test]
async fn a_symlink_leaving_the_folder_is_not_followed() {
    let fixture = Fixture::new();
    fixture.write("kept.txt", b"k");
    let outside = fixture.root.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), b"s").unwrap();
    symlink(&outside, fixture.docs().join("out-dir")).unwrap();
    symlink(
        outside.join("secret.txt"),
        fixture.docs().join("out-file.txt"),
    )
    .unwrap();
    symlink("/etc/passwd", fixture.docs().join("passwd")).unwrap();
    symlink(
        fixture.docs().join("missing"),
        fixture.docs().join("broken"),
    )
    .unwrap();
    let origin = fixture.origin();
    assert_eq!(ids(&origin).await, ["kept.txt"]);

    // Nor can an item be opened through it.
    let forged = Item {
        external_id: "out-file.txt".into(),
        name: "out-file.txt".into(),
        fingerprint: String::new(),
        size: 1,
        modified: None,
        metadata: serde_json::Map::new(),
    };
    assert!(matches!(
        origin.open(&forged).await,
        Err(SyncError::Origin(_))
    ));
    let climbing = Item {
        external_id: "../outside/secret.txt".into(),
        ..forged
    };
    assert!(matches!(
        origin.open(&climbing).await,
        Err(SyncError::Origin(_))
    ));
}

#[test]
fn a_path_outside_the_roots_is_refused() {
    let fixture = Fixture::new();
    let other = tempfile::tempdir().unwrap();
    let message = invalid_message(FolderOrigin::open(
        &[fixture.docs()],
        other.path(),
        Patterns::all(),
    ));
    assert!(message.contains("outside the allowed roots"), "{message}");
    assert!(
        message.contains(&fixture.docs().display().to_string()),
        "{message}"
    );

    // Also when it does not exist: the refusal does not tell.
    let message = invalid_message(FolderOrigin::open(
        &[fixture.docs()],
        Path::new("/nonexistent/elsewhere"),
        Patterns::all(),
    ));
    assert!(message.contains("outside the allowed roots"), "{message}");

    // A link under the root that points outside is judged by its target.
    symlink(other.path(), fixture.docs().join("escape")).unwrap();
    let message = invalid_message(FolderOrigin::open(
        &[fixture.docs()],
        &fixture.docs().join("escape"),
        Patterns::all(),
    ));
    assert!(message.contains("outside the allowed roots"), "{message}");
}

#[test]
fn no_roots_configured_is_refused() {
    let fixture = Fixture::new();
    let message = invalid_message(FolderOrigin::open(&[], &fixture.docs(), Patterns::all()));
    assert!(message.contains("connectors.folder_roots"), "{message}");
    assert!(
        message.contains("QUIRE_CONNECTORS_FOLDER_ROOTS"),
        "{message}"
    );
}

#[test]
fn dot_dot_is_resolved_before_the_check() {
    let fixture = Fixture::new();
    let sibling = fixture.root.path().join("sibling");
    fs::create_dir(&sibling).unwrap();
    let roots = [fixture.docs()];
    // docs/../sibling names a directory outside the `docs` root.
    let message = invalid_message(FolderOrigin::open(
        &roots,
        &fixture.docs().join("..").join("sibling"),
        Patterns::all(),
    ));
    assert!(message.contains("outside the allowed roots"), "{message}");

    // And a path that wanders out and back in is fine.
    fs::create_dir(fixture.docs().join("inner")).unwrap();
    let origin = FolderOrigin::open(
        &roots,
        &fixture.docs().join("inner/../../docs/inner"),
        Patterns::all(),
    )
    .unwrap();
    assert_eq!(
        origin.folder(),
        fs::canonicalize(fixture.docs().join("inner")).unwrap()
    );
}

#[test]
fn the_folder_must_exist_be_a_directory_and_be_absolute() {
    let fixture = Fixture::new();
    let roots = [fixture.root.path().to_path_buf()];
    let message = invalid_message(FolderOrigin::open(
        &roots,
        &fixture.docs().join("missing"),
        Patterns::all(),
    ));
    assert!(message.contains("cannot be opened"), "{message}");
    fixture.write("file.txt", b"f");
    let message = invalid_message(FolderOrigin::open(
        &roots,
        &fixture.docs().join("file.txt"),
        Patterns::all(),
    ));
    assert!(message.contains("not a directory"), "{message}");
    let message = invalid_message(FolderOrigin::open(
        &roots,
        Path::new("docs"),
        Patterns::all(),
    ));
    assert!(message.contains("absolute"), "{message}");
}

#[tokio::test]
async fn the_fingerprint_changes_when_the_content_changes() {
    let fixture = Fixture::new();
    fixture.write("a.txt", b"one");
    let origin = fixture.origin();
    let first = origin.list().await.unwrap().remove(0);
    assert_eq!(
        origin.list().await.unwrap()[0].fingerprint,
        first.fingerprint
    );

    // A different size.
    fixture.write("a.txt", b"one more");
    let second = origin.list().await.unwrap().remove(0);
    assert_ne!(second.fingerprint, first.fingerprint);

    // The same size, a later modification time (set explicitly: no waiting for the clock).
    let file = fs::File::options()
        .write(true)
        .open(fixture.docs().join("a.txt"))
        .unwrap();
    fs::write(fixture.docs().join("a.txt"), b"one MORE").unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    let third = origin.list().await.unwrap().remove(0);
    assert_eq!(third.size, second.size);
    assert_ne!(third.fingerprint, second.fingerprint);
}

async fn read_all(origin: &FolderOrigin, item: &Item) -> Vec<u8> {
    let chunks: Vec<Bytes> = origin
        .open(item)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    chunks.concat()
}

#[tokio::test]
async fn streams_the_bytes_in_chunks() {
    let fixture = Fixture::new();
    let content: Vec<u8> = (0..CHUNK_BYTES * 3 + 17).map(|i| (i % 251) as u8).collect();
    fixture.write("nested/big.bin", &content);
    fixture.write("empty.txt", b"");
    let origin = fixture.origin();
    let items = origin.list().await.unwrap();
    let big = items.iter().find(|i| i.name == "big.bin").unwrap();
    let chunks: Vec<Bytes> = origin.open(big).await.unwrap().try_collect().await.unwrap();
    assert!(chunks.len() > 1, "expected several chunks");
    assert!(chunks.iter().all(|c| c.len() <= CHUNK_BYTES));
    assert_eq!(chunks.concat(), content);
    let empty = items.iter().find(|i| i.name == "empty.txt").unwrap();
    assert!(read_all(&origin, empty).await.is_empty());

    // A file deleted since the listing is an origin error.
    fs::remove_file(fixture.docs().join("empty.txt")).unwrap();
    assert!(matches!(
        origin.open(empty).await,
        Err(SyncError::Origin(_))
    ));
}

#[tokio::test]
async fn an_unreadable_directory_fails_the_listing() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    fixture.write("locked/a.txt", b"a");
    let locked = fixture.docs().join("locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let probe = fs::read_dir(&locked);
    let result = fixture.origin().list().await;
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    // Running as root reads it anyway; then there is nothing to check.
    if probe.is_err() {
        assert!(matches!(result, Err(SyncError::Origin(_))), "{result:?}");
    }
}
