"""Variants of one host XML (`topo xml --profile NAME -o NAME.xml`), each with one thing
changed: one NIC fewer, AMD CPUs, sm80 GPUs, 200G NICs, Gen4 PCIe. Usage: variants.py
NAME.xml SHORT writes SHORT-nic1.xml, SHORT-amd.xml, ... beside it."""
import os, re, sys
base=open(sys.argv[1]).read(); name=sys.argv[2]
DIR=os.path.dirname(os.path.abspath(sys.argv[1]))
def w(suffix, s): open(os.path.join(DIR, f"{name}-{suffix}.xml"),"w").write(s)
# one NIC fewer: drop the last <nic>..</nic>
i=base.rfind("<nic>"); j=base.find("</nic>",i)+6; w("nic1", base[:i]+base[j:])
# other CPU vendor
s=re.sub(r'(<cpu[^>]*?)vendor="GenuineIntel"', r'\1vendor="AuthenticAMD"', base); s=re.sub(r'(<cpu[^>]*?)familyid="6"', r'\1familyid="25"', s); s=re.sub(r'(<cpu[^>]*?)modelid="\d+"', r'\1modelid="1"', s)
w("amd", s)
# other SM
w("sm80", re.sub(r'(<gpu[^>]*?)sm="90"', r'\1sm="80"', base))
# slower NICs
w("nic200", re.sub(r'(<net[^>]*?)speed="400000"', r'\1speed="200000"', base))
# slower PCIe on NICs/GPUs
w("gen4", base.replace('link_speed="32.0 GT/s PCIe"','link_speed="16.0 GT/s PCIe"'))
