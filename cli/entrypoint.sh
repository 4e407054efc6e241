#!/bin/sh
# singulacomp-entrypoint: PID 1 of the sandbox image (and the LOCAL provider's entry). Starts the
# daemon (its arguments, default `singulacomp-agent`), forwards TERM/INT/HUP/QUIT/USR1/USR2 to it,
# reaps every orphan re-parented to it (the shell's wait reaps any child, not only the daemon), and
# exits with the daemon's exit status once the daemon is gone.
set -u
if [ "$#" -eq 0 ]; then set -- singulacomp-agent; fi
"$@" &
daemon=$!
for sig in TERM INT HUP QUIT USR1 USR2; do
  # shellcheck disable=SC2064 # the signal name is bound now, on purpose
  trap "kill -s $sig $daemon 2>/dev/null" "$sig"
done
while :; do
  wait "$daemon"
  status=$?
  # wait also returns when a trapped signal arrived: keep going while the daemon lives.
  kill -0 "$daemon" 2>/dev/null || break
done
# The daemon's own status (a signal can interrupt the wait that would have returned it).
wait "$daemon" 2>/dev/null
last=$?
[ "$last" -ne 127 ] && status=$last
exit "$status"
