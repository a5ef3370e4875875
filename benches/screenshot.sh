#!/usr/bin/env bash
# Render an SVG to a PNG with headless Chromium, to look at a plot the way a browser shows it.
#
#   benches/screenshot.sh IN.svg OUT.png
#
# The window is the SVG's own width x height (900 x 540 per panel for rdma-direct's plots),
# read from its root element. Needs Debian's `chromium` package; installed with apt-get when
# missing and this runs as root. Chromium runs with a throw-away profile and every background
# network feature off.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 IN.svg OUT.png" >&2
    exit 2
fi
svg=$1
png=$2
[ -r "$svg" ] || { echo "$0: cannot read $svg" >&2; exit 1; }

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "$0: chromium missing; installing Debian's chromium package" >&2
        apt-get install -y --no-install-recommends chromium fonts-dejavu-core >/dev/null \
            || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium fonts-dejavu-core >/dev/null; }
        browser=$(command -v chromium)
    else
        echo "$0: chromium not found; install Debian's chromium package (apt-get install chromium)" >&2
        exit 1
    fi
fi

# The size from the root element's width/height (numbers in user units).
head=$(head -c 2000 "$svg")
w=$(printf '%s' "$head" | sed -n 's/.*<svg[^>]* width="\([0-9.]*\)".*/\1/p' | head -n1)
h=$(printf '%s' "$head" | sed -n 's/.*<svg[^>]* height="\([0-9.]*\)".*/\1/p' | head -n1)
w=${w%%.*}
h=${h%%.*}
w=${w:-900}
h=${h:-540}

abs=$(cd "$(dirname "$svg")" && pwd)/$(basename "$svg")
out=$(cd "$(dirname "$png")" && pwd)/$(basename "$png")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" --screenshot="$out" \
    --window-size="$w,$h" "file://$abs" >/dev/null 2>"$profile/log" || {
    cat "$profile/log" >&2
    exit 1
}
[ -s "$out" ] || { echo "$0: chromium wrote no $out" >&2; cat "$profile/log" >&2; exit 1; }
echo "$out (${w}x${h})"
