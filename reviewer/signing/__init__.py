"""Signed decisions: the statement and OpenSSH SSHSIG (`sshsig`), allowed signers (`allowed_signers`),
the executor's check of an approval (`signed_approvals`) and the options that set it up (`options`).

The policy that asks for signatures lives in `reviewer.policy`; this package only signs and checks."""
