"""Signed decisions: the statement, OpenSSH SSHSIG, allowed signers, the executor's check and the policy."""
