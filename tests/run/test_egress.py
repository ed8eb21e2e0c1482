"""`reviewer run --allow-net HOST:PORT`: COMMAND's network holds the gate and a CONNECT proxy that
tunnels to the named HOST:PORTs only. A real TCP echo server on loopback stands for the model's API
(the proxy sees host and port only: what goes through the tunnel, TLS or not, is the two ends')."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import socketserver
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from reviewer.sandbox.egress import (
    MAX_CONNECTIONS,
    Allowed,
    EgressProxy,
    address_refused,
    parse_host_port,
    serving_egress,
)
from tests.run.harness import ROOT, Queue, SampleApi, start_run
from tests.run.other_users import require_other_users
from tests.service.ports import free_port
from tests.serving import serving_in_thread


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            self.wfile.write(b"echo: " + line)


@pytest.fixture(scope="module")
def echo() -> Iterator[int]:
    """A TCP echo server on loopback: each line comes back after `echo: `."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", free_port()), _Echo)
    server.daemon_threads = True
    with serving_in_thread(server):
        yield server.server_address[1]


def test_allow_net_reads_host_port_as_the_executor_reads_a_host() -> None:
    assert parse_host_port("API.OpenAI.com.:443") == Allowed("api.openai.com", 443)
    assert parse_host_port("Bücher.example:8443") == Allowed("xn--bcher-kva.example", 8443)
    assert str(parse_host_port("[::1]:8080")) == "[::1]:8080"
    assert parse_host_port("127.0.0.1:11434").literal is not None
    for bad in (
        "api.openai.com",
        "api.openai.com:0",
        "api.openai.com:https",
        "a b.example:443",
        ":443",
        "[x]:1",
    ):
        with pytest.raises(ValueError, match="--allow-net"):
            parse_host_port(bad)
    # An IPv4 address written another way is named for what resolvers make of it, at the start.
    for loose in ("0177.0.0.1", "0x7f.0.0.1", "127.1", "2130706433"):
        with pytest.raises(
            ValueError,
            match=r"is the IPv4 address 127\.0\.0\.1 written another way .* write 127\.0\.0\.1:8443",
        ):
            parse_host_port(f"{loose}:8443")
    assert parse_host_port("api7.example:443") == Allowed("api7.example", 443), "a name with digits is a name"


