#!/usr/bin/env python3
"""mkimage.py BINARY NAME OUT: writes an OCI image-layout tarball holding one file, /pause,
for `ctr images import` (the test cluster's sandbox image; nothing can be pulled here)."""
import hashlib, io, json, sys, tarfile

binary, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
blobs = {}


def add(data):
    d = hashlib.sha256(data).hexdigest()
    blobs[d] = data
    return "sha256:" + d, len(data)


def entry(path, data, mode):
    ti = tarfile.TarInfo(path)
    ti.size, ti.mode, ti.mtime = len(data), mode, 0
    return ti, io.BytesIO(data)


lb = io.BytesIO()
with tarfile.open(fileobj=lb, mode="w", format=tarfile.PAX_FORMAT) as t:
    t.addfile(*entry("pause", open(binary, "rb").read(), 0o755))
ldig, lsize = add(lb.getvalue())
cfg = {"architecture": "amd64", "os": "linux",
       "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
       "rootfs": {"type": "layers", "diff_ids": [ldig]},
       "history": [{"created_by": "mcp-exec scripts/k8s/mkimage.py"}]}
cdig, csize = add(json.dumps(cfg).encode())
man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csize},
       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": lsize}]}
mdig, msize = add(json.dumps(man).encode())
index = {"schemaVersion": 2, "manifests": [{
    "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdig, "size": msize,
    "annotations": {"io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}]}
with tarfile.open(out, "w") as t:
    t.addfile(*entry("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644))
    t.addfile(*entry("index.json", json.dumps(index).encode(), 0o644))
    for d, data in blobs.items():
        t.addfile(*entry("blobs/sha256/" + d, data, 0o644))
