#!/usr/bin/python3
"""The Redfish driver against Redfish services nobody here wrote (DMTF's own programs in
../shared/peers/redfish), through kubecomp-fabric (the same driver reconfig-mgr runs).

Usage: redfish_peers_test.py KUBECOMP_FABRIC PEERS_DIR

  mockup     DMTF Redfish Mockup Server on the public-composability mockup: exactly one GPU
             (OffloadBlock9; the Compute blocks are hosts, never GPUs); a GPU Processor without
             a UUID is Unhealthy (never handed to a pod) until the service shows one; session
             login answered 204 with X-Auth-Token and Location is accepted; an attach the
             static mockup does not apply fails as unverified and the GPU stays where it was;
             a ResourceBlock without CompositionStatus is left out with the reason, the rest
             stays. The Mockup Server advertises $expand: the default read (expanded) and a
             read without $expand, one GET at a time, show the same inventory, the expanded one
             in fewer GETs (counted in the server's request log).
  tls        the Mockup Server over https with a certificate of a CA made here (openssl): with
             that CA (--ca-file) the inventory is read; with none (the system store) or another
             CA the read is refused with an error naming the chassis; --insecure-skip-verify
             reads it with a warning on stderr.
  emulator   DMTF Redfish Interface Emulator (dynamic, populated; its block Processors made
             GPUs with distinct UUIDs in a scratch copy of its template): exactly the 8 GPU
             blocks, its systems as hosts; an attach the service cannot express is refused as
             unsupported and nothing is sent (no POST, PATCH or DELETE in its request log).
  cxl        the Mockup Server on the public-cxl mockup read with --style fabric (DSP0268 Fabric
             Endpoints and Connections): exactly one GPU (T2, a GPU Processor behind a CXL
             Type 2 device; FPGA, memory and switch Endpoints are not GPUs), the initiator
             Endpoints its collection lists (I1-I3; I4 is not listed) as hosts, T2 connected to I2 by Connection 12; Unhealthy without a UUID
             until the service shows one. The Mockup Server keeps POSTs and DELETEs of
             collection members in memory, so a real move is made: detach = DELETE of
             Connection 12, attach = POST of a Connection to I1, both verified by re-reading;
             with the Fabric's Connections link gone, an attach is unsupported and nothing is
             sent.

Exit 0 on success, 77 (skipped) when PEERS_DIR is absent, 1 with the reason otherwise.
"""

import json
import os
import ssl
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def ok(msg):
    print("ok  ", msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, log, timeout=30, cafile=None):
    deadline = time.monotonic() + timeout
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"{url}: the peer exited: {open(log).read()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    fail(f"{url} did not answer within {timeout} s: {open(log).read()[-2000:]}")


