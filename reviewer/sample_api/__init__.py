"""The reference scenario's sample ticket API, and the walkthrough that runs it in every dry-run mode."""
