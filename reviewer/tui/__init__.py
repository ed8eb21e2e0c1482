"""The terminal app: the only part of reviewer that imports Textual."""
