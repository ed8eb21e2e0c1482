"""Debian's chromium driven by Playwright, with the DevTools virtual authenticator standing in for a
reviewer's phone: CTAP2, internal, resident keys, the user verified. No browser is downloaded; the
tests fail (they do not skip) where chromium is missing, as CI installs it (`.ci/run`)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from playwright.sync_api import Browser, BrowserContext, CDPSession, Page, expect, sync_playwright

from tests.queue_harness import Service
from tests.service.ports import free_port

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Device:
    """A browser page with a virtual authenticator of its own (a phone that holds passkeys)."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    authenticator_id: str
    dialogs: list[str]

    def credentials(self) -> list[dict[str, Any]]:
        answer = self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.authenticator_id})
        found: list[dict[str, Any]] = answer["credentials"]
        return found

    def add_stranger_credential(self, rp_id: str) -> None:
        """A resident passkey this queue never registered, for `rp_id`."""
        key = ec.generate_private_key(ec.SECP256R1())
        pkcs8 = key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.cdp.send(
            "WebAuthn.addCredential",
            {
                "authenticatorId": self.authenticator_id,
                "credential": {
                    "credentialId": base64.b64encode(b"stranger-credential-0001").decode(),
                    "isResidentCredential": True,
                    "rpId": rp_id,
                    "privateKey": base64.b64encode(pkcs8).decode(),
                    "userHandle": base64.b64encode(b"stranger").decode(),
                    "signCount": 1,
                },
            },
        )

    def close(self) -> None:
        self.context.close()


def device(browser: Browser, viewport: tuple[int, int] = (390, 844)) -> Device:
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    added = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return Device(context, page, cdp, added["authenticatorId"], dialogs)


def web_service(folder: Path, *serve_args: str) -> Service:
    """A queue serving pages at http://localhost:PORT (an IP address is no relying party id)."""
    port = free_port()
    running = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        port=port,
        serve_args=("--web-origin", f"http://localhost:{port}", *serve_args),
    )
    running.start()
    return running


def enrol(service: Service, token: str, phone: Device) -> str:
    """Enrol a passkey on `phone` for the token's reviewer; the one-time link it spent."""
    with service.client(token) as reviewer:
        made = reviewer.post("/v1/passkeys/links")
    assert made.status_code == 201, made.text
    link = str(made.json()["link"])
    register_on(phone, link)
    return link


def register_on(phone: Device, link: str) -> None:
    phone.page.goto(link)
    phone.page.get_by_role("button", name="Register passkey").click()
    expect(phone.page.locator("#status")).to_have_text(re.compile("^Registered"))
