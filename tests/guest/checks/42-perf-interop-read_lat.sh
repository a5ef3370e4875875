#!/bin/sh
# read_lat against perftest 4.5's ib_read_lat and against ourselves, both roles: see 40-perf-interop.sh.
exec sh "$(dirname "$0")/40-perf-interop.sh" read_lat
