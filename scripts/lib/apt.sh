# shellcheck shell=bash
# Sourced by the scripts that install Debian packages. apt_get runs apt-get one at a time
# among this project's scripts, and waits (up to 10 minutes) for dpkg's lock when something
# else holds it: scripts/test.sh runs some steps beside others (the images beside the
# linters, the Kubernetes step beside the other engines' suites), and two apt-gets at once
# would otherwise fail on the lock on a fresh machine, where each installs what it needs.
apt_get() {
  DEBIAN_FRONTEND=noninteractive flock -w 900 /run/lock/mcp-exec-apt.lock \
    apt-get -o DPkg::Lock::Timeout=600 "$@"
}
