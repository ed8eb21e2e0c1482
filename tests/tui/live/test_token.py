"""The reviewer's token: stored 0600 in a 0700 folder, refused when others can read it, never shown."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from reviewer.queue.config import (
    BadQueueUrl,
    NoQueueConfigured,
    NoToken,
    Secret,
    TokenFileUnsafe,
    TokenForOtherQueue,
    load_settings,
    read_token_file,
    write_configured_queue,
    write_token_file,
)
from tests.forked_commands import run_reviewer
from tests.queue_harness import reviewer_command
from tests.tui.live.helpers import Queue, run, status, until

TOKEN = "rv-test-token-5f1c9a"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_token_file_is_created_0600_in_a_0700_folder(tmp_path: Path) -> None:
    path = write_token_file(Secret(TOKEN), tmp_path / "config" / "reviewer" / "token")
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert read_token_file(path) == Secret(TOKEN)
    assert TOKEN not in repr(Secret(TOKEN)) + str(Secret(TOKEN)) + f"{Secret(TOKEN)}"


def test_a_token_file_others_can_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = write_token_file(Secret(TOKEN), tmp_path / "reviewer" / "token")
    path.chmod(0o644)
    with pytest.raises(TokenFileUnsafe) as refused:
        read_token_file(path)
    assert f"chmod 600 {path}" in str(refused.value) and TOKEN not in str(refused.value)


def test_a_symlinked_token_file_is_refused(tmp_path: Path) -> None:
    real = write_token_file(Secret(TOKEN), tmp_path / "elsewhere" / "token")
    link = tmp_path / "reviewer" / "token"
    link.parent.mkdir()
    link.symlink_to(real)
    with pytest.raises(TokenFileUnsafe):
        read_token_file(link)


def test_settings_priorities_and_refusals(tmp_path: Path) -> None:
    config, token = tmp_path / "config.toml", tmp_path / "token"
    paths = {"config_path": config, "token_path": token}
    with pytest.raises(NoQueueConfigured):
        load_settings(None, {}, **paths)
    with pytest.raises(NoToken):
        load_settings("http://127.0.0.1:8470", {}, **paths)
    write_configured_queue("http://127.0.0.1:8470/", config)
    write_token_file(Secret(TOKEN), token)
    assert load_settings(None, {}, **paths).queue_url == "http://127.0.0.1:8470"
    with pytest.raises(TokenForOtherQueue):  # a stored token never goes to another URL
        load_settings("http://127.0.0.1:9999", {}, **paths)
    environ = {"REVIEWER_QUEUE": "https://q.example", "REVIEWER_TOKEN": "other"}
    from_env = load_settings(None, environ, **paths)
    assert (from_env.queue_url, from_env.token) == ("https://q.example", Secret("other"))
    with pytest.raises(BadQueueUrl):  # the token would cross the network in clear text
        load_settings("http://q.example:8470", {"REVIEWER_TOKEN": "x"}, **paths)
    config.write_text('# mine\ncolour = "blue"\nqueue = "http://127.0.0.1:1"\n')
    write_configured_queue("http://localhost:8470", config)
    assert config.read_text() == '# mine\ncolour = "blue"\nqueue = "http://localhost:8470"\n'


def test_login_stores_the_token_privately_and_never_prints_it(queue: Queue, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("REVIEWER_TOKEN", None)
    token = queue.tokens["alice"]
    login = run_reviewer(
        reviewer_command("login", "--queue", queue.url),
        input=token + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert login.returncode == 0, login.stderr
    assert "signed in" in login.stdout and "alice (reviewer)" in login.stdout
    assert token not in login.stdout + login.stderr
    stored = tmp_path / "xdg" / "reviewer" / "token"
    assert mode(stored) == 0o600 and mode(stored.parent) == 0o700
    assert stored.read_text().strip() == token
    assert f'queue = "{queue.url}"' in (stored.parent / "config.toml").read_text()

    wrong = run_reviewer(
        reviewer_command("login", "--queue", queue.url),
        input="not-a-token\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert wrong.returncode == 1 and "refused this token" in wrong.stderr
    assert stored.read_text().strip() == token  # a refused token replaces nothing

    stored.chmod(0o640)
    review = run_reviewer(reviewer_command("review"), capture_output=True, text=True, env=env, timeout=60)
    assert review.returncode == 2 and f"chmod 600 {stored}" in review.stderr
    assert token not in review.stdout + review.stderr


def test_the_token_is_in_no_log_line_nor_on_screen(
    queue: Queue, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    token = queue.tokens["alice"]
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        app = queue.app(poll_interval=0.1, list_wait=0.1)  # each poll held a tenth of a second
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            source = app.queue
            assert source is not None
            polled = source.polls
            await until(pilot, lambda: source.polls >= polled + 2, "another whole poll")
            assert token not in app.export_screenshot()
            assert token not in repr(app.queue.poll_client) + repr(vars(app))

    run(scenario)
    captured = capsys.readouterr()
    assert caplog.records, "expected httpx's log lines"
    assert token not in caplog.text + captured.out + captured.err
