#!/bin/sh
# The reference task with curl: open one ticket, close t1 and t2 into it, delete t3.
#
#   reviewer run --api http://127.0.0.1:8480 -- sh examples/curl_agent.sh
#
# REVIEWER_API_URL is the gate `reviewer run` opens for this script, which holds no credential. The URL
# goes to curl in a config on its standard input (`-K -`), never as an argument: a command line is
# readable by every user of the machine (/proc/PID/cmdline), and where COMMAND shares the machine's
# network (--no-sandbox) the URL holds the gate's secret.
set -eu
api="${REVIEWER_API_URL:?run me under reviewer run}"

send() {  # METHOD PATH [JSON]: print the answer's body, then its status on a line of its own
    # printf is the shell's own: no process shows the URL.
    if [ $# -ge 3 ]; then
        printf 'url = "%s%s"\ndata = "%s"\n' "$api" "$2" "$(printf '%s' "$3" | sed 's/[\\"]/\\&/g')" |
            curl -sS -K - -X "$1" -H 'content-type: application/json' -w '\n%{http_code}\n'
    else
        printf 'url = "%s%s"\n' "$api" "$2" | curl -sS -K - -X "$1" -w '\n%{http_code}\n'
    fi
}

send GET /v1/tickets
created=$(send POST /v1/tickets '{"title": "Printer on fire"}')
echo "$created"
# The new ticket's id: in the dry run the placeholder "<id from call 1>", in a real run the real id.
id=$(printf '%s' "$created" | head -n 1 | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
for ticket in t1 t2; do
    send PATCH "/v1/tickets/$ticket" "{\"status\": \"closed\", \"mergedInto\": \"$id\"}"
done
send DELETE /v1/tickets/t3
