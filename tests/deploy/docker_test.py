#!/usr/bin/env python3
"""Every Dockerfile in docker/ against the CMake install tree (no Docker engine runs here).

For each docker/<image>.Dockerfile:
- three stages: `FROM debian:bookworm AS build`; `FROM ${BINARIES} AS binaries` with
  `ARG BINARIES=build` (so the build stage by default; tools/build-images.sh --prebuilt names an
  image of an existing build's install tree instead); then `FROM debian:bookworm-slim`, which
  copies from `binaries`;
- the build stage installs every package of the toolchain and libraries groups of
  tools/setup-deps.sh, builds the image's target and installs its CMake component;
- every file it copies from the binaries stage is in that component's install tree;
- the runtime stage installs the Debian package of every shared library the installed binary
  links (found with ldd and dpkg -S on this bookworm machine), and nothing that provides none
  of them (no -dev package, no extra);
- a numeric non-root USER and an ENTRYPOINT that is the copied binary; an image named
  <daemon>-<backend> (the bridge pods) runs it with --backend <backend>, one its --help lists.
And across them: every file a daemon's component installs (the daemons of
cmake/KubecompInstall.cmake; an operator tool's component is no image) is copied by some
Dockerfile, every image the chart
names (values.yaml `image:`) has a Dockerfile, and so has every `<registry>/kubecomp/<image>:<tag>`
the chart's examples and docs/ name; an example names exactly the chart's default
`<global.image.registry>/<image>:<appVersion>`. The checker is first shown broken Dockerfiles
and must catch each one.
"""
import argparse
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

