#!/bin/bash
# Brings up a one-node, loopback-only Kubernetes cluster for the Kubernetes backend's tests:
# etcd, kube-apiserver, kube-scheduler, a kubelet and a containerd instance of its own (never
# dockerd's), all bound to 127.0.0.1. There is no controller-manager: nothing turns a Deployment
# into pods and no ServiceAccount "default" appears by itself (see kns below); the backend creates
# bare Pods, which the scheduler places.
#
# Idempotent: a cluster that is already up and healthy is left as it is; a partial one is taken
# down first. Binaries come from build.sh's cache (built once per version). Each bring-up starts
# from an empty etcd. down.sh undoes everything this does.
#
# What it does to the host, all undone by down.sh:
#   - processes: containerd, etcd, kube-apiserver, kube-scheduler, kubelet (pid files in $KSTATE/run)
#   - files: only under $KSTATE and $KCACHE, except three paths the kubelet hard-codes
#     (/var/lib/kubelet/device-plugins, /var/log/containers, /run/containerd/runc/k8s.io)
#   - mounts: a shared bind mount of $KSTATE/kubelet (so that the kubelet's volume mounts, made in
#     its own mount namespace, reach containerd), pod volumes and rootfs under $KSTATE
#   - cgroups: /kubepods in each cgroup v1 hierarchy
# and what it avoids doing:
#   - sysctls: the kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops when
#     they differ from its wishes; it runs in a mount namespace of its own where those /proc/sys
#     files are shadowed by bind mounts, so the host's values never change and nobody else sees
#     the shadows
#   - iptables: the kubelet runs with a PATH without /usr/sbin, so it finds no iptables and
#     writes no rules; no kube-proxy runs
#   - network: the CNI plugin (lo-only) creates nothing; pods have only their own lo
#
# The four blockers on our machines (docs/kubernetes.md, "The test cluster"):
#   1. CNI with only the loopback plugin fails ("failed to find network info for sandbox"):
#      lo-only reports eth0 at 127.0.0.1 and creates nothing, so a pod's netns holds only lo.
#   2. runc fails "can't get final child's PID from pipe: EOF" (no CAP_SYS_RESOURCE in any
#      bounding set here): restrict_oom_score_adj in containerd, oomScoreAdj 0 for the kubelet.
#   3. The kubelet rejects a loopback --node-ip: the node is named localhost, the kubelet binds
#      127.0.0.1 and the apiserver prefers the Hostname address.
#   4. Pod admission needs the ServiceAccount "default" even with automountServiceAccountToken
#      false, and no controller creates it: kns creates it.
#
# Needs: go (module proxy, for build.sh), Debian's containerd, runc, containernetworking-plugins,
# openssl, python3, curl (installed when missing); docker only to `docker save` the images.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$here/env.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/apt.sh
. "$here/../lib/apt.sh"
IMAGES=${IMAGES:-mcp-exec/python-sandbox:v1}   # dockerd images imported into the cluster's containerd

