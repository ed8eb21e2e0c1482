"""Reading a plan: the analysis the review screen shows, drift between revisions, a real run verified."""
