#!/bin/sh
# Chromium from the system's packages for `make browser-test`: installed with apt-get when
# missing and we are root on a Debian-like system; otherwise a message saying what to install.
# playwright never downloads a browser of its own.
chromium="$1"
[ -x "$chromium" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "browser-test: $chromium is missing; installing Debian's chromium package (apt-get)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; then
        echo "browser-test: apt-get could not install chromium (see above)." >&2
        exit 1
    fi
    [ -x "$chromium" ] && exit 0
    echo "browser-test: apt-get installed chromium, but $chromium is still missing;" >&2
    echo "pass its path as CHROMIUM=/path/to/chromium." >&2
    exit 1
fi
cat >&2 <<MESSAGE
browser-test: no Chromium at $chromium, and it cannot be installed from here
(that needs root and apt-get). Install your system's Chromium package, e.g.
    sudo apt-get install chromium      (Debian; Ubuntu: chromium-browser)
    sudo dnf install chromium          (Fedora)
then run make browser-test again, or pass CHROMIUM=/path/to/chromium.
MESSAGE
exit 1
