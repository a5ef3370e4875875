#!/bin/sh
# write_bw against perftest 4.5's ib_write_bw and against ourselves, both roles: see 40-perf-interop.sh.
exec sh "$(dirname "$0")/40-perf-interop.sh" write_bw