# In every debian:bookworm-slim image (Essential or required by apt and dpkg).
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# Runtime packages that provide no library: allowed beside the linked ones. ca-certificates:
# libcore/net's HTTPS client verifies against OpenSSL's default paths when given no CA file.
DATA_PACKAGES = {"ca-certificates"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def parse_dockerfile(text, build_args=None):
    """-> list of stages: {from, name, runs: [str], copies: [(from, src, dst)], user, entrypoint,
    instructions}; the ARGs before the first FROM go into `build_args` (name -> default)."""
    joined = re.sub(r"\\\n", " ", text)
    stages = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            parts = rest.split()
            stages.append({"from": parts[0], "name": parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None,
                           "runs": [], "copies": [], "user": None, "entrypoint": None, "instructions": 0})
        elif not stages:
            if word != "ARG":
                return None
            if build_args is not None:
                key, _, default = rest.strip().partition("=")
                build_args[key] = default
        else:
            stages[-1]["instructions"] += 1
        if word == "FROM" or not stages:
            continue
        if word == "RUN":
            stages[-1]["runs"].append(rest)
        elif word == "COPY":
            args = shlex.split(rest)
            source = None
            for a in [a for a in args if a.startswith("--")]:
                if a.startswith("--from="):
                    source = a.split("=", 1)[1]
            paths = [a for a in args if not a.startswith("--")]
            stages[-1]["copies"].append((source, paths[:-1], paths[-1]))
        elif word == "USER":
            stages[-1]["user"] = rest.strip()
        elif word == "ENTRYPOINT":
            try:
                stages[-1]["entrypoint"] = yaml.safe_load(rest)
            except yaml.YAMLError:
                stages[-1]["entrypoint"] = rest
    return stages


def apt_packages(runs):
    pkgs = []
    for run in runs:
        for cmd in re.split(r"&&|;", run):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                pkgs += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return pkgs


def setup_deps_groups(path, names):
    text = open(path).read()
    out = []
    for name in names:
        m = re.search(r"# " + name + r"\n((?:  [^#\n].*\n)+)", text)
        if not m:
            fail(f"tools/setup-deps.sh has no '# {name}' group")
        out += m.group(1).split()
    return out


@functools.lru_cache(maxsize=None)
def package_of(path):
    """The Debian package owning a library path, across the /lib -> /usr/lib merge."""
    real = os.path.realpath(path)
    candidates = [path, real]
    for p in (path, real):
        if p.startswith("/usr/lib/"):
            candidates.append(p[len("/usr"):])
        elif p.startswith("/lib/"):
            candidates.append("/usr" + p)
    for c in candidates:
        r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


@functools.lru_cache(maxsize=None)
def runtime_packages(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"ldd {binary}: {r.stderr}")
    pkgs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            if m.group(2) == "not":
                fail(f"{binary}: {m.group(1)} not found")
            pkg = package_of(m.group(2))
            if pkg is None:
                fail(f"{binary}: no Debian package owns {m.group(2)}")
            pkgs.setdefault(pkg.split(":")[0], []).append(m.group(1))
    return pkgs


def check_dockerfile(name, text, ctx):
    """Violations of one Dockerfile (strings)."""
    out = []
    build_args = {}
    stages = parse_dockerfile(text, build_args)
    if not stages or len(stages) != 3:
        return [f"{name}: want exactly three stages (build, binaries, runtime)"]
    build, binaries, run = stages
    if build["from"] != "debian:bookworm" or build["name"] != "build":
        out.append(f"{name}: first stage must be 'FROM debian:bookworm AS build'")
    # The runtime stage copies from `binaries`, which is the build stage unless BINARIES names
    # an image of a prebuilt install tree (tools/build-images.sh --prebuilt).
    if build_args.get("BINARIES") != "build":
        out.append(f"{name}: wants 'ARG BINARIES=build' before the first FROM")
    if binaries["from"] != "${BINARIES}" or binaries["name"] != "binaries" or binaries["instructions"]:
        out.append(f"{name}: second stage must be 'FROM ${{BINARIES}} AS binaries' and nothing else")
    if run["from"] != "debian:bookworm-slim":
        out.append(f"{name}: runtime stage must be FROM debian:bookworm-slim")
    missing = [p for p in ctx["build_packages"] if p not in apt_packages(build["runs"])]
    if missing:
        out.append(f"{name}: build stage lacks setup-deps packages {missing}")
    build_text = " ".join(build["runs"])
    component, backend = image_component(name, ctx)
    if component is None:
        return out + [f"{name}: names no CMake install component (<daemon> or <daemon>-<backend>)"]
    if f"--target {component} " not in build_text + " ":
        out.append(f"{name}: build stage does not build target {component}")
    m = re.search(r"cmake --install build/release --component (\S+) --prefix (\S+)", build_text)
    if not m or m.group(1) != component:
        out.append(f"{name}: build stage does not install CMake component {component}")
        return out
    prefix = m.group(2).rstrip("/")
    tree = ctx["component_files"].get(component, set())
    copied = []
    for source, srcs, dst in run["copies"]:
        if source != "binaries":
            out.append(f"{name}: runtime stage copies from {source or 'the build context'}, not the binaries stage")
            continue
        for s in srcs:
            rel = os.path.relpath(s, prefix)
            if rel not in tree:
                out.append(f"{name}: copies {s}, which `cmake --install --component {component}` does not install")
            copied.append((rel, dst))
    ctx["copied"].update(rel for rel, _ in copied)
    binary = os.path.join(ctx["install_root"], component, "bin", component)
    needed = runtime_packages(binary) if os.path.exists(binary) else {}
    listed = apt_packages(run["runs"])
    for pkg, libs in sorted(needed.items()):
        if pkg not in listed and pkg not in BASE_PACKAGES:
            out.append(f"{name}: runtime stage lacks {pkg} (for {', '.join(libs)})")
    for pkg in listed:
        if pkg not in needed and pkg not in DATA_PACKAGES:
            out.append(f"{name}: runtime stage installs {pkg}, which the binary does not link")
    user = (run["user"] or "").split(":")
    if not user[0].isdigit() or int(user[0]) == 0 or (len(user) > 1 and (not user[1].isdigit() or int(user[1]) == 0)):
        out.append(f"{name}: runtime USER must be a numeric non-root uid:gid (got {run['user']})")
    entry = run["entrypoint"]
    dsts = [dst for _, dst in copied]
    if not isinstance(entry, list) or not entry or entry[0] not in dsts:
        out.append(f"{name}: ENTRYPOINT {entry} is not the copied binary")
    elif backend is not None:
        if entry[1:] != ["--backend", backend]:
            out.append(f"{name}: ENTRYPOINT {entry} does not select backend {backend}")
        elif not re.search(r"--backend\b[^\n]*\b" + re.escape(backend) + r"\b", help_text(binary)):
            out.append(f"{name}: {component} --help lists no backend {backend}")
    elif len(entry) != 1:
        out.append(f"{name}: ENTRYPOINT {entry} passes arguments (the chart passes flags)")
    return out


def image_component(name, ctx):
    """docker/<name>.Dockerfile -> (CMake component, backend or None)."""
    if name in ctx["components"]:
        return name, None
    for c in ctx["components"]:
        if name.startswith(c + "-"):
            return c, name[len(c) + 1:]
    return None, None


@functools.lru_cache(maxsize=None)
def help_text(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return r.stdout


def daemon_components(src):
    """The daemons of cmake/KubecompInstall.cmake (its `foreach(daemon ...)`): one image each."""
    text = open(os.path.join(src, "cmake/KubecompInstall.cmake")).read()
    m = re.search(r"foreach\(daemon\s+([^)]*)\)", text)
    if not m or not m.group(1).split():
        fail("cmake/KubecompInstall.cmake has no foreach(daemon ...) list")
    return set(m.group(1).split())


IMAGE_REF = re.compile(r"[\w.-]+(?::\d+)?(?:/[\w.-]+)*/kubecomp/([a-z0-9-]+):([\w.-]+)")


def image_name_problems(texts, dockerfiles, registry, app_version):
    """Images the examples and docs name ({path: text}) against the Dockerfiles and the chart's
    <registry>/<daemon>:<appVersion>. A chart example must be exactly that (it works with the
    chart's defaults); docs may show another registry or tag, but only images that exist."""
    out = []
    for path, text in sorted(texts.items()):
        for m in IMAGE_REF.finditer(text):
            name = m.group(1)
            if f"{name}.Dockerfile" not in dockerfiles:
                out.append(f"{path}: image {m.group(0)} has no docker/{name}.Dockerfile")
            elif "/examples/" in path and m.group(0) != f"{registry}/{name}:{app_version}":
                out.append(f"{path}: image {m.group(0)} is not the chart's {registry}/{name}:{app_version}")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source-dir", required=True)
    p.add_argument("--build-dir", required=True)
    args = p.parse_args()
    src = args.source_dir
    docker_dir = os.path.join(src, "docker")
    files = sorted(f for f in os.listdir(docker_dir) if f.endswith(".Dockerfile"))
    if not files:
        fail("no Dockerfiles in docker/")

    with tempfile.TemporaryDirectory(prefix="docker-test-") as tmp:
        ctx = {"build_packages": setup_deps_groups(os.path.join(src, "tools/setup-deps.sh"), ["toolchain", "libraries"]),
               "component_files": {}, "install_root": tmp, "copied": set()}
        everything = os.path.join(tmp, "_all")
        r = subprocess.run(["cmake", "--install", args.build_dir, "--prefix", everything], capture_output=True, text=True)
        if r.returncode != 0:
            fail("cmake --install: " + r.stdout + r.stderr)
        installed = {os.path.relpath(os.path.join(d, f), everything) for d, _, fs in os.walk(everything) for f in fs}
        if not installed:
            fail("cmake --install installs nothing")
        # One component per installed program (cmake/KubecompInstall.cmake): bin/<component>.
        ctx["components"] = sorted((os.path.basename(f) for f in installed if f.startswith("bin/")),
                                   key=len, reverse=True)
        for name in ctx["components"]:
            prefix = os.path.join(tmp, name)
            r = subprocess.run(["cmake", "--install", args.build_dir, "--component", name, "--prefix", prefix],
                               capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"cmake --install --component {name}: {r.stdout}{r.stderr}")
            ctx["component_files"][name] = {os.path.relpath(os.path.join(d, x), prefix)
                                            for d, _, xs in os.walk(prefix) for x in xs}

        # The checker must catch each breakage before its verdict on the real files counts.
        sample_name = "vni-webhook"
        sample = open(os.path.join(docker_dir, sample_name + ".Dockerfile")).read()
        broken = {
            "runtime library dropped": sample.replace(" libsqlite3-0", ""),
            "extra runtime package": sample.replace("libssl3 \\", "libssl3 curl \\"),
            "root user": sample.replace("USER 65532:65532", "USER 0:0"),
            "no user": sample.replace("USER 65532:65532\n", ""),
            "wrong runtime base": sample.replace("FROM debian:bookworm-slim", "FROM ubuntu:22.04"),
            "copy of a file not installed": sample.replace("/out/bin/vni-webhook /", "/out/bin/vni-webhookd /"),
            "build package dropped": sample.replace(" libsqlitecpp-dev", ""),
            "other component": sample.replace("--component vni-webhook", "--component bridge-operator"),
            "binaries default not the build stage": sample.replace("ARG BINARIES=build", "ARG BINARIES=prebuilt"),
            "copy past the binaries stage": sample.replace("COPY --from=binaries ", "COPY --from=build "),
            "binaries stage that runs something": sample.replace("AS binaries\n", "AS binaries\nRUN true\n"),
        }
        pod = open(os.path.join(docker_dir, "bridge-pod-slurm.Dockerfile")).read()
        broken_pods = {
            "backend not selected": pod.replace(', "--backend", "slurm"', ""),
            "other backend": pod.replace('"--backend", "slurm"', '"--backend", "ray"'),
        }
        for what, text in broken.items():
            saved = set(ctx["copied"])
            if not check_dockerfile(sample_name, text, ctx):
                fail(f"the Dockerfile checker misses: {what}")
            ctx["copied"] = saved
        for what, text in broken_pods.items():
            saved = set(ctx["copied"])
            if not check_dockerfile("bridge-pod-slurm", text, ctx):
                fail(f"the Dockerfile checker misses: {what}")
            ctx["copied"] = saved
        print(f"Dockerfile checker: all {len(broken) + len(broken_pods)} broken Dockerfiles caught")

        problems = []
        for f in files:
            name = f[: -len(".Dockerfile")]
            problems += check_dockerfile(name, open(os.path.join(docker_dir, f)).read(), ctx)
        # Every file a daemon's component installs is in an image; other components (operator
        # tools such as kubectl-kubecomp, installed on a workstation) are not images.
        daemons = daemon_components(src)
        for d in sorted(daemons - set(ctx["components"])):
            problems.append(f"daemon {d} (cmake/KubecompInstall.cmake) installs no bin/{d}")
        daemon_files = set().union(*(ctx["component_files"].get(d, set()) for d in daemons))
        for rel in sorted(daemon_files - ctx["copied"]):
            problems.append(f"installed file {rel} is in no image")
        values = yaml.safe_load(open(os.path.join(src, "charts/kubecomp/values.yaml")))

        def images(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == "image" and isinstance(v, str):
                        yield v
                    else:
                        yield from images(v)

        for image in sorted(set(images(values))):
            if f"{image}.Dockerfile" not in files:
                problems.append(f"the chart uses image {image}, which has no docker/{image}.Dockerfile")
        # The images the chart's examples and the docs name: built ones, under the chart's names.
        registry = values["global"]["image"]["registry"]
        app_version = str(yaml.safe_load(open(os.path.join(src, "charts/kubecomp/Chart.yaml")))["appVersion"])
        examples = os.path.join(src, "charts/kubecomp/examples")
        texts = {os.path.join("charts/kubecomp/examples", f): open(os.path.join(examples, f)).read()
                 for f in os.listdir(examples) if f.endswith(".yaml")}
        texts.update({os.path.join("docs", f): open(os.path.join(src, "docs", f)).read()
                      for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md")})
        for what, bad in {"an example naming another registry": "image: ghcr.io/kubecomp/bridge-pod-slurm:0.1.0",
                          "an example naming another tag": f"image: {registry}/bridge-pod-slurm:0.1",
                          "an image that is not built": f"image: {registry}/bridge-pod-pbs:{app_version}"}.items():
            if not image_name_problems({"charts/kubecomp/examples/x.yaml": bad}, files, registry, app_version):
                fail(f"the image name checker misses: {what}")
        problems += image_name_problems(texts, files, registry, app_version)
        if problems:
            fail("\n  ".join(["Dockerfiles:"] + problems))
        print(f"{len(files)} Dockerfiles agree with the install tree ({len(installed)} files) and the binaries' libraries")


if __name__ == "__main__":
    main()
