"""The trail as a log anyone can check: RFC 9162 Merkle hashing and proofs (`merkle`), signed
checkpoints (`checkpoint`), what each event is as a leaf and as an export line (`entries`), the
offline verifier (`verify`), the export in OCSF's API Activity shape (`ocsf`); what an executor
remembers of each queue's log (`memory`), and `reviewer trail checkpoint|export|verify` (`commands`).

The log's format and its checks are pure and small on purpose, as sigsum's and Rekor's verifiers
are: they import nothing of the service, so what checks the queue shares none of the queue's code
paths beyond the format. The memory and the commands reach the queue through its client alone.
"""
