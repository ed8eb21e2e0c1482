"""Where reviewer keeps its files, and the live app's settings: the queue URL and the reviewer's token.

Settings for `reviewer review`, highest priority first (and `[alerts]`, how the app tells of a newly
pending proposal: `configured_alerts`):

- the queue: `--queue URL`, then `REVIEWER_QUEUE`, then `queue = "URL"` in `config.toml` in the
  platform config dir (`reviewer login` writes it; e.g. ~/.config/reviewer/config.toml);
- the token: `REVIEWER_TOKEN`, then the file `token` next to `config.toml`, which must be mode 0600
  and is written by `reviewer login` with 0600 inside a 0700 folder. On a queue that signs reviewers
  in through the team's OpenID provider the file holds the session instead (the identity token and
  the refresh token that renews it, `reviewer.queue.sign_in.ProviderSession`), renewed in place.

A token from the file is sent only to the queue `reviewer login` checked it against (the one in
`config.toml`): pointing the app at another URL with `--queue` or `REVIEWER_QUEUE` needs a new
`reviewer login` or `REVIEWER_TOKEN`, so a typo in a URL never hands the credential to another host.
A token travels only in `Secret`, whose repr and str never show it.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import platformdirs

from reviewer.plan.hosts import is_loopback
from reviewer.private_files import private_folder, write_private
from reviewer.queue.terminal_alerts import DESKTOP_PROTOCOLS, TerminalAlerts
from reviewer.queue.trust import use_ca_file

if TYPE_CHECKING:  # httpx and the JOSE library load only for a queue that signs in through a provider
    import httpx

    from reviewer.queue.sign_in import ProviderSession
    from reviewer.signing.sshsig import Signer

APP_NAME = "reviewer"
QUEUE_ENV: Final = "REVIEWER_QUEUE"
TOKEN_ENV: Final = "REVIEWER_TOKEN"
AGENT_TOKEN_ENV: Final = "REVIEWER_AGENT_TOKEN"
"""An agent's token, which proposes; never the reviewer's `REVIEWER_TOKEN`, which decides."""
SIGNING_KEY_ENV: Final = "REVIEWER_SIGNING_KEY"
CONFIG_FILE_NAME: Final = "config.toml"
TOKEN_FILE_NAME: Final = "token"
MAX_TOKEN_FILE_BYTES: Final = 65536
"""A minted token is 47 bytes; a provider's session (two tokens, one a signed JWT) a few kilobytes."""
_QUEUE_LINE: Final = re.compile(r"^\s*queue\s*=.*$", re.MULTILINE)


def data_dir() -> Path:
    """The per-user data directory (e.g. ~/.local/share/reviewer); not created here."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_db_path() -> Path:
    """The queue service's SQLite file when `--db` is not given."""
    return data_dir() / "queue.sqlite3"


def config_dir() -> Path:
    """The per-user config directory (e.g. ~/.config/reviewer): config.toml and the token file."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def config_file() -> Path:
    return config_dir() / CONFIG_FILE_NAME


def token_file() -> Path:
    return config_dir() / TOKEN_FILE_NAME


class ConfigError(Exception):
    """A setting that is missing or unsafe; the message says what to run or change."""


class NoQueueConfigured(ConfigError):
    def __init__(self) -> None:
        super().__init__(
            f"no queue configured: run `reviewer login --queue URL`, pass `--queue URL`, or set {QUEUE_ENV}"
        )


class BadQueueUrl(ConfigError):
    pass


class BadConfigFile(ConfigError):
    pass


class NoToken(ConfigError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"no token: run `reviewer login --queue URL` (it writes {path}) or set {TOKEN_ENV}")


class NoAgentToken(ConfigError):
    def __init__(self, option: str) -> None:
        super().__init__(
            f"no agent token: set {AGENT_TOKEN_ENV} or pass {option} (mint one on the queue's host with "
            "`reviewer token create --name NAME --role agent`)"
        )


class TokenFileUnsafe(ConfigError):
    """The token file is readable or writable by others, or is not a plain file of this user."""


class TokenForOtherQueue(ConfigError):
    pass


class Secret:
    """A token that does not show itself: repr, str and format give `Secret('…')`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        value = value.strip()
        if not value or not value.isprintable() or any(character.isspace() for character in value):
            raise ConfigError("the token is empty or contains spaces or control characters; paste it again")
        self._value = value

    def reveal(self) -> str:
        """The token itself, for the one place that needs it: the Authorization header."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('…')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class Settings:
    """What `reviewer review` needs: the queue's URL and the token it sends there, and nowhere else."""

    queue_url: str
    token: Secret
    session: ProviderSession | None = None
    """Signed in through the provider: the session `token` is the identity token of."""
    session_path: Path | None = None

    def credential(self) -> str | httpx.Auth:
        """What a `QueueClient` authenticates with: the token, or the provider's session, renewed
        (and stored again) whenever the queue's session ends."""
        if self.session is None or self.session_path is None:
            return self.token.reveal()
        from reviewer.queue.sign_in import RenewingAuth

        path = self.session_path

        def stored() -> ProviderSession | None:
            try:
                credential = read_credential(path)
            except ConfigError:
                return None
            return None if credential is None or isinstance(credential, Secret) else credential

        return RenewingAuth(self.session, lambda renewed: write_session_file(renewed, path), reload=stored)


