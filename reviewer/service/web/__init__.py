"""The review page and passkey enrolment (`serve --web-origin`): server-rendered pages, one script, a
strict CSP, and WebAuthn ceremonies whose every decision is bound by the reviewer's passkey."""