# node_ready: the node reports the condition Ready=True.
node_ready() {
  [ "$(kc get node "$KNODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
healthy() {
  for p in containerd etcd kube-apiserver kube-scheduler kubelet; do
    [ -f "$KSTATE/run/$p.pid" ] && kill -0 "$(cat "$KSTATE/run/$p.pid")" 2>/dev/null || return 1
  done
  kc get --raw /readyz >/dev/null 2>&1 && node_ready
}
if healthy; then
  kts "already up: export KUBECONFIG=$KUBECONFIG_ADMIN"
  exit 0
fi
if [ -d "$KSTATE/run" ]; then
  kts "partial cluster found: taking it down first"
  bash "$here/down.sh"
fi
for port in "$KAPIPORT" "$KETCDPORT" "$KETCDPEER" "$KKUBELETPORT" "$KKUBELETHEALTHZ" "$KSCHEDPORT"; do
  if ss -Hltn "sport = :$port" | grep -q .; then
    echo "port $port on this host is taken (another cluster?); set KAPIPORT or stop it" >&2; exit 1
  fi
done

need=()
for p in containerd runc containernetworking-plugins openssl python3 curl; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  kts "installing ${need[*]}"
  apt_get install -y "${need[@]}" >/dev/null 2>&1 || { apt_get update >/dev/null && apt_get install -y "${need[@]}" >/dev/null; }
fi

bash "$here/build.sh"
B=$KCACHE/bin
# gVisor: runsc and its containerd shim at the pinned version, built once (scripts/gvisor-build.sh);
# the shim patched not to lower its oom_score_adj where no process may (no CAP_SYS_RESOURCE).
gvshim=$(bash "$here/../gvisor-build.sh" --which-node-shim)
GV=$(bash "$here/../gvisor-build.sh" "--$gvshim")

mkdir -p "$KSTATE"/{etc,logs,run,pki,cni/bin,cni/net.d,etcd-data,kubelet,podlogs,sysctl-shadow,images,gvisor/bin,gvisor/root}
cd "$KSTATE"

# ------------------------------------------------------------------ PKI (kept between bring-ups)
if [ ! -f pki/ca.crt ]; then
  kts "generating a throwaway CA and certificates"
  (
    cd pki
    o() { openssl "$@" 2>/dev/null; }
    o req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj /CN=mcp-exec-k8s-ca
    cert() { # name subject [subjectAltName]
      o req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
      if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" > "$1.ext"
      else printf 'extendedKeyUsage=clientAuth\n' > "$1.ext"; fi
      o x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext"
      rm -f "$1.csr" "$1.ext"
    }
    cert apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    cert admin "/O=system:masters/CN=admin"
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
    cert kubelet-client "/O=system:nodes/CN=system:node:$KNODE"
    o genrsa -out sa.key 2048
    o rsa -in sa.key -pubout -out sa.pub
    chmod 600 ./*.key
  )
fi
for u in admin:admin kubelet:kubelet-client; do
  cat > "etc/${u%%:*}.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: mcp-exec-test
  cluster: {server: "https://127.0.0.1:$KAPIPORT", certificate-authority: $KSTATE/pki/ca.crt}
users:
- name: ${u%%:*}
  user: {client-certificate: $KSTATE/pki/${u#*:}.crt, client-key: $KSTATE/pki/${u#*:}.key}
contexts:
- name: mcp-exec-test
  context: {cluster: mcp-exec-test, user: ${u%%:*}}
current-context: mcp-exec-test
EOF
done

# ------------------------------------------------------------------ CNI (blocker 1)
# containerd's CRI always runs the loopback plugin for lo and wants one more network that
# returns eth0 with an address. lo-only creates nothing and reports 127.0.0.1: the pod's network
# namespace holds only its own lo. It enforces no NetworkPolicy (nothing to enforce it on).
ln -sf /usr/lib/cni/loopback cni/bin/loopback
cat > cni/bin/lo-only <<'EOF'
#!/bin/sh
# A CNI plugin that creates nothing: the pod keeps only the lo that the loopback plugin brings up.
case "$CNI_COMMAND" in
  ADD) cat >/dev/null
       printf '{"cniVersion":"0.4.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","address":"127.0.0.1/8","interface":0}],"dns":{}}' "$CNI_IFNAME" "$CNI_NETNS" ;;
  VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
  *) cat >/dev/null ;;
esac
EOF
chmod +x cni/bin/lo-only
rm -f cni/net.d/*
echo '{"cniVersion":"0.4.0","name":"lo-only","plugins":[{"type":"lo-only"}]}' > cni/net.d/10-lo-only.conflist

# ------------------------------------------------------------------ containerd (private instance)
cat > etc/containerd.toml <<EOF
version = 2
root = "$KSTATE/containerd/root"
state = "$KSTATE/containerd/state"
oom_score = 0
[grpc]
  address = "$KSTATE/containerd.sock"
[ttrpc]
  address = "$KSTATE/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$KSTATE/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/mcp-exec-k8s/pause:1"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # blocker 2: runc cannot raise the sandbox's oom_score_adj to -998 without CAP_SYS_RESOURCE
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "/usr/sbin/runc"
      # gVisor (RuntimeClass gvisor, handler runsc): the shim containerd-shim-runsc-v1 is found on
      # containerd's PATH ($KSTATE/gvisor/bin); its options file says which runsc and how.
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
        runtime_type = "io.containerd.runsc.v1"
        # RLIMIT_NPROC: under gVisor the program's tasks are not host tasks, so podPidsLimit
        # does not limit them; gVisor's kernel counts RLIMIT_NPROC per sandbox (as on Docker).
        base_runtime_spec = "$KSTATE/etc/runsc-spec.json"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
          TypeUrl = "io.containerd.runsc.v1.options"
          ConfigPath = "$KSTATE/etc/runsc.toml"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$KSTATE/cni/bin"
      conf_dir = "$KSTATE/cni/net.d"
      max_conf_num = 1
EOF
# runsc's options, those scripts/runsc.sh gives it on dockerd where they apply:
#   network none: the sandbox's only network is gVisor's own loopback (the pod's netns, which
#     holds only lo here, is not used at all);
#   oci-seccomp: the pod's seccomp profile also filters the program's system calls inside gVisor;
#   root: runsc's state under $KSTATE, not its default /run/containerd/runsc.
cat > etc/runsc.toml <<EOF
binary_name = "$KSTATE/gvisor/bin/runsc"
root = "$KSTATE/gvisor/root"
[runsc_config]
  network = "none"
  oci-seccomp = "true"
EOF
# The base OCI spec of runsc's containers: containerd's default plus RLIMIT_NPROC = $KGVISORPIDS.
# Kubernetes cannot set an rlimit per pod; the node does. podPidsLimit ($KPODPIDS host tasks per
# pod) must leave room for gVisor's own: ~40 at rest plus 1-2 per guest process.
"${KCTR[@]}" oci spec | python3 -c '
import json, sys
s = json.load(sys.stdin)
n = int(sys.argv[1])
s["process"]["rlimits"] = [r for r in s["process"].get("rlimits", []) if r["type"] != "RLIMIT_NPROC"] + [{"type": "RLIMIT_NPROC", "hard": n, "soft": n}]
json.dump(s, sys.stdout, indent=1)' "$KGVISORPIDS" > etc/runsc-spec.json
# gVisor's shim, adapted to this containerd (1.6) and this VM (scripts/k8s/runsc-shim.sh).
install -m 0755 "$here/runsc-shim.sh" gvisor/bin/containerd-shim-runsc-v1
ln -sf "$GV/$gvshim" gvisor/bin/containerd-shim-runsc-v1.bin
ln -sf "$GV/runsc" gvisor/bin/runsc
kts "starting containerd"
PATH=$KSTATE/gvisor/bin:$PATH nohup containerd --config etc/containerd.toml > logs/containerd.log 2>&1 &
echo $! > run/containerd.pid
kwaitfor 20 test -S "$KSTATE/containerd.sock"   # (ctr waits ~10 s when the socket is missing)
kwaitfor 20 "${KCTR[@]}" version
"${KCTR[@]}" images import "$KCACHE/images/pause.oci.tar" >/dev/null
# An image is imported again only when dockerd's copy changed (its ID is recorded at import).
for img in $IMAGES; do
  id=$(docker image inspect -f '{{.Id}}' "$img")
  rec=images/$(echo "$img" | tr '/:' '__').id
  if [ "$(cat "$rec" 2>/dev/null)" != "$id" ]; then
    kts "importing $img from dockerd"
    docker save "$img" | nice -n 10 "${KCTR[@]}" images import - >/dev/null
    echo "$id" > "$rec"
  fi
done

# ------------------------------------------------------------------ etcd (empty every time)
rm -rf etcd-data && mkdir etcd-data
kts "starting etcd"
nohup "$B/etcd" --name mcp-exec-test --data-dir "$KSTATE/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$KETCDPORT" --advertise-client-urls "http://127.0.0.1:$KETCDPORT" \
  --listen-peer-urls "http://127.0.0.1:$KETCDPEER" --initial-advertise-peer-urls "http://127.0.0.1:$KETCDPEER" \
  --initial-cluster "mcp-exec-test=http://127.0.0.1:$KETCDPEER" --listen-metrics-urls '' \
  --unsafe-no-fsync --quota-backend-bytes 2147483648 > logs/etcd.log 2>&1 &
echo $! > run/etcd.pid
kwaitfor 30 curl -sf "http://127.0.0.1:$KETCDPORT/health"

# ------------------------------------------------------------------ kube-apiserver
kts "starting kube-apiserver"
nohup "$B/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$KETCDPORT" \
  --bind-address=127.0.0.1 --secure-port="$KAPIPORT" --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none \
  --tls-cert-file="$KSTATE/pki/apiserver.crt" --tls-private-key-file="$KSTATE/pki/apiserver.key" \
  --client-ca-file="$KSTATE/pki/ca.crt" --anonymous-auth=false \
  --kubelet-client-certificate="$KSTATE/pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$KSTATE/pki/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$KSTATE/pki/sa.pub" --service-account-signing-key-file="$KSTATE/pki/sa.key" \
  --service-cluster-ip-range=10.96.0.0/24 \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction,PodSecurity,ValidatingAdmissionPolicy \
  --profiling=false > logs/kube-apiserver.log 2>&1 &
echo $! > run/kube-apiserver.pid
kwaitfor 120 kc get --raw /readyz

# ------------------------------------------------------------------ kube-scheduler
kts "starting kube-scheduler"
nohup "$B/kube-scheduler" --kubeconfig="$KSTATE/etc/admin.kubeconfig" \
  --authentication-kubeconfig="$KSTATE/etc/admin.kubeconfig" --authorization-kubeconfig="$KSTATE/etc/admin.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port="$KSCHEDPORT" \
  > logs/kube-scheduler.log 2>&1 &
echo $! > run/kube-scheduler.pid

# ------------------------------------------------------------------ kubelet
cat > etc/kubelet.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KKUBELETPORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KKUBELETHEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $KSTATE/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: true
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$KSTATE/containerd.sock
podLogsDir: $KSTATE/podlogs
resolvConf: ""
registerNode: true
protectKernelDefaults: false
oomScoreAdj: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageMinimumGCAge: 87600h
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 60
# Kubernetes has no per-container process limit; this per-pod one is the sandbox's pids limit.
podPidsLimit: $KPODPIDS
syncFrequency: 10s
fileCheckFrequency: 0s
nodeStatusUpdateFrequency: 10s
localStorageCapacityIsolation: true
EOF
# The kubelet runs in a mount namespace of its own. There, the sysctl files it would change are
# shadowed by bind mounts (invisible to the host; gone with the namespace). $KSTATE/kubelet is a
# shared mount made before the namespace exists, so the volume mounts the kubelet makes under it
# (emptyDir tmpfs) reach containerd and runc on the host side.
if ! awk -v d="$KSTATE/kubelet" '$5 == d' /proc/self/mountinfo | grep -q .; then
  mount --bind "$KSTATE/kubelet" "$KSTATE/kubelet"
fi
mount --make-shared "$KSTATE/kubelet"
# /proc is made private in the namespace first: on a host whose /proc is shared the shadows
# would otherwise propagate back.
shadows="mount --make-rprivate /proc &&"
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
          kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  s=sysctl-shadow/$(echo "${kv%=*}" | tr / _)
  echo "${kv#*=}" > "$s"
  shadows="$shadows mount --bind $KSTATE/$s /proc/sys/${kv%=*} &&"
done
kts "starting kubelet"
# PATH without /usr/sbin: the kubelet finds no iptables and leaves the host's rules alone.
PATH=/usr/bin:/bin nohup unshare --mount --propagation unchanged -- /bin/sh -c \
  "$shadows exec $B/kubelet --config=$KSTATE/etc/kubelet.yaml --kubeconfig=$KSTATE/etc/kubelet.kubeconfig \
   --root-dir=$KSTATE/kubelet --cert-dir=$KSTATE/kubelet/pki --hostname-override=$KNODE --v=1" \
  > logs/kubelet.log 2>&1 &
echo $! > run/kubelet.pid
kwaitfor 120 node_ready
# No controller-manager: lift the taint its node-lifecycle controller would lift.
kc taint nodes "$KNODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
bash "$here/kns.sh" default >/dev/null
# The RuntimeClass for gVisor sandboxes (mcp-exec --runtime gvisor), the one docs/deploy/kubernetes ships.
kc apply -f "$here/../../docs/deploy/kubernetes/gvisor/runtimeclass.yaml" >/dev/null
kts "cluster up: export KUBECONFIG=$KUBECONFIG_ADMIN"
