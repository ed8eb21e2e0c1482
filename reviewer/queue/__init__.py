"""The queue's client side: the wire messages (`messages`), the asynchronous HTTP client of the app and
the agents (`client`), the shell's synchronous one (`shell_client`) reading its answers as views
(`answers`), the errors both raise (`refusals`), the reviewer's config (`config`), signing in
(`sign_in`, `provider_login`) with a bearer token kept renewed (`bearer`), the ids a person types
(`ids`), deciding (`deciding`), the shell's commands (`commands`: `list`, `show`, `approve`, `reject`,
`request-changes`) with their summary (`overview`), and putting proposal files on a queue
(`submitting`). The trail's commands and an executor's memory of it are `reviewer.trail`'s."""
