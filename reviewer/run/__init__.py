"""`reviewer run -- COMMAND`: gate an agent written in any language at the HTTP boundary.

COMMAND talks to a loopback gate (`REVIEWER_API_URL`) that holds the API's credential: reads pass
through, writes become a plan that a reviewer approves before the agent library's executor runs it.
"""
