"""The plan format and what every part shares about a plan.

The proposal and its digest, the fields a queue reads of it (and what an agent leaves out for a
queue that reads fewer), the placeholder grammar, the dry-run parameter names, how a real call
is matched with a plan call, and the sanitizer every string of a plan passes on its way to a screen.
"""