def normalize_queue_url(url: str) -> str:
    """`url` without a trailing slash, refused when a token sent there could leak.

    Plain http is allowed only to a loopback address (a local queue or an SSH tunnel); anywhere
    else the bearer token would cross the network readable, so https is required.
    """
    value = url.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadQueueUrl(f"{url!r} is not a queue URL: give one like https://queue.example:8470")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise BadQueueUrl(
            "the queue URL must not carry a user, password, query or fragment: "
            "the token file holds the credential"
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise BadQueueUrl(
            f"{value} is plain http to another host: the token would cross the network readable. "
            "Use https://, or an SSH tunnel to a loopback port (http://127.0.0.1:PORT)"
        )
    return value


def read_config(path: Path | None = None) -> dict[str, object]:
    """config.toml as a table; a missing file is an empty one."""
    path = path or config_file()
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise BadConfigFile(
            f"{path} cannot be read ({error}); fix it or run `reviewer login` again"
        ) from None


def configured_queue(path: Path | None = None) -> str | None:
    """The queue `reviewer login` stored, or None."""
    value = read_config(path).get("queue")
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadConfigFile(f'{path or config_file()}: `queue` must be a string like "https://host:8470"')
    return normalize_queue_url(value)


def read_token_file(path: Path | None = None) -> Secret | None:
    """The token in `path` (of a provider's session, its identity token), or None when there is no file."""
    credential = read_credential(path)
    if credential is None or isinstance(credential, Secret):
        return credential
    return Secret(credential.id_token)


def read_credential(path: Path | None = None) -> Secret | ProviderSession | None:
    """The token or the provider's session in `path`, or None when there is no file; refused unless
    only this user can read it.

    The file is opened without following a symlink and checked through its open descriptor, so it
    cannot be swapped between the check and the read.
    """
    path = path or token_file()
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise TokenFileUnsafe(
            f"{path} cannot be opened ({error.strerror}); it must be a plain file: "
            "remove it and run `reviewer login`"
        ) from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise TokenFileUnsafe(f"{path} is not a plain file: remove it and run `reviewer login`")
        if hasattr(os, "getuid") and status.st_uid != os.getuid():
            raise TokenFileUnsafe(f"{path} belongs to another user: remove it and run `reviewer login`")
        if status.st_mode & 0o077:
            raise TokenFileUnsafe(
                f"{path} can be read by other users (mode {stat.S_IMODE(status.st_mode):04o}); "
                f"run `chmod 600 {path}` (and consider the token exposed: have it revoked and log in again)"
            )
        raw = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise TokenFileUnsafe(f"{path} is too large to be a token: run `reviewer login` again")
    if raw.startswith(b"{"):
        from reviewer.queue.sign_in import ProviderSession

        try:
            return ProviderSession.from_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, TypeError):
            raise TokenFileUnsafe(f"{path} does not hold a sign-in: run `reviewer login` again") from None
    try:
        return Secret(raw.decode("utf-8"))
    except (UnicodeDecodeError, ConfigError):
        raise TokenFileUnsafe(f"{path} does not hold a token: run `reviewer login` again") from None


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, 0600, in a folder only its owner may enter (the config
    folder, which holds the token: tightened to 0700 if it was wider)."""
    private_folder(path.parent, tighten=True)
    write_private(path, data)


def write_token_file(token: Secret, path: Path | None = None) -> Path:
    path = path or token_file()
    _write_private(path, token.reveal().encode() + b"\n")
    return path


def write_session_file(session: ProviderSession, path: Path | None = None) -> Path:
    path = path or token_file()
    _write_private(path, session.to_json() + b"\n")
    return path


def write_configured_queue(url: str, path: Path | None = None) -> Path:
    """Set `queue = "URL"` in config.toml, keeping any other line the user wrote."""
    path = path or config_file()
    line = f"queue = {_toml_string(normalize_queue_url(url))}"
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if _QUEUE_LINE.search(current):
        updated = _QUEUE_LINE.sub(lambda _: line, current, count=1)
    else:
        updated = f"{line}\n{current}"
    tomllib.loads(updated)  # refuse to write a file the next start could not read
    _write_private(path, updated.encode("utf-8"))
    return path


def store_sign_in(credential: Secret | ProviderSession, queue_url: str) -> str | None:
    """What `reviewer login` keeps once the queue accepted the credential: the token or the session
    in the token file, the queue's URL in config.toml. None once stored, else why not."""
    try:
        if isinstance(credential, Secret):
            write_token_file(credential, token_file())
        else:
            write_session_file(credential, token_file())
        write_configured_queue(queue_url, config_file())
    except (OSError, ConfigError) as error:
        return f"could not store the settings: {error}"
    return None


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes with ensure_ascii are a subset of TOML's."""
    return json.dumps(value, ensure_ascii=True)


