//! `quire admin set-password` and the `QUIRE_ADMIN_PASSWORD` first-start setting: the admin
//! web interface's one password. Like `keys`, the command only opens the database, so it works
//! while `quire serve` runs; setting a password signs every admin session out and is recorded
//! in the audit log.

use std::io::BufRead;

use anyhow::{Context, bail};
use quire_admin::PasswordError;
use quire_app::{Actor, Ledger};
use quire_core::Secret;

/// The environment variable read at start when no password is stored yet.
pub const PASSWORD_ENV: &str = "QUIRE_ADMIN_PASSWORD";

/// Reads one line from `input` (without its line ending) as the new password and stores its
/// hash. Returns what to print.
pub async fn set_password(ledger: &Ledger, input: impl BufRead) -> anyhow::Result<String> {
    let password = read_password(input)?;
    match quire_admin::password::set(
        ledger,
        &Actor::Operator,
        password,
        "set from the command line",
    )
    .await
    {
        Ok(()) => Ok("admin password set; every admin session was signed out".into()),
        Err(PasswordError::TooShort(n)) => bail!(
            "the password must be at least {} characters long (it has {n}); nothing was changed",
            quire_admin::MIN_PASSWORD_CHARS
        ),
        Err(e) => Err(anyhow::Error::new(e).context("could not set the admin password")),
    }
}

fn read_password(mut input: impl BufRead) -> anyhow::Result<Secret<String>> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .context("could not read the password from standard input")?;
    let trimmed = line
        .strip_suffix('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .unwrap_or(&line);
    Ok(Secret::new(trimmed.to_owned()))
}

/// At start: stores `QUIRE_ADMIN_PASSWORD` when it is set and no password is stored yet. A
/// password that is too short stops the start, so the operator notices.
pub async fn password_from_env(ledger: &Ledger) -> anyhow::Result<()> {
    let Some(value) = std::env::var_os(PASSWORD_ENV) else {
        return Ok(());
    };
    let value = value
        .into_string()
        .map_err(|_| anyhow::anyhow!("{PASSWORD_ENV} is not valid UTF-8"))?;
    match quire_admin::password::set_initial(ledger, Secret::new(value)).await {
        Ok(true) => tracing::info!("the admin password was set from {PASSWORD_ENV}"),
        Ok(false) => tracing::info!(
            "{PASSWORD_ENV} is ignored: an admin password is already set (change it with `quire admin set-password`)"
        ),
        Err(PasswordError::TooShort(n)) => bail!(
            "{PASSWORD_ENV} must be at least {} characters long (it has {n})",
            quire_admin::MIN_PASSWORD_CHARS
        ),
        Err(e) => {
            return Err(anyhow::Error::new(e).context("could not set the admin password"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_line_without_its_ending() {
        let read = |s: &str| read_password(s.as_bytes()).unwrap().expose().clone();
        assert_eq!(read("pass word 123\r\nmore"), "pass word 123");
        assert_eq!(read("  spaces kept  \n"), "  spaces kept  ");
        assert_eq!(read("no newline"), "no newline");
    }
}
