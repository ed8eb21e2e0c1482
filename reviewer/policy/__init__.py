"""The queue's policy: environments decided by where a plan runs, rules in CEL on what it does, quorums."""
