# shellcheck shell=bash
# No interface but lo, no route off it.
devs=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')
[ "$devs" = "lo " ] || fail "/proc/net/dev lists ${devs% }, want only lo"
routes=$(tail -n +2 /proc/net/route | grep -c .)
[ "$routes" = 0 ] || fail "$routes IPv4 routes in the main table"
if [ -r /proc/net/ipv6_route ]; then
  devs6=$(awk '{print $NF}' /proc/net/ipv6_route | sort -u | grep -vx lo | tr '\n' ' ')
  [ -z "$devs6" ] || fail "IPv6 routes through ${devs6% }"
fi
echo "interfaces: ${devs% }"

# TCP and UDP to outside addresses: connect() finds no route (bash's /dev/tcp and
# /dev/udp; timeout: a sandbox with a route but no answer must fail, not hang).
# A kernel without IPv6 refuses the socket; the process backend's namespace has no
# IPv6 address to send from, so there an IPv6 connect fails before routing
# (EADDRNOTAVAIL, the Python probes' documented difference): unreachable, said.
unreachable() {
  local out
  # shellcheck disable=SC2016 # the child bash's $1
  out=$(timeout 5 bash -c 'exec 3<>"/dev/$1"' _ "$1" 2>&1)
  case $? in
    0) fail "$1: connected, want ENETUNREACH" ;;
    124) fail "$1: no answer within 5 s (a route out), want ENETUNREACH" ;;
    *)
      if [[ $out == *"Network is unreachable"* ]]; then
        echo "$1: unreachable (ENETUNREACH)"
      elif [[ $1 == *:* && ( $out == *"Address family not supported"* || ( $PROCESS = 1 && $out == *"Cannot assign requested address"* ) ) ]]; then
        note "$1: no IPv6 address to send from (${out##*: })"
      else
        fail "$1: failed with '${out//$'\n'/ }', want ENETUNREACH"
      fi
      ;;
  esac
}
for a in tcp/1.1.1.1/53 tcp/8.8.8.8/443 udp/1.1.1.1/53 udp/9.9.9.9/123 \
  tcp/2606:4700:4700::1111/53 udp/2001:4860:4860::8888/53; do
  unreachable "$a"
done

# Names do not resolve: getent's exit 2 is "not found" (no answer from any source).
for name in example.com pypi.org host.docker.internal host.containers.internal metadata.google.internal; do
  out=$(timeout 10 getent ahosts "$name")
  rc=$?
  if [ "$rc" = 2 ]; then
    echo "resolve $name: not found"
  else
    fail "resolve $name: getent exit $rc (${out//$'\n'/ }), want 2 (not found)"
  fi
done
finish
