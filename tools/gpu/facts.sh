#!/usr/bin/env bash
# The machine facts the GPU campaign records first (tools/gpu/campaign.sh
# step "facts"; no GPU work): the kernel command line and the IOMMU (do
# the GPU's reads of host memory pass one?), the NUMA nodes and the GPU's
# node, nvidia-smi's topology and BAR1, and the memory vkattn's buffers get
# (vkattn-info's memory line). Every probe is best effort: a missing tool
# prints that it is missing.
#   bash tools/gpu/facts.sh BUILD
set -u
[ $# -eq 1 ] && [ -x "$1/examples/vkattn-info" ] ||
  { echo "usage: tools/gpu/facts.sh BUILD (a build folder with examples/vkattn-info)" >&2; exit 2; }
build=$1
echo "== /proc/cmdline"
cat /proc/cmdline
echo "== IOMMU (dmesg, /sys/class/iommu)"
(dmesg 2>/dev/null || echo "dmesg not readable") | grep -i -e iommu -e dmar | head -n 20
ls /sys/class/iommu 2>/dev/null || echo "no /sys/class/iommu entries"
echo "== NUMA"
if command -v numactl >/dev/null; then numactl -H; else echo "numactl not installed"; fi
lscpu 2>/dev/null | grep -i numa
grep -i mems_allowed_list /proc/self/status
if command -v nvidia-smi >/dev/null; then
  echo "== nvidia-smi topo -m"
  nvidia-smi topo -m
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -n 1 | tr 'A-F' 'a-f')
  bus=${bus#0000}  # nvidia-smi: 00000000:19:00.0; sysfs: 0000:19:00.0
  echo "== the GPU's NUMA node ($bus)"
  cat "/sys/bus/pci/devices/$bus/numa_node" 2>/dev/null || echo "unknown"
  echo "== BAR1"
  nvidia-smi -q | grep -A3 -i bar1
else
  echo "nvidia-smi not found"
fi
echo "== vkattn memory"
"$build/examples/vkattn-info" | grep -e '^  memory:' -e '^vkattn '
