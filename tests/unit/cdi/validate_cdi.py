#!/usr/bin/env python3
"""Every CDI spec libcore/cdi writes, checked by an implementation nobody here wrote.

Runs cdi_spec_gen (the specs the node agent writes: device-plugin form with 1 and 8 GPUs, a DRA
claim's spec, a spec without control nodes) into a temp dir, then validates each file with
Debian's python3-jsonschema against the CDI project's JSON schema (../shared/peers/cdi/schema:
schema.json, which $refs defs.json), and with the rules of SPEC.md the schema does not encode
(kind and device name syntax, the minimum cdiVersion of the fields used).

So that the test can fail, the validator is first shown to refuse: the schema's own
testdata/bad files must be refused and testdata/good accepted, and mutated copies of a
generated spec (a rule of schema.json, of defs.json through a $ref, and of SPEC.md broken each)
must be refused.

Usage: validate_cdi.py <cdi_spec_gen> <schema dir>
Exit 0 all good, 1 a failure, 77 skipped (the schema peer is absent).
"""
import copy
import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

SKIP = 77
FAILURES = []

# SPEC.md, "Released versions": the first version that allows each feature.
V050, V060, V070, V110 = (0, 5, 0), (0, 6, 0), (0, 7, 0), (1, 1, 0)
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
KIND_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
SEMVER_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
OUR_FILE_RE = re.compile(r"^kubecomp\.io-gpu_[A-Za-z0-9_-][A-Za-z0-9_.-]*\.json$")


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def make_validator(jsonschema, schema_dir):
    """Draft-07 validator of schema.json with defs.json resolvable under the schema dir's URI."""
    schema = json.loads((schema_dir / "schema.json").read_text())
    defs = json.loads((schema_dir / "defs.json").read_text())
    base = schema_dir.resolve().as_uri() + "/"
    jsonschema.Draft7Validator.check_schema(schema)
    try:  # jsonschema >= 4.18 resolves $ref through a referencing registry
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7
    except ImportError:  # Debian bookworm's 4.10: RefResolver with the two documents in its store
        resolver = jsonschema.RefResolver(
            base_uri=base + "schema.json", referrer=schema,
            store={base + "schema.json": schema, base + "defs.json": defs})
        return jsonschema.Draft7Validator(schema, resolver=resolver)
    registry = Registry().with_resources([
        (base + "schema.json", Resource.from_contents(schema, default_specification=DRAFT7)),
        (base + "defs.json", Resource.from_contents(defs, default_specification=DRAFT7)),
    ])
    return jsonschema.Draft7Validator(dict(schema, **{"$id": base + "schema.json"}),
                                      registry=registry)


def version_tuple(text):
    m = SEMVER_RE.match(text) if isinstance(text, str) else None
    return tuple(int(x) for x in m.groups()) if m else None


def all_edits(spec):
    edits = [spec.get("containerEdits") or {}]
    edits += [d.get("containerEdits") or {} for d in spec.get("devices", [])]
    return [e for e in edits if isinstance(e, dict)]


def spec_rule_errors(spec):
    """SPEC.md's rules beyond schema.json; [] when the spec keeps them all."""
    errors = []
    version = version_tuple(spec.get("cdiVersion"))
    if version is None:
        return ["cdiVersion is not a semantic version"]
    kind = spec.get("kind", "")
    prefix, _, name = kind.partition("/")
    if ("/" not in kind or "/" in name or not name or len(name) > 63
            or not KIND_NAME_RE.match(name) or len(prefix) > 253
            or not all(DNS_LABEL_RE.match(label) for label in prefix.split("."))):
        errors.append(f"kind {kind!r} is not <dns subdomain>/<name>")
    need = (0, 3, 0)
    if "." in name:
        need = max(need, V060)
    devices = spec.get("devices", [])
    if not devices:
        errors.append("no device")
    names = [d.get("name") for d in devices]
    for n in names:
        if not isinstance(n, str) or not NAME_RE.match(n):
            errors.append(f"device name {n!r} breaks the name rule")
        elif n[0].isdigit():
            need = max(need, V050)
    if len(set(map(str, names))) != len(names):
        errors.append("a device name is repeated")
    if "annotations" in spec or any("annotations" in d for d in devices):
        need = max(need, V060)
    for edits in all_edits(spec):
        for node in edits.get("deviceNodes", []):
            if "hostPath" in node:
                need = max(need, V050)
            if not str(node.get("path", "")).startswith("/"):
                errors.append(f"device node path {node.get('path')!r} is not absolute")
        for env in edits.get("env", []):
            if not isinstance(env, str) or "=" not in env or env.startswith("="):
                errors.append(f"env entry {env!r} is not NAME=VALUE")
        if "intelRdt" in edits or "additionalGids" in edits:
            need = max(need, V070)
        if "netDevices" in edits:
            need = max(need, V110)
    if version < need:
        errors.append("cdiVersion %s is below %s, the minimum for the fields used"
                      % (spec["cdiVersion"], ".".join(map(str, need))))
    return errors


