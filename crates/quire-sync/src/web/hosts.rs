//! Politeness across sources: every web source a node runs sends a host one request at a
//! time, so two sources of one site (or two runs) never double the load on it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use quire_netguard::Url;
use tokio::sync::{Mutex as Turn, OwnedMutexGuard};

/// One turn per host and port; an entry nobody holds or waits for is dropped at the next call.
static TURNS: LazyLock<Mutex<HashMap<String, Arc<Turn<()>>>>> = LazyLock::new(Default::default);

/// Waits for `url`'s host to be free and holds it until the guard is dropped.
pub(super) async fn turn(url: &Url) -> OwnedMutexGuard<()> {
    let host = format!(
        "{}:{}",
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    );
    let turn = {
        // Each entry is replaced whole under the lock: a panic elsewhere cannot leave it torn.
        let mut turns = TURNS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        turns.retain(|_, turn| Arc::strong_count(turn) > 1);
        Arc::clone(turns.entry(host).or_default())
    };
    turn.lock_owned().await
}
