#!/usr/bin/env python3
"""Every binary of the suite answers its command line the same way (libcore/cli/flags.hpp):
--version prints "<name> <version> (git <revision>)" on stdout and exits 0, --help exits 0 and
lists --version, an unknown flag exits 2 naming the flag (before any missing required flag),
--log-level, where a binary has it, lists its values, and the flags daemons share have one
name everywhere (kube-scheduler's): --bind-address, --kubeconfig, the --leader-elect group; an old
name may remain only in the help's deprecated group. An environment-variable fallback is shown
the one way CLI11 writes it, "(Env:NAME)", and the flags every binary shares (--kubeconfig,
--log-level, --version, --help) are described the same way in every --help.
Usage: cli_conventions_test.py NAME=PATH...
"""
import re
import subprocess
import sys

VERSION = re.compile(r"^(?P<name>\S+) \d+\.\d+\.\d+( \(git ([0-9a-f]{4,40}(-dirty)?|unknown)\))?$")
BOGUS = "--no-such-flag-for-the-test"
DEPRECATED = "Deprecated (removed in the next release)"
# Old names of shared flags: never offered outside the deprecated group.
OLD_NAMES = ["--listen", "--bind", "--no-leader-elect", "--lease-namespace", "--lease-name",
             "--leader-elect-namespace", "--leader-elect-name", "--lease-duration-seconds",
             "--renew-deadline-seconds", "--retry-period-seconds"]
LEADER_GROUP = ["--leader-elect", "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
                "--leader-elect-retry-period", "--leader-elect-resource-namespace",
                "--leader-elect-resource-name"]
# kubelet-standin keeps kubelet's own names (--address, --healthz-port): it stands in for kubelet.
KUBELET_NAMES = {"kubelet-standin"}
# Flags whose description must read the same in every binary that has them.
SHARED_DESCRIPTIONS = ["--kubeconfig", "--log-level", "--version", "--help"]


def description(help_text, flag):
    """The description of `flag` in CLI11's --help layout (continuation lines joined)."""
    m = re.search(r"(?m)^\s+(?:-\w, ?)?" + re.escape(flag) + r"(?=[\s,=]|$)[^\n]*(\n {20,}[^\n]*)*",
                  help_text)
    if not m:
        return None
    text = re.sub(r"\s+", " ", m.group(0)).strip()
    # Drop the flag, its value type, default and environment variable (each binary has its own):
    # what is left is the description.
    text = re.sub(r"^(?:-\w, ?)?" + re.escape(flag) + r"(?: [A-Z:]+(?:\[[^]]*\])?)? ?", "", text)
    text = re.sub(r"^=\S+ ?", "", text)
    return re.sub(r"\(Env:[A-Z0-9_]+\) ?", "", text).strip()


def run(path, *args):
    cmd = [sys.executable, path] if path.endswith("kubecomp-demo") else [path]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30)


def main():
    failures = []
    shared = {}  # flag -> description -> binaries
    binaries = [a.split("=", 1) for a in sys.argv[1:]]
    if not binaries:
        print("usage: cli_conventions_test.py NAME=PATH...")
        return 2
    for name, path in binaries:
        def fail(what):
            failures.append(f"{name}: {what}")

        v = run(path, "--version")
        m = VERSION.match(v.stdout.strip())
        if v.returncode != 0 or not m or m.group("name") != name or v.stdout.count("\n") != 1:
            fail(f"--version: rc {v.returncode}, stdout {v.stdout!r}, stderr {v.stderr[:200]!r}")
        # With a required flag missing as well (bridge-pod, kubecomp-sim need some), the unknown
        # flag is what is reported.
        u = run(path, BOGUS)
        if u.returncode != 2:
            fail(f"unknown flag: rc {u.returncode} (want 2)")
        if f"unknown flag {BOGUS}" not in u.stderr and f"unrecognized arguments: {BOGUS}" not in u.stderr:
            fail(f"unknown flag not named on stderr: {u.stderr[:300]!r}")
        h = run(path, "--help")
        if h.returncode != 0 or "--version" not in h.stdout:
            fail(f"--help: rc {h.returncode}, --version listed: {'--version' in h.stdout}")
        level = re.search(r"--log-level[^\n]*(\n {20,}[^\n]*)?", h.stdout)
        if level and not all(v in level.group(0) for v in ("trace", "debug", "info", "warn", "error")):
            fail(f"--log-level does not list its values: {level.group(0)!r}")
        current = h.stdout.split(DEPRECATED)[0]
        offered = set(re.findall(r"(?m)^\s+(?:-\w, ?)?(--[a-z0-9-]+)", current))
        for old in OLD_NAMES:
            if old in offered:
                fail(f"offers the old name {old} outside the deprecated group")
        if name not in KUBELET_NAMES and ("--address" in offered):
            fail("offers --address (the shared name is --bind-address)")
        if any(f.startswith("--leader-elect") for f in offered):
            missing = [f for f in LEADER_GROUP if f not in offered]
            if missing:
                fail(f"has leader election but not the whole group: missing {missing}")
        # Environment fallbacks: shown as CLI11 shows them, never as a "default: $NAME" of its
        # own ($KUBECONFIG is the kubeconfig loader's lookup, described with --kubeconfig).
        for var in re.findall(r"default:? \$([A-Z_]+)", h.stdout):
            if var != "KUBECONFIG":
                fail(f"describes the environment fallback ${var} by hand (use envname: (Env:{var}))")
        if name.endswith("kubecomp-demo") is False:
            for flag in SHARED_DESCRIPTIONS:
                d = description(h.stdout, flag)
                if d is not None:
                    shared.setdefault(flag, {}).setdefault(d, []).append(name)
        print(f"{name}: {v.stdout.strip()}")
    for flag, variants in shared.items():
        if len(variants) > 1:
            listed = "; ".join(f"{d!r} ({', '.join(b)})" for d, b in variants.items())
            failures.append(f"{flag} is described {len(variants)} ways: {listed}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(binaries)} binaries, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
