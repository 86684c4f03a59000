#!/usr/bin/env python3
"""Builds every image of docker/ from this build's binaries and runs each one (label `images`).

tools/build-images.sh --prebuilt <build dir> makes the runtime images with buildah (bases from
mmdebstrap, cached under <build dir>/images). Each image is then run as a container by runc,
the OCI runtime containerd uses, from the image's own config (its USER, ENTRYPOINT, Env,
WorkingDir) with a read-only root file system, no capability and no new privileges, as the
chart's pods run. For every image:
- its USER is a numeric uid:gid other than root, and the container runs as that user;
- ENTRYPOINT + `--version` prints what this build's binary prints, ENTRYPOINT + `--help` the
  same help (both exit 0): the image holds this build's program and its entry point works;
- `ldd` of the entry point inside the image resolves every library the binary needs (the same
  sonames as on the build machine);
- a write to the root file system fails (EROFS): the harness really runs it read-only.
Images made broken on purpose (a library removed, USER root) must be refused first.
Needs root, buildah, mmdebstrap and runc, and the Debian mirror (skipped with 77 without the
tools or root; docs/deploy.md "Images").
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TAG = "ctest"
REGISTRY = "localhost/kubecomp"


class Harness:
    """buildah on the script's store, runc on a state directory of its own."""

    def __init__(self, source_dir, work_dir, tmp):
        self.source_dir = source_dir
        self.work_dir = work_dir
        self.tmp = tmp
        self.runs = 0
        out = run(["bash", os.path.join(source_dir, "tools/build-images.sh"), "--print-buildah", "--work-dir", work_dir])
        self.buildah = out.split()
        self.runc_root = os.path.join(tmp, "runc")
        spec_dir = os.path.join(tmp, "spec")
        os.makedirs(spec_dir)
        run(["runc", "spec"], cwd=spec_dir)
        with open(os.path.join(spec_dir, "config.json")) as f:
            self.spec = json.load(f)

    def b(self, *args):
        return run(self.buildah + list(args))

    def config(self, ref):
        """The image's OCI config (User, Entrypoint, Env, WorkingDir)."""
        return json.loads(self.b("inspect", "--type", "image", ref))["OCIv1"]["config"]

    def mount(self, ref):
        """-> (container, root path) of a working container of ref."""
        ctr = self.b("from", "--pull=false", ref).strip()
        return ctr, self.b("mount", ctr).strip()

    def unmount(self, ctr):
        self.b("umount", ctr)
        self.b("rm", ctr)

    def run_in(self, root, config, args):
        """Runs args in a container of root as the image's user: -> (exit code, stdout, stderr)."""
        uid, gid = parse_user(config.get("User", ""))
        spec = json.loads(json.dumps(self.spec))
        spec["root"] = {"path": root, "readonly": True}
        proc = spec["process"]
        proc.update({"terminal": False, "args": args, "cwd": config.get("WorkingDir") or "/",
                     "env": config.get("Env") or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                     "user": {"uid": uid, "gid": gid}, "noNewPrivileges": True,
                     "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}})
        self.runs += 1
        bundle = os.path.join(self.tmp, f"bundle-{self.runs}")
        os.makedirs(bundle)
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(spec, f)
        r = subprocess.run(["runc", "--root", self.runc_root, "run", "--bundle", bundle, f"kc-images-{os.getpid()}-{self.runs}"],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def parse_user(user):
    """'65532:65532' -> (65532, 65532); None for anything but a numeric uid:gid."""
    m = re.fullmatch(r"(\d+):(\d+)", user or "")
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def sonames(ldd_out):
    """ldd output -> {soname: resolved path or None}."""
    libs = {}
    for line in ldd_out.splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if m:
            libs[m.group(1)] = None if m.group(2).strip() == "not found" else m.group(2).strip()
    return libs


def check_image(h, name, ref, host_binary):
    """Problems of one built image (strings)."""
    config = h.config(ref)
    uid, gid = parse_user(config.get("User"))
    if uid is None or uid == 0 or gid == 0:
        return [f"{name}: USER {config.get('User')!r} is not a numeric non-root uid:gid"]
    entry = config.get("Entrypoint") or []
    if not entry:
        return [f"{name}: no ENTRYPOINT"]
    out = []
    ctr, root = h.mount(ref)
    try:
        rc, stdout, _ = h.run_in(root, config, ["/bin/sh", "-c", "id -u; id -g"])
        if rc != 0 or stdout.split() != [str(uid), str(gid)]:
            out.append(f"{name}: the container does not run as {uid}:{gid} (id says {stdout.split()}, exit {rc})")
        rc, _, stderr = h.run_in(root, config, ["/bin/sh", "-c", "touch /.kc-rw-probe"])
        if rc == 0 or "Read-only file system" not in stderr:
            out.append(f"{name}: a write to / did not fail with EROFS (exit {rc}: {stderr.strip()})")
        for flag in ("--version", "--help"):
            # The host binary under the image's path as argv[0], so the usage lines compare.
            want = subprocess.run([entry[0]] + entry[1:] + [flag], executable=host_binary, capture_output=True, text=True)
            rc, stdout, stderr = h.run_in(root, config, entry + [flag])
            if rc != 0 or want.returncode != 0:
                out.append(f"{name}: {' '.join(entry)} {flag} exits {rc} in the image, {want.returncode} here: {stderr.strip()[:300]}")
            elif stdout != want.stdout:
                out.append(f"{name}: {flag} in the image differs from this build's binary:\n{stdout[:300]}")
        rc, stdout, stderr = h.run_in(root, config, ["ldd", entry[0]])
        libs = sonames(stdout)
        host = sonames(subprocess.run(["ldd", host_binary], capture_output=True, text=True).stdout)
        missing = sorted(s for s, p in libs.items() if p is None)
        if rc != 0 or missing or not libs:
            out.append(f"{name}: ldd {entry[0]} in the image: exit {rc}, not found: {missing} {stderr.strip()[:200]}")
        elif set(libs) != set(host):
            out.append(f"{name}: the image's binary links {sorted(set(libs) ^ set(host))} unlike this build's")
    finally:
        h.unmount(ctr)
    return out


def broken_variants(h, ref):
    """Images derived from ref that the checks must refuse: {what: ref}."""
    variants = {}
    ctr, root = h.mount(ref)
    lib = next(p for s, p in sonames(run(["chroot", root, "ldd", "/usr/local/bin/vni-webhook"])).items()
               if s.startswith("libsqlite3") and p)
    os.unlink(os.path.join(root, lib.lstrip("/")))
    h.b("umount", ctr)
    variants["a runtime library removed"] = f"localhost/kubecomp-broken/no-library:{TAG}"
    h.b("commit", "-q", "--rm", ctr, variants["a runtime library removed"])
    ctr = h.b("from", "--pull=false", ref).strip()
    h.b("config", "--user", "0:0", ctr)
    variants["USER root"] = f"localhost/kubecomp-broken/root:{TAG}"
    h.b("commit", "-q", "--rm", ctr, variants["USER root"])
    return variants


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source-dir", required=True)
    p.add_argument("--build-dir", required=True)
    p.add_argument("--work-dir", help="buildah store and cached bases (default: <build dir>/images)")
    p.add_argument("--binary", action="append", default=[], metavar="COMPONENT=PATH",
                   help="this build's program of each CMake install component")
    args = p.parse_args()
    programs = dict(b.split("=", 1) for b in args.binary)
    src, build = os.path.abspath(args.source_dir), os.path.abspath(args.build_dir)
    work = os.path.abspath(args.work_dir or os.path.join(build, "images"))
    if os.geteuid() != 0:
        print("SKIP: needs root (mmdebstrap, buildah, runc); run as root or see docs/deploy.md, Images")
        return SKIP
    absent = [t for t in ("buildah", "mmdebstrap", "runc") if shutil.which(t) is None]
    if absent:
        print(f"SKIP: {', '.join(absent)} missing (bash tools/setup-deps.sh installs them)")
        return SKIP

    names = sorted(f[: -len(".Dockerfile")] for f in os.listdir(os.path.join(src, "docker")) if f.endswith(".Dockerfile"))
    start = time.monotonic()
    r = subprocess.run(["bash", os.path.join(src, "tools/build-images.sh"), "--prebuilt", build, "--work-dir", work,
                        "--tag", TAG, "--registry", REGISTRY], capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        fail("tools/build-images.sh failed:\n" + r.stderr)
    built = time.monotonic() - start

    with tempfile.TemporaryDirectory(prefix="images-test-") as tmp:
        h = Harness(src, work, tmp)
        binaries = {}
        for name in names:
            text = open(os.path.join(src, "docker", name + ".Dockerfile")).read()
            component = re.search(r"--component (\S+)", text).group(1)
            if component not in programs:
                fail(f"{name}: installs {component}, which no --binary names")
            binaries[name] = programs[component]

        # The checks must refuse what is broken before their verdict on the real images counts.
        for what, ref in broken_variants(h, f"{REGISTRY}/vni-webhook:{TAG}").items():
            found = check_image(h, "vni-webhook", ref, binaries["vni-webhook"])
            if not found:
                fail(f"the image checks miss: {what}")
            print(f"refused, {what}: {found[0].splitlines()[0][:200]}")
            h.b("rmi", ref)
        print("image checks: both broken images refused")

        problems = []
        for name in names:
            problems += check_image(h, name, f"{REGISTRY}/{name}:{TAG}", binaries[name])
        if problems:
            fail("\n  ".join(["images:"] + problems))
        sizes = h.b("images", "--format", "{{.Name}}:{{.Tag}} {{.Size}}")
        for line in sizes.splitlines():
            if line.startswith(REGISTRY + "/") and line.split()[0].endswith(":" + TAG):
                print("  " + line)
    print(f"{len(names)} images built in {built:.0f} s and run as their non-root user with a read-only root "
          f"(--version, --help, ldd), {time.monotonic() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
