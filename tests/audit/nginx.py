"""Debian's nginx, started on a loopback port in front of a backend, writing the access log of
docs/audit-logs.md."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.service.ports import free_port

NGINX = shutil.which("nginx") or next((path for path in ("/usr/sbin/nginx",) if Path(path).exists()), None)
LOG_FORMAT = (
    """log_format reviewer escape=json '{"time":"$time_iso8601","method":"$request_method","""
    """"uri":"$request_uri","status":$status,"request_id":"$http_x_request_id"}';"""
)
"""The nginx format of docs/audit-logs.md, as written there."""
LOG_FORMAT_WITHOUT_IDS = LOG_FORMAT.replace(',"request_id":"$http_x_request_id"', "")
"""The same format, keeping no request id: a log only method, path, query and time can be matched in."""
STARTUP_SECONDS = 15.0


@dataclass(frozen=True)
class Proxy:
    url: str
    access_log: Path


def config(port: int, backend: str, folder: Path, log_format: str = LOG_FORMAT) -> str:
    temp = folder / "temp"
    return f"""
daemon off;
master_process off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
    {log_format}
    access_log {folder}/access.log reviewer;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass {backend};
            add_header Request-Id $request_id always;
        }}
    }}
}}
"""


@contextmanager
def nginx_in_front_of(backend: str, folder: Path, log_format: str = LOG_FORMAT) -> Iterator[Proxy]:
    """nginx proxying to `backend` until the block ends; skips, saying so, where nginx is missing."""
    if NGINX is None:
        pytest.skip("nginx is not installed (Debian's package `nginx`; .ci/run installs it)")
    (folder / "temp").mkdir(parents=True, exist_ok=True)
    port = free_port()
    (folder / "nginx.conf").write_text(config(port, backend, folder, log_format), encoding="utf-8")
    process = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"nginx exited: {process.stderr.read().decode() if process.stderr else ''}"
                )
            try:
                httpx.get(f"{url}/v1/stats", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield Proxy(url, folder / "access.log")
    finally:
        process.terminate()
        process.wait(timeout=10)
