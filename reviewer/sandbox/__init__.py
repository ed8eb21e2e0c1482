"""Where an agent's own code runs so that it holds nothing it was not handed: `reviewer run`'s COMMAND
and `reviewer mcp-gate`'s upstream server, started in one sandbox (`modes`): a root made of what
they need, no Unix socket (`syscall_filter`), a network of their own whose one way out is a proxy to
the hosts the operator names (`egress`), and an environment without the reviewer's secrets
(`environment`)."""
