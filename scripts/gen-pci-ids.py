#!/usr/bin/env python3
"""Cut the PCI ids topo names into crates/topo-source/data/pci.ids.

Usage: scripts/gen-pci-ids.py [PCI_IDS] [SOURCE_NOTE]

PCI_IDS defaults to Debian's /usr/share/misc/pci.ids (package pci.ids, also pulled in by
pciutils and hwdata); any pci.ids of the PCI ID Project has the same format. The output keeps
that format (vendor lines, tab-indented device lines; subsystem lines and classes dropped) for
the vendors whose devices sit on GPU servers and the name line of every other vendor (so an
NVMe drive or a BMC is still named by its maker), with a header naming the input's version and
where it came from, so topo parses the embedded subset and a machine's own file alike.
"""
import re
import sys

# Vendors kept whole: GPUs, NVSwitches, NICs, DPUs, PCIe switches, VM devices.
WHOLE = {
    "10de",  # NVIDIA
    "15b3",  # Mellanox / NVIDIA networking
    "14e4",  # Broadcom (NICs)
    "1000",  # Broadcom / LSI (PEX switches, HBAs)
    "10b5",  # Broadcom / PLX (PCIe switches)
    "1002",  # AMD / ATI (GPUs, Instinct)
    "1dd8",  # AMD Pensando (DPUs)
    "11f8",  # Microchip (Switchtec)
    "1d0f",  # Amazon (EFA, ENA)
    "1af4",  # Red Hat virtio
    "1425",  # Chelsio
    "1924",  # Solarflare
    "1077",  # QLogic
    "19e5",  # Huawei
    "1bd4",  # Inspur
}
# Vendors with many unrelated parts: only NIC, GPU, accelerator and PCIe bridge lines.
FILTERED = {
    "8086": r"ethernet|network|connection|omni-?path|gaudi|graphics|arc |data center gpu"
            r"|xe |ponte vecchio|iris|uhd|ipu|e8[0-9]{2}|x7[0-9]{2}|pcie? (switch|bridge|root)",
    "1022": r"ethernet|network|pensando|gpu|instinct|pcie? (gpp|bridge|root)",
    "104c": r"xio31|pci.?express|pcie",
}


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/misc/pci.ids"
    note = sys.argv[2] if len(sys.argv) > 2 else src
    text = open(src, encoding="utf-8", errors="replace").read().splitlines()
    version = next((l.split(":", 1)[1].strip() for l in text if l.startswith("#\tVersion:")), "?")
    date = next((l.split(":", 1)[1].strip() for l in text if l.startswith("#\tDate:")), "?")
    out = [
        "# A subset of the PCI ID database (pci.ids) for topo, cut by scripts/gen-pci-ids.py.",
        f"#\tVersion: {version}",
        f"#\tDate:    {date}",
        f"# Source: {note}",
        "# The PCI ID Project, https://pci-ids.ucw.cz/, maintained by Albert Pool, Martin Mares",
        "# and other volunteers; distributed under GPL-2.0-or-later or BSD-3-Clause.",
        "# Kept: every vendor line; device lines of the vendors in the script; subsystems dropped.",
    ]
    vendor, pattern = None, None
    for line in text:
        if line.startswith("C "):
            break  # the class list follows the vendors
        if not line or line.startswith("#"):
            continue
        if not line.startswith("\t"):
            vendor = line[:4]
            keep = vendor in WHOLE or vendor in FILTERED
            pattern = re.compile(FILTERED[vendor], re.I) if vendor in FILTERED else None
            out.append(line)
            if not keep:
                vendor = None
            continue
        if vendor is None or line.startswith("\t\t"):
            continue
        if pattern is None or pattern.search(line):
            out.append(line)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
