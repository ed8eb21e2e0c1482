"""reviewer: an approval gate between an AI agent's dry run and its real writes."""
