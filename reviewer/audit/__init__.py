"""Reading the audit logs real APIs keep, in their own formats, as one kind of row (`rows`,
docs/audit-logs.md), one reader per kind, a real call matched with its audit line (`matching`), the
checks a run makes with them (`checks`) and `reviewer verify` (`commands`)."""
