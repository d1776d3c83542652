#!/bin/bash
# Dissimilar-host jobs against the multi-host nccl-oracle at 2.28: HX holds the host XMLs
# (topo xml --profile NAME -o $HX/NAME.xml; variants.py for h100-*/h200-*), TOPO and ORACLE
# the binaries. Prints only the fields that differ and the oracle's warnings.
HX=${HX:-/tmp/hx}
here=$(dirname "$0")
# pairs and triples of different hosts
pairs=(
"dgx-h100 h100-nic1" "dgx-h100 h100-amd" "dgx-h100 h100-sm80" "dgx-h100 h100-nic200" "dgx-h100 h100-gen4"
"h100-nic1 dgx-h100" "h100-amd dgx-h100" "h100-sm80 dgx-h100" "h100-nic200 dgx-h100"
"hgx-h200 h200-nic1" "hgx-h200 h200-amd" "hgx-h200 h200-sm80" "hgx-h200 h200-nic200" "hgx-h200 h200-gen4"
"dgx-h100 dgx-a100" "dgx-a100 dgx-h100" "dgx-h100 hgx-h800" "dgx-h100 dgx-b200" "dgx-b200 dgx-h100"
"dgx-h100 azure-nd-h100-v5" "aws-p5 dgx-h100" "dgx-h100 pcie-8x-l40s" "dgx-h100 gh200" "gh200 dgx-h100"
"gcp-a3-mega dgx-h100" "hgx-h200 hgx-h800"
"dgx-h100 h100-nic1 h100-amd" "dgx-h100 h100-sm80 dgx-h100" "hgx-h200 h200-nic1 h200-nic200" "dgx-h100 gh200 dgx-a100"
)
for p in "${pairs[@]}"; do
  files=""; for h in $p; do files="$files $HX/$h.xml"; done
  echo "=== $p"
  python3 "$here/compare.py" $files | grep -v "^same"
done
