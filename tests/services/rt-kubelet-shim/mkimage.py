#!/usr/bin/python3
"""Builds a docker-archive image tar (what `ctr images import` reads) from the static busybox of
Debian's busybox-static and our static rtprobe, with no registry: one layer holding
/bin/busybox, its applet links and /rtprobe; default command `sleep 1000000`.

usage: mkimage.py <out.tar> <image ref> <busybox> <rtprobe>
"""
import hashlib
import io
import json
import sys
import tarfile


def add_file(tar, name, data, mode=0o755):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def main():
    out, ref, busybox, rtprobe = sys.argv[1:5]
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for d in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755 if d != "tmp" else 0o1777
            t.addfile(info)
        add_file(t, "bin/busybox", open(busybox, "rb").read())
        for applet in ("sh", "sleep", "cat", "echo", "ls", "true"):
            info = tarfile.TarInfo("bin/" + applet)
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            t.addfile(info)
        add_file(t, "rtprobe", open(rtprobe, "rb").read())
        add_file(t, "etc/passwd", b"root:x:0:0:root:/:/bin/sh\n", 0o644)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": ["/bin/sleep", "1000000"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    config_bytes = json.dumps(config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": ["layer.tar"]}]
    with tarfile.open(out, "w") as t:
        add_file(t, config_name, config_bytes, 0o644)
        add_file(t, "layer.tar", layer_bytes, 0o644)
        add_file(t, "manifest.json", json.dumps(manifest).encode(), 0o644)


if __name__ == "__main__":
    main()
