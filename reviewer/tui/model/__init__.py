"""The terminal app's data model, free of Textual: where proposals come from, the folder or the queue."""