@asynccontextmanager
async def proxy_served(proxy: EgressProxy) -> AsyncIterator[int]:
    """`proxy` served as `reviewer run` serves it, on a listener bound elsewhere (here, on this
    machine's loopback); yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    async with serving_egress(proxy, listener):
        yield listener.getsockname()[1]


def test_the_proxy_holds_64_connections_and_answers_503_beyond() -> None:
    async def scenario() -> tuple[str, str]:
        async with proxy_served(EgressProxy([])) as port:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(MAX_CONNECTIONS)]
            for _, writer in held:  # each has begun its request, and the proxy has taken it
                writer.write(b"CONNECT ")
                await writer.drain()
            answer = await _exchange(port, b"CONNECT api.example:443 HTTP/1.1\r\n\r\n")
            for _, writer in held:
                writer.close()
            return answer

    status, body = asyncio.run(scenario())
    assert status == "HTTP/1.1 503 Service Unavailable" and f"holds {MAX_CONNECTIONS} connections" in body


def test_a_silent_request_and_an_idle_tunnel_are_ended(echo: int) -> None:
    """With short timeouts given: a connection that never sends its request, and a tunnel nothing moves
    through after its first line, are closed by the proxy (the client reads their end)."""

    async def scenario() -> tuple[bytes, bytes, bytes]:
        proxy = EgressProxy([Allowed("127.0.0.1", echo)], head_timeout=0.2, idle_timeout=0.2)
        async with proxy_served(proxy) as port:
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            silent = await silent_reader.read()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\nfirst\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            first = await reader.readline()
            rest = await reader.read()  # nothing more is sent: the proxy ends the tunnel
            for end in (silent_writer, writer):
                end.close()
            assert head.startswith(b"HTTP/1.1 200 ")
            return silent, first, rest

    assert asyncio.run(scenario()) == (b"", b"echo: first\n", b"")


def test_a_name_reaches_public_addresses_only_unless_named_as_local() -> None:
    public, loopback = ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("127.0.0.1")
    named = Allowed("api.example", 443)
    assert address_refused(named, public) is None
    for local in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:127.0.0.1", "fd00::1"):
        assert "not a public address" in str(address_refused(named, ipaddress.ip_address(local)))
    assert address_refused(Allowed("localhost", 8080), loopback) is None
    assert address_refused(Allowed("localhost", 8080), public) is not None
    assert address_refused(Allowed("127.0.0.1", 8080), loopback) is None


async def _exchange(port: int, request: bytes, then: bytes = b"") -> tuple[str, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    if " 200 " in head and then:
        writer.write(then)
        body = await reader.readline()
    else:
        body = await reader.read()
    writer.close()
    return head.split("\r\n")[0], body.decode("latin-1")


def test_the_proxy_tunnels_to_named_hosts_only_and_says_why_it_refuses(echo: int) -> None:
    """The proxy as `reviewer run` serves it outside the sandbox, on a listener it was handed; `api.example`'s
    DNS answers a loopback address (a resolver given by the test), as a rebinding attacker's would."""
    other = free_port()

    async def loopback_dns(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    async def scenario() -> list[tuple[str, str]]:
        proxy = EgressProxy([Allowed("127.0.0.1", echo), Allowed("api.example", echo)], loopback_dns)
        async with proxy_served(proxy) as port:
            return [
                await _exchange(port, f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\n".encode(), b"ping\n"),
                await _exchange(port, f"CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n".encode()),
                await _exchange(port, f"CONNECT API.Example.:{echo} HTTP/1.1\r\n\r\n".encode()),
                await _exchange(port, f"CONNECT localhost:{echo} HTTP/1.1\r\n\r\n".encode()),
                await _exchange(port, f"GET http://127.0.0.1:{echo}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()),
                await _exchange(port, b"CONNECT \x1b[31mevil:1 HTTP/1.1\r\n\r\n"),
            ]

    tunnel, other_port, rebound, localhost, plain, hostile = asyncio.run(scenario())
    assert tunnel == ("HTTP/1.1 200 Connection Established", "echo: ping\n")
    assert other_port[0] == "HTTP/1.1 403 Forbidden"
    assert f"127.0.0.1:{other} is not a host reviewer run was told to allow" in other_port[1]
    assert rebound[0] == "HTTP/1.1 403 Forbidden"
    assert "api.example resolves to 127.0.0.1, which is not a public address" in rebound[1]
    assert localhost[0] == "HTTP/1.1 403 Forbidden" and "not a host" in localhost[1]
    assert plain[0] == "HTTP/1.1 403 Forbidden" and "plain HTTP is not" in plain[1]
    assert hostile[0] == "HTTP/1.1 400 Bad Request" and "\x1b" not in hostile[1]


@pytest.fixture(scope="module")
def sandboxed(
    queue: Queue, _sample_api_process: SampleApi, echo: int, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], str]:
    """One run, `--allow-net 127.0.0.1:ECHO`: what its child found, and the run's stderr."""
    require_other_users()
    folder = tmp_path_factory.mktemp("egress")
    queue_port = int(queue.url.rsplit(":", 1)[1].split("/")[0])
    spec = json.dumps(
        {
            "report": str(folder / "found.json"),
            "proxy": 8480,
            "allowed": echo,
            "refused": [queue_port, free_port()],
        }
    )
    gate, curl_proxied, curl_direct = folder / "gate", folder / "curl-proxied", folder / "curl-direct"
    named_api = f"{_sample_api_process.url}/v1/stats"  # a loopback service named by its address
    script = (
        f'printf "url = \\"%s/v1/tickets\\"\\n" "$REVIEWER_API_URL"'
        f' | curl -sS -K - -o /dev/null -w "%{{http_code}}" > {gate};'
        f" curl -s --noproxy '' -p -o /dev/null -w '%{{http_code}}' {named_api} > {curl_proxied};"
        f" curl -s -o /dev/null -w '%{{http_code}}' {named_api} > {curl_direct};"
        f" {sys.executable} {ROOT / 'tests/run/egress_probe.py'} '{spec}'"
    )
    run = start_run(
        queue,
        _sample_api_process,
        "--allow-net",
        f"127.0.0.1:{echo}",
        "--allow-net",
        _sample_api_process.url.removeprefix("http://"),
        writable=folder,
        command=["sh", "-c", script],
    )
    status, stderr = run.finish()
    assert status == 0 and "COMMAND made no write" in stderr, stderr
    found = json.loads((folder / "found.json").read_text())
    found["gate"] = gate.read_text()
    found["curl"] = {"proxied": curl_proxied.read_text(), "direct": curl_direct.read_text()}
    return found, stderr


def test_the_child_reaches_a_named_host_through_the_proxy_and_its_start_line_names_it(
    sandboxed: tuple[dict[str, Any], str], echo: int, _sample_api_process: SampleApi
) -> None:
    found, stderr = sandboxed
    named = sorted([("127.0.0.1", echo), ("127.0.0.1", int(_sample_api_process.url.rsplit(":", 1)[1]))])
    hosts = ", ".join(f"{host}:{port}" for host, port in named)
    assert f"through a proxy (HTTPS_PROXY), {hosts};" in stderr.splitlines()[0]
    assert found["allowed"] == {
        "status": "HTTP/1.1 200 Connection Established",
        "body": "echo: ping through\n",
    }
    # The gate is still reached directly: curl, told of the proxy, leaves 127.0.0.1 out of it.
    assert found["gate"] == "200"
    # A named loopback service, as the docs say: curl told to ignore NO_PROXY tunnels to it through
    # the proxy (HTTP_PROXY from the environment); a plain curl goes direct and finds nothing there.
    assert found["curl"] == {"proxied": "200", "direct": "000"}


def test_the_child_is_refused_the_queue_another_port_and_plain_http(
    sandboxed: tuple[dict[str, Any], str],
) -> None:
    found, _ = sandboxed
    for refused in found["refused"]:
        assert refused["status"] == "HTTP/1.1 403 Forbidden"
        assert "is not a host reviewer run was told to allow (--allow-net)" in refused["body"]
    assert found["plain"]["status"] == "HTTP/1.1 403 Forbidden"


def test_without_the_proxy_the_child_reaches_nothing(sandboxed: tuple[dict[str, Any], str]) -> None:
    """Its loopback is its own: the echo server, the queue and the other port are not there at all."""
    found, _ = sandboxed
    assert found["direct"] == ["ConnectionRefusedError"] * 3


def test_a_child_whose_client_ignores_the_proxy_is_told_what_its_network_holds(
    queue: Queue, _sample_api_process: SampleApi, echo: int
) -> None:
    """curl told to ignore the proxy finds nothing; its own error is all it sees, and the run's line
    names what the network holds, the allowed host through the proxy."""
    direct = f"curl --noproxy '*' -sS -m 5 http://127.0.0.1:{echo}/; exit 7"
    run = start_run(
        queue, _sample_api_process, "--allow-net", f"127.0.0.1:{echo}", command=["sh", "-c", direct]
    )
    status, stderr = run.finish()
    assert status == 1 and "Failed to connect to 127.0.0.1" in stderr, stderr
    assert (
        "COMMAND exited with status 7 in the dry run (its network holds the gate and, through the proxy in "
        f"HTTPS_PROXY, 127.0.0.1:{echo}: a connection elsewhere, or by a client that ignores the proxy "
        "variables, finds no route and no name); nothing was submitted"
    ) in stderr


def test_the_childs_environment_sends_its_clients_through_the_proxy(
    sandboxed: tuple[dict[str, Any], str],
) -> None:
    found, _ = sandboxed
    environment = found["environment"]
    assert {environment[name] for name in environment if name != "NO_PROXY"} == {"http://127.0.0.1:8480"}
    assert environment["NO_PROXY"] == "127.0.0.1,localhost"


def test_allow_net_is_refused_with_share_network_or_a_host_without_a_port() -> None:
    for options, said in (
        (["--allow-net", "api.openai.com:443", "--share-network"], "choose one"),
        (["--allow-net", "api.openai.com:443", "--no-sandbox"], "no network of its own"),
        (["--allow-net", "api.openai.com"], "is not HOST:PORT"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "reviewer", "run", "--api", "http://127.0.0.1:9", *options, "--", "true"],
            capture_output=True,
            text=True,
            env={"REVIEWER_AGENT_TOKEN": "not-looked-at", "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
