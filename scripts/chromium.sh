#!/usr/bin/env bash
# The console's browser tests drive Debian's chromium (playwright's own browser downloads are not
# used). Finds it, or installs it with apt-get when it can; says what to do when it cannot.
set -euo pipefail
want="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$want" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium: installing Debian's chromium for the browser tests"
  apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }
  [ -x "$want" ] && exit 0
fi
echo "chromium: not found at $want; install it (apt-get install chromium) or set CHROMIUM_PATH" >&2
exit 1
