"""A minimal ssh-agent client (draft-miller-ssh-agent): list the agent's keys and ask it to sign.

Spoken directly over `SSH_AUTH_SOCK`, so a key forwarded with `ssh -A` signs from the reviewer's
laptop and no private key, temporary file or child process is ever involved on the host; and the
two failures a reviewer meets (no agent, the key is not in it) are told apart before anything is sent.
"""

from __future__ import annotations

import os
import socket
from typing import Final

from reviewer.signing._ssh_wire import WireError, WireReader, encode_string, encode_uint32

SSH_AGENT_FAILURE: Final = 5
SSH2_AGENTC_REQUEST_IDENTITIES: Final = 11
SSH2_AGENT_IDENTITIES_ANSWER: Final = 12
SSH2_AGENTC_SIGN_REQUEST: Final = 13
SSH2_AGENT_SIGN_RESPONSE: Final = 14
SSH_AGENT_RSA_SHA2_256: Final = 2
SSH_AGENT_RSA_SHA2_512: Final = 4
"""For an RSA key, ask for rsa-sha2-512, as `ssh-keygen -Y sign` does: SSHSIG refuses SHA-1 `ssh-rsa`."""

_MAX_MESSAGE: Final = 256 * 1024
_TIMEOUT_SECONDS: Final = 30.0
"""Long enough for an agent that asks its user to confirm (`ssh-add -c`), short enough not to hang."""


class AgentError(Exception):
    """The agent could not be reached or would not sign; the message is one line that says what to do."""


class NoAgent(AgentError):
    pass


class KeyNotInAgent(AgentError):
    pass


def agent_socket_path(environ: dict[str, str] | None = None) -> str:
    """The agent's socket from `SSH_AUTH_SOCK`, or `NoAgent` saying how to get one."""
    path = (os.environ if environ is None else environ).get("SSH_AUTH_SOCK", "")
    if not path:
        raise NoAgent(
            "no ssh-agent: SSH_AUTH_SOCK is not set (start one with `eval $(ssh-agent)` and `ssh-add`, "
            "or connect with `ssh -A`)"
        )
    return path


class AgentConnection:
    """One connection to the agent; use as a context manager."""

    def __init__(self, socket_path: str) -> None:
        self._path = socket_path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.settimeout(_TIMEOUT_SECONDS)
        try:
            self._socket.connect(socket_path)
        except OSError as error:
            self._socket.close()
            raise NoAgent(
                f"no ssh-agent answers at SSH_AUTH_SOCK ({error.strerror or error}): "
                "start one with `eval $(ssh-agent)`, or reconnect with `ssh -A`"
            ) from error

    def __enter__(self) -> AgentConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._socket.close()

    def _exchange(self, message_type: int, payload: bytes) -> tuple[int, WireReader]:
        body = bytes([message_type]) + payload
        try:
            self._socket.sendall(encode_uint32(len(body)) + body)
            length = int.from_bytes(self._receive(4), "big")
            if not 0 < length <= _MAX_MESSAGE:
                raise AgentError(f"the ssh-agent sent a message of {length} bytes; it is not an ssh-agent")
            answer = self._receive(length)
        except OSError as error:
            raise AgentError(f"the ssh-agent connection failed: {error.strerror or error}") from error
        return answer[0], WireReader(answer[1:], "the ssh-agent's answer")

    def _receive(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self._socket.recv(count - len(chunks))
            if not chunk:
                raise AgentError("the ssh-agent closed the connection before answering")
            chunks += chunk
        return bytes(chunks)

    def identities(self) -> list[tuple[bytes, str]]:
        """The agent's public keys as (wire blob, comment)."""
        kind, reader = self._exchange(SSH2_AGENTC_REQUEST_IDENTITIES, b"")
        if kind != SSH2_AGENT_IDENTITIES_ANSWER:
            raise AgentError(f"the ssh-agent refused to list its keys (answer {kind})")
        try:
            count = reader.uint32()
            keys = [(reader.string(), reader.text()) for _ in range(count)]
        except WireError as error:
            raise AgentError(str(error)) from error
        return keys

    def sign(self, key_blob: bytes, data: bytes, flags: int = 0) -> bytes:
        """The agent's signature blob (`string format, string signature`) over `data`."""
        payload = encode_string(key_blob) + encode_string(data) + encode_uint32(flags)
        kind, reader = self._exchange(SSH2_AGENTC_SIGN_REQUEST, payload)
        if kind == SSH_AGENT_FAILURE:
            raise AgentError(
                "the ssh-agent refused to sign (a confirmation declined, or a hardware key not touched)"
            )
        if kind != SSH2_AGENT_SIGN_RESPONSE:
            raise AgentError(f"the ssh-agent answered a signing request with message {kind}")
        try:
            return reader.string()
        except WireError as error:
            raise AgentError(str(error)) from error
