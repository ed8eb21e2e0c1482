"""Reading the audit logs real APIs keep, in their own formats, as one kind of row (docs/audit-logs.md)."""
