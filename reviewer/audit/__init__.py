"""Reading the audit logs real APIs keep, in their own formats, as one kind of row (docs/design.md, "Verifying
against audit logs")."""