def refusal(validator, spec):
    """Why the spec is refused (schema first, then SPEC.md's rules), or None."""
    schema_errors = sorted(validator.iter_errors(spec), key=lambda e: list(e.path))
    if schema_errors:
        return "schema: " + schema_errors[0].message
    rules = spec_rule_errors(spec)
    return "SPEC.md: " + rules[0] if rules else None


def check_testdata(validator, schema_dir):
    good = sorted((schema_dir / "testdata" / "good").glob("*.json"))
    bad = sorted((schema_dir / "testdata" / "bad").glob("*.json"))
    check(len(good) > 0 and len(bad) > 0, f"testdata: {len(good)} good, {len(bad)} bad files")
    refused_by_schema = 0
    for path in good:
        why = refusal(validator, json.loads(path.read_text()))
        check(why is None, f"testdata/good/{path.name} accepted" + (f" ({why})" if why else ""))
    for path in bad:
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError:
            check(True, f"testdata/bad/{path.name} refused (not JSON)")
            continue
        why = refusal(validator, doc)
        refused_by_schema += why is not None and why.startswith("schema:")
        check(why is not None, f"testdata/bad/{path.name} refused ({why})")
    check(refused_by_schema > 0, "at least one bad file is refused by the schema itself")


def mutations(spec):
    """(what, mutated copy, who must refuse it) from a generated spec."""
    def mutate(fn):
        doc = copy.deepcopy(spec)
        fn(doc)
        return doc
    node = lambda d: d["devices"][0]["containerEdits"]["deviceNodes"][0]  # noqa: E731
    return [
        ("no devices field", mutate(lambda d: d.pop("devices")), "schema"),
        ("no kind", mutate(lambda d: d.pop("kind")), "schema"),
        ("device name a number", mutate(lambda d: d["devices"][0].update(name=5)), "schema"),
        ("device without containerEdits",
         mutate(lambda d: d["devices"][0].pop("containerEdits")), "schema"),
        # defs.json through schema.json's $ref, and defs.json's own $ref to uint32:
        ("device node without path (defs.json)", mutate(lambda d: node(d).pop("path")), "schema"),
        ("device node uid -1 (defs.json uint32)", mutate(lambda d: node(d).update(uid=-1)),
         "schema"),
        ("hostPath in a 0.4.0 spec", mutate(lambda d: d.update(cdiVersion="0.4.0")), "SPEC.md"),
        ("device name starting with '-'",
         mutate(lambda d: d["devices"][0].update(name="-gpu")), "SPEC.md"),
        ("kind without a vendor", mutate(lambda d: d.update(kind="gpu")), "SPEC.md"),
        ("no device at all", mutate(lambda d: d.update(devices=[])), "SPEC.md"),
    ]


def check_generated(validator, generator):
    with tempfile.TemporaryDirectory(prefix="kc-cdi-") as tmp:
        spec_dir = pathlib.Path(tmp) / "cdi"
        run = subprocess.run([generator, str(spec_dir)], capture_output=True, text=True,
                             timeout=30)
        check(run.returncode == 0, "cdi_spec_gen wrote its specs" +
              (f" ({run.stderr.strip()})" if run.stderr.strip() else ""))
        paths = [pathlib.Path(line) for line in run.stdout.split()]
        check(len(paths) == 4, f"cdi_spec_gen reported {len(paths)} files (want 4)")
        check(sorted(p.name for p in paths) == sorted(os.listdir(spec_dir)),
              "the directory holds exactly the reported files (no temp file left)")
        specs = {}
        for path in paths:
            check(bool(OUR_FILE_RE.match(path.name)), f"{path.name}: named <vendor>-<class>_<tag>.json")
            spec = json.loads(path.read_text())
            specs[path.name] = spec
            why = refusal(validator, spec)
            check(why is None, f"{path.name}: valid CDI spec" + (f" ({why})" if why else ""))
            check(spec.get("kind") == "kubecomp.io/gpu", f"{path.name}: kind kubecomp.io/gpu")
        eight = specs.get("kubecomp.io-gpu_node-8.json", {})
        check(len(eight.get("devices", [])) == 8, "the 8-GPU spec has 8 devices")
        for what, doc, who in mutations(eight or {"devices": [{}]}):
            why = refusal(validator, doc)
            check(why is not None and why.startswith(who),
                  f"mutated spec refused by {who}: {what} ({why})")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 1
    generator, schema_dir = sys.argv[1], pathlib.Path(sys.argv[2])
    if not (schema_dir / "schema.json").is_file() or not (schema_dir / "defs.json").is_file():
        print(f"SKIP: peer CDI JSON schema absent: {schema_dir} (schema.json, defs.json; "
              "the CDI project's schema under ../shared/peers/cdi)")
        return SKIP
    try:
        import jsonschema
    except ImportError:
        print("FAIL: python3-jsonschema is not installed (bash tools/setup-deps.sh installs it)")
        return 1
    print(f"jsonschema {importlib.metadata.version('jsonschema')} from "
          f"{os.path.dirname(jsonschema.__file__)}, schema {schema_dir}")
    validator = make_validator(jsonschema, schema_dir)
    check_testdata(validator, schema_dir)
    check_generated(validator, generator)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
