#!/bin/sh
# send_lat against perftest 4.5's ib_send_lat and against ourselves, both roles: see 40-perf-interop.sh.
exec sh "$(dirname "$0")/40-perf-interop.sh" send_lat
