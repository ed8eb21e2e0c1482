"""The trail as a log anyone can check: RFC 9162 Merkle hashing and proofs (`merkle`), signed
checkpoints (`checkpoint`), what each event is as a leaf and as an export line (`entries`), the
offline verifier (`verify`), and the export in OCSF's API Activity shape (`ocsf`). What an executor
remembers of a queue's log is `reviewer.queue.trail_memory`.

Pure and small on purpose, as sigsum's and Rekor's verifiers are: it imports nothing of the
service, so what checks the queue does not share the queue's code paths beyond the format.
"""
