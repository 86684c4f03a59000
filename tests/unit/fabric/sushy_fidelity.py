#!/usr/bin/env python3
"""chassis-sim's Redfish, read by a client nobody here wrote: Debian's python3-sushy
(OpenStack's Redfish library).

Usage: sushy_fidelity.py CHASSIS_SIM_BINARY TESTBED_YAML

Starts the simulator on a free port with basic auth and checks, through sushy, that the
classic profile's service root, session login, CompositionService, ResourceBlocks, their GPU
Processors and the ComputerSystems parse and say what the testbed topology says; that an
AddResourceBlock action sent through sushy's connector is applied; and that sushy reaches the
emulator profile's service root through its 308 redirect. Exit 0 on success, 1 with the reason.
"""

import re
import subprocess
import sys

import sushy
from sushy.resources.compositionservice import constants as comp_cons
from sushy.resources.compositionservice import resourceblock
from sushy.resources.system import constants as sys_cons
from sushy.resources.system import processor

USER, PASSWORD = "ops", "pw"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")
    print(f"ok   {what}: {got!r}")


class Sim:
    def __init__(self, binary, testbed, profile):
        self.proc = subprocess.Popen(
            [binary, "--topology", testbed, "--port", "0", "--latency-scale", "0",
             "--dialect", "redfish", "--redfish-profile", profile,
             "--basic-auth", f"{USER}:{PASSWORD}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = self.proc.stdout.readline()
        match = re.search(r"listening on (http://\S+)", first)
        if not match:
            self.stop()
            fail(f"chassis-sim did not start: {first!r}")
        self.base = match.group(1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def connect(base, prefix):
    return sushy.Sushy(base, root_prefix=prefix,
                       auth=sushy.auth.SessionOrBasicAuth(username=USER, password=PASSWORD))


def blocks_of(root, comp):
    # sushy 4.3's CompositionService.resource_blocks passes its path helper uncalled, so the
    # collection is built from the link sushy parsed.
    return resourceblock.ResourceBlockCollection(
        root._conn, comp.json["ResourceBlocks"]["@odata.id"],
        redfish_version=root.redfish_version, root=root)


def classic(binary, testbed):
    sim = Sim(binary, testbed, "classic")
    try:
        prefix = "/chassis/falcon-0/redfish/v1/"
        root = connect(sim.base, prefix)
        expect("service root Id", root.identity, "RootService")
        expect("RedfishVersion", root.redfish_version, "1.17.0")

        comp = root.get_composition_service()
        expect("CompositionService Id", comp.identity, "CompositionService")
        expect("CompositionService ServiceEnabled", comp.service_enabled, True)

        want_host = {"001300": "css-host-128", "001800": "css-host-128",
                     "000C00": "css-host-129", "000500": None}
        want_uuid = {"001300": "16a0c321-fc4f-fd47-26e7-770eb9ecf5f9"}
        blocks = {b.identity: b for b in blocks_of(root, comp).get_members()}
        expect("ResourceBlock Ids", sorted(blocks), sorted(want_host))
        systems = {s.identity: s for s in root.get_system_collection().get_members()}
        expect("ComputerSystem Ids", sorted(systems), ["css-host-128", "css-host-129"])
        for gid, host in want_host.items():
            block = blocks[gid]
            expect(f"{gid} CompositionState", block.composition_status.composition_state,
                   comp_cons.CompositionState.COMPOSED if host else comp_cons.CompositionState.UNUSED)
            procs = [processor.Processor(root._conn, link["@odata.id"],
                                         redfish_version=root.redfish_version, root=root)
                     for link in block.json.get("Processors", [])]
            expect(f"{gid} processors", len(procs), 1)
            expect(f"{gid} ProcessorType", procs[0].processor_type, sys_cons.ProcessorType.GPU)
            expect(f"{gid} Model", procs[0].model, "Tesla V100-PCIE-32GB")
            if gid in want_uuid:
                expect(f"{gid} UUID", procs[0].json.get("UUID"), want_uuid[gid])
            holders = sorted(s.identity for s in systems.values()
                             if block.path in [l["@odata.id"] for l in s.json["Links"]["ResourceBlocks"]])
            expect(f"{gid} held by", holders, [host] if host else [])

        # An action through sushy's own connector (sushy models no AddResourceBlock).
        target = systems["css-host-129"].json["Actions"]["#ComputerSystem.AddResourceBlock"]["target"]
        reply = root._conn.post(target, data={"ResourceBlock": {"@odata.id": blocks["000500"].path}})
        expect("AddResourceBlock status", reply.status_code, 204)
        blocks["000500"].refresh()
        expect("000500 CompositionState after AddResourceBlock",
               blocks["000500"].composition_status.composition_state,
               comp_cons.CompositionState.COMPOSED)
    finally:
        sim.stop()


def emulator(binary, testbed):
    sim = Sim(binary, testbed, "emulator")
    try:
        # No trailing slash: the emulator profile answers 308 to "/redfish/v1/", and sushy's
        # HTTP stack must follow it to read the root.
        root = connect(sim.base, "/chassis/falcon-1/redfish/v1")
        expect("emulator service root Id (through the 308)", root.identity, "RootService")
        comp = root.get_composition_service()
        expect("emulator CompositionService Id", comp.identity, "CompositionService")
    finally:
        sim.stop()


def main():
    if len(sys.argv) != 3:
        fail("usage: sushy_fidelity.py CHASSIS_SIM_BINARY TESTBED_YAML")
    classic(sys.argv[1], sys.argv[2])
    emulator(sys.argv[1], sys.argv[2])
    print("sushy read chassis-sim as the topology says")


if __name__ == "__main__":
    main()
