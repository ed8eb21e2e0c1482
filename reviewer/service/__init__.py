"""The queue service: the FastAPI application (`app`) and its routes (`routes`), the store on SQLite or
PostgreSQL (`store`), who a caller is (`auth`, `oidc`), the rules of deciding (`rules`), notifications
(`notifications`), the signed-decision and signed-log checks (`signed_decisions`, `signed_memory`), and
the operator's commands (`commands`: `serve`, `token`, `keys`, `notify`, `db`)."""
