#!/bin/sh
# The bandwidth half of 40-perf-interop.sh (write_bw, send_bw, read_bw against perftest 4.5
# and against ourselves, both roles); split off so each check stays under 300 s.
exec sh "$(dirname "$0")/40-perf-interop.sh" bw