class Peer:
    def __init__(self, argv, cwd, log, url, env, cafile=None):
        self.log = log
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                     env=env)
        wait_http(url, self.proc, log, cafile=cafile)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def fabric(binary, url, *args, auth="none", creds=None, flags=()):
    argv = [binary, "--dialect", "redfish", "--url", url, "--name", "peer", "--auth", auth]
    if creds:
        argv += ["--credentials-file", creds]
    argv += list(flags) + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def inventory(binary, url, **kw):
    r = fabric(binary, url, "-o", "json", "inventory", **kw)
    if r.returncode != 0:
        fail(f"inventory of {url} exited {r.returncode}: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)["chassis"][0]


def mutating_requests(log):
    return [line for line in open(log).read().splitlines()
            if any(f'"{m} ' in line for m in ("POST", "PATCH", "DELETE", "PUT"))]


def get_requests(log):
    return [line for line in open(log).read().splitlines() if '"GET ' in line]


def expand_versus_plain(binary, url, log):
    """The default read ($expand, parallel) against a plain one-GET-at-a-time read."""
    start = len(get_requests(log))
    expanded = inventory(binary, url)
    middle = len(get_requests(log))
    plain = inventory(binary, url, flags=["--no-expand", "--read-parallelism", "1"])
    end = len(get_requests(log))
    for key in ("gpus", "hosts", "skipped"):
        if expanded[key] != plain[key]:
            fail(f"mockup: {key} differ with and without $expand: {expanded[key]} / {plain[key]}")
    asked = [line for line in get_requests(log)[start:middle] if "$expand=" in line]
    if not asked:
        fail("mockup: the default read asked for no $expand although the service advertises it")
    if not middle - start < end - middle:
        fail(f"mockup: expanded read took {middle - start} GETs, plain {end - middle}")
    ok(f"$expand: the same inventory in {middle - start} GETs instead of {end - middle} "
       f"(asked: {asked[0].split('GET ')[1].split(' ')[0]})")


def mockup(binary, peers, tmp, env):
    mock = os.path.join(tmp, "public-composability")
    shutil.copytree(os.path.join(peers, "mockups", "public-composability"), mock)
    # One malformed block: DriveBlock5 without CompositionStatus.
    block5 = os.path.join(mock, "CompositionService", "ResourceBlocks", "DriveBlock5", "index.json")
    doc = json.load(open(block5))
    del doc["CompositionStatus"]
    json.dump(doc, open(block5, "w"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = os.path.join(peers, "Redfish-Mockup-Server", "redfishMockupServer.py")
    peer = Peer(["/usr/bin/python3", server, "-S", "-D", mock, "-H", "127.0.0.1", "-p", str(port)],
                tmp, os.path.join(tmp, "mockup.log"), url + "/redfish/v1/", env)
    try:
        inv = inventory(binary, url)
        ids = [g["id"] for g in inv["gpus"]]
        if ids != ["peer.OffloadBlock9"]:
            fail(f"mockup: GPUs {ids}, want exactly [peer.OffloadBlock9] (Compute blocks are hosts)")
        if inv["hosts"] != ["ComputeBlock1", "ComputeBlock2", "SystemBlock11", "SystemBlock12"]:
            fail(f"mockup: hosts {inv['hosts']}")
        ok("public-composability: one GPU, the Compute and ComputerSystem blocks as hosts")
        gpu = inv["gpus"][0]
        if gpu["health"] != "Unhealthy" or "UUID" not in gpu["healthDetail"]:
            fail(f"mockup: a GPU without UUID is {gpu['health']} ({gpu['healthDetail']})")
        ok("a GPU Processor without UUID is Unhealthy: " + gpu["healthDetail"])
        if len(inv["skipped"]) != 1 or "DriveBlock5" not in inv["skipped"][0]:
            fail(f"mockup: skipped {inv['skipped']}, want DriveBlock5 with the reason")
        ok("a block without CompositionStatus is left out, the rest read: " + inv["skipped"][0])
        expand_versus_plain(binary, url, peer.log)
        creds = os.path.join(tmp, "creds")
        with open(creds, "w") as f:
            f.write("root:password\n")
        if inventory(binary, url, auth="session", creds=creds)["gpus"] != inv["gpus"]:
            fail("mockup: session login changed the inventory")
        ok("session login answered 204 + X-Auth-Token + Location is accepted")
        req = urllib.request.Request(
            url + "/redfish/v1/CompositionService/ResourceBlocks/OffloadBlock9/Processors/Block9GPU",
            data=json.dumps({"UUID": "8f1a3b7e-5c2d-4e9a-b6f0-1d2e3f4a5b6c"}).encode(),
            method="PATCH", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()
        gpu = inventory(binary, url)["gpus"][0]
        if gpu["health"] != "OK" or gpu["uuid"] != "GPU-8f1a3b7e-5c2d-4e9a-b6f0-1d2e3f4a5b6c":
            fail(f"mockup: with a UUID the GPU is {gpu}")
        ok("with a UUID it is OK: " + gpu["uuid"])
        r = fabric(binary, url, "attach", "peer.OffloadBlock9", "ComputeBlock1")
        if r.returncode == 0 or "does not show the change" not in r.stderr:
            fail(f"mockup: attach on a static mockup: exit {r.returncode}: {r.stdout}{r.stderr}")
        ok("attach the static mockup does not apply: " + r.stderr.strip())
        r = fabric(binary, url, "verify", "peer.OffloadBlock9")
        if r.returncode != 0:
            fail(f"mockup: the GPU is no longer unattached: {r.stdout}{r.stderr}")
        ok("the GPU stayed unattached")
    finally:
        peer.stop()


def patch(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="PATCH",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()


def cxl(binary, peers, tmp, env):
    mock = os.path.join(tmp, "public-cxl")
    shutil.copytree(os.path.join(peers, "mockups", "public-cxl"), mock)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = os.path.join(peers, "Redfish-Mockup-Server", "redfishMockupServer.py")
    peer = Peer(["/usr/bin/python3", server, "-S", "-D", mock, "-H", "127.0.0.1", "-p", str(port)],
                tmp, os.path.join(tmp, "mockup-cxl.log"), url + "/redfish/v1/", env)
    style = ["--style", "fabric"]
    try:
        inv = inventory(binary, url, flags=style)
        if [g["id"] for g in inv["gpus"]] != ["peer.T2"]:
            fail(f"cxl: GPUs {inv['gpus']}, want exactly [peer.T2]")
        if inv["hosts"] != ["I1", "I2", "I3"] or inv["skipped"]:  # its collection omits I4
            fail(f"cxl: hosts {inv['hosts']}, skipped {inv['skipped']}")
        gpu = inv["gpus"][0]
        if gpu.get("host") != "I2" or gpu["health"] != "Unhealthy" or "UUID" not in gpu["healthDetail"]:
            fail(f"cxl: T2 is {gpu}")
        ok("public-cxl: one GPU (T2) on I2 by Connection 12, the three initiators listed as hosts; "
           "no UUID: " + gpu["healthDetail"])
        if inventory(binary, url, flags=style + ["--fabric", "CXL"])["gpus"] != inv["gpus"]:
            fail("cxl: --fabric CXL reads another inventory")
        r = fabric(binary, url, "inventory", flags=style + ["--fabric", "PCIe"])
        if r.returncode != 1 or "its Fabrics: CXL" not in r.stdout + r.stderr:
            fail(f"cxl: a Fabric it lacks: exit {r.returncode}: {r.stdout}{r.stderr}")
        ok("a Fabric it lacks is refused naming the ones it has")
        patch(url, "/redfish/v1/Chassis/PooledCXLType2/Processors/GPU",
              {"UUID": "5b1f6a2c-9d3e-4f70-8a1b-2c3d4e5f6a7b", "Model": "CXL Type 2 GPU"})
        gpu = inventory(binary, url, flags=style)["gpus"][0]
        if gpu["health"] != "OK" or gpu["uuid"] != "GPU-5b1f6a2c-9d3e-4f70-8a1b-2c3d4e5f6a7b":
            fail(f"cxl: with a UUID T2 is {gpu}")
        ok("with a UUID it is OK: " + gpu["uuid"])
        before = len(mutating_requests(peer.log))
        r = fabric(binary, url, "detach", "peer.T2", flags=style)
        sent = mutating_requests(peer.log)[before:]
        if r.returncode != 0 or len(sent) != 1 or "DELETE /redfish/v1/Fabrics/CXL/Connections/12" not in sent[0]:
            fail(f"cxl: detach exit {r.returncode}: {r.stdout}{r.stderr}; sent {sent}")
        ok("detach: DELETE of Connection 12, verified: " + r.stdout.strip())
        before = len(mutating_requests(peer.log))
        r = fabric(binary, url, "attach", "peer.T2", "I1", flags=style)
        sent = mutating_requests(peer.log)[before:]
        if r.returncode != 0 or len(sent) != 1 or "POST /redfish/v1/Fabrics/CXL/Connections" not in sent[0]:
            fail(f"cxl: attach exit {r.returncode}: {r.stdout}{r.stderr}; sent {sent}")
        if fabric(binary, url, "verify", "peer.T2", "I1", flags=style).returncode != 0:
            fail("cxl: after the attach T2 is not on I1")
        ok("attach: POST of a Connection I1 -> T2, verified: " + r.stdout.strip())
        r = fabric(binary, url, "detach", "peer.T2", flags=style)
        if r.returncode != 0:
            fail(f"cxl: detach of the new Connection: {r.stdout}{r.stderr}")
        patch(url, "/redfish/v1/Fabrics/CXL", {"Connections": None})
        before = len(mutating_requests(peer.log))
        r = fabric(binary, url, "attach", "peer.T2", "I1", flags=style)
        sent = mutating_requests(peer.log)[before:]
        if r.returncode == 0 or "unsupported" not in r.stderr or sent:
            fail(f"cxl: attach without Connections: exit {r.returncode}: {r.stderr}; sent {sent}")
        ok("no Connections collection: unsupported, nothing sent: " + r.stderr.strip())
    finally:
        peer.stop()


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"openssl {' '.join(args)}: {r.stderr}")


def make_ca(tmp, name):
    """A throwaway CA (EC P-256, 2 days) as <name>.crt / <name>.key in tmp."""
    cnf = os.path.join(tmp, name + ".cnf")
    with open(cnf, "w") as f:
        f.write("[req]\ndistinguished_name=dn\nx509_extensions=ca\nprompt=no\n[dn]\nCN=" + name +
                "\n[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".crt", "-days", "2", "-config", cnf, cwd=tmp)
    return os.path.join(tmp, name + ".crt")


def make_server_cert(tmp, ca):
    """A serving certificate for 127.0.0.1 signed by CA `ca` (server.crt / server.key)."""
    ext = os.path.join(tmp, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=IP:127.0.0.1\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=tmp)
    openssl("x509", "-req", "-in", "server.csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", "server.crt", cwd=tmp)
    return os.path.join(tmp, "server.crt"), os.path.join(tmp, "server.key")


def tls(binary, peers, tmp, env):
    ca = make_ca(tmp, "bmc-ca")
    other = make_ca(tmp, "other-ca")
    cert, key = make_server_cert(tmp, "bmc-ca")
    mock = os.path.join(peers, "mockups", "public-composability")
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    server = os.path.join(peers, "Redfish-Mockup-Server", "redfishMockupServer.py")
    peer = Peer(["/usr/bin/python3", server, "-S", "-D", mock, "-H", "127.0.0.1", "-p", str(port),
                 "-s", "--cert", cert, "--key", key],
                tmp, os.path.join(tmp, "mockup-tls.log"), url + "/redfish/v1/", env, cafile=ca)
    try:
        inv = inventory(binary, url, flags=["--ca-file", ca])
        if [g["id"] for g in inv["gpus"]] != ["peer.OffloadBlock9"]:
            fail(f"tls: GPUs {inv['gpus']} with the right CA")
        ok("https with the CA that signed the service's certificate: inventory read")
        for what, flags in (("no CA (the system store)", []), ("another CA", ["--ca-file", other])):
            r = fabric(binary, url, "inventory", flags=flags)
            text = r.stdout + r.stderr
            if r.returncode != 1 or "redfish chassis peer" not in text or \
                    "certificate verification" not in text:
                fail(f"tls: {what}: exit {r.returncode}: {text}")
            ok(f"{what}: refused: " + r.stdout.strip().splitlines()[-1][:160])
        r = fabric(binary, url, "-o", "json", "inventory", flags=["--insecure-skip-verify"])
        if r.returncode != 0 or "verification is OFF" not in r.stderr:
            fail(f"tls: insecure: exit {r.returncode}: {r.stdout}{r.stderr}")
        if json.loads(r.stdout)["chassis"][0]["gpus"] != inv["gpus"]:
            fail("tls: insecure read shows other GPUs")
        ok("--insecure-skip-verify: read, with a warning: " + r.stderr.strip().splitlines()[0][:160])
    finally:
        peer.stop()


def emulator(binary, peers, tmp, env):
    emu = os.path.join(tmp, "emu")
    shutil.copytree(os.path.join(peers, "Redfish-Interface-Emulator"), emu)
    shutil.copy(os.path.join(emu, "emulator-config_dynamic_populate.json"),
                os.path.join(emu, "emulator-config.json"))
    # Its blocks carry CPU Processors; as GPUs (with a UUID each) they are what we pool.
    tpl = os.path.join(emu, "api_emulator", "redfish", "templates", "processor.py")
    text = open(tpl).read()
    text = text.replace('"ProcessorType": "CPU",',
                        '"ProcessorType": "GPU",\n    "UUID": "{suffix_id}-{processor_id}",', 1)
    text = text.replace("c['Id'] = c['Id'].format(**defaults)",
                        "c['Id'] = c['Id'].format(**defaults)\n    c['UUID'] = c['UUID'].format(**defaults)", 1)
    open(tpl, "w").write(text)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    peer = Peer(["/usr/bin/python3", "emulator.py", "-port", str(port)], emu,
                os.path.join(tmp, "emulator.log"), url + "/redfish/v1/", env)
    try:
        inv = inventory(binary, url)
        ids = [g["id"] for g in inv["gpus"]]
        want = [f"peer.Block-{i}" for i in range(1, 9)]
        if sorted(ids) != sorted(want):
            fail(f"emulator: GPUs {ids}, want {want} (blocks 9 and 10 hold only storage)")
        bad = [g for g in inv["gpus"] if g["health"] != "OK" or not g["uuid"]]
        if bad or len({g["uuid"] for g in inv["gpus"]}) != 8:
            fail(f"emulator: GPUs not OK or UUIDs not distinct: {inv['gpus']}")
        if inv["hosts"] != [f"System-{i}" for i in range(1, 8)]:
            fail(f"emulator: hosts {inv['hosts']}")
        ok("Interface Emulator: exactly the 8 GPU blocks, distinct UUIDs, 7 systems as hosts")
        before = len(mutating_requests(peer.log))
        r = fabric(binary, url, "attach", "peer.Block-1", "System-1")
        if r.returncode == 0 or "unsupported" not in r.stderr:
            fail(f"emulator: attach exit {r.returncode}: {r.stdout}{r.stderr}")
        sent = mutating_requests(peer.log)[before:]
        if sent:
            fail(f"emulator: an unsupported attach sent {sent}")
        ok("attach it cannot express: unsupported, nothing sent: " + r.stderr.strip())
    finally:
        peer.stop()


def main():
    if len(sys.argv) != 3:
        fail(__doc__)
    binary, peers = sys.argv[1], os.path.join(sys.argv[2], "redfish")
    if not os.path.isdir(peers):
        print(f"SKIP: {peers} is absent (the real Redfish peers live in ../shared/peers)")
        sys.exit(SKIP)
    env = dict(os.environ, PYTHONPATH=os.path.join(peers, "stubs"))
    with tempfile.TemporaryDirectory(prefix="redfish-peers-") as tmp:
        mockup(binary, peers, tmp, env)
        cxl(binary, peers, tmp, env)
        tls(binary, peers, tmp, env)
        emulator(binary, peers, tmp, env)
    print("PASS")


if __name__ == "__main__":
    main()