def load_settings(
    queue: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    config_path: Path | None = None,
    token_path: Path | None = None,
) -> Settings:
    """The queue and token for the live app, by the priorities of this module's docstring."""
    environ = os.environ if environ is None else environ
    stored_queue = configured_queue(config_path)
    chosen = queue or environ.get(QUEUE_ENV) or stored_queue
    if not chosen:
        raise NoQueueConfigured()
    queue_url = normalize_queue_url(chosen)
    if environ.get(TOKEN_ENV):
        return Settings(queue_url, Secret(environ[TOKEN_ENV]))
    token_path = token_path or token_file()
    credential = read_credential(token_path)
    if credential is None:
        raise NoToken(token_path)
    if queue_url != stored_queue:
        raise TokenForOtherQueue(
            f"the stored token was checked against {stored_queue or 'no queue'}, not {queue_url}: "
            f"run `reviewer login --queue {queue_url}`, or set {TOKEN_ENV} for this queue"
        )
    if isinstance(credential, Secret):
        return Settings(queue_url, credential)
    return Settings(queue_url, Secret(credential.id_token), credential, token_path)


def reviewer_settings(queue: str | None, ca_file: Path | None) -> Settings:
    """The settings of a command that reads the queue under the reviewer's credential, from its
    `--queue` and `--ca-file` (which every queue client this process opens then trusts)."""
    use_ca_file(ca_file)
    return load_settings(queue)


def agent_token(
    token_file: Path | None, option: str = "--token-file", environ: Mapping[str, str] | None = None
) -> Secret:
    """The agent token of a command that proposes (`submit`, `walkthrough --queue`): the file
    `option` names, else `REVIEWER_AGENT_TOKEN`."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as error:
            raise ConfigError(f"cannot read the token file {token_file}: {error.strerror}") from None
        if not token:
            raise ConfigError(f"the token file {token_file} is empty")
        return Secret(token)
    environ = os.environ if environ is None else environ
    token = environ.get(AGENT_TOKEN_ENV, "").strip()
    if not token:
        raise NoAgentToken(option)
    return Secret(token)


def configured_signing_key(
    option: Path | None = None, environ: Mapping[str, str] | None = None, config_path: Path | None = None
) -> Path | None:
    """The SSH key that signs decisions: `--key`, then `REVIEWER_SIGNING_KEY`, then `signing_key` in
    config.toml; None when none is set (decisions then go unsigned). A `.pub` file signs through the
    ssh-agent, a private key file by itself (see `reviewer.signing.sshsig.signer_for`)."""
    if option is not None:
        return option.expanduser()
    environ = os.environ if environ is None else environ
    if environ.get(SIGNING_KEY_ENV):
        return Path(environ[SIGNING_KEY_ENV]).expanduser()
    value = read_config(config_path).get("signing_key")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadConfigFile(
            f'{config_path or config_file()}: `signing_key` must be a path like "~/.ssh/id_ed25519.pub"'
        )
    return Path(value).expanduser()


def configured_signer(option: Path | None = None) -> Signer | None:
    """What signs decisions: the signer of `configured_signing_key`, or None when no key is set
    (decisions then go unsigned). A key that cannot sign raises `SigningError`."""
    key_path = configured_signing_key(option)
    if key_path is None:
        return None
    from reviewer.signing.sshsig import signer_for

    return signer_for(key_path)


def configured_alerts(path: Path | None = None) -> TerminalAlerts:
    """`[alerts]` of config.toml, e.g. `bell = false`; absent keys keep their default (on)."""
    table = read_config(path).get("alerts", {})
    where = path or config_file()
    if not isinstance(table, dict):
        raise BadConfigFile(f"{where}: `alerts` must be a table, like [alerts] bell = false")
    unknown = sorted(set(table) - {"bell", "title", "desktop"})
    if unknown:
        raise BadConfigFile(f"{where}: [alerts] has no setting {unknown[0]!r}; it takes bell, title, desktop")
    for name in ("bell", "title"):
        if not isinstance(table.get(name, True), bool):
            raise BadConfigFile(f"{where}: [alerts] {name} must be true or false")
    desktop = table.get("desktop", True)
    if not isinstance(desktop, bool) and desktop not in DESKTOP_PROTOCOLS:
        raise BadConfigFile(f'{where}: [alerts] desktop must be true, false, "osc9" or "osc777"')
    return TerminalAlerts(bell=table.get("bell", True), title=table.get("title", True), desktop=desktop)
